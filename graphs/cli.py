"""`kiln run`: turn a PyTorch problem into a verified kernel with the agent loop."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kiln.graphs import cli_options as o
from kiln.tools.errors import KilnInputError
from kiln.tools.flags import writable


def _print_summary(summary) -> None:  # noqa: ANN001 - RunSummary, imported lazily
    best = summary.best
    speed = f"{best.speedup_vs_eager:.2f}x vs eager" if best.speedup_vs_eager is not None else "speed not measured"
    compile_ = f", {best.speedup_vs_compile:.2f}x vs torch.compile" if best.speedup_vs_compile is not None else ""
    typer.echo(f"status: {summary.status} ({summary.stop_reason})")
    typer.echo(f"best: {best.path or '-'} ({'correct' if best.correct else 'NOT correct'}; {speed}{compile_})")
    if getattr(summary, "suite_note", None):
        typer.echo(f"note: {summary.suite_note}")
    if getattr(summary, "shrunk", None):
        typer.echo(f"note: checked at smaller sizes than the problem's: {summary.shrunk.line()}")
    if getattr(best, "verified", None):
        typer.echo(f"verified: {best.verified}")
    if summary.cost_usd is not None:
        cost = f"${summary.cost_usd:.4f}"
    else:  # no tokens at all: the built-in policies (or a replay) ran, nothing was billed
        cost = "no LLM cost" if not summary.tokens else "cost unknown (no price for this model)"
    typer.echo(f"iterations: {summary.iterations}, tokens: {summary.tokens}, {cost}; run dir: {summary.run_dir}")


@o.described(seed="fixed input seed (default: a fresh secret one per check); with --llm-cache, a rerun then "
                   "replays the run exactly")
def run(
    problem: Annotated[Path | None, typer.Argument(help="KernelBench-format problem file")] = None,
    lang: o.Lang = o.LANG,
    llm: o.Llm = None,
    coder_llm: o.CoderLlm = None,
    judge_llm: o.JudgeLlm = None,
    proposer_llm: o.ProposerLlm = None,
    base_url: o.BaseUrl = None,
    target_speedup: o.TargetSpeedup = o.TARGET_SPEEDUP,
    target_baseline: o.TargetBaseline = o.TARGET_BASELINE,
    max_iters: o.MaxIters = o.MAX_ITERS,
    strategy: o.Strategy = o.STRATEGY,
    device: o.Device = o.DEVICE,
    dtype: o.Dtype = o.DTYPE,
    out: Annotated[Path | None, typer.Option(help="run directory (default runs/<problem>-<time>)")] = None,
    resume: Annotated[Path | None, typer.Option(help="continue the run in this directory")] = None,
    budget_usd: o.BudgetUsd = None,
    budget_tokens: o.BudgetTokens = None,
    budget_minutes: o.BudgetMinutes = None,
    no_progress: o.NoProgress = o.NO_PROGRESS,
    llm_cache: o.LlmCache = None,
    trials: o.Trials = o.TRIALS,
    check_timeout: o.CheckTimeout = o.CHECK_TIMEOUT,
    seed: o.Seed = None,
    isolation: o.Isolation = o.ISOLATION,
    bwrap: o.Bwrap = None,
    shrink: o.Shrink = False,
    quiet: Annotated[bool, typer.Option(help="no live display")] = False,
) -> None:
    """Run the Coder / Judge / Proposer loop on PROBLEM until the kernel is verified and fast enough."""
    run_dir = _checked_paths(problem, out, resume)  # bad input fails here, before torch or LangGraph load
    loop = None if resume is not None else o.loop_options(
        device=o.check_device(device), lang=lang, llm=llm, coder_llm=coder_llm, judge_llm=judge_llm,
        proposer_llm=proposer_llm, base_url=base_url, target_speedup=target_speedup,
        target_baseline=target_baseline, strategy=strategy, max_iters=max_iters, budget_usd=budget_usd,
        budget_tokens=budget_tokens, budget_minutes=budget_minutes, no_progress=no_progress, trials=trials,
        dtype=dtype, check_timeout=check_timeout, seed=seed, llm_cache=llm_cache, isolation=isolation, bwrap=bwrap,
        shrink=shrink)
    from kiln.graphs.progress import Progress
    from kiln.graphs.runner import resume_run, run_problem
    from kiln.tools.device import resolve_device

    progress = Progress(live=not quiet)
    try:
        if loop is None:
            summary = resume_run(run_dir, progress=progress)
        else:
            loop = o.with_device(loop, resolve_device(device))
            from kiln.tools.check.servers import warm_for

            warm_for(loop.device, loop.check)  # the first check's server starts beside the Coder
            summary = run_problem(problem, out=run_dir, progress=progress, loop=loop)
    except KeyboardInterrupt:
        typer.echo(f"kiln: stopped; continue with: kiln run --resume {run_dir}", err=True)
        raise
    _print_summary(summary)
    # solved_cpu_only is a correct kernel whose GPU path a CPU run could not reach: the status line says so
    raise typer.Exit(0 if summary.status in ("solved", "solved_cpu_only") else 1)


def _checked_paths(problem: Path | None, out: Path | None, resume: Path | None) -> Path:
    """The run directory, once the files named exist and the output can be written: one line otherwise."""
    if resume is not None:
        if not (resume / "run.json").is_file():
            raise KilnInputError(f"not a kiln run directory (no run.json): {resume}")
        return resume
    if problem is None:
        raise KilnInputError("give a PROBLEM file, or --resume RUN_DIR")
    if not problem.is_file():
        raise KilnInputError(f"problem file not found: {problem.resolve()}")
    run_dir = out or o.default_run_dir(problem)
    if (run_dir / "run.json").exists():
        raise KilnInputError(f"{run_dir.resolve()} already holds a run; use --resume {run_dir} or another --out")
    writable(run_dir, "--out", folder=True)
    return run_dir
