"""The reference worker: the problem's (and each case's) `Model`, built from seeds the parent sends,
and the check's judge.

It never imports the candidate. For each trial it draws the inputs from that trial's seed, runs the
reference, keeps the packed output and its numerics on its device until the parent asks for the
judgement (`kiln.tools.check.judging`), and saves inputs small enough to pass as a file where the
candidate reads them (larger ones the candidate draws from the same per-trial seed). It counts the
problem's work for the physics floor, judges degeneracy, and recomputes the timed iterations the
parent picks (`kiln.tools.timing.audit`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from kiln.tools import numerics
from kiln.tools.check import messages as m
from kiln.tools.check.judging import Judge, leaves_of, pack_on_device
from kiln.tools.check.worker import JobSpec, LapSteps, Worker, WorkerError, error_message, load_module
from kiln.tools.inputs import (
    DTYPES,
    InputsError,
    clone,
    fingerprint,
    inputs_from_seed,
    prepare,
    seed_all,
    validate,
)

INPUT_FILE_MAX_BYTES = 64 << 20
"""Trial inputs up to this size (all tensors together) are made here and handed to the candidate as
a file; above it, the candidate draws them itself from the trial's seed when the trial starts."""


def input_bytes(inputs: tuple) -> int:
    return sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))


class Case:
    """One case's modules and Model in this process."""

    def __init__(self, path: str, model_path: str, *, init_seed: int, model_seed: int, dtype: str,
                 device: str) -> None:
        self.mod = load_module(path, "case")
        self.model_mod = self.mod if model_path == path else load_module(model_path, "problem")
        seed_all(init_seed)
        self.init = prepare(validate(self.mod.get_init_inputs(), "get_init_inputs()"), dtype=dtype, device="cpu")
        seed_all(model_seed)
        self.model = self.model_mod.Model(*self.init).to(device=device, dtype=DTYPES[dtype])
        self.numerics: numerics.Numerics | str | None = None  # tolerance (issue 16): set up by op_setup

    def inputs(self, seed: int, dist: str, dtype: str, device: str) -> tuple:
        return inputs_from_seed(self.mod.get_inputs, seed=seed, dist=dist, dtype=dtype, device=device)


class ReferenceWorker(LapSteps, Worker):
    blame = "reference"

    def __init__(self, spec: JobSpec) -> None:
        super().__init__(spec)
        self.cases: dict[str, Case] = {}
        self.dropped: dict[tuple[str, str], str] = {}  # tolerance (issue 16): (case, dist) -> why
        # tag -> the packed reference output, its trial and its inputs' fingerprint, until judged
        self.held: dict[str, tuple[dict[str, Any], m.RefTrial, list[float]]] = {}
        self.judge = Judge(spec.dtype, spec.device)
        self.digests: dict[tuple[str, int], tuple[list[float], dict[str, Any]]] = {}  # degeneracy across draws
        self.ring: Any = None  # (model, laps.Ring) while the parent times the harness's steps here

    def op_setup(self, cmd: m.RefSetup) -> m.RefSetupReply:
        """Build every case's Model (and, for the numerics rule, its high-precision and |.| copies:
        `kiln.tools.numerics`); save its weights where the candidate reads them."""
        fps: dict[str, list[float]] = {}
        for c in self.spec.cases:
            seeds = cmd.seeds[c.name]
            try:
                case = Case(c.path, c.model_path, init_seed=seeds.init, model_seed=seeds.model,
                            dtype=self.spec.dtype, device=self.spec.device)
            except InputsError as exc:
                raise WorkerError("input", f"case {c.name}: {exc}") from exc
            self.cases[c.name] = case
            case.numerics = numerics.build(case.model, self.spec.dtype) if cmd.numerics_rule else None
            torch.save({k: v.detach().cpu() for k, v in case.model.state_dict().items()}, cmd.weights[c.name])
            fps[c.name] = fingerprint([t for _, t in sorted(case.model.state_dict().items())])
        return m.RefSetupReply(weights_fp=fps)

    def op_trial(self, cmd: m.RefTrial) -> m.RefTrialReply:
        """One trial's reference output, kept with its numerics for the judgement. A wide distribution
        (issue 16) whose first trial's output is not finite is dropped for this case."""
        if (cmd.case, cmd.dist) in self.dropped:
            return m.RefTrialReply(dropped=self.dropped[(cmd.case, cmd.dist)])
        c = self.cases[cmd.case]
        try:
            inputs = c.inputs(cmd.seed, cmd.dist, self.spec.dtype, self.spec.device)
        except InputsError as exc:
            raise WorkerError("input", f"case {cmd.case}: {exc}") from exc
        pristine = clone(inputs)
        saved = cmd.inputs_file is not None and input_bytes(inputs) <= INPUT_FILE_MAX_BYTES
        if saved:
            torch.save([v.detach().cpu() if isinstance(v, torch.Tensor) else v for v in pristine], cmd.inputs_file)
        packed, why = numerics.reference_trial(c.model, c.numerics, inputs, pristine, seed=cmd.key,
                                               drop_nonfinite=cmd.drop_nonfinite and cmd.trial == 0,
                                               packer=pack_on_device)
        if packed is None:
            self.dropped[(cmd.case, cmd.dist)] = why or "not finite"
            return m.RefTrialReply(dropped=self.dropped[(cmd.case, cmd.dist)])
        fp = fingerprint(pristine)
        self.held[cmd.tag] = (packed, cmd, fp)
        self._digest(cmd, fp, packed)
        mutated, nbytes = not _same(inputs, pristine), input_bytes(pristine)
        del inputs, pristine
        return m.RefTrialReply(input_fp=fp, mutated=mutated, inputs_saved=saved, input_bytes=nbytes,
                               finite=numerics.nonfinite(packed) is None, leaves=leaves_of(packed),
                               reproducible=saved or cmd.trial != 0 or cmd.dist != "x1"
                               or self._again(c, cmd, fp))

    def _again(self, c: Case, cmd: m.RefTrial, fp: list[float]) -> bool:
        """Do the trial's inputs come out the same when drawn again from its seed? (The candidate
        draws inputs too large to pass as a file itself: a problem whose get_inputs uses a random
        source kiln does not seed cannot be checked that way.)"""
        return fingerprint(c.inputs(cmd.seed, cmd.dist, self.spec.dtype, self.spec.device)) == fp

    def _digest(self, cmd: m.RefTrial, fp: list[float], packed: dict[str, Any]) -> None:
        """A small digest of the problem's outputs for the degeneracy judgement (the first trial of
        each distribution and a second x1 draw)."""
        from kiln.tools.integrity import degenerate

        if cmd.case == "problem" and (cmd.trial == 0 or (cmd.dist, cmd.trial) == ("x1", 1)):
            self.digests[(cmd.dist, cmd.trial)] = (fp, degenerate.digest(packed))

    def op_judge(self, cmd: m.RefJudge) -> m.RefJudgeReply:
        """Judge the candidate's outputs of a trial; its inputs file (if any) is no longer needed."""
        held = self.held.pop(cmd.tag, None)
        if held is None:
            raise WorkerError("protocol", f"no reference output held for trial {cmd.tag}")
        packed, trial, fp = held
        if cmd.inputs_file:
            Path(cmd.inputs_file).unlink(missing_ok=True)
        try:
            return self.judge.judge(packed, cmd, refine=lambda: self._refine(packed, trial, fp))
        except Exception as exc:  # noqa: BLE001 - kiln's own judge failing is kiln's error, never the problem's
            raise WorkerError("kiln", f"kiln's judge failed: {error_message(exc)}") from exc

    def _refine(self, packed: dict[str, Any], trial: m.RefTrial, fp: list[float]) -> bool:
        """More sensitivity draws for a close rejection (`numerics.refine_sensitivity`), on the trial's
        inputs drawn again from its seed; False when they do not come out the same."""
        c = self.cases[trial.case]
        inputs = c.inputs(trial.seed, trial.dist, self.spec.dtype, self.spec.device)
        if fingerprint(inputs) != fp:
            return False
        return numerics.refine_sensitivity(c.numerics, inputs, packed, seed=trial.key)

    def op_work(self, cmd: m.RefWork) -> m.RefWorkReply:
        """Bytes and FLOPs of one forward of the problem (the physics floor's numerator)."""
        from kiln.tools.integrity import physics

        c = self.cases[self.spec.cases[0].name]
        nbytes, flops = physics.count_work(c.model, c.inputs(cmd.seed, "x1", self.spec.dtype, self.spec.device))
        return m.RefWorkReply(bytes_moved=nbytes, flops=flops)

    def op_degenerate(self, cmd: m.RefDegenerate) -> m.RefDegenerateReply:
        """Is the problem's output independent of its weights (two weight seeds)?"""
        from kiln.tools.integrity import degenerate

        c = self.cases[self.spec.cases[0].name]
        dtype, device = self.spec.dtype, self.spec.device
        seeds = (cmd.seed_a, cmd.seed_b)

        def make(i: int) -> tuple:
            return c.inputs(seeds[i], "x1", dtype, device)

        def build(i: int) -> torch.nn.Module:
            seed_all(seeds[i])
            init = prepare(validate(c.mod.get_init_inputs(), "get_init_inputs()"), dtype=dtype, device="cpu")
            seed_all(seeds[i])
            return c.model.__class__(*init).to(device=device, dtype=DTYPES[dtype])

        return m.RefDegenerateReply(degenerate=degenerate.assess(build, make).model_dump(mode="json"))

    def op_draws(self, cmd: m.RefDraws) -> m.RefDrawsReply:
        """Degeneracy across the trials' input draws (`degenerate.assess_packs`, issue 16)."""
        from kiln.tools.inputs import DISTRIBUTIONS
        from kiln.tools.integrity import degenerate

        fps = {k: fp for k, (fp, _) in self.digests.items()}
        keys = degenerate.draws(list(DISTRIBUTIONS), fps)
        if not keys:
            return m.RefDrawsReply()
        rec = degenerate.assess_packs([(dist, self.digests[(dist, t)][1]) for dist, t in keys], dtype=self.spec.dtype,
                                      atol=cmd.atol, rtol=cmd.rtol, numerics=cmd.numerics)
        return m.RefDrawsReply(draws=rec.model_dump(mode="json"))

    def op_audit(self, cmd: m.RefAudit) -> m.RefAuditReply:
        """Recompute the picked timed iterations and judge the candidate's committed projections. A
        lap's inputs are one stream (`laps.draw_lap`): it is drawn again up to the lap's last picked
        slot, the picked slots kept, before the model runs on any of them."""
        from kiln.tools.timing.laps import RingSpec, draw_lap

        c = self.cases[self.spec.cases[0].name]
        spec = RingSpec.model_validate(cmd.ring)
        verdicts: dict[tuple[int, int], m.AuditVerdict] = {}
        by_lap: dict[int, set[int]] = {}
        for lap, slot in cmd.picks:
            by_lap.setdefault(lap, set()).add(slot)
        for lap, slots in by_lap.items():
            key, drawn = cmd.commit_keys.get(str(lap)), cmd.input_keys.get(str(lap))
            inputs: dict[int, tuple] = {}
            if key is not None and drawn is not None:
                with torch.no_grad():
                    inputs = {i: x for i, x in enumerate(draw_lap(c.mod.get_inputs, spec, drawn, max(slots)))
                              if i in slots}
            for slot in sorted(slots):
                verdicts[(lap, slot)] = self._audit_one(c, lap, slot, inputs.pop(slot, None), key, cmd)
        return m.RefAuditReply(verdicts=[verdicts[(lap, slot)] for lap, slot in cmd.picks])

    def _audit_one(self, c: Case, lap: int, slot: int, inputs: tuple | None, key: int | None,
                   cmd: m.RefAudit) -> m.AuditVerdict:
        from kiln.tools.timing.audit import verdict

        committed = cmd.projections.get(f"{lap}.{slot}")
        if inputs is None or key is None or not isinstance(committed, dict):
            return m.AuditVerdict(lap=lap, slot=slot, passed=False, why="nothing was committed for it")
        with torch.no_grad():
            ref_out = c.model(*inputs)
        try:
            ok, why, stat = verdict(committed.get("leaves"), ref_out, key, cmd.sigma, rel_err=cmd.rel_err,
                                    atol=cmd.atol, rtol=cmd.rtol, tight=cmd.tight)
        except Exception as exc:  # noqa: BLE001 - the candidate's data, not the problem: its failed verdict
            ok, why, stat = False, f"its committed projection can't be judged ({error_message(exc)[:200]})", None
        return m.AuditVerdict(lap=lap, slot=slot, passed=ok, why=why, stat=stat)

    def op_release(self, cmd: m.Release) -> None:
        """Give cached GPU blocks back (the candidate is about to be timed on this GPU; or the
        steps below are done)."""
        self.held.clear()
        self.ring = None
        if self.spec.device == "cuda":
            torch.cuda.empty_cache()

    # ------------------------------------------------------------------ the timing steps, timed now
    def op_time_setup(self, cmd: m.TimeSetup) -> None:
        """The problem's Model on a timing ring, through the baseline worker's harness: when a cached
        eager run's refresh and commit figures would charge the candidate, kiln's clock times these
        identical steps here, in this check's conditions, with no process to start (the parent
        closed the candidate's worker first)."""
        from kiln.tools.timing.laps import Ring, RingSpec, warm_up
        from kiln.tools.timing.stage import profiled_once

        c = self.cases[self.spec.cases[0].name]
        ring = Ring(c.mod.get_inputs, RingSpec.model_validate(cmd.ring))
        profiled_once(c.model, ring.slots[0], self.spec.device)
        self.ring = (c.model, ring)
        warm_up(*self.ring)



def _same(a: tuple, b: tuple) -> bool:
    from kiln.tools.inputs import same

    return same(a, b)
