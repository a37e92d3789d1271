"""Helpers for the whole-graph tests: the small problem and kernels in `data/`, scripted roles,
and the real LocalEvaluator (wrapped only to count calls, or to add GPU-style timings). A module
of its own name: one named `conftest` clashes with other folders' when pytest runs several."""

from __future__ import annotations

from pathlib import Path

from kiln.agents.base import GpuFacts
from kiln.agents.scripted import ScriptedCoder, ScriptedJudge, ScriptedProposer
from kiln.graphs.roles import Roles
from kiln.graphs.runner import run_problem
from kiln.tools.check import LocalEvaluator
from kiln.tools.records import CheckOptions, CheckRecord, Speedup, TimingRecord, TimingStat

DATA = Path(__file__).parent / "data"
PROBLEM = DATA / "relu_small.py"


def kernel(name: str) -> str:
    return (DATA / "kernels" / f"{name}.py").read_text()


def reply(name: str) -> str:
    """A Coder reply as an LLM writes it: a sentence and one fenced block."""
    return f"Here is the kernel.\n\n```python\n{kernel(name)}```\n"


def case_source(rows: int) -> str:
    """A stress case: the same Model with other input sizes."""
    return PROBLEM.read_text().replace("rows = 37", f"rows = {rows}")


def judge(next_: str, **kw: object) -> dict:
    mode = "optimization" if next_ == "optimize" else "correction"
    return {"mode": mode, "diagnosis": kw.pop("diagnosis", f"scripted {next_}"), "plan": kw.pop("plan", ""),
            "next": next_, **kw}


class CountingEvaluator:
    """The real evaluator; remembers what it was asked."""

    def __init__(self) -> None:
        self.inner = LocalEvaluator()
        self.calls: list[tuple[str, list[str]]] = []

    def check(self, problem: Path, candidate: Path, options: CheckOptions) -> CheckRecord:
        self.calls.append((candidate.read_text(), [Path(c).stem for c in options.cases]))
        return self.inner.check(problem, candidate, options)


class TimedEvaluator(CountingEvaluator):
    """The real evaluator, plus a GPU-style timing record (CPU cannot time): speedup vs eager per
    kernel source, so the optimize path and the target stop can run on CPU."""

    def __init__(self, speedups: dict[str, float]) -> None:
        super().__init__()
        self.speedups = speedups

    def check(self, problem: Path, candidate: Path, options: CheckOptions) -> CheckRecord:
        rec = super().check(problem, candidate, options)
        value = self.speedups[candidate.read_text()]
        stat = TimingStat(median_us=100 / value, ci_low_us=99 / value, ci_high_us=101 / value, half_width_pct=1,
                          n_samples=30)
        sp = Speedup(baseline="eager", value=value, ci_low=value * 0.98, ci_high=value * 1.02,
                     verdict="faster" if value > 1 else "slower")
        return rec.model_copy(update={"timing": TimingRecord(measured=True, method="injected", candidate=stat,
                                                             speedups={"eager": sp})})


def roles(coder: list, judge_: list, proposer: list | None = None, **kw: object) -> Roles:
    return Roles(ScriptedCoder(coder, **kw), ScriptedJudge(judge_, **kw),
                 ScriptedProposer(proposer or [{"cases": []}], **kw))


def run(tmp: Path, r: Roles, evaluator: object | None = None, profiler: object = None, **opts: object):
    opts.setdefault("device", "cpu")
    opts.setdefault("trials", 1)
    return run_problem(PROBLEM, out=tmp / "run", roles=r, evaluator=evaluator or CountingEvaluator(),
                       gpu=GpuFacts(), profiler=profiler, **opts)
