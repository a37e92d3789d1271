"""Make output elements a candidate forgets to write show up as NaN.

* Python-level allocations (`torch.empty`, `empty_like`, `empty_strided`, `Tensor.new_empty`) made
  while the candidate runs are filled with NaN (floats) or -1 (integers), on CPU and GPU alike.
* On CUDA, the caching allocator is also primed with freed blocks filled with 0xFF bytes (NaN in
  every float format) of the sizes the candidate is likely to allocate, so C++ allocations
  (`torch::empty` in a load_inline extension) tend to get poisoned memory too.
* On CPU there is no caching allocator to prime (freed memory goes back to malloc/mmap, which zero
  it), so only the Python-level allocations are poisoned there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

_FACTORIES = ("empty", "empty_like", "empty_strided")
PRIME_MAX_BYTES = 512 << 20  # larger blocks are not primed (the Python-level poisoning still applies)


def _fill(t: Any) -> Any:
    if isinstance(t, torch.Tensor) and t.numel():
        with torch.no_grad():
            if t.is_floating_point() or t.is_complex():
                t.fill_(float("nan"))
            elif t.dtype != torch.bool:
                t.fill_(-1)
    return t


def _wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    def poisoned(*args: Any, **kwargs: Any) -> Any:
        return _fill(fn(*args, **kwargs))

    return poisoned


@contextlib.contextmanager
def poisoned_allocations() -> Iterator[None]:
    """Within the block, fresh tensors from the empty-factories hold NaN instead of old bytes."""
    saved = {name: getattr(torch, name) for name in _FACTORIES}
    new_empty = torch.Tensor.new_empty
    try:
        for name, fn in saved.items():
            setattr(torch, name, _wrap(fn))
        torch.Tensor.new_empty = _wrap(new_empty)  # type: ignore[method-assign]
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)
        torch.Tensor.new_empty = new_empty  # type: ignore[method-assign]


def prime_cuda_cache(nbytes: list[int], device: str) -> None:
    """Fill cached-allocator blocks of these sizes with 0xFF, then free them for reuse."""
    if device != "cuda":
        return
    sizes = [n for n in nbytes if 0 < n <= PRIME_MAX_BYTES]
    blocks = [torch.full((n,), 255, dtype=torch.uint8, device="cuda") for n in sizes for _ in range(2)]
    torch.cuda.synchronize()
    del blocks


def tensor_sizes(*values: Any) -> list[int]:
    out: list[int] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v.numel() * v.element_size())
        elif isinstance(v, (tuple, list)):
            out.extend(tensor_sizes(*v))
    return out
