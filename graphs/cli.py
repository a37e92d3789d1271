"""`kiln run`: turn a PyTorch problem into a verified kernel with the agent loop."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kiln.tools.errors import KilnConfigError, KilnInputError


def _abs_replay(spec: str | None) -> str | None:
    """Replay scripts are stored by absolute path so --resume works from any directory."""
    if spec and spec.startswith("replay:"):
        path = Path(spec[len("replay:"):])
        if not path.is_file():
            raise KilnConfigError(f"replay script not found: {path}")
        return f"replay:{path.resolve()}"
    return spec


def _print_summary(summary) -> None:  # noqa: ANN001 - RunSummary, imported lazily
    best = summary.best
    speed = f"{best.speedup_vs_eager:.2f}x vs eager" if best.speedup_vs_eager is not None else "speed not measured"
    compile_ = f", {best.speedup_vs_compile:.2f}x vs torch.compile" if best.speedup_vs_compile is not None else ""
    typer.echo(f"status: {summary.status} ({summary.stop_reason})")
    typer.echo(f"best: {best.path or '-'} ({'correct' if best.correct else 'NOT correct'}; {speed}{compile_})")
    if summary.cost_usd is not None:
        cost = f"${summary.cost_usd:.4f}"
    else:  # no tokens at all: the built-in policies (or a replay) ran, nothing was billed
        cost = "no LLM cost" if not summary.tokens else "cost unknown (no price for this model)"
    typer.echo(f"iterations: {summary.iterations}, tokens: {summary.tokens}, {cost}; run dir: {summary.run_dir}")


def run(
    problem: Annotated[Path | None, typer.Argument(help="KernelBench-format problem file")] = None,
    lang: Annotated[str, typer.Option(help="triton | cuda")] = "triton",
    llm: Annotated[str | None, typer.Option(help="PROVIDER:MODEL for every role; builtin by default")] = None,
    coder_llm: Annotated[str | None, typer.Option(help="spec for the Coder only")] = None,
    judge_llm: Annotated[str | None, typer.Option(help="spec for the Judge only")] = None,
    proposer_llm: Annotated[str | None, typer.Option(help="spec for the Proposer only")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL")] = None,
    target_speedup: Annotated[float, typer.Option(help="stop once this fast (CI low end)")] = 1.0,
    target_baseline: Annotated[str, typer.Option(help="eager | compile: what --target-speedup is against")] = "eager",
    max_iters: Annotated[int, typer.Option(help="Coder rounds at most")] = 8,
    strategy: Annotated[str, typer.Option(help="linear | beam | mcts")] = "linear",
    device: Annotated[str, typer.Option(help="auto | cuda | cpu")] = "auto",
    out: Annotated[Path | None, typer.Option(help="run directory (default runs/<problem>-<time>)")] = None,
    resume: Annotated[Path | None, typer.Option(help="continue the run in this directory")] = None,
    budget_usd: Annotated[float | None, typer.Option(help="stop once this much is spent")] = None,
    budget_tokens: Annotated[int | None, typer.Option(help="stop after this many tokens")] = None,
    budget_minutes: Annotated[float | None, typer.Option(help="stop after this many minutes")] = None,
    no_progress: Annotated[int, typer.Option(help="stop after K rounds without a better kernel")] = 4,
    llm_cache: Annotated[Path | None, typer.Option(help="LLM-response cache (SQLite) to reuse across runs")] = None,
    trials: Annotated[int, typer.Option(help="correctness trials per case and input distribution")] = 3,
    seed: Annotated[int | None, typer.Option(help="fixed input seed (default: a fresh secret one per check); "
                                             "with --llm-cache, a rerun then replays the run exactly")] = None,
    quiet: Annotated[bool, typer.Option(help="no live display")] = False,
    isolation: Annotated[str, typer.Option(help="strict | best-effort: the OS sandbox for checks")] = "best-effort",
    bwrap: Annotated[str | None, typer.Option(help="bubblewrap binary (default: on PATH)")] = None,
) -> None:
    """Run the Coder / Judge / Proposer loop on PROBLEM until the kernel is verified and fast enough."""
    from pydantic import ValidationError

    from kiln.graphs.progress import Progress
    from kiln.graphs.runner import default_run_dir, resume_run, run_problem

    progress = Progress(live=not quiet)
    if resume is None and problem is None:
        raise KilnInputError("give a PROBLEM file, or --resume RUN_DIR")
    from kiln.tools.check.sandbox import sandbox_for

    sandbox_for(isolation, bwrap)  # --isolation strict without the full sandbox: refused before any LLM call
    run_dir = resume or out or default_run_dir(problem)
    try:
        if resume is not None:
            summary = resume_run(resume, progress=progress)
        else:
            summary = run_problem(
                problem, out=run_dir, progress=progress, lang=lang, llm=_abs_replay(llm),
                coder_llm=_abs_replay(coder_llm), judge_llm=_abs_replay(judge_llm),
                proposer_llm=_abs_replay(proposer_llm), base_url=base_url, target_speedup=target_speedup, target_baseline=target_baseline,
                strategy=strategy, device=device, trials=trials, seed=seed, isolation=isolation, bwrap=bwrap,
                llm_cache=str(llm_cache.resolve()) if llm_cache else None,
                budgets={"max_iters": max_iters, "usd": budget_usd, "tokens": budget_tokens,
                         "minutes": budget_minutes, "no_progress_iters": no_progress})
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise KilnConfigError(f"bad option {where}: {first['msg']}") from None
    except KeyboardInterrupt:
        typer.echo(f"kiln: stopped; continue with: kiln run --resume {run_dir}", err=True)
        raise
    _print_summary(summary)
    raise typer.Exit(0 if summary.status == "solved" else 1)
