"""The baseline worker: a process that never imports a candidate.

`BaselineWorker` builds the problem's Model (seeds from the parent) and times it as eager, eager
with TF32 and `torch.compile` through exactly the harness the candidate's worker runs
(`kiln.tools.timing.laps`: the same ring, the same refresh, lap and commit steps), so kiln's clock
measures both the same way, and the baseline's refresh and commit times are what those steps cost
when nothing is hidden in them.
"""

from __future__ import annotations

from typing import Any

import torch

from kiln.tools.check import messages as m
from kiln.tools.check.reference import Case
from kiln.tools.check.worker import JobSpec, Worker


class BaselineWorker(Worker):
    blame = "reference"

    def __init__(self, spec: JobSpec) -> None:
        super().__init__(spec)
        self.case: Case | None = None
        self.prepared: dict[str, Any] = {}
        self.ring: Any = None

    def op_setup(self, cmd: m.BaseSetup) -> None:
        c = self.spec.cases[0]
        self.case = Case(c.path, c.model_path, init_seed=cmd.seeds.init, model_seed=cmd.seeds.model,
                         dtype=self.spec.dtype, device=self.spec.device)

    def op_prepare(self, cmd: m.BasePrepare) -> None:
        """Build the baseline callable (compile: its first call, compile time excluded) on the worker's
        one ring (every baseline times the same inputs). Nothing runs a lap here: the parent times the
        baselines only after the candidate's worker has ended, and warms each up first."""
        from kiln.tools.timing.laps import Ring, RingSpec
        from kiln.tools.timing.stage import baseline_fn, profiled_once, settle_compiled

        assert self.case is not None
        if self.ring is None:
            self.ring = Ring(self.case.mod.get_inputs, RingSpec.model_validate(cmd.ring))
            profiled_once(self.case.model, self.ring.slots[0], self.spec.device)
        fn = baseline_fn(cmd.name, self.case.model)
        if cmd.name == "compile":
            with torch.no_grad():
                settle_compiled(fn, self.ring.slots[0])
        self.prepared[cmd.name] = (fn, self.ring)

    def op_refresh(self, cmd: m.Refresh) -> None:
        self.prepared[cmd.name][1].refresh(cmd.key)

    def op_lap(self, cmd: m.Lap) -> None:
        from kiln.tools.timing.laps import run_lap
        from kiln.tools.timing.stage import tf32

        with tf32(True if cmd.name == "eager_tf32" else None):
            run_lap(*self.prepared[cmd.name])

    def op_commit(self, cmd: m.Commit) -> m.CommitReply:
        from kiln.tools.timing.laps import commit

        ring = self.prepared[cmd.name][1]
        out = m.CommitReply(projections=[{"leaves": p} for p in commit(ring, cmd.key, cmd.sigma)])
        ring.outputs = []
        return out

    def op_peak_memory(self, cmd: m.PeakMemory) -> m.PeakMemoryReply:
        from kiln.tools.timing.stage import peak_bytes

        fn, ring = self.prepared[cmd.name]
        ring.outputs = []
        return m.PeakMemoryReply(peak_bytes=peak_bytes(fn, ring.slots[0]))
