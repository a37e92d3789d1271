"""A model's outputs as named tensor leaves, and fresh inputs like the example ones (for seeds)."""

from __future__ import annotations

from typing import Any

import torch


class OutputError(Exception):
    """The model's output holds no tensor kiln can compare."""


def leaves(out: Any, prefix: str = "out") -> list[tuple[str, Any]]:
    """(name, value) for every leaf of tensors, tuples, lists, dicts and dataclass-like outputs (a
    transformers ModelOutput is a dict)."""
    if isinstance(out, torch.Tensor) or out is None or isinstance(out, bool | int | float | str):
        return [(prefix, out)]
    if isinstance(out, dict):
        return [leaf for k, v in out.items() for leaf in leaves(v, f"{prefix}.{k}")]
    if isinstance(out, tuple | list):
        return [leaf for i, v in enumerate(out) for leaf in leaves(v, f"{prefix}[{i}]")]
    return [(prefix, out)]


def tensor_leaves(out: Any) -> list[tuple[str, torch.Tensor]]:
    """The tensor leaves; an output with none, or with leaves kiln cannot compare, is an OutputError."""
    items = leaves(out)
    odd = [f"{name} ({type(v).__name__})" for name, v in items
           if v is not None and not isinstance(v, torch.Tensor | bool | int | float | str)]
    if odd:
        raise OutputError(f"non-tensor outputs kiln cannot compare: {', '.join(odd[:3])}")
    tensors = [(name, v) for name, v in items if isinstance(v, torch.Tensor)]
    if not tensors:
        raise OutputError(f"the model returned no tensor (a {type(out).__name__})")
    return tensors


def like(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A fresh tensor drawn like `t`: floats from t's own values (inverse CDF over its sorted sample),
    integers uniform over t's range, bools copied."""
    if t.dtype == torch.bool or t.numel() == 0:
        return t.clone()
    if not t.is_floating_point():
        lo, hi = int(t.min()), int(t.max())
        return torch.randint(lo, hi + 1, t.shape, generator=gen, dtype=t.dtype, device="cpu").to(t.device)
    flat = t.detach().float().reshape(-1).cpu()
    if flat.numel() > 1 << 16:
        flat = flat[torch.randint(flat.numel(), (1 << 16,), generator=gen)]
    srt = flat.sort().values
    idx = torch.randint(srt.numel(), t.shape, generator=gen)
    return srt[idx].to(device=t.device, dtype=t.dtype).contiguous(memory_format=_format(t))


def _format(t: torch.Tensor) -> torch.memory_format:
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous():
        return torch.channels_last
    return torch.contiguous_format


def redraw(v: Any, gen: torch.Generator) -> Any:
    if isinstance(v, torch.Tensor):
        return like(v, gen)
    if isinstance(v, tuple | list):
        return type(v)(redraw(x, gen) for x in v)
    if isinstance(v, dict):
        return {k: redraw(x, gen) for k, x in v.items()}
    return v


def inputs_for_seed(args: tuple, kwargs: dict, seed: int) -> tuple[tuple, dict]:
    """Seed 0: the example inputs themselves; other seeds: fresh ones drawn like them."""
    if seed == 0:
        return args, kwargs
    gen = torch.Generator().manual_seed(seed)
    return redraw(args, gen), redraw(kwargs, gen)
