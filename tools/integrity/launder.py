"""Laundering: an own kernel that only moves PyTorch's (or Python's) result into the output.

Under the `partial` policy a candidate may use PyTorch for parts, but its own kernels must do
work. A kernel that copies `torch.softmax(x)` into the output buffer "feeds the result" (poisoning
it moves the output), so the decoy check passes it. This module watches every own launch:

- its outputs are the tensor arguments the launch changed (by a bit-level digest taken before and
  after), plus what an extension function returns; when it visibly changed none, every argument
  that is not a forward input or a parameter;
- an output is a *copy* when it equals, bit for bit, permuted (same multiset of bits), cast or
  within the dtype's tolerance (fp32 1e-4, half types 1e-2), one of the launch's unchanged
  arguments or a PyTorch compute result recorded earlier in the forward (`ResultLog`);
- the copy's source is an `input` (forward input or parameter), `torch` (a compute op's result),
  `own` (what an earlier own launch wrote) or `untracked` (made outside PyTorch and outside the
  candidate's kernels: Python, a cache).

A forward is laundered when either every own launch is a copy and PyTorch computed (or a source
was untracked), or every returned tensor was last written (through clones) by a copy of a
`torch` or `untracked` source. `find_copy_kernels` then re-runs the forward on the negated inputs
and reports the kernels only if it is laundered again, so a ReLU kernel that is the identity on
non-negative inputs is not mistaken for a copy. Copies of the candidate's own results (a Triton
softmax, then a copy kernel) and pure data-movement problems with no PyTorch compute pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from kiln.tools import chunked

MAX_LAUNCHES = 256
"""Launches watched per forward; later ones are not judged (a finding needs evidence)."""
MAX_SOURCES = 64
"""PyTorch results compared against each output (the most recent of equal size)."""
KEEP_BYTES = 2 << 30
"""PyTorch results kept alive for tolerance comparisons; past this, bit-level digests only."""
_MIX1, _MIX2 = -0x61C8864680B583EB, -0x40A7B892E31B1A47  # 64-bit odd constants (splitmix64), signed


def multiset_digest(t: torch.Tensor) -> int:
    """A checksum of the multiset of raw element bits: equal for any permutation of the elements."""
    if t.numel() == 0:
        return 0
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    total = 0
    for _, s in chunked.slices(t.detach().contiguous().reshape(-1).view(ints)):
        h = s.to(torch.int64) * _MIX1
        h = (h ^ (h >> 29)) * _MIX2
        total = (total + int((h ^ (h >> 32)).sum())) & 0xFFFFFFFFFFFFFFFF
    return total


def _sid(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return -id(t)


@dataclass
class _Result:
    op: str
    tensor: torch.Tensor | None  # kept alive while under KEEP_BYTES
    exact: int
    multiset: int
    numel: int
    storage: int


class ResultLog:
    """PyTorch compute results of one forward, in order (filled by `AtenRecorder`), and the
    storages copy operators moved data between (`clone`, `_to_copy`, `copy_`)."""

    def __init__(self) -> None:
        self.results: list[_Result] = []
        self.copied_from: dict[int, int] = {}
        self._kept = 0

    def add(self, op: str, t: torch.Tensor) -> None:
        if not isinstance(t, torch.Tensor) or t.is_sparse or t.numel() == 0:
            return
        keep = self._kept + t.numel() * t.element_size() <= KEEP_BYTES
        self._kept += t.numel() * t.element_size() if keep else 0
        self.results.append(_Result(op, t if keep else None, chunked.digest(t), multiset_digest(t), t.numel(), _sid(t)))

    def note_copy(self, dst: torch.Tensor, src: Any) -> None:
        if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor) and _sid(dst) != _sid(src):
            self.copied_from[_sid(dst)] = _sid(src)

    @property
    def storages(self) -> set[int]:
        return {r.storage for r in self.results}


@dataclass
class Launch:
    name: str
    mover: bool
    sources: set[str] = field(default_factory=set)
    outputs: list[int] = field(default_factory=list)


class CopyWatch:
    """A `LaunchObserver` that judges each own launch: are all its outputs copies?"""

    def __init__(self, log: ResultLog, protected: set[int]) -> None:
        self.log, self.protected = log, protected
        self.launches: list[Launch] = []
        self.own: set[int] = set()

    def before(self, name: str, tensors: list[torch.Tensor]) -> list[int] | None:
        if len(self.launches) >= MAX_LAUNCHES:
            return None
        return [chunked.digest(t) for t in tensors]

    def after(self, name: str, tensors: list[torch.Tensor], state: Any, result: Any) -> None:
        if state is None:
            return
        now = [chunked.digest(t) for t in tensors]
        changed = [d != before for d, before in zip(now, state, strict=True)]
        outs = [t for t, c in zip(tensors, changed, strict=True) if c]
        outs += [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor)]
        outs = outs or [t for t in tensors if _sid(t) not in self.protected]
        out_ids = {id(t) for t in outs}
        unchanged = [(t, d) for t, c, d in zip(tensors, changed, now, strict=True) if not c and id(t) not in out_ids]
        digests = {id(t): d for t, d in zip(tensors, now, strict=True)}
        sources = [self._source(o, digests.get(id(o)), unchanged) for o in outs if o.numel()]
        mover = bool(sources) and all(s is not None for s in sources)
        self.launches.append(Launch(name, mover, {s for s in sources if s}, [_sid(o) for o in outs]))
        self.own |= {_sid(o) for o in outs}

    def _source(self, out: torch.Tensor, exact: int | None, unchanged: list[tuple[torch.Tensor, int]]) -> str | None:
        """Where `out` was copied from, or None when it is not a copy of anything seen."""
        probe = _Probe(out, exact)
        for s, s_exact in unchanged:
            if probe.same(s, s_exact, lambda s=s: multiset_digest(s)):
                return self._category(_sid(s))
        candidates = [r for r in self.log.results if r.numel == out.numel()][-MAX_SOURCES:]
        for r in reversed(candidates):
            live = r.tensor if r.tensor is not None and chunked.digest(r.tensor) == r.exact else None
            if probe.bits(r.exact, lambda r=r: r.multiset) or (live is not None and _close(out, live)):
                return "torch"
        return None

    def _category(self, sid: int) -> str:
        """input / own / torch / untracked, following clones back to where the data came from
        (`x.contiguous()` of an input is the input)."""
        sid = _origin(self.log, sid)
        if sid in self.protected:
            return "input"
        if sid in self.own:
            return "own"
        return "torch" if sid in self.log.storages else "untracked"


class _Probe:
    """One output's digests, computed once and only when a comparison needs them."""

    def __init__(self, out: torch.Tensor, exact: int | None) -> None:
        self.out = out
        self._exact = exact
        self._multi: int | None = None

    def bits(self, exact: int, multi: Any) -> bool:
        """Equal bit for bit, or as a multiset of bits (a permutation)? `multi` is called lazily."""
        if self._exact is None:
            self._exact = chunked.digest(self.out)
        if self._exact == exact:
            return True
        if self._multi is None:
            self._multi = multiset_digest(self.out)
        return self._multi == multi()

    def same(self, src: torch.Tensor, src_exact: int, src_multi: Any) -> bool:
        if self.out.numel() != src.numel():
            return False
        if self.out.dtype == src.dtype and self.bits(src_exact, src_multi):
            return True
        return _close(self.out, src)


def _close(out: torch.Tensor, src: torch.Tensor) -> bool:
    if out.numel() != src.numel() or not (out.is_floating_point() and src.is_floating_point()):
        return False
    tol = 1e-4 if out.dtype in (torch.float32, torch.float64) else 1e-2
    return chunked.allclose(out.detach().reshape(-1), src.detach().reshape(-1).to(out.dtype), atol=tol, rtol=tol)


def laundered(watch: CopyWatch, compute_ops: list[str], returned: list[torch.Tensor]) -> list[str]:
    """Names of the copy kernels when this forward was laundered (see the module doc), else []."""
    launches = watch.launches
    if not launches:
        return []
    movers = sorted({x.name for x in launches if x.mover})
    all_copies = all(x.mover for x in launches)
    outside = any(s in ("torch", "untracked") for x in launches for s in x.sources)
    if all_copies and (compute_ops or outside):
        return movers
    writers = [_last_writer(launches, _origin(watch.log, _sid(t))) for t in returned if t.is_floating_point()]
    if writers and all(w is not None and w.mover and w.sources <= {"torch", "untracked"} for w in writers):
        return sorted({w.name for w in writers if w is not None})
    return []


def _origin(log: ResultLog, sid: int) -> int:
    seen = set()
    while sid in log.copied_from and sid not in seen:
        seen.add(sid)
        sid = log.copied_from[sid]
    return sid


def _last_writer(launches: list[Launch], sid: int) -> Launch | None:
    return next((x for x in reversed(launches) if sid in x.outputs), None)
