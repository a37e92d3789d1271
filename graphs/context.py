"""The runtime context: everything a node needs that is not state. Roles, the evaluator, the
profiler, budgets and options travel here (LangGraph's `context=`), never through globals. The
context is rebuilt on resume from `run.json`; it is never checkpointed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kiln.agents.base import Coder, GpuFacts, Judge, KernelLang, Proposer
from kiln.tools.evaluator import Evaluator

Strategy = Literal["linear", "beam", "mcts"]


class Budgets(BaseModel):
    """Run limits. None means unlimited. Reaching any one stops the run cleanly."""

    model_config = ConfigDict(extra="forbid")

    max_iters: int = Field(default=8, ge=1, description="Coder rounds")
    usd: float | None = Field(default=None, gt=0)
    tokens: int | None = Field(default=None, gt=0)
    minutes: float | None = Field(default=None, gt=0)
    no_progress_iters: int = Field(default=4, ge=1, description="K: stop after K rounds without a better best")


class RunOptions(BaseModel):
    """Everything `kiln run` was asked, minus secrets. Saved as run.json for --resume."""

    model_config = ConfigDict(extra="forbid")

    problem: str = Field(description="absolute path of the problem file")
    lang: KernelLang = "triton"
    device: Literal["cuda", "cpu"] = "cpu"
    llm: str | None = None
    coder_llm: str | None = None
    judge_llm: str | None = None
    proposer_llm: str | None = None
    base_url: str | None = None
    llm_cache: str | None = Field(None, description="SQLite LLM-response cache; None: <run dir>/llm_cache.sqlite")
    target_speedup: float = Field(1.0, gt=0, description="the CI's low end vs target_baseline must reach it")
    target_baseline: Literal["eager", "compile"] = Field("eager", description="what the target is measured against")
    strategy: Strategy = "linear"
    beam_width: int = Field(2, ge=1, description="b: candidates kept per beam step")
    beam_children: int = Field(2, ge=1, description="k: children per kept candidate")
    mcts_children: int = Field(2, ge=1, description="children per node before UCT descends")
    mcts_c: float = Field(1.0, ge=0, description="UCT exploration constant")
    budgets: Budgets = Field(default_factory=lambda: Budgets())
    trials: int = Field(3, ge=1, description="correctness trials per case and distribution")
    seed: int | None = Field(None, description="fixed check seed; None: a fresh secret seed per check")
    dtype: Literal["fp32", "bf16", "fp16"] = Field("fp32", description="the dtype checks run the problem in")
    check_timeout_s: float = Field(300.0, gt=0)
    case_timeout_s: float = Field(60.0, gt=0, description="a stress case slower than this is rejected")
    max_cases: int = Field(4, ge=1, description="cases asked of the Proposer per round")
    roofline_stop_pct: float = Field(90.0, description="stop once the best is this close to its floor")
    recursion_limit: int = Field(0, ge=0, description="0: derived from the budgets")
    isolation: Literal["strict", "best-effort"] = Field("best-effort", description="the OS sandbox's level")
    bwrap: str | None = Field(None, description="bubblewrap binary (None: on PATH)")


ProfileFn = Callable[[Path, Path], tuple[str | None, str | None]]
"""(problem, candidate) -> (digest, skip reason): exactly one of the two is None."""


@dataclass(frozen=True)
class RunContext:
    """What nodes read through `runtime.context`."""

    options: RunOptions
    run_dir: Path
    coder: Coder
    judge: Judge
    proposer: Proposer
    evaluator: Evaluator
    gpu: GpuFacts = field(default_factory=GpuFacts)
    profiler: ProfileFn | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def problem(self) -> Path:
        return Path(self.options.problem)
