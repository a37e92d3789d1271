"""`kiln check`: compile, verify, (on a GPU) time and integrity-check one candidate against a problem.

1. Parent, no candidate code runs: validate the files by AST, static integrity scan, secret seed.
2. A session (`session`): reference, candidate and baseline workers in contained subprocesses,
   driven by commands; every comparison and measurement bound computed in this process.
3. Parent: the integrity verdict, an extra verification round after any speedup above 10x.
   Failures of the candidate are records; only a broken problem raises.
"""

from __future__ import annotations

import secrets
import shutil
import time
from pathlib import Path
from typing import Any

from kiln.tools.device import resolve_device
from kiln.tools.errors import KilnInputError
from kiln.tools.records import (
    CheckOptions,
    CheckRecord,
    CompileRecord,
    Finding,
    IntegrityRecord,
    TimingRecord,
)


def _device(device: str) -> str:
    """The CLI passes the device it resolved; only the Python API's default "auto" is resolved here."""
    return resolve_device(device) if device == "auto" else device


def _static_scan(source: str, filename: str, dtype: str, mode: str = "allowlist") -> list[Finding]:
    try:
        from kiln.tools.integrity import static
    except ImportError as exc:  # INTEGRITY's scanner not installed: a visible finding, not silence
        return [Finding(rule="static.unavailable", severity="info", evidence=str(exc))]

    try:
        return static.scan_candidate(source, filename=filename, dtype=dtype, mode=mode)
    except RecursionError:  # the scan walks the tree recursively: a source nested past it is refused, unrun
        return [Finding(rule="static.too-deep", severity="reject",
                        evidence="the source nests deeper than the static scan follows (an expression or "
                                 "statement nested ~1,000 levels)")]


def _unsupported(rec: CheckRecord, lang: str, dtype: str, candidate: Path) -> CheckRecord | None:
    """CPU can run Triton (interpreter, no bf16) and PyTorch candidates, not CUDA ones."""
    if rec.device != "cpu":
        return None
    rec.timing = TimingRecord(measured=False, reason="not measured (no GPU)")
    if lang == "cuda":
        rec.status, rec.reasons = "unsupported", ["needs a CUDA GPU: CUDA candidates cannot run on CPU"]
        if shutil.which("nvcc"):
            from kiln.tools.compile import nvcc_compile_check

            rec.compile = nvcc_compile_check(candidate)
            rec.reasons.append("nvcc compile check: " + ("ok" if rec.compile.ok else "failed"))
        return rec
    if lang == "triton" and dtype == "bf16":
        rec.status = "unsupported"
        rec.reasons = ["Triton's CPU interpreter (TRITON_INTERPRET=1) has no bf16: use fp32/fp16 or a GPU"]
        rec.compile = CompileRecord(ok=False, lang="triton", backend="triton-interpreter")
        return rec
    return None


def check(problem: Path, candidate: Path, options: CheckOptions | None = None) -> CheckRecord:
    """The full verdict for one candidate. Raises KilnInputError only for a broken problem (or
    case); a broken candidate (syntax error, no ModelNew, wrong signature) is a `compile_error`
    record, and a statically rejected one is never executed."""
    return _writable(_check(problem, candidate, options))


def _writable(rec: CheckRecord) -> CheckRecord:
    """`rec`, or a copy whose strings are whole characters, when some text in it (a path with bytes
    that are not UTF-8, a message that came through a door the channel does not watch) holds a lone
    surrogate: no record kiln returns may fail to be written as JSON."""
    try:
        rec.model_dump_json()
        return rec
    except ValueError:  # pydantic's serialization error is a ValueError: "surrogates not allowed"
        from kiln.tools.check.channel import whole_characters

        return CheckRecord.model_validate(whole_characters(rec.model_dump()))


def _check(problem: Path, candidate: Path, options: CheckOptions | None) -> CheckRecord:
    from kiln.tools.compile import detect_lang
    from kiln.tools.problem import load_candidate, load_problem

    options = options or CheckOptions()
    t0 = time.monotonic()
    prob = load_problem(Path(problem))
    cases = [load_problem(Path(c), what="case", model_optional=True) for c in options.cases]
    rec = CheckRecord(problem=prob.path, candidate=str(Path(candidate).resolve()),
                      device=_device(options.device), dtype=options.dtype, status="error")
    rec.stages_s["load"] = round(time.monotonic() - t0, 3)  # the problem and its cases parsed
    from kiln.tools.sandbox.box import sandbox_for  # strict without a full sandbox: refused here

    t_box = time.monotonic()
    rec.isolation = sandbox_for(options.isolation, options.bwrap).record
    rec.stages_s["sandbox_probe"] = round(time.monotonic() - t_box, 3)
    try:
        cand = load_candidate(Path(candidate), prob)
    except KilnInputError as exc:
        return _broken_candidate(rec, str(exc), t0)
    except (RecursionError, MemoryError) as exc:
        return _broken_candidate(rec, f"{candidate}: the candidate nests too deeply to read ({type(exc).__name__})", t0)
    t_scan = time.monotonic()
    static = _static_scan(cand.source, Path(candidate).name, options.dtype, options.static)
    rec.stages_s["static"] = round(time.monotonic() - t_scan, 3)
    rec.integrity = IntegrityRecord(policy=options.policy, static=options.static, findings=static)
    lang = detect_lang(cand.source)
    rec.evidence.lang = lang
    executed_not = any(f.severity == "reject" for f in static) and not options.run_rejected
    if executed_not:
        rec.reasons.append("not executed: the static scan rejected the source")
        rec.timing = TimingRecord(measured=False, reason="not measured (rejected before running)")
    peaks = None
    if not executed_not and _unsupported(rec, lang, options.dtype, Path(candidate)) is None:
        rec, peaks = _run_guarded(rec, prob, cases, cand, options, static)
    t_verdict = time.monotonic()
    rec = _verdict(rec, options, peaks)
    rec.stages_s["verdict"] = round(time.monotonic() - t_verdict, 3)
    rec.stages_s["total"] = round(time.monotonic() - t0, 3)
    return rec


def _run_guarded(rec: CheckRecord, prob: Any, cases: list[Any], cand: Any, options: CheckOptions,
                 static: list[Finding]) -> tuple[CheckRecord, Any]:
    """The pipeline; a failure of kiln's own code becomes an `error` record (never a traceback
    instead of a verdict). A broken problem still raises KilnInputError: that is the user's input."""
    from kiln.tools.check.pipeline import run_check

    try:
        return run_check(rec, prob, cases, cand, options, static=static, seed=options.seed or secrets.randbits(63))
    except KilnInputError:
        raise
    except Exception as exc:  # noqa: BLE001 - every check ends with a record
        import traceback

        failed = rec.model_copy(deep=True)
        failed.status, failed.correct = "error", False
        failed.reasons.append(f"kiln failed during the check ({type(exc).__name__}: {str(exc)[:300]}): "
                              "this is kiln's bug, not the candidate's; the traceback is in stderr_tail")
        failed.stderr_tail = "".join(traceback.format_exception(exc))[-2000:]
        return failed, None


def _broken_candidate(rec: CheckRecord, message: str, t0: float) -> CheckRecord:
    """A candidate file kiln cannot even load: a compile error, recorded like any other verdict."""
    rec.status = "compile_error"
    rec.reasons = [message]
    rec.compile = CompileRecord(ok=False, errors=[message])
    rec.timing = TimingRecord(measured=False, reason="not measured (the candidate did not load)")
    rec.stages_s["total"] = round(time.monotonic() - t0, 3)
    return rec


def _verdict(rec: CheckRecord, options: CheckOptions, peaks: Any = None) -> CheckRecord:
    from kiln.tools.integrity import verdict

    return verdict.apply(rec, threshold=options.speedup_threshold, peaks=peaks)


class LocalEvaluator:
    """The local Evaluator: one pair of fresh worker subprocesses per candidate."""

    def __init__(self, defaults: CheckOptions | None = None) -> None:
        self.defaults = defaults or CheckOptions()

    def check(self, problem: Path, candidate: Path, options: CheckOptions | None = None) -> CheckRecord:
        return check(problem, candidate, options or self.defaults)
