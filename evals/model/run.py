"""`kiln model`: the stages of one whole-model run, each leaving its result in the run directory so
`--resume` continues where a run stopped (a finished stage is read back, never redone).

    RUN_DIR/model_run.json    options          profile.json     where the time goes
    RUN_DIR/problems/         extracted problems (+ .params.pt, captured calls), extract.json
    RUN_DIR/optimise/         the batch (results.sqlite, one agent run per problem)
    RUN_DIR/confirm/          confirmation checks in the model's dtype
    RUN_DIR/bundle/           the kernels that stay patched + manifest.json
    RUN_DIR/model.json, report.html
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch
from pydantic import BaseModel, ConfigDict, Field

from kiln.evals.model import capture, extract, profile, targets
from kiln.evals.model.bundle import Bundle, current_guard, write
from kiln.evals.model.e2e import TOL, run_e2e
from kiln.evals.model.leaves import OutputError, inputs_for_seed, tensor_leaves
from kiln.evals.model.optimise import OptimiseOptions, best_kernel, confirm, decide, evaluator_for, run_batch
from kiln.evals.model.records import (
    BundleEntry,
    BundleManifest,
    E2ERecord,
    ModelReport,
    OpGroup,
    OpOutcome,
    ProfileRecord,
)
from kiln.evals.model.report import write_report
from kiln.tools.errors import KilnInputError

OPTIONS = "model_run.json"
DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


class ModelRunOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: str
    device: str = "cpu"
    dtype: str = "fp32"
    top: int = Field(8, ge=1, description="ops (signatures) to optimise at most")
    min_share: float = Field(0.01, ge=0, description="skip ops below this share of the model's time")
    seeds: int = Field(3, ge=1, description="input seeds of the end-to-end check")
    e2e_tol: float | None = Field(None, description="relative L2 error allowed per output (default by dtype)")
    optimise: OptimiseOptions = Field(default_factory=OptimiseOptions)


class Run:
    def __init__(self, opts: ModelRunOptions, folder: Path, say: Callable[[str], None]) -> None:
        self.o, self.dir, self.say = opts, folder, say
        self.report = ModelReport(target=opts.target, model=opts.target, device=opts.device, dtype=opts.dtype)
        self.comparable = True

    # ------------------------------------------------------------------ stages

    def build(self) -> targets.Target | None:
        try:
            t = targets.place(targets.build(self.o.target), self.o.device, self.o.dtype)
        except targets.TargetError as err:
            self._fail(str(err))
            return None
        self.report.model = t.name
        try:
            with torch.no_grad():
                tensor_leaves(t.call())
        except OutputError as err:
            self._skip("model output", f"{err}: nothing is patched without an end-to-end check")
            self.comparable = False
        else:
            self.comparable = True
        return t

    def profile(self, t: targets.Target) -> ProfileRecord:
        path = self.dir / "profile.json"
        if path.exists():
            return ProfileRecord.model_validate_json(path.read_text())
        self.say(f"profiling {t.name} on {self.o.device} ({self.o.dtype})")
        a1, k1 = inputs_for_seed(t.args, t.kwargs, 1)
        prof = profile.profile_model(t.model, [lambda: t.call(), lambda: t.call(a1, k1)], self.o.device,
                                     DTYPE_NAMES[self.o.dtype])
        path.write_text(prof.model_dump_json(indent=2))
        return prof

    def extract(self, t: targets.Target, prof: ProfileRecord, chosen: list[OpGroup]) -> dict[str, dict]:
        path = self.dir / "extract.json"
        if path.exists():
            return json.loads(path.read_text())
        keep = {g.sig.key() for g in chosen} | {g.tail.key() for g in chosen if g.tail}
        folder = self.dir / "problems"
        (folder / "calls").mkdir(parents=True, exist_ok=True)
        rec, _ = capture.record(t.model, lambda: t.call(), keep=keep, save_dir=folder / "calls")
        out: dict[str, dict] = {}
        for g in chosen:
            g = _with_stats(g, rec.kept)
            p = extract.write_problem(g, t.model, t.name, folder, rec.kept.get(g.sig.key()))
            out[g.id] = {"path": str(p.path), "params": p.params, "verified": p.verified, "error": p.error}
            self.say(f"  extracted {g.id} ({100 * g.share:.1f}%): {'ok' if p.verified else p.error}")
        path.write_text(json.dumps(out, indent=1))
        return out

    def optimise(self, groups: dict[str, OpGroup], problems: dict[str, dict]) -> list[OpOutcome]:
        ok = {k: Path(v["path"]) for k, v in problems.items() if v["verified"]}
        o = self.o.optimise
        evaluator = evaluator_for(o)
        if ok:
            self.say(f"optimising {len(ok)} problem(s) with {o.llm or 'builtin'} ({o.device})")
            run_batch(self.dir / "optimise", ok, groups, o, evaluator, self.say)
        outcomes = []
        for key, path in ok.items():
            kernel, why = best_kernel(self.dir / "optimise", key)
            rec = confirm(path, kernel, o, evaluator, self.dir / "confirm" / f"{key}.json") if kernel else None
            outcomes.append(decide(groups[key], path, kernel, why, rec, o.patch))
            self.say(f"  {key}: {outcomes[-1].status} ({outcomes[-1].reason})")
        return outcomes

    def bundle(self, t: targets.Target, groups: dict[str, OpGroup], problems: dict[str, dict],
               outcomes: list[OpOutcome]) -> Bundle:
        entries, kernels = [], {}
        for oc in outcomes:
            if oc.status != "patched" or oc.kernel is None:
                continue
            g = groups[oc.group]
            sp = oc.speedup
            entries.append(BundleEntry(group=g.id, kind=g.kind, sig=g.sig, tail=g.tail, kernel="",
                                       params=problems[g.id]["params"], scopes=g.scopes, module_paths=g.module_paths,
                                       module_class=g.module_class, speedup_vs_eager=sp.value if sp else None,
                                       speedup_ci=[sp.ci_low, sp.ci_high] if sp else None))
            kernels[g.id] = Path(oc.kernel)
        manifest = BundleManifest(model=t.name, guard=current_guard(t.model), entries=entries)
        return write(self.dir / "bundle", manifest, kernels)

    def e2e(self, t: targets.Target, b: Bundle, groups: dict[str, OpGroup], outcomes: list[OpOutcome]) -> Bundle:
        patched = [e.group for e in b.manifest.entries]
        if not patched or not self.comparable:
            return b
        cache = self.dir / "e2e.json"
        if cache.exists():
            saved = json.loads(cache.read_text())
            rec, keep = E2ERecord.model_validate(saved["record"]), saved["keep"]
        else:
            self.say(f"end-to-end check of {len(patched)} patched group(s) over {self.o.seeds} seed(s)")
            tol = self.o.e2e_tol or TOL[DTYPE_NAMES[self.o.dtype]]
            gain = {k: g.share * (1 - 1 / max(_speed(outcomes, k), 1e-9)) for k, g in groups.items()}
            rec, keep = run_e2e(t, b, patched, seeds=self.o.seeds, tol=tol, device=self.o.device, gain=gain,
                                share={k: g.share for k, g in groups.items()})
            rec.coverage = coverage(list(groups.values()), keep)
            cache.write_text(json.dumps({"record": rec.model_dump(mode="json"), "keep": keep}))
        self.report.e2e = rec
        for oc in outcomes:
            if oc.status == "patched" and oc.group not in keep:
                oc.status = "dropped"
                oc.reason = next((d.split(": ", 1)[1] for d in rec.dropped if d.startswith(oc.group + ":")), "dropped")
        manifest = b.manifest.model_copy(update={
            "entries": [e for e in b.manifest.entries if e.group in keep], "compile_policy": rec.compile_policy,
            "e2e": {"coverage": rec.coverage, "speedups": {k: v.value for k, v in rec.speedups.items()}}})
        (b.folder / "manifest.json").write_text(manifest.model_dump_json(indent=2))
        return Bundle(b.folder, manifest)

    # ------------------------------------------------------------------ whole run

    def run(self) -> ModelReport:
        t = self.build()
        if t is None:
            return self.report
        prof = self.profile(t)
        self.report.profile = prof
        chosen = profile.select(prof, self.o.top, self.o.min_share)
        for g in prof.groups:
            if g.skipped and g.share >= self.o.min_share:
                self._skip(g.id, g.skipped, g.sig.op, g.share)
        problems = self.extract(t, prof, chosen)
        for k, v in problems.items():
            if not v["verified"]:
                self._skip(k, v["error"], next(g.sig.op for g in chosen if g.id == k))
        groups = {g.id: g for g in prof.groups}
        outcomes = self.optimise(groups, problems)
        b = self.bundle(t, groups, problems, outcomes)
        b = self.e2e(t, b, groups, outcomes)
        self.report.ops = outcomes
        self.report.bundle = str(b.folder) if b.manifest.entries else None
        write_report(self.dir, self.report)
        return self.report

    def _skip(self, group: str, reason: str | None, op: str = "", share: float = 0.0) -> None:
        self.report.skipped.append(OpOutcome(group=group, op=op, share=share, status="skipped", reason=reason or ""))

    def _fail(self, error: str) -> None:
        self.report.status, self.report.error = "failed", error
        self._skip("model", error)
        write_report(self.dir, self.report)
        return None


def coverage(groups: list[OpGroup], patched: list[str]) -> float:
    """Share of the original forward's time in calls a patched kernel runs: a single op group counts
    whole when patched, else by the fraction of its calls that patched fused pairs take."""
    fused = [g for g in groups if g.kind == "fused" and g.id in patched]
    total = 0.0
    for g in groups:
        if g.kind == "fused":
            continue
        key = g.sig.key()
        taken = sum(f.count for f in fused if f.sig.key() == key or (f.tail is not None and f.tail.key() == key))
        frac = 1.0 if g.id in patched else min(1.0, taken / g.count if g.count else 0.0)
        total += g.share * frac
    return total


def _speed(outcomes: list[OpOutcome], key: str) -> float:
    oc = next((o for o in outcomes if o.group == key), None)
    return oc.speedup.value if oc and oc.speedup else 1.0


def _with_stats(g: OpGroup, kept: dict[str, dict]) -> OpGroup:
    """The group with the activation statistics of its first real call(s)."""
    head = kept.get(g.sig.key())
    sig = head["sig"] if head else g.sig
    tail = g.tail
    if tail is not None and tail.key() in kept:
        real = kept[tail.key()]["sig"]
        tail = tail.model_copy(update={"args": [a.model_copy(update={"stats": r.stats}) for a, r in
                                                zip(tail.args, real.args, strict=True)]})
    return g.model_copy(update={"sig": sig, "tail": tail})


def start(opts: ModelRunOptions, out: Path, say: Callable[[str], None]) -> ModelReport:
    if (out / OPTIONS).exists():
        raise KilnInputError(f"{out} already holds a model run; use --resume {out} or another --out")
    out.mkdir(parents=True, exist_ok=True)
    (out / OPTIONS).write_text(opts.model_dump_json(indent=2))
    return Run(opts, out, say).run()


def resume(folder: Path, say: Callable[[str], None]) -> ModelReport:
    path = folder / OPTIONS
    if not path.exists():
        raise KilnInputError(f"not a kiln model run directory (no {OPTIONS}): {folder}")
    say(f"resuming {folder}")
    return Run(ModelRunOptions.model_validate_json(path.read_text()), folder, say).run()
