"""One check as the parent drives it: workers started, commands sent, every verdict computed here.

The secret seed never leaves this process. The reference worker gets each trial's seed and sketch
key; the candidate worker gets that trial's inputs (a file the reference made, or the trial's seed
for inputs too large to pass) when the trial starts, and the sketch key only after its output
exists. Trials go group by group ((case, distribution) pairs): every group once, then the rest of
the trials, so one early failure does not decide the score. Timing: the candidate's loop and each
baseline's loop (baseline worker, never imports the candidate) are bracketed by this process's
clock; a secret subset of the candidate's timed outputs is recomputed by the reference worker and
compared here. Caches are read and written only here (`kiln.tools.check.caches`).
"""

from __future__ import annotations

import contextlib
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kiln.tools.check import caches
from kiln.tools.check.compare import Comparison, TrialComparer, TrialData
from kiln.tools.check.worker import CaseSpec, JobSpec
from kiln.tools.check.workers import (
    CommandFailed,
    WorkerGone,
    WorkerHandle,
    ok,
    worker_confinement,
    worker_env,
)
from kiln.tools.errors import KilnInputError
from kiln.tools.inputs import DISTRIBUTIONS, derive_seed, trial_count
from kiln.tools.problem import CandidateInfo, ProblemInfo
from kiln.tools.records import CheckOptions, CheckRecord, CompileRecord, Finding
from kiln.tools.sandbox.confine import SANDBOX_EXIT
from kiln.tools.sandbox.isolation import ProcResult

SPAWN_SLACK_S = 30.0  # the first command of a worker waits for the fork server too
LOOKAHEAD = 2  # reference trials queued ahead of the candidate's
STDERR_KEEP = 2000


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


class Failure(Exception):
    """The candidate's check ends here with `status` and `reasons` (raised inside the session)."""

    def __init__(self, status: str, reasons: list[str], stderr: str = "") -> None:
        super().__init__("; ".join(reasons))
        self.status, self.reasons, self.stderr = status, reasons, stderr


class Session:
    """Drive one check. `run()` returns the CheckRecord (verdict not yet applied)."""

    def __init__(self, rec: CheckRecord, prob: ProblemInfo, cases: list[ProblemInfo], cand: CandidateInfo,
                 options: CheckOptions, *, static: list[Finding], secret: int, work: Path,
                 budgets: dict[str, float], zygote: Any, sandbox: Any = None) -> None:
        self.rec, self.prob, self.cand, self.o, self.box = rec, prob, cand, options, sandbox
        self.static, self.secret, self.work, self.budgets, self.zygote = static, secret, work, budgets, zygote
        self.cases = _stage(work, prob, cases, cand)
        self.cand_path = str(work / "shared" / "candidate.py")
        self.t0 = time.monotonic()
        self.stage_t: dict[str, float] = {}
        self.stage, self.detail = "start-up", ""
        self.ref: WorkerHandle | None = None
        self.cnd: WorkerHandle | None = None
        self.base: WorkerHandle | None = None
        self.comparer: TrialComparer | None = None
        self.ref_replies: dict[str, dict[str, Any]] = {}
        self.ref_ahead: list[dict[str, Any]] = []  # reference trial replies read before their turn
        self.input_bytes = 0
        self.used: dict[str, float] = {}  # candidate command time per stage
        self.cand_started = False
        self.timed = options.time and (rec.device == "cuda" or options.time_on_cpu)
        self.numerics = options.atol is None and options.rtol is None  # tolerance (issue 16): the default rule
        self.timing_plan: dict[str, Any] = {}

    # ------------------------------------------------------------------ seeds
    def seed(self, *parts: object) -> int:
        return derive_seed(self.secret, *parts)

    def case_seeds(self) -> dict[str, dict[str, int]]:
        return {c.name: {"init": self.seed(c.name, "init"), "model": self.seed(c.name, "model")} for c in self.cases}

    # ------------------------------------------------------------------ workers
    def _spec(self, role: str, **extra: Any) -> JobSpec:
        fields: dict[str, Any] = {"role": role, "cases": self.cases, "dtype": self.o.dtype, "device": self.rec.device,
                                  "work_dir": str(self.work / role), "gpu_index": self.o.gpu_index,
                                  "profile_dir": caches.profile_dir()}
        return JobSpec(**{**fields, **extra})

    def _start(self, spec: JobSpec, cache_dir: Path) -> WorkerHandle:
        return WorkerHandle(spec, env=worker_env(spec, cache_dir), zygote=self.zygote,
                            backstop_s=self.o.timeout_s + SPAWN_SLACK_S,
                            confinement=worker_confinement(spec, cache_dir), sandbox=self.box)

    def cand_deadline(self) -> float:
        """The candidate's next command may use what is left of its stage's budget: time counts only
        while the candidate works (never while kiln compares or waits for the reference), and its
        first command also waits for the fork server."""
        left = self.budgets.get(self.stage, self.o.timeout_s) - self.used.get(self.stage, 0.0)
        return time.monotonic() + max(0.0, left) + (0.0 if self.cand_started else SPAWN_SLACK_S)

    def ref_deadline(self) -> float:
        """The reference (and baseline) workers: the whole check's budget, from its start."""
        return self.t0 + self.o.timeout_s + SPAWN_SLACK_S

    def enter(self, stage: str, detail: str = "") -> None:
        self.stage, self.detail = stage, detail
        self.stage_t.setdefault(stage, time.monotonic())

    # ------------------------------------------------------------------ the check
    def run(self) -> CheckRecord:
        try:
            self._run()
        except Failure as f:
            self._fail(f)
        finally:
            self._close()
        return self.rec

    def _run(self) -> None:
        cand_cache = caches.candidate_cache(self.cand.sha256)
        self.cnd = self._start(self._spec("candidate", candidate=self.cand_path, cache_root=str(cand_cache)),
                               cand_cache)
        self.ref = self._start(self._spec("reference"), caches.root() / "zygote")
        self.enter("compile")
        self.ref.send("setup", seeds=self.case_seeds(), numerics_rule=self.numerics)
        dists = list(DISTRIBUTIONS)
        self.todo = plan(self.cases, dists, self.o.trials)
        self.n_groups = len(self.cases) * len(dists)
        self.ref_queued = 0
        self._queue_reference(LOOKAHEAD)
        compiled = self._call_cand("compile")
        self.rec.compile = CompileRecord.model_validate(compiled["compile"])
        if not self.rec.compile.ok:
            raise Failure("compile_error", self.rec.compile.errors[:3] or ["the candidate failed to compile"])
        weights = self._reference_setup()
        first = self._ref_recv()  # the first trial's inputs drew: the problem's get_inputs works
        self.ref_ahead.append(first)
        self.input_bytes = int(first.get("input_bytes") or 0)
        if self.timed:
            from kiln.tools.check.timing import plan_timing

            plan_timing(self)
        self._build(weights)
        self.rec.stages_s["compile"] = self._since("compile")
        cmp = self._correctness()
        if not cmp.passed:
            return
        self._integrity()
        if self.timed:
            from kiln.tools.check.timing import time_check

            time_check(self)

    def _since(self, stage: str) -> float:
        return round(time.monotonic() - self.stage_t.get(stage, time.monotonic()), 3)

    def _reference_setup(self) -> dict[str, str]:
        """The reference's weights, copied where the candidate may read them."""
        assert self.ref is not None and self.cnd is not None
        reply = self._ref_recv()
        out = {}
        for name, info in reply["cases"].items():
            dst = Path(self.cnd.spec.work_dir) / "in" / f"weights-{name}.pt"
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(info["weights"], dst)
            out[name] = str(dst)
        return out

    def _build(self, weights: dict[str, str]) -> None:
        self.enter("compile", "building ModelNew and its first call")
        cases = {c.name: {"seeds": self.case_seeds()[c.name], "weights": weights[c.name]} for c in self.cases}
        reply = self._call_cand("build", cases=cases, warmup_seed=self.seed("warmup"))
        if "compile" in reply:  # a build error surfacing at the first call (Triton JIT, lazy NVRTC)
            self.rec.compile = CompileRecord.model_validate(reply["compile"])
            raise Failure("compile_error", self.rec.compile.errors[:3] or ["the candidate failed to compile"])
        assert self.rec.compile is not None
        self.rec.compile.first_call_s = _num(reply.get("first_call_s"))
        self.rec.extra["n_weights_copied"] = reply.get("n_weights_copied")

    # ------------------------------------------------------------------ correctness
    def _correctness(self) -> Comparison:
        from kiln.tools.correctness import tolerances

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
        cmp = self.comparer.finish(complete=done == len(todo))
        cmp.not_attempted = sorted({t.group for t in todo[done:]} - {_grp(t) for t in cmp.trials})
        self.rec.stages_s["correctness"] = self._since("correctness")
        _record_correctness(self.rec, cmp, atol, rtol, self.ref_replies)
        if cmp.problem_error:
            raise KilnInputError(f"{self.rec.problem}: {cmp.problem_error}")
        return cmp

    def _queue_reference(self, upto: int) -> None:
        """Keep the reference worker up to `upto` trials ahead of the plan."""
        assert self.ref is not None
        while self.ref_queued < min(len(self.todo), upto):
            q = self.todo[self.ref_queued]
            self.ref.send("trial", case=q.case, dist=q.dist, trial=q.trial, seed=self.seed(q.case, q.dist, q.trial),
                          key=self.seed("key", q.tag), tag=q.tag, drop_nonfinite=DISTRIBUTIONS[q.dist].wide)
            self.ref_queued += 1

    def _run_trials(self, todo: list[Trial], n_groups: int) -> int:
        """Run trials in plan order; after a failure, finish the first round (every group once) and
        stop. Each trial's comparison runs while the candidate works on the next one. Returns how
        many trials of the plan ran."""
        assert self.comparer is not None
        pending: TrialData | None = None
        ran = 0
        for i, t in enumerate(todo):
            self._queue_reference(i + 1 + LOOKAHEAD)
            first = self._start_trial(t)
            if first is None:  # tolerance (issue 16): a dropped wide distribution, no candidate call
                ran = i + 1
                continue
            if pending is not None:
                self._compare(pending)
                pending = None
            if self.comparer.failed and i >= n_groups:  # this trial's call was spent; the plan stops here
                return ran
            pending = self._finish_trial(t, first)
            ran = i + 1
        if pending is not None:
            self._compare(pending)
        return ran

    def _start_trial(self, t: Trial) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """Send the candidate this trial's inputs; (the reference's reply, the command's args), or
        None when the reference dropped the trial's distribution (not finite on it, issue 16)."""
        assert self.cnd is not None and self.comparer is not None
        self.enter("correctness", f"{t.case}/{t.dist}/trial {t.trial}")
        ref = self.ref_ahead.pop(0) if self.ref_ahead else self._ref_recv()
        if ref.get("dropped"):
            self.comparer.drop(t.group, str(ref["dropped"]))
            return None
        self.ref_replies[t.tag] = ref
        self.input_bytes = max(self.input_bytes, int(ref.get("input_bytes") or 0))
        args: dict[str, Any] = {"case": t.case, "dist": t.dist}
        if ref.get("inputs_file"):
            dst = Path(self.cnd.spec.work_dir) / "in" / f"{t.tag}.pt"
            shutil.move(ref["inputs_file"], dst)
            args["inputs_file"] = str(dst)
        else:
            args["seed"] = self.seed(t.case, t.dist, t.trial)
        self._send_cand("trial", **args)
        return ref, args

    def _finish_trial(self, t: Trial, started: tuple[dict[str, Any], dict[str, Any]]) -> TrialData:
        ref, args = started
        first = self._recv_cand()
        packed = self._call_cand("pack", key=self.seed("key", t.tag), tag=t.tag)
        if args.get("inputs_file"):
            Path(args["inputs_file"]).unlink(missing_ok=True)
        return TrialData(t.case, t.dist, t.trial, ref, first, packed)

    def _compare(self, d: TrialData) -> None:
        assert self.comparer is not None
        self.comparer.add(d)
        for f in [d.ref.get("output"), *(d.packed.get("files") or {}).values()]:
            if isinstance(f, str):
                Path(f).unlink(missing_ok=True)

    # ------------------------------------------------------------------ integrity
    def _integrity(self) -> None:
        """Runtime evidence from the candidate; meanwhile the problem's work count and degeneracy from
        the reference (cached per problem sources, written by this process only)."""
        assert self.cnd is not None and self.ref is not None
        self.enter("integrity")
        facts = caches.reference_facts(self)
        if facts is None:
            self._drain_reference()
            self.ref.send("work", seed=self.seed("work"))
            self.ref.send("degenerate", seed_a=self.seed("deg", 0), seed_b=self.seed("deg", 1))
        try:
            reply = self._call_cand("integrity", policy=self.o.policy,
                                    seeds=[self.seed("integrity", i) for i in range(4)])
        except Failure as f:
            if f.status == "error":  # kiln's own integrity code could not run: never an `ok`
                raise Failure("error", [f"the runtime integrity checks could not run, so the check fails closed: "
                                        f"{f.reasons[0]}"]) from None
            raise
        self.rec.extra["accounting"] = reply.get("accounting")
        self.rec.extra["runtime_findings"] = reply.get("findings") or []
        if self._runtime_rejects():  # the verdict is rejected already: don't spend the GPU timing it
            self.timed = False
            self.rec.extra["not_timed"] = "not measured (rejected by the runtime integrity checks)"
        self.rec.extra["reference_facts"] = facts or self._reference_facts()
        self.rec.stages_s["integrity"] = self._since("integrity")

    def _runtime_rejects(self) -> bool:
        from kiln.tools.check.merge import runtime_findings
        from kiln.tools.records import OpAccounting

        acc = self.rec.extra.get("accounting")
        try:
            parsed = OpAccounting.model_validate(acc) if isinstance(acc, dict) else None
        except ValueError:
            parsed = None
        findings = runtime_findings(parsed, self.rec.extra.get("runtime_findings"), self.o.policy)
        return any(f.severity == "reject" for f in findings)

    def _reference_facts(self) -> dict[str, Any]:
        work, deg = self._ref_recv(), self._ref_recv()
        facts = {"physics": {"bytes_moved": work.get("bytes_moved"), "flops": work.get("flops")},
                 "degenerate": deg.get("degenerate")}
        caches.store_reference_facts(self, facts)
        return facts

    # ------------------------------------------------------------------ plumbing
    def _ref_recv(self) -> dict[str, Any]:
        assert self.ref is not None
        try:
            reply = self.ref.recv(self.ref_deadline())
        except WorkerGone as gone:
            raise _reference_broken(self.rec.problem, gone, self.o.timeout_s) from None
        if not reply.get("ok"):
            raise _reference_error(self.rec.problem, reply.get("error") or {})
        return reply

    def _drain_reference(self) -> None:
        """Read the reference's replies still owed (trials queued ahead), kept for their turn."""
        assert self.ref is not None
        while self.ref.pending:
            self.ref_ahead.append(self._ref_recv())

    def _ref_call(self, op: str, **args: Any) -> dict[str, Any]:
        assert self.ref is not None
        self._drain_reference()
        self.ref.send(op, **args)
        return self._ref_recv()

    def _send_cand(self, op: str, **args: Any) -> None:
        assert self.cnd is not None
        self.cand_sent = time.monotonic()
        self.cand_deadline_at = self.cand_deadline()
        self.cnd.send(op, **args)

    def _recv_cand(self) -> dict[str, Any]:
        assert self.cnd is not None
        try:
            raw = self.cnd.recv(self.cand_deadline_at)
        except WorkerGone as gone:
            self._count_cand_time(None)
            raise self._gone(gone) from None
        self._count_cand_time(raw.get("worker_s"))
        try:
            return ok(raw)
        except CommandFailed as exc:
            raise self._command_failure(exc) from None

    def _count_cand_time(self, worker_s: Any) -> None:
        elapsed = time.monotonic() - self.cand_sent
        if not self.cand_started:  # the first reply also waited for the worker to start
            self.cand_started = True
            inside = float(worker_s) if isinstance(worker_s, (int, float)) and 0 <= worker_s <= elapsed else elapsed
            self.rec.stages_s["spawn"] = round(elapsed - inside, 3)
            elapsed = inside
        self.used[self.stage] = self.used.get(self.stage, 0.0) + elapsed

    def _call_cand(self, op: str, **args: Any) -> dict[str, Any]:
        self._send_cand(op, **args)
        return self._recv_cand()

    def _command_failure(self, exc: CommandFailed) -> Failure:
        err = exc.error
        where = self.detail or self.stage
        if exc.kind in ("kiln", "protocol"):
            return Failure("error", [f"{err.get('message')} (during {where})"], str(err.get("traceback", "")))
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
        return Failure("crashed", [f"the candidate worker was {how}{hint} in stage {where}"], tail)

    def _fail(self, f: Failure) -> None:
        self.rec.status, self.rec.correct = f.status, False
        self.rec.reasons += f.reasons
        if self.comparer is not None and self.rec.correctness is None and self.comparer.cmp.trials:
            from kiln.tools.correctness import tolerances

            atol, rtol = tolerances(self.o.dtype, self.o.atol, self.o.rtol)
            cmp = self.comparer.finish(complete=False)
            _record_correctness(self.rec, cmp, atol, rtol, self.ref_replies)
        if self.rec.correctness is not None and not self.rec.correctness.first_failure:
            self.rec.correctness.first_failure = f"{f.reasons[0]}."
        self.rec.stderr_tail = f.stderr[-STDERR_KEEP:]

    def _close(self) -> None:
        for h in (self.cnd, self.ref, self.base):
            if h is not None:
                with contextlib.suppress(Exception):
                    h.close()
        self.rec.stages_s["total_workers"] = round(time.monotonic() - self.t0, 3)


def _grp(t: Any) -> str:
    return f"{t.case}/{t.distribution}"


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


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
                        ref_replies: dict[str, dict[str, Any]]) -> None:
    from kiln.tools.check.merge import correctness_record

    rec.correctness = correctness_record(cmp, atol, rtol, ref_replies)
    rec.correct = cmp.passed
    if rec.status in ("error", "ok", "incorrect"):
        rec.status = "ok" if cmp.passed else "incorrect"
        if not cmp.passed:
            rec.reasons.append(cmp.short_reason or "correctness trials incomplete")


def _reference_broken(problem: str, gone: WorkerGone, timeout_s: float) -> KilnInputError:
    res = gone.result
    if gone.timed_out:
        return KilnInputError(f"{problem}: the reference took longer than its time budget ({timeout_s:.0f} s "
                              f"for the whole check) during {gone.during}")
    last = (res.stderr_tail.strip().splitlines() or [gone.why or "no output"])[-1]
    how = f"killed by {res.signal_name}" if res.signal_name else f"exit code {res.returncode}"
    return KilnInputError(f"{problem}: the reference worker died ({how}) during {gone.during}: {last}")


def _reference_error(problem: str, err: dict[str, Any]) -> KilnInputError:
    if err.get("kind") == "input":
        return KilnInputError(f"{problem}: {err.get('message')}")
    return KilnInputError(f"{problem}: the reference Model failed in {err.get('where')}: {err.get('message')}")


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


def secret_rng(secret: int) -> random.Random:
    return random.Random(derive_seed(secret, "recheck"))
