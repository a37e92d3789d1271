"""Candidate worker, after the parent confirmed correctness: runtime integrity (operator and kernel
accounting, output hygiene) and, on a GPU, the timing stage with re-checked timed outputs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from kiln.tools.check.worker import JobSpec, Results
from kiln.tools.correctness import close_in_place, compare, pack
from kiln.tools.inputs import clone

if TYPE_CHECKING:
    from kiln.tools.check.candidate import Built


def integrity_stage(b: Built, spec: JobSpec, res: Results) -> None:
    try:
        from kiln.tools.integrity import runtime
    except ImportError as exc:  # INTEGRITY's runtime checks not installed yet: say so, go on
        res.data["integrity_missing"] = str(exc)
        return

    res.stage("integrity", "operator and kernel accounting")
    inputs = b.inputs(spec, "x1", 0, tag="integrity")
    accounting, findings = runtime.inspect_forward(b.new, inputs, policy=spec.policy, device=spec.device)
    res.stage("integrity", "output hygiene")
    del inputs
    sets = (b.inputs(spec, "x1", i, tag="integrity-outputs") for i in range(3))  # one at a time: GBs each
    findings = [*findings, *runtime.check_outputs(b.new, b.ref, sets)]
    res.data["accounting"] = accounting.model_dump()
    res.data["findings"] = [f.model_dump() for f in findings]
    res.end_stage("integrity")


def timing_stage(b: Built, spec: JobSpec, res: Results) -> None:
    from kiln.tools.timing import run_timing_stage

    res.stage("timing")

    def make(i: int) -> tuple:
        return b.inputs(spec, "x1", i, tag="timing")

    def recheck(inputs: tuple, output: Any) -> bool:
        with torch.no_grad():
            expected = b.ref(*clone(inputs))
        quick = close_in_place(expected, output, atol=spec.atol, rtol=spec.rtol)
        if quick is not None:
            return quick
        return compare(pack(expected, spec.secret), pack(output, spec.secret), atol=spec.atol, rtol=spec.rtol) is None

    timing, tint = run_timing_stage(b.new, b.ref, make, baselines=spec.baselines, recheck=recheck,
                                    max_time_s=spec.timing_max_s, threshold=spec.speedup_threshold,
                                    step=lambda what: res.stage("timing", what))
    res.data["timing"] = timing.model_dump()
    res.data["timing_integrity"] = tint.model_dump()
    res.end_stage("timing")


def env_stage(spec: JobSpec, res: Results) -> None:
    try:
        from kiln.tools.gpuenv import env_record
    except ImportError:
        return
    res.data["env"] = env_record(spec.device, spec.gpu_index).model_dump()


def after_correctness(b: Built, spec: JobSpec, res: Results) -> None:
    if spec.integrity:
        try:
            integrity_stage(b, spec, res)
        except Exception as exc:  # noqa: BLE001 - recorded; the parent decides what it means
            res.fail("candidate", exc, "runtime integrity checks")
            return
    if spec.time and spec.device == "cuda":
        try:
            timing_stage(b, spec, res)
        except Exception as exc:  # noqa: BLE001
            res.fail("candidate", exc, "timing")
            return
    env_stage(spec, res)
