"""Scenarios for the whole-model tests, run in a subprocess under Triton's interpreter (importing
Triton without it in the pytest process would change later in-process interpreter tests).

    python tests/model/scenario.py bundle TARGET OUT     profile, extract, render the built-in kernels'
                                                         first configurations, write a bundle (no loop)
    python tests/model/scenario.py patch TARGET BUNDLE   apply: match, fall back, remove, compile
    python tests/model/scenario.py reload TARGET BUNDLE  a fresh process: load the bundle, apply, compare
Each prints one JSON line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

import kiln
from kiln.agents.builtin import space
from kiln.agents.builtin.problem import Unsupported
from kiln.agents.builtin.source import analyze, render
from kiln.evals.model import bundle, capture, extract, load, profile, targets
from kiln.evals.model.records import BundleEntry, BundleManifest


def make_bundle(target: str, out: Path) -> dict:
    t = targets.place(targets.build(target), "cpu", "fp32")
    prof = profile.profile_model(t.model, [lambda: t.call()], "cpu", "float32")
    chosen = profile.select(prof, 6, 0.0)
    keep = {g.sig.key() for g in chosen}
    rec, _ = capture.record(t.model, lambda: t.call(), keep=keep, save_dir=out)
    entries, kernels, unsupported = [], {}, {}
    for g in chosen:
        p = extract.write_problem(g, t.model, t.name, out / "problems", rec.kept.get(g.sig.key()))
        try:
            an = analyze(p.path.read_text())
        except Unsupported as err:
            unsupported[g.id] = str(err)
            continue
        k = out / f"{g.id}_kernel.py"
        k.write_text(render(an, space.default(an.family, an.variant, "cpu"), set()))
        kernels[g.id] = k
        entries.append(BundleEntry(group=g.id, kind=g.kind, sig=g.sig, tail=g.tail, kernel="", params=p.params,
                                   scopes=g.scopes, module_paths=g.module_paths, module_class=g.module_class))
    bundle.write(out / "bundle", BundleManifest(model=t.name, guard=bundle.current_guard(t.model), entries=entries),
                 kernels)
    return {"groups": [e.group for e in entries], "kinds": {e.group: e.kind for e in entries},
            "unsupported": unsupported}


def _err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


def patch(target: str, folder: Path) -> dict:
    t = targets.place(targets.build(target), "cpu", "fp32")
    b = load(folder)
    res: dict = {}
    with torch.no_grad():
        want = t.call()
        with b.applied(t.model) as h:
            res["err"] = _err(t.call(), want)
            res["calls"] = dict(h.table.calls)
        other = tuple(torch.cat([a, a]) if isinstance(a, torch.Tensor) else a for a in t.args)  # batch x2
        ref_other = t.call(other)
        with b.applied(t.model) as h:
            res["fallback_err"] = _err(t.call(other), ref_other)
            res["fallback_calls"] = dict(h.table.calls)
        res["removed_err"] = _err(t.call(), want)
        res["forwards_restored"] = all("forward" not in m.__dict__ for m in t.model.modules())
        with b.applied(t.model) as h:
            torch._dynamo.reset()
            seen: list[str] = []

            def backend(gm, example):  # noqa: ANN001, ANN202 - torch.compile's backend protocol
                seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
                return gm.forward

            res["compile_err"] = _err(torch.compile(t.model, backend=backend)(*t.args), want)
            res["compile_custom_ops"] = sorted({s for s in seen if "kiln_bundle" in s})
    return res


def reload(target: str, folder: Path) -> dict:
    t = targets.place(targets.build(target), "cpu", "fp32")
    with torch.no_grad():
        want = t.call()
        with kiln.load(folder).applied(t.model) as h:  # the one name users are shown
            got = t.call()
    return {"err": _err(got, want), "calls": dict(h.table.calls), "missing": h.missing}


if __name__ == "__main__":
    cmd, target, path = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    fn = {"bundle": make_bundle, "patch": patch, "reload": reload}[cmd]
    print(json.dumps(fn(target, path)))
