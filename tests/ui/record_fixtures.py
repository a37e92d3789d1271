"""Record the run directories the UI tests read (tests/fixtures/ui/).

    TRITON_INTERPRET=1 .venv/bin/python tests/ui/record_fixtures.py tests/fixtures/ui

One MCTS run of the real graph on CPU (the graph tests' 37 x 129 ReLU problem) with scripted roles,
the real LocalEvaluator and the Triton interpreter. CPU cannot time kernels, so the evaluator adds a
GPU-style timing record and a physics record to each correct candidate's real check record
(`method="injected"`), as the graph tests do: the speedups, CIs and roofline points are synthetic,
everything else (statuses, mismatches, stderr, events, prompts) is what kiln recorded. A fake API key
is in the environment and in one Coder reply, to show it never reaches the UI.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from ui_helpers import FAKE_KEY  # the script's own folder is on sys.path

HERE = Path(__file__).resolve().parent
GRAPH_DATA = HERE.parent / "graphs" / "data"
PROBLEM = GRAPH_DATA / "relu_small.py"
SPEEDUPS = {"good": 1.31, "good_wide": 1.74, "one_block": 0.62}


def _kernel(name: str) -> str:
    for folder in (GRAPH_DATA / "kernels", HERE / "data" / "kernels"):
        if (folder / f"{name}.py").exists():
            return (folder / f"{name}.py").read_text()
    raise FileNotFoundError(name)


def _reply(name: str, note: str = "") -> str:
    return f"{note}Here is the kernel.\n\n```python\n{_kernel(name)}```\n"


class InjectedTiming:
    """The real evaluator; correct candidates get a synthetic timing and physics record."""

    def __init__(self) -> None:
        from kiln.tools.check import LocalEvaluator

        self.inner = LocalEvaluator()
        self.by_source = {_kernel(k): v for k, v in SPEEDUPS.items()}

    def check(self, problem, candidate, options):  # noqa: ANN001, ANN201 - Evaluator protocol
        rec = self.inner.check(problem, candidate, options)
        value = self.by_source.get(candidate.read_text().replace(FAKE_KEY, "[REDACTED]"))
        if not rec.correct or value is None:
            return rec
        return _with_timing(rec, value)


def _with_timing(rec, value: float):  # noqa: ANN001, ANN202 - CheckRecord
    from kiln.tools.records import IntegrityRecord, PhysicsRecord, Speedup, TimingRecord, TimingStat

    eager_us, compile_us = 12.0, 9.5
    cand_us = eager_us / value

    def stat(us: float) -> TimingStat:
        return TimingStat(median_us=us, ci_low_us=us * 0.97, ci_high_us=us * 1.03, half_width_pct=3.0, n_samples=40)

    def sp(name: str, base: float) -> Speedup:
        v = base / cand_us
        return Speedup(baseline=name, value=v, ci_low=v * 0.95, ci_high=v * 1.05,
                       verdict="faster" if v * 0.95 > 1 else "slower" if v * 1.05 < 1 else "tie")

    timing = TimingRecord(measured=True, method="injected", candidate=stat(cand_us),
                          baselines={"eager": stat(eager_us), "compile": stat(compile_us)},
                          speedups={"eager": sp("eager", eager_us), "compile": sp("compile", compile_us)})
    n = 37 * 129
    moved, peak = 2 * n * 4, 4000.0
    floor = moved / (peak * 1e3)
    physics = PhysicsRecord(bytes_moved=moved, flops=2 * n, peak_gbps=peak, peak_tflops=60.0, floor_us=floor,
                            measured_us=cand_us, pct_of_floor=100 * floor / cand_us, bound="memory",
                            peak_source="injected")
    integrity = (rec.integrity or IntegrityRecord()).model_copy(update={"physics": physics})
    return rec.model_copy(update={"timing": timing, "integrity": integrity})


def _judge(next_: str, diagnosis: str, plan: str = "") -> dict:
    return {"mode": "optimization" if next_ == "optimize" else "correction", "diagnosis": diagnosis,
            "plan": plan, "next": next_}


def record_mcts(out: Path) -> None:
    from kiln.agents.base import GpuFacts
    from kiln.agents.scripted import ScriptedCoder, ScriptedJudge, ScriptedProposer
    from kiln.graphs.roles import Roles
    from kiln.graphs.runner import run_problem

    coder = [_reply("no_relu", f"(debug: using key {FAKE_KEY})\n"), _reply("compile_error"), _reply("tile_edge"),
             _reply("one_block"), _reply("crash_forward"), _reply("torch_fallback"), _reply("good"),
             _reply("good_wide")]
    judge = [_judge("repair", "Negative inputs are not clamped: the ReLU is missing.", "Apply tl.maximum(x, 0)."),
             _judge("optimize", "Memory-bound elementwise kernel at a third of the copy roof.",
                    "Use 4096-element blocks and 8 warps.")]
    proposer = [{"cases": [
        {"name": "rows_100", "source": PROBLEM.read_text().replace("rows = 37", "rows = 100"),
         "rationale": "12900 elements: more than one 8192-element block."},
        {"name": "wrong_model", "source": PROBLEM.read_text().replace("2.0 *", "3.0 *"),
         "rationale": "changes the model (must be rejected)"}]}]
    roles = Roles(ScriptedCoder(coder, tokens_per_call=1800, usd_per_call=0.006),
                  ScriptedJudge(judge, tokens_per_call=900, usd_per_call=0.002),
                  ScriptedProposer(proposer, tokens_per_call=1200, usd_per_call=0.003))
    run_problem(PROBLEM, out=out, roles=roles, evaluator=InjectedTiming(), gpu=GpuFacts(), device="cpu", trials=1,
                strategy="mcts", mcts_children=3, max_iters=8, target_speedup=1.5, no_progress=8)


def main(dest: Path) -> None:
    os.environ["OPENAI_API_KEY"] = FAKE_KEY
    os.environ.setdefault("TRITON_INTERPRET", "1")
    run = dest / "runs" / "relu-mcts"
    if run.exists():
        shutil.rmtree(run)
    record_mcts(run)
    for junk in ("checkpoints.sqlite-wal", "checkpoints.sqlite-shm"):
        (run / junk).unlink(missing_ok=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
