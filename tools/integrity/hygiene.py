"""Output hygiene: outputs must be fresh, plain, materialized tensors that depend on the inputs.

`check_outputs` calls the candidate and the reference on each input set in turn (fresh clones for
each), keeping every output alive, and reports:
- `output.alias-input`: an output shares memory with an input (unless the reference's does too);
- `output.alias-reference`: an output shares memory with a reference parameter, buffer or output;
- `output.subclass`: an output is not a plain `torch.Tensor`;
- `output.lazy`: an output is not materialized (meta, sparse/nested, no storage), or it changed
  after it was returned (work deferred past the call: a side stream, cross-call batching);
- `output.cached`: the candidate's outputs stay the same (or repeat the previous call's answer)
  while the reference's change with the inputs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

from kiln.tools import chunked, sketch
from kiln.tools.records import Finding

_PLAIN = (torch.Tensor, nn.Parameter)
COMPACT_MIN_NUMEL = sketch.SKETCH_MIN_NUMEL
SAMPLE = (sketch.N_UNIFORM, sketch.N_EDGE)  # uniform and edge positions kept of a compact output


def check_outputs(model_new: nn.Module, reference: nn.Module | None, input_sets: Iterable[tuple]) -> list[Finding]:
    """Call both models on each input set (an iterable, so sets can be made one at a time: at
    KernelBench's sizes each is gigabytes); keep every candidate output alive, and of each output
    a `_Snap` to compare later. Without a reference (kiln's candidate worker holds none: outputs are
    compared in the parent, where a cached answer fails the trials) the reference-side rules
    (`output.alias-reference`, `output.cached`) are left out."""
    findings: dict[str, Finding] = {}
    ref_tensors = [] if reference is None else list(reference.parameters()) + list(reference.buffers())
    params = {_sid(t) for t in ref_tensors}
    cand_outs: list[list[torch.Tensor]] = []
    snaps: list[list[_Snap]] = []
    ref_snaps: list[list[_Snap]] = []
    ref_kept: list[torch.Tensor] = []  # earlier reference outputs, alive so an alias to one shows (small ones)
    for inputs in input_sets:  # not enumerate(): its reused result tuple would keep the last set alive
        i = len(cand_outs)
        c_in, r_in = _clone(inputs), _clone(inputs)
        del inputs
        with torch.no_grad():
            c_out = _tensors(model_new(*c_in))
            r_out = [] if reference is None else _tensors(reference(*r_in))
        _sync()
        _structure(findings, c_out, i)
        _aliasing(findings, c_out, c_in, r_out, r_in, params | {_sid(t) for t in ref_kept}, i)
        cand_outs.append(c_out)
        snaps.append([_Snap(t) for t in c_out if _materialized(t)])
        ref_snaps.append([_Snap(t) for t in r_out if _materialized(t)])
        ref_kept += [t for t in r_out if _materialized(t) and t.numel() < COMPACT_MIN_NUMEL]
        del c_in, r_in, r_out
    _sync()
    _deferred(findings, cand_outs, snaps)
    if reference is not None:
        _cached(findings, snaps, ref_snaps)
    return list(findings.values())


class _Snap:
    """What is kept of one output at the moment it was returned: a copy, or, for one of at least
    `COMPACT_MIN_NUMEL` elements, a fixed sample of it and a checksum of all its bits."""

    def __init__(self, t: torch.Tensor) -> None:
        self.shape = tuple(t.shape)
        if t.numel() < COMPACT_MIN_NUMEL:
            self.copy: torch.Tensor | None = t.detach().clone()
            self.sample, self.digest = self.copy, 0
        else:
            self.copy = None
            pos = sketch.positions_on(str(t.device), self.shape, 0, *SAMPLE)
            self.sample, self.digest = t.detach().reshape(-1)[pos], chunked.digest(t)

    def unchanged(self, t: torch.Tensor) -> bool:
        if tuple(t.shape) != self.shape:
            return False
        return chunked.same_bits(t, self.copy) if self.copy is not None else chunked.digest(t) == self.digest

    def close(self, other: _Snap) -> bool:
        return self.shape == other.shape and chunked.allclose(self.sample, other.sample, atol=1e-6, rtol=1e-5)


def _structure(findings: dict[str, Finding], outs: list[torch.Tensor], i: int) -> None:
    for k, t in enumerate(outs):
        if type(t) not in _PLAIN:
            _add(findings, "output.subclass", f"output {k} is a {type(t).__module__}.{type(t).__name__}, not a torch.Tensor")
        elif not _materialized(t):
            _add(findings, "output.lazy", f"output {k} is not materialized (device={t.device}, layout={t.layout})")


def _aliasing(findings: dict[str, Finding], c_out: list[torch.Tensor], c_in: list[Any], r_out: list[torch.Tensor],
              r_in: list[Any], ref_storages: set[int], i: int) -> None:
    ref_aliases_input = any(_sid(o) in {_sid(x) for x in _tensors(r_in)} for o in r_out if _materialized(o) and o.numel())
    in_sids = {_sid(x) for x in _tensors(c_in)}
    ref_sids = ref_storages | {_sid(t) for t in r_out if _materialized(t)}
    for k, t in enumerate(c_out):
        if not _materialized(t) or t.numel() == 0:  # empty tensors have no storage to share
            continue
        if _sid(t) in in_sids and not ref_aliases_input:
            _add(findings, "output.alias-input", f"output {k} shares memory with an input (input set {i})")
        if _sid(t) in ref_sids:
            _add(findings, "output.alias-reference", f"output {k} shares memory with a reference tensor (input set {i})")


def _deferred(findings: dict[str, Finding], outs: list[list[torch.Tensor]], snaps: list[list[_Snap]]) -> None:
    for i, (out, snap) in enumerate(zip(outs, snaps, strict=True)):
        live = [t for t in out if _materialized(t)]
        if any(not s.unchanged(t) for t, s in zip(live, snap, strict=False)):
            _add(findings, "output.lazy", f"output of call {i} changed after it was returned: work was deferred past the call")


def _cached(findings: dict[str, Finding], cand: list[list[_Snap]], ref: list[list[_Snap]]) -> None:
    for i in range(1, len(cand)):
        ref_changed = not _all_close(ref[i], ref[i - 1])
        if ref_changed and _all_close(cand[i], cand[i - 1]):
            _add(findings, "output.cached", f"call {i} returned the previous call's output although the inputs "
                                            "(and the reference's output) changed")
        elif ref_changed and _all_close(cand[i], ref[i - 1]) and not _all_close(cand[i], ref[i]):
            _add(findings, "output.cached", f"call {i} returned the answer for the previous inputs (one call late)")


def _add(findings: dict[str, Finding], rule: str, evidence: str) -> None:
    findings.setdefault(rule, Finding(rule=rule, severity="reject", evidence=evidence))


def _materialized(t: torch.Tensor) -> bool:
    if t.is_meta or t.layout != torch.strided or getattr(t, "is_nested", False):
        return False
    try:
        return t.numel() == 0 or t.untyped_storage().data_ptr() != 0
    except (RuntimeError, NotImplementedError):
        return False


def _all_close(a: list[_Snap], b: list[_Snap]) -> bool:
    return len(a) == len(b) and all(x.close(y) for x, y in zip(a, b, strict=True))


def _tensors(obj: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(obj)[0] if isinstance(t, torch.Tensor)]


def _clone(inputs: tuple) -> list[Any]:
    return [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]


def _sid(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return -id(t)


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
