"""The part of the correctness rule kiln's own process needs, without torch: the default tolerances
per dtype and the one paragraph a Coder reads first. (`kiln.tools.correctness` compares tensors;
a fresh `kiln check` on the resident fork server plans, judges and words its verdict without
importing torch, which would otherwise cost its compile stage 1-2.5 s.)"""

from __future__ import annotations

from kiln.tools.records import Mismatch

DEFAULT_TOL = {"fp32": 1e-4, "bf16": 1e-2, "fp16": 1e-2}


def tolerances(dtype: str, atol: float | None, rtol: float | None) -> tuple[float, float]:
    return (DEFAULT_TOL[dtype] if atol is None else atol, DEFAULT_TOL[dtype] if rtol is None else rtol)


def first_failure(trial_desc: str, mm: Mismatch | None, error: str | None = None) -> str:
    """The one paragraph a Coder reads first."""
    if error:
        return f"The candidate failed on {trial_desc}: {error}"
    assert mm is not None
    return f"Wrong output on {trial_desc}. {mm.message}"
