"""Optimise the extracted problems with kiln's agent loop (the batch machinery: jobs in flight, checks
through one slot per GPU, a resumable store), in order of expected gain, within the run's clock;
then confirm each best kernel with one more check in the model's own dtype, as soon as its job ends.

Rounds: each invocation runs the batch of its round folder (`optimise/`, then `optimise.2/`, ...).
A resumed run first continues the last round (jobs interrupted mid-way resume from their checkpoint,
jobs never started run), and in a new round restarts the jobs the time budget cut. The best kernel of
a problem is the fastest correct one over all rounds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kiln.evals.batch.jobs import BatchConfig, JobResult, run_job, run_of
from kiln.evals.batch.problems import ProblemRef
from kiln.evals.batch.run import Batch, BatchBudget
from kiln.evals.model.budget import MIN_CHECK_S, Clock, DeadlineEvaluator
from kiln.evals.model.records import OpGroup, OpOutcome
from kiln.graphs.context import LoopOptions, fold_into_loop
from kiln.graphs.rundir import CheckCache, check_key
from kiln.graphs.state import RunStatus
from kiln.tools.evaluator import Evaluator
from kiln.tools.records import CheckOptions, CheckRecord

SHORT_DTYPE = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
CUT = ("time budget spent", "BudgetSpent", "the time budget left")


class OptimiseOptions(BaseModel):
    """How `kiln model` optimises its problems: `loop`, the one model `kiln run` builds (roles, budgets,
    check options), and the options of model mode alone. Its budgets are the whole model's: USD and
    tokens are split among the ops by share of time, `budgets.minutes` bounds the whole command."""

    model_config = ConfigDict(extra="forbid")

    loop: LoopOptions = Field(default_factory=LoopOptions, description="each op's loop; budgets for the whole model")
    concurrency: int = 4
    cpu_slots: int | None = None
    patch: str = Field("faster", description="faster: patch only kernels faster with confidence; correct: any "
                                             "correct kernel (CPU runs, where speed is not measured)")

    @model_validator(mode="before")
    @classmethod
    def _fold(cls, data: Any) -> Any:
        """Flat keywords (model_run.json of older runs: `llm`, `trials`, `check_timeout_s`, ...) go into `loop`."""
        return fold_into_loop(data, ("concurrency", "cpu_slots", "patch"))

    @property
    def budget_minutes(self) -> float | None:
        """The whole command's minutes (every stage), not per op."""
        return self.loop.budgets.minutes


class BudgetSpent(Exception):
    """A job that would start with too little time left (recorded as cut; `--resume` runs it)."""


def batch_config(o: OptimiseOptions) -> BatchConfig:
    return BatchConfig(mode="agent", loop=o.loop)


def check_options(o: OptimiseOptions) -> CheckOptions:
    """The confirmation check's options: the loop's own (`--trials`, `--isolation`, ...)."""
    return o.loop.check


def _split(total: float | int | None, share: float, integer: bool = False) -> float | int | None:
    if total is None:
        return None
    part = total * share
    return max(1, int(part)) if integer else part


class Jobs:
    """The job function of the model's batches: each problem's LLM budgets cut to its share, its loop's
    minutes to what the clock leaves, and its best kernel confirmed when it ends."""

    def __init__(self, shares: dict[str, float], clock: Clock, evaluator: DeadlineEvaluator, o: OptimiseOptions,
                 folders: list[Path], confirm_dir: Path) -> None:
        self.shares, self.clock, self.evaluator, self.o = shares, clock, evaluator, o
        self.folders, self.confirm_dir = folders, confirm_dir

    def minutes_left(self) -> float | None:
        """The loop's minutes: until optimisation must stop (room left for this job's confirmation)."""
        if not self.clock.bounded:
            return None
        return (self.clock.left_s(self.clock.tail_start()) - self.evaluator.check_s()) / 60

    def __call__(self, problem: ProblemRef, sample: int, cfg: BatchConfig, evaluator: Evaluator,
                 run_dir: Path) -> JobResult:
        s = self.shares.get(problem.key, 1.0)
        b = cfg.loop.budgets
        minutes = self.minutes_left()
        if minutes is not None and minutes * 60 < MIN_CHECK_S[self.evaluator.device]:
            raise BudgetSpent(f"not started: the time budget left {max(minutes * 60, 0):.0f} s for optimisation "
                              "(--resume runs it)")
        budgets = b.model_copy(update={"usd": _split(b.usd, s), "tokens": _split(b.tokens, s, integer=True),
                                       "minutes": minutes})
        mine = cfg.model_copy(update={"loop": cfg.loop.model_copy(update={"budgets": budgets})})
        result = run_job(problem, sample, mine, evaluator, run_dir)
        kernel, _ = best_kernel(self.folders, problem.key)
        if kernel is not None:
            confirm(Path(problem.path), kernel, self.o, self.evaluator, self.confirm_dir)
        return result


def evaluator_for(o: OptimiseOptions, clock: Clock) -> DeadlineEvaluator:
    from kiln.evals.executors import SlottedEvaluator, visible_gpus
    from kiln.tools.check import LocalEvaluator

    inner = SlottedEvaluator(LocalEvaluator(), visible_gpus() if o.loop.device == "cuda" else [], o.cpu_slots)
    return DeadlineEvaluator(inner, clock, o.loop.device)


def rounds(folder: Path) -> list[Path]:
    """The round folders of a run's optimisation, oldest first."""
    found = [p for p in folder.parent.glob(folder.name + "*") if p.is_dir() and _round_no(folder, p) is not None]
    return sorted(found, key=lambda p: _round_no(folder, p) or 0)


def _round_no(base: Path, p: Path) -> int | None:
    if p.name == base.name:
        return 1
    tail = p.name[len(base.name):]
    return int(tail[1:]) if tail.startswith(".") and tail[1:].isdigit() else None


def _summary(folder: Path, key: str) -> dict | None:
    path = run_of(folder / "problems" / key / "sample0").summary
    return json.loads(path.read_text()) if path.exists() else None


def _error(folder: Path, key: str) -> str:
    log = folder / "errors.log"
    lines = [ln for ln in log.read_text().splitlines() if ln.startswith(f"{key} sample 0:")] if log.exists() else []
    return lines[-1] if lines else ""


def finished(folder: Path, key: str) -> bool:
    """Did this round's job end on its own (not cut by the budget, not interrupted)?"""
    s = _summary(folder, key)
    if s is not None:
        return not any(c in (s.get("stop_reason") or "") for c in CUT)
    err = _error(folder, key)
    return bool(err) and not any(c in err for c in CUT)


def cut(folder: Path, key: str) -> bool:
    s = _summary(folder, key)
    why = (s.get("stop_reason") or "") if s is not None else _error(folder, key)
    return any(c in why for c in CUT)


def run_rounds(base: Path, problems: dict[str, Path], groups: dict[str, OpGroup], o: OptimiseOptions,
               evaluator: DeadlineEvaluator, clock: Clock, confirm_dir: Path, say: Callable[[str], None]) -> None:
    """Continue the last round and, in a new round, restart the problems the budget cut, side by side;
    checks take the GPU in order of expected gain."""
    old = rounds(base) or [base]
    last = old[-1]
    order = sorted(problems, key=lambda k: -groups[k].gain())
    evaluator.priority = {str(problems[k].resolve()): groups[k].gain() for k in order}
    restart = [k for k in order if any(cut(r, k) for r in old) and not any(finished(r, k) for r in old)
               and cut(last, k)]
    plans = [(last, order)]
    if restart and (last / "results.sqlite").exists():
        plans.append((base.parent / f"{base.name}.{len(old) + 1}", restart))
        say(f"  a new round for {len(restart)} problem(s) the time budget cut: {', '.join(restart)}")
    folders = [r for r in old] + [p for p, _ in plans if p not in old]
    shares = {k: groups[k].share / (sum(groups[j].share for j in problems) or 1.0) for k in problems}
    jobs = Jobs(shares, clock, evaluator, o, folders, confirm_dir)
    with ThreadPoolExecutor(max_workers=len(plans)) as pool:
        for fut in [pool.submit(_one_round, p, keys, problems, o, evaluator, clock, jobs, say) for p, keys in plans]:
            fut.result()


def _one_round(folder: Path, keys: list[str], problems: dict[str, Path], o: OptimiseOptions,
               evaluator: DeadlineEvaluator, clock: Clock, jobs: Jobs, say: Callable[[str], None]) -> None:
    refs = [ProblemRef(key=k, path=str(problems[k].resolve())) for k in keys]
    stop_at = clock.left_s(clock.tail_start()) - MIN_CHECK_S[evaluator.device]
    budget = BatchBudget(minutes=max(stop_at, 0.0) / 60) if clock.bounded else None
    batch = Batch(folder, refs, batch_config(o), evaluator, concurrency=o.concurrency, job_fn=jobs, budget=budget)

    def progress(outcome, error) -> None:  # noqa: ANN001 - SampleOutcome | None, str | None
        if error and "BudgetSpent" in error:
            say(f"  {outcome.problem if outcome else '?'}: not started, the time budget is spent (--resume runs it)")
            return
        if outcome is not None:
            say(f"  optimised {outcome.problem}: {outcome.status} ({clock.elapsed_s():.0f} s)")
        if error:
            say(f"  job failed: {error}")

    if clock.bounded and stop_at <= 0:
        say(f"  {folder.name}: no time left to optimise ({len(keys)} problem(s) wait for --resume)")
        return
    batch.run(progress)


def best_kernel(folders: list[Path], key: str) -> tuple[Path | None, str]:
    """The fastest correct kernel of one problem over all rounds (by its loop's speedup vs eager,
    then the latest), or why there is none."""
    found, why, _ = best_found(folders, key)
    return (found[0], "") if found else (None, why)


def best_found(folders: list[Path], key: str) -> tuple[tuple[Path, Path | None] | None, str, RunStatus | None]:
    """((kernel, the loop's last check record of it) | None, why there is none, how the last run without
    one ended: None when no run ended)."""
    best: tuple[float, int, Path, Path | None] | None = None
    why, status = "no run (the time budget or an interruption stopped the batch before it)", None
    for i, folder in enumerate(folders):
        s = _summary(folder, key)
        if s is None:
            err = _error(folder, key)
            why = err.split(": ", 1)[1].removeprefix("BudgetSpent: ") if err else why
            continue
        b = s.get("best") or {}
        if b.get("path") and b.get("correct"):
            rank = (b.get("speedup_vs_eager") or 0.0, i, Path(b["path"]),
                    Path(b["check_path"]) if b.get("check_path") else None)
            best = rank if best is None or rank[:2] > best[:2] else best
        else:
            why, status = _no_kernel_why(s), s.get("status")
    return ((best[2], best[3]), "", None) if best else (None, why, status)


def _no_kernel_why(s: dict) -> str:
    """Why a loop ended without a correct kernel: how its best candidate's check ended (a timeout is
    not a wrong answer), then the loop's own stop reason."""
    stop = s.get("stop_reason") or s.get("status") or "no correct kernel"
    b = s.get("best") or {}
    try:
        rec = json.loads(Path(b["check_path"]).read_text()) if b.get("check_path") else None
    except (OSError, ValueError):
        rec = None
    if not isinstance(rec, dict) or not rec.get("status"):
        return stop
    first = (rec.get("reasons") or [""])[0]
    return f"no correct kernel: the best candidate's check: {rec['status']}{': ' + first[:160] if first else ''} ({stop})"


def confirm(problem: Path, kernel: Path, o: OptimiseOptions, evaluator: DeadlineEvaluator, folder: Path
            ) -> CheckRecord:
    """One more check of the best kernel in the model's dtype, before the end-to-end check must start:
    the loop picked its best among several timed candidates, so the best one's figure is re-measured on
    fresh inputs (a fresh secret seed) before it is believed. Kept in `folder` by content (the loop's
    CheckCache): a later invocation does not confirm the same kernel under the same options again."""
    options = check_options(o)
    cache, key = CheckCache(folder), check_key(kernel.read_text(), [], options)
    saved = cache.get(key)
    if saved is not None:
        return saved
    rec = evaluator.check(problem, kernel, options, until=evaluator.clock.tail_start())
    if not budget_cut(rec):  # refused or cut by the budget: tried again by a later invocation
        cache.put(key, rec)
    return rec


def budget_cut(rec: CheckRecord) -> bool:
    return rec.status == "timeout" and any("time budget" in r for r in rec.reasons)


def confirmed(problem: Path, found: tuple[Path, Path | None], o: OptimiseOptions, evaluator: DeadlineEvaluator,
              folder: Path) -> tuple[CheckRecord | None, str]:
    """The confirmation check, or, when the budget left no time for it, the loop's own last check of
    the kernel (said so: the end-to-end check in the model is then what decides)."""
    kernel, loop_check = found
    rec = confirm(problem, kernel, o, evaluator, folder)
    if not budget_cut(rec) or loop_check is None or not loop_check.exists():
        return rec, ""
    return CheckRecord.model_validate_json(loop_check.read_text()), " (the loop's own check: the time budget left " \
        "no time to confirm it)"


def decide(g: OpGroup, problem: Path, kernel: Path | None, why: str, rec: CheckRecord | None, patch: str,
           status: RunStatus | None = None) -> OpOutcome:
    """From the confirmation check: `patched` (pending the end-to-end check) when correct and faster than
    eager with confidence, or, with patch='correct' on a run where speed was not measured, correct.
    A correct kernel that is not faster alone is still tried in the model (`trial`): at model sizes a
    kernel's launch cost can dominate alone and hide behind the GPU's queue in the model."""
    out = OpOutcome(group=g.id, op=g.sig.op + (f" -> {g.tail.op}" if g.tail else ""), share=g.share,
                    problem=str(problem), kernel=str(kernel) if kernel else None)
    if kernel is None or rec is None:
        out.status = "unsupported" if status == "unsupported" else ("not_run" if _not_run(why) else "incorrect")
        out.reason = why
        return out
    sp = rec.timing.speedups if rec.timing and rec.timing.measured else {}
    out.speedup, out.speedup_compile = sp.get("eager"), sp.get("compile")
    if budget_cut(rec):
        out.status, out.reason = "not_run", f"not confirmed: {rec.reasons[0]}"
    elif not rec.correct or rec.status != "ok":
        out.status, out.reason = "incorrect", f"confirmation check: {rec.status}: {'; '.join(rec.reasons[:2])}"
    elif out.speedup is not None and out.speedup.verdict == "faster":
        out.status, out.reason = "patched", f"{out.speedup.value:.2f}x vs eager alone (CI {out.speedup.ci_low:.2f}-" \
                                            f"{out.speedup.ci_high:.2f})"
    elif out.speedup is None and patch == "correct":
        out.status, out.reason = "patched", "correct; speed not measured (patched on request: --patch correct)"
    elif out.speedup is None:
        out.status, out.reason = "not_faster", "speed not measured (no GPU); use --patch correct to patch anyway"
    else:
        out.status, out.trial = "not_faster", True
        out.reason = f"not faster alone with confidence: {out.speedup.value:.2f}x (CI {out.speedup.ci_low:.2f}-" \
                     f"{out.speedup.ci_high:.2f}); tried in the model"
    return out


def _not_run(why: str) -> bool:
    return any(c in why for c in CUT) or why.startswith("no run")
