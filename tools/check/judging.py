"""The judge: a candidate's trial outputs against the reference's, where the reference's are (on the
reference worker's device), by the numerics rule (`kiln.tools.tolerance`) and the fixed atol/rtol
rule side by side.

The reference worker keeps each trial's packed output (`pack_on_device`: tensors, or the sketch of
a huge one, plus its numerics) until the parent asks for the judgement; the candidate's output comes
as raw bytes in the file kiln made for it (`kiln.tools.check.outputs`). Trusting this verdict is
trusting the reference's outputs, which the check does anyway; the candidate's process only ever
supplies bytes and claims about their structure, which are checked here first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from kiln.tools import sketch
from kiln.tools.check.messages import Leaf, PhaseVerdict, RefJudge, RefJudgeReply
from kiln.tools.check.outputs import read_raw
from kiln.tools.check.slots import OutputFileError
from kiln.tools.correctness import leaves as walk
from kiln.tools.correctness import relative_l2, structure
from kiln.tools.inputs import derive_seed
from kiln.tools.records import Mismatch, OutputVerdict
from kiln.tools.tolerance import judge


def pack_on_device(output: Any, key: int) -> dict[str, Any]:
    """The reference's output as the judge keeps it: {'meta': [...], 'tensors': {...}} with device
    tensors (a detached copy) or, for huge outputs, the sketch drawn with `key` (`sketch`)."""
    meta: list[dict] = []
    tensors: dict[str, Any] = {}
    for name, obj in walk(output):
        if isinstance(obj, torch.Tensor):
            meta.append({"name": name, "kind": "tensor", "cls": type(obj).__name__, "device": str(obj.device),
                         "dtype": str(obj.dtype).removeprefix("torch."), "shape": list(obj.shape)})
            if obj.numel() >= sketch.SKETCH_MIN_NUMEL:
                tensors[name] = sketch.make_sketch(obj, derive_seed(key, name), on_device=True)
            else:
                tensors[name] = obj.detach().clone().as_subclass(torch.Tensor)
        elif isinstance(obj, (bool, int, float)) or obj is None:
            meta.append({"name": name, "kind": "number", "value": obj})
        else:
            meta.append({"name": name, "kind": "other", "cls": type(obj).__name__})
    return {"meta": meta, "tensors": tensors}


def leaves_of(packed: dict[str, Any]) -> list[Leaf]:
    """The reference's output described as the candidate describes its own (`outputs.describe`)."""
    out = []
    for m in packed["meta"]:
        if m["kind"] != "tensor":
            out.append(Leaf(name=m["name"], kind=m["kind"], cls=m.get("cls", ""), value=m.get("value")))
            continue
        t = packed["tensors"][m["name"]]
        kind = "sketch" if sketch.is_sketch(t) else "tensor"
        stats = {k: t[k] for k in ("nan", "posinf", "neginf", "sum_abs")} if kind == "sketch" else {}
        out.append(Leaf(name=m["name"], kind=kind, cls=m["cls"], device=m["device"], dtype=m["dtype"],
                        shape=m["shape"], **stats))
    return out


def _meta(leaf: Leaf) -> dict[str, Any]:
    if leaf.kind in ("tensor", "sketch"):
        return {"name": leaf.name, "kind": "tensor", "cls": leaf.cls, "device": leaf.device, "dtype": leaf.dtype,
                "shape": list(leaf.shape)}
    if leaf.kind == "number":
        return {"name": leaf.name, "kind": "number", "value": leaf.value}
    return {"name": leaf.name, "kind": "other", "cls": leaf.cls}


def candidate_pack(leaves: list[Leaf], data: list[torch.Tensor], ref: dict[str, Any]) -> dict[str, Any]:
    """The candidate's output in the packed form the rules read: its tensors (or sketch values with
    its claimed whole-tensor counts), sampled where the reference's sketch sampled."""
    tensors: dict[str, Any] = {}
    it = iter(data)
    for lf in leaves:
        if lf.kind == "tensor":
            tensors[lf.name] = next(it)
        elif lf.kind == "sketch":
            r = ref["tensors"][lf.name]
            tensors[lf.name] = {"kind": "sketch", "shape": list(lf.shape), "seed": r["seed"], "n_uniform": r["n_uniform"],
                                "n_edge": r["n_edge"], "device": r.get("device", "cpu"), "values": next(it), "nan": lf.nan, "posinf": lf.posinf,
                                "neginf": lf.neginf, "sum_abs": lf.sum_abs}
    return {"meta": [_meta(lf) for lf in leaves], "tensors": tensors}


def _claims_differ(ref: list[Leaf], cand: list[Leaf]) -> str | None:
    """Why the candidate's description of its leaves can't be the reference's, beyond what
    `structure` compares; None when it can. An honest worker names its leaves as the reference's are
    named (one walk of the output), and samples exactly where the reference sampled."""
    if len(ref) != len(cand):
        return "its worker described a different number of outputs than the reference's"
    for r, c in zip(ref, cand, strict=True):
        if r.name != c.name:
            return f"its worker described an output named {c.name!r} where the reference's is {r.name!r}"
        if r.kind != c.kind:
            return "the output was sampled where the reference's was not (or the other way round)"
    return None


class Judge:
    """The judge of one check's trials, in the reference worker. It keeps each case's mean data
    magnitude on unscaled inputs (the floor of the numerics rule's G term) and each output's RMS
    on x1 inputs (the scale of the timing audit's projections)."""

    def __init__(self, dtype: str, device: str) -> None:
        self.dtype, self.device = dtype, device
        self.unit_mag: dict[str, dict[str, float]] = {}
        self.rms: dict[str, float] = {}

    def judge(self, ref: dict[str, Any], cmd: RefJudge, refine: Callable[[], bool] | None = None) -> RefJudgeReply:
        """Both calls' verdicts; each file is read once, and a second call with the first's very bytes
        takes the first's verdict. `refine`: called before a close numerics rejection stands (it
        re-estimates the reference's sensitivity in `ref`, True when it did); the call is then
        judged again."""
        expected = leaves_of(ref)
        first, data1 = self._phase("first_call", ref, expected, cmd.cand_first, cmd.first, cmd, refine=refine)
        data2 = self._read(expected, cmd.cand_second, cmd.second) if data1 is not None else None
        same = (data1 is not None and isinstance(data2, list) and cmd.cand_second == cmd.cand_first
                and all(_bits_equal(x, y) for x, y in zip(data1, data2, strict=True)))
        if same:
            second = first.model_copy(update={"phase": "second_call"}, deep=True)
        else:
            second, _ = self._phase("second_call", ref, expected, cmd.cand_second, cmd.second, cmd, data=data2,
                                    refine=refine)
        if cmd.dist == "x1":
            self._keep_rms(ref)
        return RefJudgeReply(phases=[first, second], same_bits=same, rms=dict(self.rms))

    def _read(self, expected: list[Leaf], cand: list[Leaf], slot: Any) -> list[torch.Tensor] | str | None:
        """The file's tensors (None: its structure differs, nothing read), or why it could not be read."""
        if structure({"meta": [_meta(lf) for lf in expected]}, {"meta": [_meta(lf) for lf in cand]}) is not None \
                or _claims_differ(expected, cand):
            return None
        try:
            return read_raw(slot, expected, self.device)
        except OutputFileError as exc:
            return f"its output could not be read back: {exc}"

    def _phase(self, phase: str, ref: dict[str, Any], expected: list[Leaf], cand: list[Leaf], slot: Any,
               cmd: RefJudge, data: Any = False, refine: Callable[[], bool] | None = None
               ) -> tuple[PhaseVerdict, list[torch.Tensor] | None]:
        bad = structure(ref, {"meta": [_meta(lf) for lf in cand], "tensors": {}})
        differ = _claims_differ(expected, cand) if bad is None else None
        if differ:
            bad = Mismatch(output="out", reason="type", rule="structure", message=differ)
        if bad is not None:
            return PhaseVerdict(phase=phase, passed=False, mismatch=bad, rule="structure", legacy_atol_rtol_passed=False,
                                outputs=[OutputVerdict(output=bad.output, rule="structure", passed=False,
                                                       legacy_atol_rtol_passed=False)]), None
        if data is False:
            data = self._read(expected, cand, slot)
        if isinstance(data, str):
            return PhaseVerdict(phase=phase, passed=False, error=data, legacy_atol_rtol_passed=False, rule="structure",
                                mismatch=Mismatch(output="out", reason="type", rule="structure", message=data)), None
        act = candidate_pack(cand, data, ref)
        j = judge(ref, act, dtype=self.dtype, atol=cmd.atol, rtol=cmd.rtol, numerics=cmd.numerics,
                  unit_mag=self.unit_mag.get(cmd.case))
        if j.close_call and refine is not None and refine():
            j = judge(ref, act, dtype=self.dtype, atol=cmd.atol, rtol=cmd.rtol, numerics=cmd.numerics,
                      unit_mag=self.unit_mag.get(cmd.case))
        if cmd.dist == "x1":
            mags = self.unit_mag.setdefault(cmd.case, {})
            for name, v in j.mean_mag.items():
                mags[name] = max(mags.get(name, 0.0), v)
        rel = relative_l2(ref, act) if j.mismatch is None or j.legacy_passed else None
        return PhaseVerdict(phase=phase, passed=j.mismatch is None, mismatch=j.mismatch, rel_l2_err=rel, rule=j.rule,
                            legacy_atol_rtol_passed=j.legacy_passed, outputs=j.outputs), data

    def _keep_rms(self, ref: dict[str, Any]) -> None:
        for m in ref["meta"]:
            t = ref["tensors"].get(m["name"]) if m["kind"] == "tensor" else None
            values = t["values"] if t is not None and sketch.is_sketch(t) else t
            if isinstance(values, torch.Tensor) and values.is_floating_point() and values.numel():
                f = values[torch.isfinite(values)].double()
                rms = float(f.pow(2).mean().sqrt()) if f.numel() else 0.0
                if math.isfinite(rms):
                    self.rms[m["name"]] = max(self.rms.get(m["name"], 0.0), rms)


def _bits_equal(x: torch.Tensor, y: torch.Tensor) -> bool:
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    if not x.numel():
        return True
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(x.element_size())
    if ints is None:
        return bool(torch.equal(x, y))
    return bool(torch.equal(x.contiguous().view(ints), y.contiguous().view(ints)))
