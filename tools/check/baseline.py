"""The baseline worker: a process that never imports a candidate.

`BaselineWorker` builds the problem's Model (seeds from the parent) and times it as eager, eager
with TF32 and `torch.compile`, exactly as the candidate worker times ModelNew: same input pool
(`TimedInputs` from the same timing key), same flush, same per-call sketches, so its loop's wall
time, measured by the parent, also calibrates the harness's per-call overhead that the parent
allows the candidate. `PeaksWorker` measures the GPU's copy bandwidth and matmul rate for the
physics floor (kiln's own code only; the parent writes the cache).
"""

from __future__ import annotations

from typing import Any

import torch

from kiln.tools.check.reference import Case
from kiln.tools.check.worker import JobSpec, Worker


class BaselineWorker(Worker):
    blame = "reference"

    def __init__(self, spec: JobSpec) -> None:
        super().__init__(spec)
        self.case: Case | None = None
        self.prepared: dict[str, Any] = {}

    def op_setup(self, seeds: dict[str, int]) -> dict[str, Any]:
        c = self.spec.cases[0]
        self.case = Case(c.path, c.model_path, init_seed=seeds["init"], model_seed=seeds["model"],
                         dtype=self.spec.dtype, device=self.spec.device)
        return {}

    def op_prepare(self, name: str, timing: dict[str, Any]) -> dict[str, Any]:
        """Build the baseline callable (compile: its first call, compile time excluded) and its pool."""
        from kiln.tools.timing.bench import TimedInputs
        from kiln.tools.timing.stage import Prepared, baseline_fn, settle_compiled

        assert self.case is not None
        feed = TimedInputs.from_spec(timing, self.case.mod.get_inputs, dtype=self.spec.dtype, device=self.spec.device)
        fn = baseline_fn(name, self.case.model)
        if name == "compile":
            with torch.no_grad():
                settle_compiled(fn, feed.for_call(0))
        self.prepared[name] = (Prepared(fn, feed, self.spec.device), timing)
        return {}

    def op_time_loop(self, name: str, max_time_s: float) -> dict[str, Any]:
        from kiln.tools.timing.stage import run_loop, tf32

        prepared, timing = self.prepared[name]
        with tf32(True if name == "eager_tf32" else None):
            run, facts = run_loop(prepared, max_time_s=max_time_s, sketch_key=int(timing["key"]))
        return {"samples_us": run.samples, **facts}

    def op_peak_memory(self) -> dict[str, Any]:
        from kiln.tools.timing.stage import peak_bytes

        prepared, _ = self.prepared["eager"]
        return {"peak_bytes": peak_bytes(prepared.fn, prepared.feed.for_call(0))}
