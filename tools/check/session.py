"""One check as the parent drives it: workers started, typed commands sent, the verdict assembled.

The secret seed never leaves this process. The reference worker gets each trial's seed and sketch
key, and judges the candidate's outputs against its own; the candidate worker gets that trial's
inputs (a file the reference made, or the trial's seed for inputs too large to pass) when the trial
starts, and the sketch key only after its output exists. The parent lays out the check's dirs
(`Layout`), creates every file the candidate writes for the judge, names no path a worker gave it
and reads nothing a worker wrote except typed replies. Trials go group by group ((case,
distribution) pairs): every group once, then the rest, so one early failure does not decide the
score; the judge works on one trial while the candidate runs the next. Timing
(`kiln.tools.check.timing`) is kiln's own clock over laps. Caches are read and written only here
(`kiln.tools.check.caches`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kiln.tools.check import caches
from kiln.tools.check import messages as m
from kiln.tools.check.compare import Comparison, TrialComparer, TrialData
from kiln.tools.check.failures import Failure, reference_broken, reference_error
from kiln.tools.check.slots import make_slot
from kiln.tools.check.worker import CaseSpec, JobSpec
from kiln.tools.check.workers import CommandFailed, WorkerGone, WorkerHandle, worker_confinement, worker_env
from kiln.tools.draws import DISTRIBUTIONS, derive_seed, trial_count
from kiln.tools.errors import KilnInputError
from kiln.tools.problem import CandidateInfo, ProblemInfo
from kiln.tools.records import CheckOptions, CheckRecord, Finding
from kiln.tools.sandbox.confine import SANDBOX_EXIT
from kiln.tools.sandbox.isolation import ProcResult

SPAWN_SLACK_S = 30.0  # the first command of a worker waits for the fork server too
LOOKAHEAD = 2  # reference trials queued ahead of the candidate's
STDERR_KEEP = 2000
SLOT_SLACK_BYTES = 64 << 20


@dataclass
class Trial:
    case: str
    dist: str
    trial: int

    @property
    def tag(self) -> str:
        return f"{self.case}.{self.dist}.{self.trial}"

    @property
    def group(self) -> str:
        return f"{self.case}/{self.dist}"


def plan(cases: list[CaseSpec], dists: list[str], trials: int) -> list[Trial]:
    """Every (case, distribution) group's first trial, then every group's second, and so on (the
    wide distributions get fewer: `inputs.trial_count`, issue 16)."""
    return [Trial(c.name, d, t) for t in range(trials) for c in cases for d in dists if t < trial_count(d, trials)]


class Layout:
    """A check's dirs, made by the parent. `shared/`: the problem, case and candidate copies (every
    worker reads); `feed/`: weights and small inputs (the reference writes, the candidate reads);
    `cand-out/`: the files the parent makes for the candidate's outputs (the candidate may only fill
    them, the references read them to judge); one own dir per worker. The cases (a Proposer's, or the
    user's `--case` files) have a reference worker of their own, which writes only `feed/cases/`."""

    def __init__(self, work: Path, cases: list[CaseSpec]) -> None:
        self.work = work
        for name in ("shared", "feed", "cand-out"):
            (work / name).mkdir(parents=True, exist_ok=True)
        self.feed, self.out = work / "feed", work / "cand-out"
        self.feeds = {c.name: self.feed if c.name == "problem" else self.feed / "cases" for c in cases}
        self.own = {"problem": work / "reference", "cases": work / "reference-cases"}
        for d in self.feeds.values():
            d.mkdir(exist_ok=True)

    def weights(self, case: str) -> str:
        return str(self.feeds[case] / f"weights-{case}.pt")

    def inputs(self, t: Trial) -> str:
        return str(self.feeds[t.case] / f"in-{t.tag}.pt")


@dataclass
class Pending:
    """A trial whose outputs the judge has (or will have) before the parent needs its verdict."""

    trial: Trial
    ref: m.RefTrialReply
    cand: m.CandTrialReply
    packed: m.CandPackReply
    fds: list[int] = field(default_factory=list)


class Session:
    """Drive one check. `run()` returns the CheckRecord (verdict not yet applied)."""

    def __init__(self, rec: CheckRecord, prob: ProblemInfo, cases: list[ProblemInfo], cand: CandidateInfo,
                 options: CheckOptions, *, static: list[Finding], secret: int, work: Path,
                 budgets: dict[str, float], zygote: Any, sandbox: Any = None) -> None:
        self.rec, self.prob, self.cand, self.o, self.box = rec, prob, cand, options, sandbox
        self.static, self.secret, self.work, self.budgets, self.zygote = static, secret, work, budgets, zygote
        self.cases = _stage(work, prob, cases, cand)
        self.layout = Layout(work, self.cases)
        self.cand_path = str(work / "shared" / "candidate.py")
        self.t0 = time.monotonic()
        self.hard_end = self.t0 + options.timeout_s  # no deadline reaches past the check's --timeout
        self.stage_t: dict[str, float] = {}
        self.stage, self.detail = "start-up", ""
        self.ref: WorkerHandle | None = None  # the judge: the problem's trials, the timing audit, the problem's facts
        self.case_ref: WorkerHandle | None = None  # the cases' own reference: their trials only, never the problem's
        self.cnd: WorkerHandle | None = None
        self.base: WorkerHandle | None = None
        self.comparer: TrialComparer | None = None
        self.ref_replies: dict[str, m.RefTrialReply] = {}
        self.ref_got: dict[tuple[str, str, str], m.Reply] = {}  # (group, op, key) -> reply read before it was asked for
        self.ref_expect: dict[str, list[tuple[str, str]]] = {}  # group -> (op, key) of every command sent, in order
        self.input_bytes = 0
        self.output_bytes = 0
        self.slot_paths: list[str] = []  # every output file kiln made for the candidate, in this check
        self.slot_bytes = 0  # the largest output file a trial so far needs
        self.used: dict[str, float] = {}  # candidate command time per stage
        self.cand_started = False
        self.timed = options.time and (rec.device == "cuda" or options.time_on_cpu)
        self.numerics = options.atol is None and options.rtol is None  # tolerance (issue 16): the default rule
        self.timing_plan: dict[str, Any] = {}
        self.evidence: dict[str, Any] = {}  # what the workers reported, for `merge` (validated there)

    # ------------------------------------------------------------------ seeds
    def seed(self, *parts: object) -> int:
        return derive_seed(self.secret, *parts)

    def case_seeds(self) -> dict[str, m.CaseSeeds]:
        return {c.name: m.CaseSeeds(init=self.seed(c.name, "init"), model=self.seed(c.name, "model")) for c in self.cases}

    # ------------------------------------------------------------------ workers
    def _spec(self, role: str, **extra: Any) -> JobSpec:
        fields: dict[str, Any] = {"role": role, "cases": self.cases, "dtype": self.o.dtype, "device": self.rec.device,
                                  "work_dir": str(self.work / role), "gpu_index": self.o.gpu_index,
                                  "profile_dir": caches.profile_dir()}
        return JobSpec(**{**fields, **extra})

    def _start(self, spec: JobSpec, cache_dir: Path) -> WorkerHandle:
        watch = (lambda: caches.over_bound(cache_dir) or self._slots_over_bound()) if spec.role == "candidate" else None
        return WorkerHandle(spec, env=worker_env(spec, cache_dir), zygote=self.zygote,
                            backstop_s=self.o.timeout_s + 5.0,
                            confinement=worker_confinement(spec, cache_dir), sandbox=self.box, watch=watch)

    def cand_deadline(self) -> float:
        """The candidate's next command may use what is left of its stage's budget: time counts only
        while the candidate works (never while kiln compares or waits for the reference), and its
        first command also waits for the fork server."""
        left = self.budgets.get(self.stage, self.o.timeout_s) - self.used.get(self.stage, 0.0)
        stage_end = time.monotonic() + max(0.0, left) + (0.0 if self.cand_started else SPAWN_SLACK_S)
        return min(stage_end, self.hard_end)

    def ref_deadline(self) -> float:
        """The reference (and baseline) workers: the whole check's budget, from its start."""
        return self.hard_end

    def enter(self, stage: str, detail: str = "") -> None:
        self.stage, self.detail = stage, detail
        self.stage_t.setdefault(stage, time.monotonic())

    # ------------------------------------------------------------------ the check
    def run(self) -> CheckRecord:
        try:
            self._run()
        except Failure as f:
            self._stop_candidate()
            self._fail(f)
        finally:
            self._close()
        return self.rec

    def _watch_candidate(self) -> None:
        """The candidate's bounds (its compile cache, its stderr, its output files), checked while
        kiln waits for another worker: a broken one ends the check as the candidate's."""
        why = self.cnd.bound_broken() if self.cnd is not None else None
        if why:
            self._stop_candidate()
            where = f"{self.stage} ({self.detail})" if self.detail else self.stage
            raise Failure("crashed", [f"the candidate worker was stopped: {why} in stage {where}"])

    def _slots_over_bound(self) -> str | None:
        """The files kiln made for the candidate's outputs hold at most what 4 of them need at once (a
        trial's two and the pending trial's two; judged ones are emptied): each may otherwise grow to
        RLIMIT_FSIZE, in RAM, for as long as the check runs. A file reopened after it was judged
        counts too."""
        used = 0
        for path in self.slot_paths:  # kiln's files: the candidate may fill them, not replace or link them
            try:
                used += os.stat(path, follow_symlinks=False).st_blocks * 512
            except FileNotFoundError:
                continue
            except OSError as exc:
                return f"its output files could not be measured ({exc.strerror})"
        bound = 4 * self.slot_bytes + SLOT_SLACK_BYTES
        return f"its output files hold {used >> 20} MiB, past the {bound >> 20} MiB they need" if used > bound else None

    def _stop_candidate(self) -> None:
        """Kill the candidate's worker and all it started, at once: a check that failed has no more
        use for it, and whatever load it put on the machine (processes spinning while kiln and the
        reference work) ends with it, before kiln's own remaining work."""
        if self.cnd is not None:
            with contextlib.suppress(Exception):
                self.cnd.kill()

    def _run(self) -> None:
        cand_cache = caches.candidate_cache(self.cand.sha256)
        self.cnd = self._start(self._spec("candidate", candidate=self.cand_path, cache_root=str(cand_cache)),
                               cand_cache)
        groups = {"problem": self.cases[:1], "cases": self.cases[1:]}  # the problem's judge never imports a case
        seeds = self.case_seeds()
        for group, specs in groups.items():
            if not specs:
                continue
            h = self._start(self._spec("reference", cases=specs, work_dir=str(self.layout.own[group]),
                                       feed_dir=str(self.layout.feeds[specs[0].name])), caches.root() / "zygote")
            h.on_timeout = self._stop_candidate  # a late reference may be a starved one: its starver goes first
            h.while_waiting = self._watch_candidate  # its bounds hold while kiln waits for the judge too
            if group == "problem":
                self.ref = h
            else:
                self.case_ref = h
            self.ref_send(m.RefSetup(seeds={c.name: seeds[c.name] for c in specs}, numerics_rule=self.numerics,
                                     weights={c.name: self.layout.weights(c.name) for c in specs}), "setup",
                          specs[0].name)
        self.enter("compile")
        self.todo = plan(self.cases, list(DISTRIBUTIONS), self.o.trials)
        self.n_groups = len(self.cases) * len(DISTRIBUTIONS)
        self.ref_queued = 0
        self._queue_reference(LOOKAHEAD)
        compiled = self._call_cand(m.CandCompile())
        self.rec.compile = compiled.compile.record()
        if not self.rec.compile.ok:
            raise Failure("compile_error", self.rec.compile.errors[:3] or ["the candidate failed to compile"])
        self._native_symbols(cand_cache)
        for c in self.cases[:2]:  # the problem's reference, and the cases' if any
            self.ref_wait("setup", "setup", c.name)
        first = self.ref_wait("trial", self.todo[0].tag, self.todo[0].case)  # its inputs drew: get_inputs works
        self.ref_got[(self._ref_of(self.todo[0].case)[0], "trial", self.todo[0].tag)] = first  # kept for its turn
        assert isinstance(first, m.RefTrialReply)
        self.input_bytes = first.input_bytes
        self.output_bytes = _leaf_bytes(first.leaves)
        if self.timed:
            from kiln.tools.check.timing import plan_timing

            plan_timing(self)
        self._build()
        self.rec.stages_s["compile"] = self._since("compile")
        cmp = self._correctness()
        if not cmp.passed:
            return
        self._integrity()
        if self.timed:
            from kiln.tools.check.timing import time_check

            time_check(self)

    def _native_symbols(self, cand_cache: Path) -> None:
        """The built extensions' undefined symbols (`kiln.tools.integrity.symbols`), judged here
        before ModelNew is built or called: a refused import ends the check, never run further."""
        from kiln.tools.integrity.symbols import native_findings

        found = native_findings(cand_cache / "ext")  # torch extensions: kiln.tools.compile.importer builds them there
        self.static.extend(found)
        bad = [f for f in found if f.severity == "reject"]
        if bad and not self.o.run_rejected:  # run_rejected (tests of the layers behind): recorded, run anyway
            raise Failure("rejected", [f"not executed further: its built extension imports what no kernel needs "
                                       f"({bad[0].evidence})"])

    def _since(self, stage: str) -> float:
        return round(time.monotonic() - self.stage_t.get(stage, time.monotonic()), 3)

    def _build(self) -> None:
        self.enter("compile", "building ModelNew and its first call")
        seeds = self.case_seeds()
        cases = {c.name: m.CaseBuild(seeds=seeds[c.name], weights=self.layout.weights(c.name)) for c in self.cases}
        reply = self._call_cand(m.CandBuild(cases=cases, warmup_seed=self.seed("warmup")))
        if reply.compile is not None:  # a build error surfacing at the first call (Triton JIT, lazy NVRTC)
            self.rec.compile = reply.compile.record()
            raise Failure("compile_error", self.rec.compile.errors[:3] or ["the candidate failed to compile"])
        assert self.rec.compile is not None
        self.rec.compile.first_call_s = reply.first_call_s
        self.evidence["n_weights_copied"] = reply.n_weights_copied

    # ------------------------------------------------------------------ correctness
    def _correctness(self) -> Comparison:
        from kiln.tools.rule import tolerances

        atol, rtol = tolerances(self.o.dtype, self.o.atol, self.o.rtol)
        self.comparer = TrialComparer(atol, rtol, dtype=self.o.dtype, numerics=self.numerics)
        todo = self.todo
        self.comparer.cmp.groups_planned = sorted({t.group for t in todo})
        self.comparer.cmp.n_planned = 2 * len(todo)
        self.enter("correctness")
        done = self._run_trials(todo, self.n_groups)
        dropped = self.comparer.cmp.dropped  # tolerance (issue 16): groups the reference is not finite on
        self.comparer.cmp.groups_planned = [g for g in self.comparer.cmp.groups_planned if g not in dropped]
        self.comparer.cmp.n_planned = 2 * sum(t.group not in dropped for t in todo)
        for t in todo:  # issue 25: what a case costs, for the loop's budgets
            if t.group not in dropped:
                self.comparer.cmp.n_planned_by_case[t.case] = self.comparer.cmp.n_planned_by_case.get(t.case, 0) + 2
        cmp = self.comparer.finish(complete=done == len(todo))
        self._retire_case_refs()
        cmp.not_attempted = sorted({t.group for t in todo[done:]} - {_grp(t) for t in cmp.trials})
        draws = self.ref_call(m.RefDraws(atol=atol, rtol=rtol, numerics=self.numerics), "draws")
        self.evidence["degenerate_draws"] = getattr(draws, "draws", None)  # issue 16: across the trials' draws
        self.rec.stages_s["correctness"] = self._since("correctness")
        _record_correctness(self.rec, cmp, atol, rtol, self.ref_replies)
        if cmp.problem_error:
            raise KilnInputError(f"{self.rec.problem}: {cmp.problem_error}")
        return cmp

    def _queue_reference(self, upto: int) -> None:
        """Keep the reference worker up to `upto` trials ahead of the plan."""
        while self.ref_queued < min(len(self.todo), upto):
            q = self.todo[self.ref_queued]
            self.ref_send(m.RefTrial(case=q.case, dist=q.dist, trial=q.trial, seed=self.seed(q.case, q.dist, q.trial),
                                     key=self.seed("key", q.tag), tag=q.tag, drop_nonfinite=DISTRIBUTIONS[q.dist].wide,
                                     inputs_file=self.layout.inputs(q)), q.tag, q.case)
            self.ref_queued += 1

    def _run_trials(self, todo: list[Trial], n_groups: int) -> int:
        """Run trials in plan order; after a failure, finish the first round (every group once) and
        stop. The judge judges each trial while the candidate works on the next one. Returns how many
        trials of the plan ran."""
        assert self.comparer is not None
        pending: Pending | None = None
        ran = 0
        for i, t in enumerate(todo):
            self._queue_reference(i + 1 + LOOKAHEAD)
            ref = self._start_trial(t)
            if ref is None:  # tolerance (issue 16): a dropped wide distribution, no candidate call
                ran = i + 1
                continue
            if pending is not None:
                self._collect(pending)
                pending = None
            if self.comparer.failed and i >= n_groups:  # this trial's call was spent; the plan stops here
                return ran
            pending = self._finish_trial(t, ref)
            ran = i + 1
        if pending is not None:
            self._collect(pending)
        return ran

    def _start_trial(self, t: Trial) -> m.RefTrialReply | None:
        """Send the candidate this trial's inputs; the reference's reply, or None when the reference
        dropped the trial's distribution (not finite on it, issue 16)."""
        assert self.comparer is not None
        self.enter("correctness", f"{t.case}/{t.dist}/trial {t.trial}")
        ref = self.ref_wait("trial", t.tag, t.case)
        assert isinstance(ref, m.RefTrialReply)
        if ref.dropped:
            self.comparer.drop(t.group, ref.dropped)
            return None
        if not ref.reproducible:
            raise KilnInputError(f"{self.rec.problem}: get_inputs() gave different tensors under the same seed: it "
                                 "uses a random source kiln does not seed, so inputs cannot be reproduced")
        self.ref_replies[t.tag] = ref
        self.input_bytes = max(self.input_bytes, ref.input_bytes)
        self.slot_bytes = max(self.slot_bytes, _leaf_bytes(ref.leaves))
        if ref.inputs_saved:
            self._send_cand(m.CandTrial(case=t.case, dist=t.dist, inputs_file=self.layout.inputs(t)))
        else:
            self._send_cand(m.CandTrial(case=t.case, dist=t.dist, seed=self.seed(t.case, t.dist, t.trial)))
        return ref

    def _finish_trial(self, t: Trial, ref: m.RefTrialReply) -> Pending:
        """The candidate's first call done: make its two output files, have it fill them (and call
        again), then hand them to the judge."""
        cand = self._recv_cand()
        assert isinstance(cand, m.CandTrialReply)
        try:
            first, fd1 = make_slot(str(self.layout.out / f"{t.tag}.first"))
            second, fd2 = make_slot(str(self.layout.out / f"{t.tag}.second"))
        except OSError as exc:  # only the candidate's worker may change that folder (its modes)
            raise Failure("crashed", [f"kiln could not make the candidate's output file ({exc.strerror}): its "
                                      "worker changed the folder kiln makes them in"]) from None
        self.slot_paths += [first.path, second.path]
        packed = self._call_cand(m.CandPack(key=self.seed("key", t.tag), first=first.path, second=second.path))
        assert isinstance(packed, m.CandPackReply)
        from kiln.tools.rule import tolerances

        atol, rtol = tolerances(self.o.dtype, self.o.atol, self.o.rtol)
        self.ref_send(m.RefJudge(tag=t.tag, case=t.case, dist=t.dist, trial=t.trial, first=first, second=second,
                                 cand_first=packed.first, cand_second=packed.second, atol=atol, rtol=rtol,
                                 numerics=self.numerics,
                                 inputs_file=self.layout.inputs(t) if ref.inputs_saved else None), t.tag, t.case)
        return Pending(t, ref, cand, packed, [fd1, fd2])

    def _collect(self, p: Pending) -> None:
        """The judge's verdict on a pending trial; its output files are emptied (through kiln's own
        descriptors: no path is followed) and closed."""
        assert self.comparer is not None
        verdict = self.ref_wait("judge", p.trial.tag, p.trial.case)
        assert isinstance(verdict, m.RefJudgeReply)
        for fd in p.fds:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.close(fd)
        self.comparer.add(TrialData(p.trial.case, p.trial.dist, p.trial.trial, p.ref, p.cand, p.packed, verdict))

    # ------------------------------------------------------------------ integrity
    def _integrity(self) -> None:
        """Runtime evidence from the candidate; meanwhile the problem's work count and degeneracy from
        the reference (cached per problem sources, written by this process only)."""
        assert self.cnd is not None and self.ref is not None
        self.enter("integrity")
        facts = caches.reference_facts(self)
        if facts is None:
            self.ref_send(m.RefWork(seed=self.seed("work")), "work")
        if facts is None:
            self.ref_send(m.RefDegenerate(seed_a=self.seed("deg", 0), seed_b=self.seed("deg", 1)), "degenerate")
        try:
            reply = self._call_cand(m.CandIntegrity(policy=self.o.policy,
                                                    seeds=[self.seed("integrity", i) for i in range(4)]))
        except Failure as f:
            if f.status == "error":  # kiln's own integrity code could not run: never an `ok`
                raise Failure("error", [f"the runtime integrity checks could not run, so the check fails closed: "
                                        f"{f.reasons[0]}"]) from None
            raise
        assert isinstance(reply, m.CandIntegrityReply)
        self.evidence["accounting"], self.evidence["runtime_findings"] = reply.accounting, reply.findings
        if self._runtime_rejects():  # the verdict is rejected already: don't spend the GPU timing it
            self.timed = False
            self.evidence["not_timed"] = "not measured (rejected by the runtime integrity checks)"
        self.evidence["reference_facts"] = self._reference_facts(facts)
        self.rec.stages_s["integrity"] = self._since("integrity")

    def _runtime_rejects(self) -> bool:
        from kiln.tools.check.merge import runtime_findings
        from kiln.tools.records import OpAccounting

        acc = self.evidence.get("accounting")
        try:
            parsed = OpAccounting.model_validate(acc) if isinstance(acc, dict) else None
        except ValueError:
            parsed = None
        findings = runtime_findings(parsed, self.evidence.get("runtime_findings"), self.o.policy)
        return any(f.severity == "reject" for f in findings)

    def _reference_facts(self, cached: dict[str, Any] | None) -> dict[str, Any]:
        """The work count and weight independence (cached per problem), else from the reference now."""
        if cached is not None:
            return cached
        work, deg = self.ref_wait("work", "work"), self.ref_wait("degenerate", "degenerate")
        assert isinstance(deg, m.RefDegenerateReply)
        assert isinstance(work, m.RefWorkReply)
        facts = {"physics": {"bytes_moved": work.bytes_moved, "flops": work.flops}, "degenerate": deg.degenerate}
        caches.store_reference_facts(self, facts)
        return facts

    # ------------------------------------------------------------------ plumbing
    def _ref_of(self, case: str) -> tuple[str, WorkerHandle]:
        """The reference worker that judges `case`'s trials, and its group ("problem" or "cases")."""
        group, h = ("problem", self.ref) if case == "problem" else ("cases", self.case_ref)
        assert h is not None, f"kiln: no reference worker for {case}"
        return group, h

    def ref_send(self, cmd: m.Msg, key: str, case: str = "problem") -> None:
        """Send a command to the reference worker of `case` (the problem's judge by default)."""
        group, h = self._ref_of(case)
        h.send(cmd)
        self.ref_expect.setdefault(group, []).append((str(cmd.op), key))

    def ref_wait(self, op: str, key: str, case: str = "problem") -> m.Reply:
        """The reply of `case`'s reference to the command (op, key), reading (and keeping) the replies
        to commands sent to it before."""
        group, h = self._ref_of(case)
        expect = self.ref_expect.setdefault(group, [])
        whose = self.rec.problem if case == "problem" else f"{self.rec.problem} (case {case})"
        while (group, op, key) not in self.ref_got:
            if not expect:
                raise RuntimeError(f"kiln: no reference command {op} {key} was sent")
            want = expect.pop(0)
            try:
                self.ref_got[(group, *want)] = h.recv_reply(self.ref_deadline())
            except WorkerGone as gone:
                raise reference_broken(whose, gone, self.o.timeout_s) from None
            except CommandFailed as exc:
                if exc.kind == "kiln":
                    raise Failure("error", [f"{exc.error.get('message')} (during {self.detail or self.stage})"],
                                  str(exc.error.get("traceback", ""))) from None
                raise reference_error(whose, exc.error) from None
        return self.ref_got.pop((group, op, key))

    def ref_call(self, cmd: m.Msg, key: str) -> m.Reply:
        self.ref_send(cmd, key)
        return self.ref_wait(str(cmd.op), key)

    def _retire_case_refs(self) -> None:
        """The cases' reference is done once correctness is: told to exit now, so its GPU memory and
        process are gone before anything is timed (collected in `_close`)."""
        if self.case_ref is not None:
            with contextlib.suppress(Exception):
                self.case_ref.ask_exit()

    def _send_cand(self, cmd: m.Msg) -> None:
        assert self.cnd is not None
        self.cand_sent = time.monotonic()
        self.cand_deadline_at = self.cand_deadline()
        self.cnd.send(cmd)

    def _recv_cand(self) -> m.Reply:
        assert self.cnd is not None
        try:
            reply = self.cnd.recv_reply(self.cand_deadline_at)
        except WorkerGone as gone:
            self._count_cand_time(None)
            raise self._gone(gone) from None
        except CommandFailed as exc:
            self._count_cand_time(None)
            raise self._command_failure(exc) from None
        self._count_cand_time(reply.worker_s)
        return reply

    def _count_cand_time(self, worker_s: Any) -> None:
        elapsed = time.monotonic() - self.cand_sent
        if not self.cand_started:  # the first reply also waited for the worker to start
            self.cand_started = True
            inside = float(worker_s) if isinstance(worker_s, (int, float)) and 0 <= worker_s <= elapsed else elapsed
            self.rec.stages_s["spawn"] = round(elapsed - inside, 3)
            elapsed = inside
        self.used[self.stage] = self.used.get(self.stage, 0.0) + elapsed

    def _call_cand(self, cmd: m.Msg) -> Any:
        self._send_cand(cmd)
        return self._recv_cand()

    def _command_failure(self, exc: CommandFailed) -> Failure:
        err = exc.error
        where = self.detail or self.stage
        if exc.kind in ("kiln", "protocol"):  # the candidate's process says so: a claim, never believed (a
            # red-team candidate raised kiln's own WorkerError("kiln") and its crash read as kiln's failure)
            return Failure("crashed", [f"the candidate's worker reported a failure of kiln's own code during {where} "
                                       f"({err.get('message')}); its process runs the candidate's code, so the "
                                       "failure counts against the candidate"], str(err.get("traceback", "")))
        return Failure("crashed", [f"the candidate raised {err.get('message')} during {where}"],
                       str(err.get("traceback", "")))

    def _gone(self, gone: WorkerGone) -> Failure:
        res: ProcResult = gone.result
        where = f"{self.stage} ({self.detail})" if self.detail else self.stage
        tail = res.stderr_tail
        if gone.timed_out:
            budget = self.budgets.get(self.stage)
            times = _trial_times(self.comparer.cmp if self.comparer else None)
            limit = f"its {budget:.0f} s budget" if budget else "its time limit"
            if time.monotonic() >= self.hard_end - 0.5:
                limit = f"the check's --timeout of {self.o.timeout_s:.0f} s"
            return Failure("timeout", [f"timed out in stage {where}: the stage exceeded {limit}{times}"], tail)
        if gone.why:
            return Failure("crashed", [f"the candidate worker {gone.why} in stage {where}"], tail)
        if res.returncode == SANDBOX_EXIT and "kiln sandbox:" in tail:
            last = next((ln for ln in reversed(tail.splitlines()) if "kiln sandbox:" in ln), "")
            return Failure("error", [f"kiln could not contain the candidate's worker, so it did not run: {last.strip()}"],
                           tail)
        if res.returncode == 0:
            return Failure("crashed", [f"the candidate worker exited early (exit code 0) in stage {where}: "
                                       "os._exit or sys.exit in the candidate?"], tail)
        how = f"killed by {res.signal_name}" if res.signal_name else f"exit code {res.returncode}"
        hint = " (illegal memory access or segfault?)" if res.signal_name in ("SIGSEGV", "SIGBUS") else ""
        hint = " (a file it wrote outgrew the size limit)" if res.signal_name == "SIGXFSZ" else hint
        return Failure("crashed", [f"the candidate worker was {how}{hint} in stage {where}"], tail)

    def _fail(self, f: Failure) -> None:
        self.rec.status, self.rec.correct = f.status, False
        self.rec.reasons += f.reasons
        if self.comparer is not None and self.rec.correctness is None and self.comparer.cmp.trials:
            from kiln.tools.rule import tolerances

            atol, rtol = tolerances(self.o.dtype, self.o.atol, self.o.rtol)
            cmp = self.comparer.finish(complete=False)
            _record_correctness(self.rec, cmp, atol, rtol, self.ref_replies)
        if self.rec.correctness is not None and not self.rec.correctness.first_failure:
            self.rec.correctness.first_failure = f"{f.reasons[0]}."
        self.rec.stderr_tail = f.stderr[-STDERR_KEEP:]

    def _close(self) -> None:
        handles = [h for h in (self.cnd, self.ref, self.base, self.case_ref) if h is not None]
        for h in handles:  # every worker told first, so their teardowns overlap
            with contextlib.suppress(Exception):
                h.ask_exit()
        for h in handles:
            with contextlib.suppress(Exception):
                h.close()
        self.rec.stages_s["total_workers"] = round(time.monotonic() - self.t0, 3)


def _leaf_bytes(leaves: list[m.Leaf]) -> int:
    total = 0
    for lf in leaves:
        if lf.kind in ("tensor", "sketch") and lf.dtype in m.ITEM_BYTES:
            n = 1
            for s in lf.shape:
                n *= s
            total += n * m.ITEM_BYTES[lf.dtype]
    return total


def _grp(t: Any) -> str:
    return f"{t.case}/{t.distribution}"


def _trial_times(cmp: Comparison | None) -> str:
    """Per-trial candidate times so far, for a timeout message (what was slow, and how slow)."""
    if cmp is None or not cmp.trials:
        return ""
    firsts = [t for t in cmp.trials if t.phase == "first_call" and t.candidate_s is not None][-5:]
    if not firsts:
        return ""
    shown = ", ".join(f"{t.case}/{t.distribution}/{t.trial}: {t.candidate_s:.2f} s" for t in firsts)
    return f"; the candidate's last calls took {shown}"


def _record_correctness(rec: CheckRecord, cmp: Comparison, atol: float, rtol: float,
                        ref_replies: dict[str, m.RefTrialReply]) -> None:
    from kiln.tools.check.merge import correctness_record

    rec.correctness = correctness_record(cmp, atol, rtol, {k: {"worker_s": v.worker_s} for k, v in ref_replies.items()})
    rec.correct = cmp.passed
    if rec.status in ("error", "ok", "incorrect"):
        rec.status = "ok" if cmp.passed else "incorrect"
        if not cmp.passed:
            rec.reasons.append(cmp.short_reason or "correctness trials incomplete")


def _stage(work: Path, prob: ProblemInfo, cases: list[ProblemInfo], cand: CandidateInfo) -> list[CaseSpec]:
    """Copy the problem, case and candidate files into the check's shared dir: the workers read
    these copies, never the user's tree."""
    shared = work / "shared"
    shared.mkdir(parents=True, exist_ok=True)
    problem_copy = shared / "problem.py"
    shutil.copyfile(prob.path, problem_copy)
    (shared / "candidate.py").write_text(cand.source)
    specs = [CaseSpec(name="problem", path=str(problem_copy), model_path=str(problem_copy))]
    for i, c in enumerate(cases):
        name = c.name if c.name != "problem" else f"case{i}"
        copy = shared / f"case-{i}.py"
        shutil.copyfile(c.path, copy)
        specs.append(CaseSpec(name=name, path=str(copy), model_path=str(copy) if c.has_model else str(problem_copy)))
    params = Path(prob.path).with_suffix(".params.pt")  # a problem's real parameters (kiln model), beside it
    for spec in specs if params.is_file() else []:
        shutil.copyfile(params, Path(spec.path).with_suffix(".params.pt"))
    return specs
