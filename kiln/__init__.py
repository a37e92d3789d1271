"""kiln: PyTorch modules into verified, fast CUDA or Triton kernels.

The code lives in `kiln.tools` (compile, verify, time, profile), `kiln.agents` (the LLM roles),
`kiln.graphs` (the loop), `kiln.evals` (batches, whole-model mode, curriculum) and `kiln.rewards`.
At this level, one name for users of a `kiln model` bundle:

    import kiln
    kiln.load("runs/model/bundle").apply(model)
"""

from __future__ import annotations

from typing import Any

__all__ = ["load"]


def load(folder: Any) -> Any:
    """Read a `kiln model` bundle; `.apply(model)` patches a model in place (kiln.evals.model.bundle)."""
    from kiln.evals.model.bundle import load as _load

    return _load(folder)
