"""The runtime context: everything a node needs that is not state. Roles, the evaluator, the
profiler, budgets and options travel here (LangGraph's `context=`), never through globals. The
context is rebuilt on resume from `run.json`; it is never checkpointed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from kiln.agents.base import Coder, GpuFacts, Judge, KernelLang, Proposer
from kiln.agents.llm.usage import Budgets
from kiln.agents.registry import RoleSpecs
from kiln.graphs.shrink import ShrinkRecord
from kiln.tools.evaluator import Evaluator
from kiln.tools.profile.records import ProfileReport
from kiln.tools.records import JSON_SAFE, CheckOptions

Strategy = Literal["linear", "beam", "mcts"]

# flat keywords (the Python API's `run_problem(..., trials=3)`, run.json of older runs) -> nested field
_FLAT: dict[str, tuple[str, str]] = {
    "llm": ("roles", "llm"), "coder_llm": ("roles", "coder_llm"), "judge_llm": ("roles", "judge_llm"),
    "proposer_llm": ("roles", "proposer_llm"), "base_url": ("roles", "base_url"),
    "max_iters": ("budgets", "max_iters"), "budget_usd": ("budgets", "usd"), "budget_tokens": ("budgets", "tokens"),
    "budget_minutes": ("budgets", "minutes"), "no_progress": ("budgets", "no_progress_iters"),
    "trials": ("check", "trials"), "dtype": ("check", "dtype"), "seed": ("check", "seed"),
    "check_timeout_s": ("check", "timeout_s"), "check_timeout": ("check", "timeout_s"),
    "isolation": ("check", "isolation"), "bwrap": ("check", "bwrap"),
}


def fold_flat(data: Any, table: dict[str, tuple[str, str]] | None = None) -> Any:
    """Move flat keywords into their nested model (`table`, default the loop's); an explicit None
    leaves the default."""
    if not isinstance(data, dict):
        return data
    table = _FLAT if table is None else table
    out = {k: v for k, v in data.items() if k not in table}
    for key, (group, field_) in table.items():
        if key in data and data[key] is not None:
            nested = out.get(group)
            nested = dict(nested) if isinstance(nested, dict) else nested.model_dump() if nested else {}
            out[group] = {**nested, field_: data[key]}
    return out


def fold_into_loop(data: Any, own: tuple[str, ...]) -> Any:
    """For a product's options that embed `loop: LoopOptions` (the batch config, `kiln model`'s): the
    keywords not its own (`own`) go into `loop`, flat or nested, as older records and the keyword API
    give them."""
    if not isinstance(data, dict):
        return data
    flat = {k: v for k, v in data.items() if k not in (*own, "loop")}
    loop = data.get("loop")
    loop = loop.model_dump() if isinstance(loop, BaseModel) else dict(loop or {})
    return {k: v for k, v in data.items() if k in own} | {"loop": {**loop, **flat}}


class LoopOptions(BaseModel):
    """How the loop runs on any problem: roles, budgets, check options, search. `kiln run` and each
    sample of `kiln eval` use this one model (the batch config holds one), so an option means the
    same in both and is defined once."""

    model_config = JSON_SAFE

    lang: KernelLang = "triton"
    device: Literal["cuda", "cpu"] = "cpu"
    roles: RoleSpecs = Field(default_factory=RoleSpecs)
    llm_cache: str | None = Field(None, description="SQLite LLM-response cache; None: <run dir>/llm_cache.sqlite")
    target_speedup: float = Field(1.0, gt=0, description="the CI's low end vs target_baseline must reach it")
    target_baseline: Literal["eager", "compile"] = Field("eager", description="what the target is measured against")
    strategy: Strategy = "linear"
    beam_width: int = Field(2, ge=1, description="b: candidates kept per beam step")
    beam_children: int = Field(2, ge=1, description="k: children per kept candidate")
    mcts_children: int = Field(2, ge=1, description="children per node before UCT descends")
    mcts_c: float = Field(1.0, ge=0, description="UCT exploration constant")
    budgets: Budgets = Field(default_factory=Budgets)
    check: CheckOptions = Field(default_factory=CheckOptions, description="every check's options; the graph adds "
                                "the stress cases and the device")
    case_timeout_s: float = Field(60.0, gt=0, description="a stress case slower than this is rejected")
    max_cases: int = Field(4, ge=1, description="cases asked of the Proposer per round")
    roofline_stop_pct: float = Field(90.0, description="stop once the best is this close to its floor")
    recursion_limit: int = Field(0, ge=0, description="0: derived from the budgets")
    shrink: bool = Field(False, description="--shrink: on a CPU, check a copy of the problem at sizes Triton's "
                                            "interpreter can check in the budget (said and recorded)")

    @model_validator(mode="before")
    @classmethod
    def _fold(cls, data: Any) -> Any:
        return fold_flat(data)

    @model_validator(mode="after")
    def _check_device(self) -> LoopOptions:
        self.check = self.check.model_copy(update={"device": self.device, "cases": []})
        return self

    @property
    def trials(self) -> int:
        return self.check.trials

    @property
    def seed(self) -> int | None:
        return self.check.seed


class RunOptions(LoopOptions):
    """Everything `kiln run` was asked, minus secrets. Saved as run.json for --resume."""

    problem: str = Field(description="absolute path of the problem file")
    shrunk: ShrinkRecord | None = Field(None, description="--shrink's changes: `problem` is then the run's copy")
    original_problem: str | None = Field(None, description="absolute path of the problem before its sizes were "
                                         "shrunk (`kiln run --shrink` sets it): the Coder is shown its sizes and the "
                                         "target GPU's floors for them")


ProfileFn = Callable[[Path, Path], tuple[ProfileReport | None, str | None]]
"""(problem, candidate) -> (profile, skip reason): exactly one of the two is None."""


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
