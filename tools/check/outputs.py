"""Outputs on their way from the candidate's worker to the judge, as raw bytes in files kiln made.

The candidate's worker describes each forward() result as `Leaf`s (kind, class, dtype, shape; the
values of numbers) and writes the data of its tensor leaves, in order, as raw bytes into a file the
parent created beforehand (`write_raw`: it opens that path without creating or following anything).
Outputs of `sketch.SKETCH_MIN_NUMEL` elements or more are sampled at positions drawn from a key the
worker gets only after the output exists (`kiln.tools.sketch`), so only the sample travels.

The judge (the reference worker) reads a file only if it is the very regular file the parent made
(`read_raw`: same device and inode, no symlink, no FIFO, exactly the size the reference's own
output implies), so a worker can neither point the judge at another file nor make it block or
allocate by a size it claims. Nothing is unpickled: the bytes become tensors of the dtype and shape
the reference's output has.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from kiln.tools import sketch
from kiln.tools.check.messages import Leaf, Slot
from kiln.tools.check.slots import OPEN_FLAGS, OutputFileError, open_slot
from kiln.tools.correctness import leaves as walk
from kiln.tools.inputs import derive_seed

DTYPES = {str(d).removeprefix("torch."): d for d in (torch.float64, torch.float32, torch.float16, torch.bfloat16,
                                                      torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
                                                      torch.bool, torch.complex64, torch.complex128)}


def describe(output: Any, key: int = 0) -> tuple[list[Leaf], list[torch.Tensor]]:
    """The leaves of one forward() result, and the CPU tensors whose bytes travel: each tensor leaf's
    data, or for a huge one its sketch's sampled values (drawn with `key`)."""
    leaves: list[Leaf] = []
    data: list[torch.Tensor] = []
    for name, obj in walk(output):
        if isinstance(obj, torch.Tensor):
            leaf, values = _tensor_leaf(name, obj, key)
            leaves.append(leaf)
            data.append(values)
        elif isinstance(obj, (bool, int, float)) or obj is None:
            leaves.append(Leaf(name=name, kind="number", value=obj))
        else:
            leaves.append(Leaf(name=name, kind="other", cls=type(obj).__name__))
    return leaves, data


def _tensor_leaf(name: str, t: torch.Tensor, key: int) -> tuple[Leaf, torch.Tensor]:
    base = {"name": name, "cls": type(t).__name__, "device": str(t.device),
            "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)}
    if t.numel() >= sketch.SKETCH_MIN_NUMEL:
        sk = sketch.make_sketch(t, derive_seed(key, name))
        stats = {k: sk[k] for k in ("nan", "posinf", "neginf", "sum_abs")}
        return Leaf(kind="sketch", **base, **stats), sk["values"].contiguous()
    # a plain torch.Tensor copy: a subclass's class is in the leaf, and fails the judge as a type
    return Leaf(kind="tensor", **base), t.detach().to("cpu", copy=True).contiguous().as_subclass(torch.Tensor)


def n_values(leaf: Leaf) -> int:
    """How many values of a tensor leaf travel: all of them, or the sketch's sample."""
    if leaf.kind == "sketch":
        return sketch.N_UNIFORM + sketch.N_EDGE
    n = 1
    for s in leaf.shape:
        n *= s
    return n


def nbytes(leaf: Leaf) -> int:
    dt = DTYPES.get(leaf.dtype)
    if dt is None:
        raise OutputFileError(f"{leaf.name}: unknown dtype {leaf.dtype!r}")
    return n_values(leaf) * torch.empty((), dtype=dt).element_size()


def write_raw(path: str, data: list[torch.Tensor]) -> None:
    """Write the tensors' bytes, in order, into the file the parent made at `path` (never created,
    never followed through a link)."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | OPEN_FLAGS)
    try:
        for t in data:
            if t.numel():
                view = t.contiguous().reshape(-1).view(torch.uint8).numpy().data  # a memoryview of the bytes
                while view:
                    view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def read_raw(slot: Slot, expected: list[Leaf], device: str) -> list[torch.Tensor]:
    """The tensors of a candidate's output file, shaped as the reference's `expected` tensor leaves
    say (the judge compares structure first: only a matching candidate's file is read)."""
    want = [lf for lf in expected if lf.kind in ("tensor", "sketch")]
    total = sum(nbytes(lf) for lf in want)
    fd = open_slot(slot)
    try:
        size = os.fstat(fd).st_size
        if size != total:
            raise OutputFileError(f"its output file holds {size} bytes; its output needs {total}")
        buf = bytearray(total)
        view, got = memoryview(buf), 0
        while got < total:
            n = os.readv(fd, [view[got:]])
            if n <= 0:
                raise OutputFileError("its output file shrank while it was read")
            got += n
    finally:
        os.close(fd)
    return _split(buf, want, device)


def _split(buf: bytearray, want: list[Leaf], device: str) -> list[torch.Tensor]:
    raw = torch.frombuffer(buf, dtype=torch.uint8) if buf else torch.empty(0, dtype=torch.uint8)
    out, off = [], 0
    for lf in want:
        n = nbytes(lf)
        t = raw[off:off + n].view(DTYPES[lf.dtype])
        shape = [n_values(lf)] if lf.kind == "sketch" else lf.shape
        out.append(t.reshape(shape).to(device))
        off += n
    return out
