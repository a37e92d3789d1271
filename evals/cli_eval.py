"""`kiln eval`: a batch over a KernelBench checkout or any folder of problem files."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from kiln.evals.batch import Batch, BatchBudget, group, write_metrics
from kiln.evals.executors import RayEvaluator, SlottedEvaluator, visible_gpus
from kiln.evals.jobs import BatchConfig
from kiln.evals.metrics import SampleOutcome, fast_p
from kiln.evals.problems import ProblemRef, folder_problems, kernelbench_problems, parse_ids
from kiln.tools.errors import KilnInputError

console = Console(stderr=True)


def _problems(target: str, root: Path | None, levels: list[int], ids_spec: str | None) -> list[ProblemRef]:
    ids = parse_ids(ids_spec)
    if target == "kernelbench":
        if root is None:
            raise KilnInputError("kiln eval kernelbench needs --root PATH (a local KernelBench clone)")
        return kernelbench_problems(root, levels or [1], ids)
    return folder_problems(Path(target), ids)


def _evaluator(executor: str, ray_address: str | None, device: str, cpu_slots: int | None):
    from kiln.tools.check import LocalEvaluator

    if executor == "ray":
        return RayEvaluator(ray_address, use_gpus=None if device != "cpu" else False)
    if executor != "local":
        raise KilnInputError(f"unknown --executor {executor!r}: use local or ray")
    gpus = [] if device == "cpu" else visible_gpus()
    if device == "cuda" and not gpus:
        raise KilnInputError("--device cuda but no CUDA GPU is visible")
    return SlottedEvaluator(LocalEvaluator(), gpus, cpu_slots)


def _resolve_device(device: str) -> str:
    if device not in ("auto", "cuda", "cpu"):
        raise KilnInputError(f"--device must be auto, cuda or cpu, not {device!r}")
    if device == "auto":
        return "cuda" if visible_gpus() else "cpu"
    return device


def _validate_roles(cfg: BatchConfig) -> None:
    """Fail at start (missing provider package, key, unknown name), not once per problem."""
    from kiln.agents.registry import resolve_roles
    from kiln.evals.jobs import _budgets

    resolve_roles(cfg.llm, coder=cfg.coder_llm, judge=cfg.judge_llm, proposer=cfg.proposer_llm,
                  base_url=cfg.base_url, lang=cfg.lang, cache_path=None, budgets=_budgets(cfg), device=cfg.device)


def eval_(
    target: Annotated[str, typer.Argument(help="'kernelbench' (with --root) or a folder/file of problems")],
    root: Annotated[Path | None, typer.Option(help="local KernelBench clone")] = None,
    level: Annotated[list[int], typer.Option(help="KernelBench level (repeatable)")] = [],  # noqa: B006
    problems: Annotated[str | None, typer.Option(help="problem ids, e.g. 1-20,23")] = None,
    out: Annotated[Path | None, typer.Option(help="run directory (default: runs/eval-<time>)")] = None,
    mode: Annotated[str, typer.Option(help="agent | oneshot")] = "agent",
    samples: Annotated[int, typer.Option(help="samples per problem (pass@k)")] = 1,
    llm: Annotated[str | None, typer.Option(help="PROVIDER:MODEL for every role, or builtin")] = None,
    coder_llm: Annotated[str | None, typer.Option()] = None,
    judge_llm: Annotated[str | None, typer.Option()] = None,
    proposer_llm: Annotated[str | None, typer.Option()] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL")] = None,
    lang: Annotated[str, typer.Option(help="triton | cuda")] = "triton",
    device: Annotated[str, typer.Option(help="auto | cuda | cpu")] = "auto",
    dtype: Annotated[str, typer.Option(help="fp32 | bf16 | fp16")] = "fp32",
    max_iters: Annotated[int, typer.Option(help="agent iterations per problem")] = 8,
    target_speedup: Annotated[float, typer.Option()] = 1.0,
    strategy: Annotated[str, typer.Option(help="linear | beam | mcts")] = "linear",
    budget_usd: Annotated[float | None, typer.Option(help="per problem")] = None,
    budget_tokens: Annotated[int | None, typer.Option(help="per problem")] = None,
    budget_minutes: Annotated[float | None, typer.Option(help="per problem")] = None,
    batch_budget_usd: Annotated[float | None, typer.Option(help="whole batch")] = None,
    batch_budget_tokens: Annotated[int | None, typer.Option(help="whole batch")] = None,
    batch_budget_minutes: Annotated[float | None, typer.Option(help="whole batch")] = None,
    concurrency: Annotated[int, typer.Option(help="jobs in flight (LLM-bound work)")] = 8,
    executor: Annotated[str, typer.Option(help="local | ray")] = "local",
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address (default: start a local one)")] = None,
    cpu_slots: Annotated[int | None, typer.Option(help="parallel checks without a GPU")] = None,
    timeout: Annotated[float, typer.Option(help="seconds per check")] = 300.0,
    trials: Annotated[int, typer.Option(help="correctness trials per input distribution")] = 5,
    isolation: Annotated[str, typer.Option(help="strict | best-effort: the OS sandbox for checks")] = "best-effort",
    bwrap: Annotated[str | None, typer.Option(help="bubblewrap binary (default: on PATH)")] = None,
) -> None:
    """Run kiln over many problems; resumable (rerun the same command to continue)."""
    refs = _problems(target, root, level, problems)
    device = _resolve_device(device)
    try:
        cfg = BatchConfig(mode=mode, samples=samples, llm=llm, coder_llm=coder_llm, judge_llm=judge_llm,
                          proposer_llm=proposer_llm, base_url=base_url, lang=lang, device=device, dtype=dtype,
                          max_iters=max_iters, target_speedup=target_speedup, strategy=strategy,
                          budget_usd=budget_usd, budget_tokens=budget_tokens, budget_minutes=budget_minutes,
                          check_timeout_s=timeout, trials=trials, isolation=isolation, bwrap=bwrap)
    except ValueError as err:
        raise KilnInputError(str(err).splitlines()[-1] if str(err) else "bad option") from None
    _validate_roles(cfg)
    from kiln.tools.check.sandbox import sandbox_for

    sandbox_for(cfg.isolation, cfg.bwrap)  # --isolation strict without the full sandbox: refused at start
    run_dir = out or Path("runs") / datetime.now(UTC).strftime("eval-%Y%m%d-%H%M%S")
    evaluator = _evaluator(executor, ray_address, device, cpu_slots)
    budget = BatchBudget(usd=batch_budget_usd, tokens=batch_budget_tokens, minutes=batch_budget_minutes)
    batch = Batch(run_dir, refs, cfg, evaluator, concurrency=concurrency, budget=budget)
    timed = bool(getattr(evaluator, "on_gpu", False))
    _run_with_progress(batch, timed)
    metrics = write_metrics(run_dir, batch.store, cfg, timed=timed, stopped=batch.stopped,
                            elapsed_s=batch.elapsed_s, done_now=batch.done_now)
    if executor == "ray":
        RayEvaluator.shutdown()
    _print_summary(run_dir, metrics)


def _run_with_progress(batch: Batch, timed: bool) -> None:
    done_before = batch.store.outcomes()
    total = len(batch.problems) * batch.cfg.samples
    seen: list[SampleOutcome] = list(done_before)
    columns = [TextColumn("[bold]kiln eval"), BarColumn(), MofNCompleteColumn(),
               TextColumn("correct {task.fields[correct]}  fast_1 {task.fields[fast1]}  "
                          "tokens {task.fields[tokens]}  ${task.fields[cost]}"),
               TimeElapsedColumn(), TimeRemainingColumn()]
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("eval", total=total, completed=len(seen), **_fields(seen, timed))

        def on_progress(outcome: SampleOutcome | None, error: str | None) -> None:
            if outcome is not None:
                seen.append(outcome)
            if error:
                progress.console.print(f"[yellow]job failed[/] {error}")
            progress.update(task, completed=len(seen), **_fields(seen, timed))

        started = time.monotonic()
        batch.run(on_progress)
        if batch.stopped:
            progress.console.print(f"[yellow]stopped:[/] {batch.stopped} after {time.monotonic() - started:.0f} s")


def _fields(outcomes: list[SampleOutcome], timed: bool) -> dict[str, str]:
    problems = group(outcomes)
    correct = sum(1 for p in problems if p.n_correct)
    f1 = f"{fast_p(problems, 'eager', 1.0):.2f}" if problems and timed else "—"
    cost = sum(o.cost_usd or 0.0 for o in outcomes)
    return {"correct": f"{correct}/{len(problems)}", "fast1": f1,
            "tokens": str(sum(o.tokens for o in outcomes)), "cost": f"{cost:.2f}"}


def _print_summary(run_dir: Path, metrics: dict) -> None:
    from kiln.evals.report import metrics_table

    Console().print(metrics_table(metrics))
    Console().print(f"run directory: {run_dir}   (kiln report {run_dir})")
