"""kiln: PyTorch modules into verified, fast CUDA or Triton kernels.

The code lives in `kiln.tools` (compile, verify, time, profile), `kiln.agents` (the LLM roles),
`kiln.graphs` (the loop), `kiln.evals` (batch eval, whole-model mode, the UI, the curriculum) and
`kiln.rewards` (the reward for RL trainers). At this level, the names users of a `kiln model` bundle
need, and nothing else:

    import kiln
    handle = kiln.load("runs/model/bundle").apply(model)   # handle.remove() undoes it
    with kiln.load("runs/model/bundle").applied(model): ...

`kiln.Bundle` and `kiln.BundleError` are the types behind them. The runtime that patches a model
(kiln.evals.model.bundle, .apply, .patch) is imported only when one of these names is used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Bundle", "BundleError", "load"]


def load(folder: Any) -> Any:
    """Read a `kiln model` bundle; `.apply(model)` patches a model in place (kiln.evals.model.bundle)."""
    from kiln.evals.model.bundle import load as _load

    return _load(folder)


def __getattr__(name: str) -> Any:
    if name in ("Bundle", "BundleError"):
        from kiln.evals.model import bundle

        return getattr(bundle, name)
    raise AttributeError(f"module 'kiln' has no attribute {name!r}")
