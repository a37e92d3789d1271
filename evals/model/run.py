"""`kiln model`: the stages of one whole-model run, each leaving its result in the run directory so
`--resume` continues where a run stopped (a finished stage is read back, never redone).

    RUN_DIR/model_run.json    options          profile.json     where the time goes
    RUN_DIR/baseline.json     GPU: eager and torch.compile(original), timed once, early
    RUN_DIR/problems/         extracted problems (+ .params.pt, captured calls), extract.json
    RUN_DIR/optimise*/        the batch rounds (results.sqlite, one agent run per problem)
    RUN_DIR/confirm/          confirmation checks in the model's dtype
    RUN_DIR/bundle/           the kernels that stay patched + manifest.json (manifest.tried.json: every
                              kernel the end-to-end check tried; their files are all there)
    RUN_DIR/model.json, report.html

`--budget-minutes N` bounds the whole command (`budget.Clock`): optimisation stops early enough for
the end-to-end check, the bundle and the report, which are always written.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import torch
from pydantic import BaseModel, ConfigDict, Field

from kiln.evals.model import capture, extract, profile, targets
from kiln.evals.model.budget import Clock
from kiln.evals.model.bundle import Bundle, current_guard, write
from kiln.evals.model.e2e import TOL, run_e2e
from kiln.evals.model.leaves import OutputError, inputs_for_seed, tensor_leaves
from kiln.evals.model.optimise import (
    OptimiseOptions,
    best_found,
    confirmed,
    decide,
    evaluator_for,
    rounds,
    run_rounds,
)
from kiln.evals.model.outcomes import after_e2e, coverage, reserve_s
from kiln.evals.model.records import (
    BundleEntry,
    BundleManifest,
    ModelReport,
    OpGroup,
    OpOutcome,
    ProfileRecord,
)
from kiln.evals.model.report import write_report
from kiln.tools.errors import KilnInputError

OPTIONS = "model_run.json"
DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
RELOAD = 'import kiln; kiln.load("{dir}").apply(model)'


class ModelRunOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: str
    device: str = "cpu"
    dtype: str = "fp32"
    top: int = Field(8, ge=1, description="op groups (signatures) to optimise at most, plus fused pairs on them")
    min_share: float = Field(0.01, ge=0, description="skip ops below this share of the model's time")
    seeds: int = Field(3, ge=1, description="input seeds of the end-to-end check")
    e2e_tol: float | None = Field(None, description="relative L2 error allowed per output (default by dtype)")
    optimise: OptimiseOptions = Field(default_factory=OptimiseOptions)


class Run:
    def __init__(self, opts: ModelRunOptions, folder: Path, say: Callable[[str], None], already_s: float = 0.0
                 ) -> None:
        self.o, self.dir, self.say = opts, folder, say
        self.clock = Clock(opts.optimise.budget_minutes, already_s=already_s)
        self.report = ModelReport(target=opts.target, model=opts.target, device=opts.device, dtype=opts.dtype,
                                  budget_minutes=opts.optimise.budget_minutes)
        self.comparable = True
        self._t0, self._stage_name = time.monotonic(), ""

    def _stage(self, name: str) -> None:
        """Close the running stage's clock (report.stages_s) and start the next."""
        now = time.monotonic()
        if self._stage_name:
            self.report.stages_s[self._stage_name] = round(now - self._t0, 2)
        self._t0, self._stage_name = now, name

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
        self.say(f"  shares below are of {prof.share_of}")
        return prof

    def baseline(self, t: targets.Target) -> dict:
        """GPU: eager and torch.compile of the original, timed now (the compile time sizes the end's
        reserve, and the figures exist even if the run is cut later)."""
        path = self.dir / "baseline.json"
        if path.exists() or self.o.device != "cuda":
            return json.loads(path.read_text()) if path.exists() else {}
        from kiln.evals.model.measure import baseline_figures

        out = baseline_figures(t, self.say)
        path.write_text(json.dumps(out))
        return out

    def extract(self, t: targets.Target, chosen: list[OpGroup]) -> dict[str, dict]:
        path = self.dir / "extract.json"
        if path.exists():
            return json.loads(path.read_text())
        keep = {g.sig.key() for g in chosen} | {g.tail.key() for g in chosen if g.tail}
        folder = self.dir / "problems"
        (folder / "calls").mkdir(parents=True, exist_ok=True)
        rec, _ = capture.record(t.model, lambda: t.call(), keep=keep, save_dir=folder / "calls")
        out: dict[str, dict] = {}
        for g in chosen:
            g = extract.with_stats(g, rec.kept)
            p = extract.write_problem(g, t.model, t.name, folder, rec.kept.get(g.sig.key()))
            out[g.id] = {"path": str(p.path), "params": p.params, "verified": p.verified, "error": p.error}
            self.say(f"  extracted {g.id} ({profile.describe(g)}): {'ok' if p.verified else p.error}")
        path.write_text(json.dumps(out, indent=1))
        return out

    def optimise(self, groups: dict[str, OpGroup], problems: dict[str, dict]) -> list[OpOutcome]:
        ok = {k: Path(v["path"]) for k, v in problems.items() if v["verified"]}
        o = self.o.optimise
        evaluator = evaluator_for(o, self.clock)
        base = self.dir / "optimise"
        if ok:
            order = sorted(ok, key=lambda k: -groups[k].gain())
            self.say(f"optimising {len(ok)} problem(s) with {o.loop.roles.llm or 'builtin'} ({o.loop.device}), in order of "
                     f"expected gain: {', '.join(order)}")
            run_rounds(base, ok, groups, o, evaluator, self.clock, self.dir / "confirm", self.say)
        outcomes = []
        for key, path in ok.items():
            found, why, status = best_found(rounds(base), key)
            rec, note = confirmed(path, found, o, evaluator, self.dir / "confirm") if found \
                else (None, "")
            outcomes.append(decide(groups[key], path, found[0] if found else None, why, rec, o.patch, status))
            outcomes[-1].reason += note
            self.say(f"  {key}: {outcomes[-1].status} ({outcomes[-1].reason})")
        return outcomes

    def bundle(self, t: targets.Target, groups: dict[str, OpGroup], problems: dict[str, dict],
               outcomes: list[OpOutcome]) -> Bundle:
        """Every kernel the end-to-end check will try: the ones faster alone and the trials."""
        entries, kernels = [], {}
        for oc in outcomes:
            if not (oc.status == "patched" or oc.trial) or oc.kernel is None:
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

    def e2e(self, t: targets.Target, b: Bundle, groups: dict[str, OpGroup], outcomes: list[OpOutcome],
            baseline: dict) -> Bundle:
        tried = sorted(e.group for e in b.manifest.entries)
        if not tried and baseline.get("eager"):
            from kiln.evals.model.measure import baseline_only

            self.report.e2e = baseline_only(baseline)
        if not tried or not self.comparable:
            return b
        cache = self.dir / "e2e.json"
        saved = json.loads(cache.read_text()) if cache.exists() else {}
        kernels = {oc.group: oc.kernel for oc in outcomes if oc.group in tried}  # a new best kernel: check again
        if saved.get("tried") == tried and saved.get("kernels") == kernels:
            from kiln.evals.model.records import E2ERecord

            rec, keep = E2ERecord.model_validate(saved["record"]), saved["keep"]
        else:
            self.say(f"end-to-end check of {len(tried)} group(s) over {self.o.seeds} seed(s) "
                     f"({self.clock.left_s():.0f} s left)" if self.clock.bounded else
                     f"end-to-end check of {len(tried)} group(s) over {self.o.seeds} seed(s)")
            tol = self.o.e2e_tol or TOL[DTYPE_NAMES[self.o.dtype]]
            faster = {o.group for o in outcomes if o.status == "patched"}
            rec, keep = run_e2e(t, b, tried, seeds=self.o.seeds, tol=tol, device=self.o.device,
                                share={k: g.share for k, g in groups.items()}, faster_alone=faster,
                                clock=self.clock, baseline=baseline)
            rec.coverage = coverage(list(groups.values()), keep)
            cache.write_text(json.dumps({"tried": tried, "kernels": kernels, "record": rec.model_dump(mode="json"),
                                         "keep": keep}))
        self.report.e2e = rec
        after_e2e(outcomes, rec, keep, groups)
        # what was tried stays beside what was kept: the kernels' files are all in the folder
        (b.folder / "manifest.tried.json").write_text(b.manifest.model_dump_json(indent=2))
        manifest = b.manifest.model_copy(update={
            "entries": [e for e in b.manifest.entries if e.group in keep], "compile_policy": rec.compile_policy,
            "e2e": {"coverage": rec.coverage, "speedups": {k: v.value for k, v in rec.speedups.items()}}})
        (b.folder / "manifest.json").write_text(manifest.model_dump_json(indent=2))
        return Bundle(b.folder, manifest)

    # ------------------------------------------------------------------ whole run

    def run(self) -> ModelReport:
        self._stage("build")
        t = self.build()
        if t is None:
            return self.report
        self._stage("profile")
        prof = self.profile(t)
        self.report.profile = prof
        self._stage("baseline")
        baseline = self.baseline(t)
        chosen = profile.select(prof, self.o.top, self.o.min_share)
        self.report.selection = profile.selection_line(chosen, self.o.top, self.o.min_share)
        self.say(self.report.selection)
        self.clock.reserve(reserve_s(self.o.device, baseline, len(chosen), self.o.seeds, self.clock))
        for g in prof.groups:
            if g.skipped and g.share >= self.o.min_share:
                self._skip(g.id, g.skipped, g.sig.op, g.share)
        self._stage("extract")
        problems = self.extract(t, chosen)
        for k, v in problems.items():
            if not v["verified"]:
                self._skip(k, v["error"], next(g.sig.op for g in chosen if g.id == k))
        groups = {g.id: g for g in prof.groups}
        self._stage("optimise")
        outcomes = self.optimise(groups, problems)
        self._stage("e2e")
        b = self.bundle(t, groups, problems, outcomes)
        b = self.e2e(t, b, groups, outcomes, baseline)
        self._stage("report")
        self._finish(outcomes, b)
        return self.report

    def _finish(self, outcomes: list[OpOutcome], b: Bundle) -> None:
        self.report.ops = outcomes
        self.report.bundle = str(b.folder) if b.manifest.entries else None
        self.report.reload = RELOAD.format(dir=b.folder) if b.manifest.entries else None
        not_run = [o.group for o in outcomes if o.status == "not_run"]
        if self.clock.bounded:
            self.report.budget_note = (f"--budget-minutes {self.clock.minutes:g}: {self.clock.elapsed_s() / 60:.2f} "
                                       f"min used" + (f"; not optimised or not confirmed in time: "
                                                      f"{', '.join(not_run)} (--resume continues)" if not_run else ""))
        self._stage("")
        write_report(self.dir, self.report)

    def _skip(self, group: str, reason: str | None, op: str = "", share: float = 0.0) -> None:
        self.report.skipped.append(OpOutcome(group=group, op=op, share=share, status="skipped", reason=reason or ""))

    def _fail(self, error: str) -> None:
        self.report.status, self.report.error = "failed", error
        self._skip("model", error)
        write_report(self.dir, self.report)


def start(opts: ModelRunOptions, out: Path, say: Callable[[str], None], already_s: float = 0.0) -> ModelReport:
    """A new run into `out`; `already_s`: what the command spent before (counted in its budget)."""
    if (out / OPTIONS).exists():
        raise KilnInputError(f"{out} already holds a model run; use --resume {out} or another --out")
    out.mkdir(parents=True, exist_ok=True)
    (out / OPTIONS).write_text(opts.model_dump_json(indent=2))
    return Run(opts, out, say, already_s).run()


def resume(folder: Path, say: Callable[[str], None], already_s: float = 0.0) -> ModelReport:
    """Continue a run; a budget holds again from this invocation's start."""
    path = folder / OPTIONS
    if not path.exists():
        raise KilnInputError(f"not a kiln model run directory (no {OPTIONS}): {folder}")
    say(f"resuming {folder}")
    return Run(ModelRunOptions.model_validate_json(path.read_text()), folder, say, already_s).run()
