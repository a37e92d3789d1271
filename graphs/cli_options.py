"""The command-line options of the loop, declared once for `kiln run`, `kiln eval`, `kiln model` and
`kiln curriculum` (each uses the ones it has). The check's own flags (`--trials`, `--isolation`, ...)
are `kiln.tools.cli_options`', shared with `kiln check`, and re-exported here.

Each flag's type, help text and default live here, once for every command. The defaults are the
models' own (`LoopOptions`, `Budgets`, `CheckOptions`), written out so that `--help` imports no model
(pydantic and the records are half a second of start-up); tests/evals/test_startup.py checks that
each one equals its model's. `loop_options(...)` turns the flags into the one `LoopOptions` model; a
bad value becomes `--flag must be ...`, the way `kiln check` words it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kiln.tools.cli_options import (  # noqa: F401 - the check's flags, re-exported for the loop's commands
    CHECK_TIMEOUT,
    DEVICE,
    DTYPE,
    ISOLATION,
    TRIALS,
    Bwrap,
    CheckTimeout,
    Device,
    Dtype,
    Isolation,
    Seed,
    Trials,
    described,
)
from kiln.tools.errors import KilnConfigError

if TYPE_CHECKING:
    from kiln.graphs.context import LoopOptions

LANG = "triton"
# (model, field) each default is, for the test that keeps them equal
DEFAULTS: dict[str, tuple[str, str]] = {
    "TARGET_SPEEDUP": ("kiln.graphs.context:LoopOptions", "target_speedup"),
    "MAX_ITERS": ("kiln.agents.llm.usage:Budgets", "max_iters"),
    "NO_PROGRESS": ("kiln.agents.llm.usage:Budgets", "no_progress_iters"),
    "TRIALS": ("kiln.tools.records:CheckOptions", "trials"),
    "CHECK_TIMEOUT": ("kiln.tools.records:CheckOptions", "timeout_s"),
    "DTYPE": ("kiln.tools.records:CheckOptions", "dtype"),
    "ISOLATION": ("kiln.tools.records:CheckOptions", "isolation"),
    "DEVICE": ("kiln.tools.records:CheckOptions", "device"),
    "STRATEGY": ("kiln.graphs.context:LoopOptions", "strategy"),
    "TARGET_BASELINE": ("kiln.graphs.context:LoopOptions", "target_baseline"),
}
TARGET_SPEEDUP = 1.0
MAX_ITERS = 8
NO_PROGRESS = 4
STRATEGY = "linear"
TARGET_BASELINE = "eager"

Lang = Annotated[str, typer.Option(help="triton | cuda: the kernel language")]
Llm = Annotated[str | None, typer.Option(help="PROVIDER:MODEL for every role (openai:..., anthropic:..., "
                                              "scripted:FILE); builtin when not given")]
CoderLlm = Annotated[str | None, typer.Option(help="PROVIDER:MODEL for the Coder only (overrides --llm)")]
JudgeLlm = Annotated[str | None, typer.Option(help="PROVIDER:MODEL for the Judge only (overrides --llm)")]
ProposerLlm = Annotated[str | None, typer.Option(help="PROVIDER:MODEL for the Proposer only (overrides --llm)")]
BaseUrl = Annotated[str | None, typer.Option(help="OpenAI-compatible server URL (vLLM, SGLang, Ollama, ...)")]
TargetSpeedup = Annotated[float, typer.Option(help="stop once the speedup's 95% CI low end reaches this")]
TargetBaseline = Annotated[str, typer.Option(help="eager | compile: what --target-speedup is measured against")]
MaxIters = Annotated[int, typer.Option(help="Coder rounds at most")]
Strategy = Annotated[str, typer.Option(help="linear | beam | mcts")]
BudgetUsd = Annotated[float | None, typer.Option(help="stop once this much is spent (USD)")]
BudgetTokens = Annotated[int | None, typer.Option(help="stop after this many tokens (input + output)")]
BudgetMinutes = Annotated[float | None, typer.Option(help="stop after this many minutes; LLM requests in "
                                                         "flight are cut to fit")]
NoProgress = Annotated[int, typer.Option(help="stop after K Coder rounds without a better kernel")]
Shrink = Annotated[bool, typer.Option(help="on a CPU, when the problem is too large for Triton's interpreter, "
                                           "check it at smaller sizes (its size constants halved; said and "
                                           "recorded in run.json and summary.json)")]
Executor = Annotated[str, typer.Option(help="local | ray")]
RayAddress = Annotated[str | None, typer.Option(help="Ray cluster address (default: start a local one)")]
CpuSlots = Annotated[int | None, typer.Option(help="parallel checks without a GPU")]
LlmCache = Annotated[Path | None, typer.Option(help="LLM-response cache (SQLite) to reuse across runs")]


def default_run_dir(problem: Path) -> Path:
    return Path("runs") / f"{problem.stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_device(device: str) -> str:
    """The --device flag checked without importing torch; "auto" is validated as "cpu" until the
    device is resolved (`with_device`), after every other flag has been checked."""
    from kiln.tools.device import check_device_name

    return "cpu" if check_device_name(device) == "auto" else device


def with_device(loop: LoopOptions, device: str) -> LoopOptions:
    return type(loop).model_validate({**loop.model_dump(), "device": device})


def _abs_replay(spec: str | None) -> str | None:
    """Replay scripts are stored by absolute path so --resume works from any directory."""
    if spec and spec.startswith("replay:"):
        path = Path(spec[len("replay:"):])
        if not path.is_file():
            raise KilnConfigError(f"replay script not found: {path}")
        return f"replay:{path.resolve()}"
    return spec


def loop_options(*, device: str, llm: str | None = None, coder_llm: str | None = None,
                 judge_llm: str | None = None, proposer_llm: str | None = None, base_url: str | None = None,
                 max_iters: int = MAX_ITERS, budget_usd: float | None = None, budget_tokens: int | None = None,
                 budget_minutes: float | None = None, no_progress: int = NO_PROGRESS, trials: int = TRIALS,
                 dtype: str = DTYPE, check_timeout: float = CHECK_TIMEOUT, seed: int | None = None,
                 llm_cache: Path | None = None, isolation: str = ISOLATION, bwrap: str | None = None,
                 **rest: Any) -> LoopOptions:
    """The flags as one LoopOptions (device already resolved); KilnConfigError names the bad flag.
    `--isolation strict` without the full sandbox, a `--base-url` nothing answers at and bf16 on CPU
    are refused here, before any LLM call."""
    roles = {"llm": _abs_replay(llm), "coder_llm": _abs_replay(coder_llm), "judge_llm": _abs_replay(judge_llm),
             "proposer_llm": _abs_replay(proposer_llm), "base_url": base_url}
    budgets = {"max_iters": max_iters, "usd": budget_usd, "tokens": budget_tokens, "minutes": budget_minutes,
               "no_progress_iters": no_progress}
    check = {"trials": trials, "dtype": dtype, "timeout_s": check_timeout, "seed": seed, "isolation": isolation,
             "bwrap": bwrap}
    from pydantic import ValidationError

    from kiln.graphs.context import LoopOptions
    from kiln.tools.flags import flag_error

    try:
        loop = LoopOptions(device=device, roles=roles, budgets=budgets, check=check,
                           llm_cache=str(llm_cache.resolve()) if llm_cache else None, **rest)
    except ValidationError as err:
        raise KilnConfigError(flag_error(err)) from None
    if loop.device == "cpu" and loop.check.dtype == "bf16":  # every candidate would come back `unsupported`
        raise KilnConfigError("--dtype bf16 needs a GPU: on CPU, Triton's interpreter has no bf16 and CUDA "
                              "kernels cannot run; use --dtype fp32 or fp16 there")
    specs = [loop.roles.spec(role) for role in ("coder", "judge", "proposer")]
    if loop.roles.base_url and any(s.strip().lower().startswith("openai") for s in specs):
        from kiln.agents.llm.reach import check_reachable  # before any run directory or LLM call: one try

        check_reachable(loop.roles.base_url)
    from kiln.tools.sandbox.box import sandbox_for

    sandbox_for(loop.check.isolation, loop.check.bwrap)
    return loop
