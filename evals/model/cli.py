"""`kiln model TARGET`: profile a whole model, optimise its hot ops, patch it in place, check it end to
end, export a bundle and a report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kiln.graphs import cli_options as o
from kiln.tools.errors import KilnConfigError, KilnInputError
from kiln.tools.flags import flag_error, writable


def _device(device: str) -> str:
    """The device, resolved once; a CPU run calls its kernels under Triton's interpreter."""
    from kiln.tools.device import resolve_device

    dev = resolve_device(device)
    if dev == "cpu":
        interpreter()
    return dev


def _check_roles(oo) -> None:  # noqa: ANN001 - OptimiseOptions (imported lazily)
    """A missing provider package, key or unknown name fails now, not once per op after profiling."""
    from kiln.agents.registry import resolve_roles

    loop = oo.loop
    resolve_roles(loop.roles.llm, **loop.roles.kwargs(), lang=loop.lang, cache_path=None, budgets=loop.budgets,
                  device=loop.device)


def interpreter() -> None:
    """A CPU run calls its kernels in this process (the end-to-end check): under Triton's interpreter,
    whose switch is read when Triton is first imported."""
    import os

    os.environ.setdefault("TRITON_INTERPRET", "1")


@o.described(max_iters="Coder rounds per op", budget_usd="whole model, split by share of time",
             budget_tokens="whole model, split by share of time",
             budget_minutes="the whole command: it ends within this (+5%) with the best kernels so far checked, "
                            "bundled, reported",
             dtype="fp32 | bf16 | fp16: the model is cast to it")
def model(
    target: Annotated[str | None, typer.Argument(help="path/to/file.py:factory, timm:NAME, transformers:FAMILY?..., "
                                                      "diffusers:BLOCK?...")] = None,
    llm: o.Llm = None,
    coder_llm: o.CoderLlm = None,
    judge_llm: o.JudgeLlm = None,
    proposer_llm: o.ProposerLlm = None,
    base_url: o.BaseUrl = None,
    lang: o.Lang = o.LANG,
    strategy: o.Strategy = o.STRATEGY,
    max_iters: o.MaxIters = o.MAX_ITERS,
    budget_usd: o.BudgetUsd = None,
    budget_tokens: o.BudgetTokens = None,
    budget_minutes: o.BudgetMinutes = None,
    device: o.Device = o.DEVICE,
    dtype: o.Dtype = o.DTYPE,
    top: Annotated[int, typer.Option(help="optimise this many op groups (the hottest), plus the fused pairs "
                                          "built on them")] = 8,
    min_share: Annotated[float, typer.Option(help="skip ops below this share of model time")] = 0.01,
    seeds: Annotated[int, typer.Option(help="input seeds of the end-to-end check")] = 3,
    e2e_tol: Annotated[float | None, typer.Option(help="relative L2 error allowed per output")] = None,
    patch: Annotated[str, typer.Option(help="faster (CI above 1) | correct (CPU: speed not measured)")] = "faster",
    trials: o.Trials = o.TRIALS,
    timeout: o.CheckTimeout = o.CHECK_TIMEOUT,
    concurrency: Annotated[int, typer.Option(help="problems in flight")] = 4,
    cpu_slots: o.CpuSlots = None,
    isolation: o.Isolation = o.ISOLATION,
    bwrap: o.Bwrap = None,
    out: Annotated[Path | None, typer.Option(help="run directory (default runs/model-<target>-<time>)")] = None,
    resume: Annotated[Path | None, typer.Option(help="continue the model run in this directory")] = None,
) -> None:
    """Find a model's hot ops, make them faster in place, and prove it end to end."""
    writable(out, "--out", folder=True)  # before anything is imported, built or profiled
    import time

    from pydantic import ValidationError

    from kiln.evals.model.budget import process_age_s
    from kiln.evals.model.optimise import OptimiseOptions
    from kiln.evals.model.run import ModelRunOptions, start
    from kiln.evals.model.run import resume as resume_run

    say = typer.echo
    if resume is not None:
        if '"device": "cpu"' in (resume / "model_run.json").read_text() if (resume / "model_run.json").exists() else "":
            interpreter()
        report, folder = resume_run(resume, say, process_age_s()), resume
    else:
        if target is None:
            raise KilnInputError("give a TARGET (path/to/file.py:factory, timm:NAME, ...), or --resume RUN_DIR")
        if patch not in ("faster", "correct") or dtype not in ("fp32", "bf16", "fp16"):
            raise KilnConfigError("--patch must be faster or correct; --dtype fp32, bf16 or fp16")
        if isolation not in ("strict", "best-effort"):
            raise KilnConfigError(f"--isolation must be strict or best-effort, not {isolation!r}")
        dev = _device(device)
        loop = o.loop_options(device=dev, llm=llm, coder_llm=coder_llm, judge_llm=judge_llm,
                              proposer_llm=proposer_llm, base_url=base_url, lang=lang, strategy=strategy,
                              max_iters=max_iters, budget_usd=budget_usd, budget_tokens=budget_tokens,
                              budget_minutes=budget_minutes, trials=trials, dtype=dtype, check_timeout=timeout,
                              isolation=isolation, bwrap=bwrap)  # the sandbox is checked here
        try:
            oo = OptimiseOptions(loop=loop, concurrency=concurrency, cpu_slots=cpu_slots, patch=patch)
            opts = ModelRunOptions(target=target, device=dev, dtype=dtype, top=top, min_share=min_share, seeds=seeds,
                                   e2e_tol=e2e_tol, optimise=oo)
        except ValidationError as err:
            raise KilnConfigError(flag_error(err)) from None
        _check_roles(opts.optimise)
        stem = target.split("?")[0].replace("/", "_").replace(":", "-")[-40:]
        folder = out or Path("runs") / f"model-{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        try:
            report = start(opts, folder, say, process_age_s())
        except KeyboardInterrupt:
            typer.echo(f"kiln: stopped; continue with: kiln model --resume {folder}", err=True)
            raise
    if report.status == "failed":
        raise KilnInputError(f"{report.error} (report: {folder / 'report.html'})")
    patched = [op for op in report.ops if op.status == "patched"]
    say(f"patched {len(patched)} of {len(report.ops)} optimised op group(s); {len(report.skipped)} other input(s) or "
        "group(s) kiln could not use (the report says why)")
    if report.budget_note:
        say(report.budget_note)
    if report.e2e and report.e2e.speedups.get("patched_vs_eager"):
        s = report.e2e.speedups["patched_vs_eager"]
        say(f"end to end: {s.value:.3f}x vs eager (CI {s.ci_low:.3f}-{s.ci_high:.3f})")
    if report.reload:
        say(f"bundle: {report.bundle}  ({report.reload})")
    say(f"report: {folder / 'report.html'}")
