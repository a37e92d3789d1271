"""`kiln eval`: a batch over a KernelBench checkout or any folder of problem files."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kiln.graphs import cli_options as o
from kiln.tools.errors import KilnInputError
from kiln.tools.flags import flag_error, writable

if TYPE_CHECKING:
    from kiln.evals.batch.jobs import BatchConfig
    from kiln.evals.batch.problems import ProblemRef


def _problems(target: str, root: Path | None, levels: list[int], ids_spec: str | None) -> list[ProblemRef]:
    from kiln.evals.batch.problems import folder_problems, kernelbench_problems, parse_ids

    ids = parse_ids(ids_spec)
    if target == "kernelbench":
        if root is None:
            raise KilnInputError("kiln eval kernelbench needs --root PATH (a local KernelBench clone)")
        return kernelbench_problems(root, levels or [1], ids)
    return folder_problems(Path(target), ids)


def _evaluator(executor: str, ray_address: str | None, device: str, cpu_slots: int | None):
    from kiln.evals.executors import RayEvaluator, SlottedEvaluator, visible_gpus
    from kiln.tools.check import LocalEvaluator

    if executor == "ray":
        return RayEvaluator(ray_address, use_gpus=None if device != "cpu" else False)
    if executor != "local":
        raise KilnInputError(f"unknown --executor {executor!r}: use local or ray")
    gpus = [] if device == "cpu" else visible_gpus()
    if device == "cuda" and not gpus:
        raise KilnInputError("--device cuda but no CUDA GPU is visible")
    return SlottedEvaluator(LocalEvaluator(), gpus, cpu_slots)


def _validate_roles(cfg: BatchConfig) -> None:
    """Fail at start (missing provider package, key, unknown name), not once per problem."""
    from kiln.agents.registry import resolve_roles

    loop = cfg.loop
    resolve_roles(loop.roles.llm, **loop.roles.kwargs(), lang=loop.lang, cache_path=None, budgets=loop.budgets,
                  device=loop.device)


@o.described(budget_usd="per sample: stop its loop once this much is spent",
             budget_tokens="per sample: stop its loop after this many tokens",
             budget_minutes="per sample: stop its loop after this many minutes")
def eval_(
    target: Annotated[str, typer.Argument(help="'kernelbench' (with --root) or a folder/file of problems")],
    root: Annotated[Path | None, typer.Option(help="local KernelBench clone")] = None,
    level: Annotated[list[int], typer.Option(help="KernelBench level (repeatable)")] = [],  # noqa: B006
    problems: Annotated[str | None, typer.Option(help="problem ids, e.g. 1-20,23")] = None,
    out: Annotated[Path | None, typer.Option(help="run directory (default: runs/eval-<time>)")] = None,
    mode: Annotated[str, typer.Option(help="agent (the kiln run loop per sample) | oneshot (one generation)")] = "agent",
    samples: Annotated[int, typer.Option(help="samples per problem (pass@k)")] = 1,
    llm: o.Llm = None,
    coder_llm: o.CoderLlm = None,
    judge_llm: o.JudgeLlm = None,
    proposer_llm: o.ProposerLlm = None,
    base_url: o.BaseUrl = None,
    lang: o.Lang = o.LANG,
    device: o.Device = o.DEVICE,
    dtype: o.Dtype = o.DTYPE,
    max_iters: o.MaxIters = o.MAX_ITERS,
    target_speedup: o.TargetSpeedup = o.TARGET_SPEEDUP,
    strategy: o.Strategy = o.STRATEGY,
    budget_usd: o.BudgetUsd = None,
    budget_tokens: o.BudgetTokens = None,
    budget_minutes: o.BudgetMinutes = None,
    batch_budget_usd: Annotated[float | None, typer.Option(help="whole batch")] = None,
    batch_budget_tokens: Annotated[int | None, typer.Option(help="whole batch")] = None,
    batch_budget_minutes: Annotated[float | None, typer.Option(help="whole batch")] = None,
    concurrency: Annotated[int, typer.Option(help="jobs in flight (LLM-bound work)")] = 8,
    executor: o.Executor = "local",
    ray_address: o.RayAddress = None,
    cpu_slots: o.CpuSlots = None,
    check_timeout: o.CheckTimeout = o.CHECK_TIMEOUT,
    trials: o.Trials = o.TRIALS,
    isolation: o.Isolation = o.ISOLATION,
    bwrap: o.Bwrap = None,
    shrink: o.Shrink = False,
) -> None:
    """Run kiln over many problems; resumable (rerun the same command to continue)."""
    from pydantic import ValidationError

    from kiln.evals.batch.jobs import BatchConfig

    if executor not in ("local", "ray"):
        raise KilnInputError(f"unknown --executor {executor!r}: use local or ray")
    run_dir = out or Path("runs") / datetime.now(UTC).strftime("eval-%Y%m%d-%H%M%S")
    writable(run_dir, "--out", folder=True)
    refs = _problems(target, root, level, problems)
    loop = o.loop_options(device=o.check_device(device), lang=lang, llm=llm, coder_llm=coder_llm,
                          judge_llm=judge_llm, proposer_llm=proposer_llm, base_url=base_url, max_iters=max_iters,
                          target_speedup=target_speedup, strategy=strategy, budget_usd=budget_usd,
                          budget_tokens=budget_tokens, budget_minutes=budget_minutes, trials=trials, dtype=dtype,
                          check_timeout=check_timeout, isolation=isolation, bwrap=bwrap, shrink=shrink)
    try:
        cfg = BatchConfig(mode=mode, samples=samples, loop=loop)
    except ValidationError as err:
        raise KilnInputError(flag_error(err)) from None
    from kiln.tools.device import resolve_device

    device = resolve_device(device)
    cfg = cfg.model_copy(update={"loop": o.with_device(cfg.loop, device)})
    _validate_roles(cfg)
    _run_batch(run_dir, refs, cfg, _evaluator(executor, ray_address, device, cpu_slots),
               concurrency=concurrency, executor=executor,
               budget=(batch_budget_usd, batch_budget_tokens, batch_budget_minutes))


def _run_batch(run_dir: Path, refs: list[ProblemRef], cfg: BatchConfig, evaluator, *, concurrency: int,  # noqa: ANN001
               executor: str, budget: tuple[float | None, int | None, float | None]) -> None:
    from kiln.evals.batch.progress import run_with_progress
    from kiln.evals.batch.run import Batch, BatchBudget, write_metrics
    from kiln.evals.executors import RayEvaluator

    usd, tokens, minutes = budget
    batch = Batch(run_dir, refs, cfg, evaluator, concurrency=concurrency,
                  budget=BatchBudget(usd=usd, tokens=tokens, minutes=minutes))
    timed = bool(getattr(evaluator, "on_gpu", False))
    run_with_progress(batch, timed)
    if executor == "ray":
        RayEvaluator.shutdown()
    try:
        metrics = write_metrics(run_dir, batch.store, cfg, timed=timed, stopped=batch.stopped,
                                elapsed_s=batch.elapsed_s, done_now=batch.done_now)
    except OSError as err:  # the figures are shown anyway; the samples are in results.sqlite
        from kiln.evals.batch.metrics import summarize
        from kiln.evals.batch.run import group

        _print_summary(run_dir, summarize(group(batch.store.outcomes()), timed=timed))
        raise KilnInputError(f"could not write {run_dir / 'metrics.json'}: {err.strerror or err} (the figures "
                             "above; every sample is kept in results.sqlite)") from None
    _print_summary(run_dir, metrics)


def _print_summary(run_dir: Path, metrics: dict) -> None:
    from rich.console import Console

    from kiln.evals.batch.report import metrics_table

    Console().print(metrics_table(metrics))
    Console().print(f"run directory: {run_dir}   (kiln report {run_dir})")
