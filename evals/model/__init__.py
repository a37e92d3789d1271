"""Whole-model mode (`kiln model TARGET`): profile a model, extract its hot ops as problems, optimise
them with the agent loop, patch the live model with the kernels that are faster with confidence,
check it end to end and export a bundle. `load(folder)` reads a bundle back (`.apply(model)`)."""

from __future__ import annotations

from typing import Any

__all__ = ["load"]


def load(folder: Any) -> Any:
    """`load("bundle").apply(model)`: read a kiln bundle; see kiln.evals.model.bundle."""
    from kiln.evals.model.bundle import load as _load

    return _load(folder)
