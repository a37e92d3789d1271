"""verl's custom reward hooks, backed by one process-wide `KilnReward`.

- naive reward manager: `custom_reward_function.path=<this file>`, `name=compute_score`;
- batch reward manager (`reward_model.reward_manager=batch`): `name=compute_score_batch`, which
  checks the whole batch in parallel and applies the group speed gate per ground truth.

`ground_truth` is the problem's KernelBench module source; `solution_str` the completion. Call
`configure(...)` first (same arguments as `KilnReward`) to choose devices, Ray, cache and seed.
"""

from __future__ import annotations

import threading
from typing import Any

from kiln.rewards.callable import KilnReward

_LOCK = threading.Lock()
_DEFAULT: KilnReward | None = None


def configure(**kwargs: Any) -> KilnReward:
    global _DEFAULT
    with _LOCK:
        _DEFAULT = KilnReward(**kwargs)
        return _DEFAULT


def _reward() -> KilnReward:
    global _DEFAULT
    with _LOCK:
        if _DEFAULT is None:
            _DEFAULT = KilnReward()
        return _DEFAULT


def compute_score(data_source: Any = None, solution_str: str = "", ground_truth: str = "",
                  extra_info: Any = None, **_: Any) -> float:
    """One sample (no group: speed counts when the sample is verified)."""
    return _reward()([ground_truth], [solution_str], problem=[ground_truth])[0]


def compute_score_batch(data_sources: list[Any] | None = None, solution_strs: list[str] | None = None,
                        ground_truths: list[str] | None = None, extra_infos: list[Any] | None = None,
                        **_: Any) -> list[float]:
    """A batch, checked in parallel; samples sharing a ground truth form a group."""
    truths = list(ground_truths or [])
    return _reward()(truths, list(solution_strs or []), problem=truths)
