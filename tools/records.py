"""Typed records returned by every evaluation stage.

Every tool in kiln returns one of these records, never a bare tuple or bool. Failures are records
too: a compile error is data for the Coder. Units are in the field names (`_us`, `_s`, `_bytes`,
`_gbps`). Every record round-trips through JSON (`model_dump_json` / `model_validate_json`).

Ownership (who edits what): the check pipeline owns `CheckRecord`, `CheckOptions`, `CompileRecord`,
`CorrectnessRecord`, `TimingRecord`; the integrity checks own the `Integrity*`, `OpAccounting`,
`PhysicsRecord`, `DegenerateRecord` and `TimingIntegrity` records. Add fields with defaults so old
JSON still loads.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["ok", "compile_error", "incorrect", "crashed", "timeout", "rejected", "unsupported", "error"]
"""Outcome of one check. Only `ok` exits 0 on the command line."""

Device = Literal["auto", "cuda", "cpu"]
DType = Literal["fp32", "bf16", "fp16"]
Policy = Literal["strict", "partial"]
StaticPolicy = Literal["allowlist", "denylist"]
Lang = Literal["triton", "cuda", "torch", "unknown"]
Severity = Literal["info", "warn", "reject"]
Baseline = Literal["eager", "eager_tf32", "compile"]
ALL_BASELINES: tuple[Baseline, ...] = ("eager", "eager_tf32", "compile")
Verdict = Literal["faster", "slower", "tie", "not_measured"]
Isolation = Literal["strict", "best-effort"]


JSON_SAFE = ConfigDict(extra="forbid", ser_json_inf_nan="strings")
"""The config every kiln record uses: unknown fields refused, and NaN / +-Inf written as the JSON
strings "NaN", "Infinity", "-Infinity" (pydantic's default writes `null`, which a float field then
refuses to read back: a kernel that leaves NaN in its output broke every later read of its record).
The output stays standard JSON; reading it back gives the same floats."""


class Record(BaseModel):
    """Base for all records: strict field names, JSON round-trip (NaN and infinities included)."""

    model_config = JSON_SAFE


# ----------------------------------------------------------------------------- options


class CheckOptions(Record):
    """What a caller asks of one check (`kiln check` flags map 1:1 onto these)."""

    device: Device = "auto"
    dtype: DType = "fp32"
    trials: int = Field(2, ge=1, description="correctness trials per case and basic input distribution (the wide "
                                              "ones get half, at least one): docs/integrity.md says what each catches")
    cases: list[str] = Field(default_factory=list, description="extra case files (problem format)")
    timeout_s: float = Field(300.0, gt=0, description="overall budget; stages get their own share")
    compile_timeout_s: float | None = None
    correctness_timeout_s: float | None = None
    timing_timeout_s: float | None = None
    atol: float | None = Field(None, description="None: the dtype's default (fp32 1e-4, bf16/fp16 1e-2)")
    rtol: float | None = None
    policy: Policy = "partial"
    static: StaticPolicy = Field("allowlist", description="static scan: 'allowlist' (LLM-written code) or "
                                                          "'denylist' (hand-written trusted kernels)")
    time: bool = Field(True, description="time correct candidates when a GPU is used")
    baselines: list[Baseline] = Field(default_factory=lambda: list(ALL_BASELINES))
    seed: int | None = Field(None, description="None: a fresh secret seed per run (recorded afterwards)")
    gpu_index: int = 0
    speedup_threshold: float = Field(1.0, description="'faster' only if the CI's low end is above this")
    fork_server: bool = Field(True, description="fork workers from a pre-imported server (saves ~2 s/check)")
    isolation: Isolation = Field("best-effort", description="strict: refuse to run unless every sandbox layer is "
                                                            "in force; best-effort: use what works, say what not")
    bwrap: str | None = Field(None, description="bubblewrap binary (None: `bwrap` on PATH)")
    timing_laps_s: float = Field(1.5, gt=0, description="at most this long for one function's timing laps (the "
                                                          "candidate's, each baseline's); kiln.rewards takes less")
    timing_target_pct: float = Field(1.0, gt=0, description="a function's laps stop once the 95% CI half-width of "
                                                             "its median lap is this % of it (or at timing_laps_s)")
    exclusive_timing: bool = Field(True, description="time only while no other kiln check times on this GPU (a "
                                                      "per-GPU lock across threads and processes, kiln.tools.timing."
                                                      "exclusive); the wait is recorded as stages_s.timing_wait")
    time_on_cpu: bool = Field(False, description="run the timing stage on the CPU with host clocks: only to test "
                                                 "the timing protocol, the numbers mean nothing there")
    run_rejected: bool = Field(False, description="execute a candidate the static scan rejected anyway (to test "
                                                  "the sandbox and the later layers); its verdict stays rejected")


# ----------------------------------------------------------------------------- stages


class CompileRecord(Record):
    """Did the candidate build and import? Errors trimmed for a Coder to read."""

    ok: bool = False
    lang: Lang = "unknown"
    backend: str = Field("", description="triton | triton-interpreter | load_inline | nvrtc | nvcc")
    compile_s: float | None = None
    cached: bool = False
    errors: list[str] = Field(default_factory=list, description="first errors, with file:line")
    first_call_s: float | None = Field(None, description="first forward call (Triton JIT, lazy NVRTC builds)")
    log_tail: str = ""


class MismatchEntry(Record):
    index: list[int]
    expected: float
    actual: float


class Mismatch(Record):
    """How one output differed from the reference, written so an LLM can act on it."""

    output: str = Field("out", description="which output: 'out', 'out[1]', ...")
    reason: Literal["values", "shape", "dtype", "device", "nan", "type", "count"] = "values"
    expected_desc: str = ""
    actual_desc: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    n_mismatch: int = 0
    n_total: int = 0
    mismatch_frac: float = 0.0
    first: list[MismatchEntry] = Field(default_factory=list)
    message: str = ""
    rule: str = Field("atol_rtol", description="the rule that decided: 'numerics' (kiln.tools.tolerance), "
                                               "'atol_rtol' (a fixed tolerance), 'exact' (integers, bools), "
                                               "'structure' (count, shape, dtype, device, type)")
    max_err_over_tol: float | None = Field(None, description="numerics rule: the worst |actual - expected| / "
                                                             "allowed error (> 1 fails)")


class OutputVerdict(Record):
    """How one output of one trial was judged, and what the fixed-tolerance rule would have said."""

    output: str = Field(description="'out', 'out[1]', ...")
    rule: str = Field(description="numerics | atol_rtol | exact | structure")
    why: str = Field("", description="why this rule decided (an override, numerics unavailable, ...)")
    passed: bool
    legacy_atol_rtol_passed: bool | None = Field(None, description="|a - e| <= atol + rtol |e| against the "
                                                                   "native-dtype reference (the rule before issue 16)")
    max_err_over_tol: float | None = Field(None, description="numerics rule: worst error / allowed error")
    sens_draws: int | None = Field(None, description="numerics rule: the sensitivity draws behind its S term (1; "
                                                     "8 when a close rejection was judged again)")


class TrialRecord(Record):
    case: str = Field(description="'problem' or the case file's stem")
    distribution: str = Field(description="x1 | x3 | x0.01 | neg | x1000 | x0.001 | heavy")
    trial: int
    phase: Literal["first_call", "second_call", "before_reference", "after_reference"] = Field(
        "first_call", description="which of the trial's two calls on the same inputs (older records: "
                                  "before/after an in-process reference call)")
    passed: bool
    mismatch: Mismatch | None = None
    error: str | None = None
    input_mutated: bool = False
    rel_l2_err: float | None = Field(None, description="||actual - expected|| / ||expected|| over the output "
                                                        "(worst output) when the trial passed")
    candidate_s: float | None = Field(None, description="wall time of this call in the candidate's worker")
    rule: str = Field("atol_rtol", description="numerics when every float output was judged by the numerics "
                                               "rule, else the rule of the first output that was not")
    legacy_atol_rtol_passed: bool | None = Field(None, description="the verdict of the fixed atol/rtol rule "
                                                                   "against the native-dtype reference")
    outputs: list[OutputVerdict] = Field(default_factory=list, description="per output: the rule that decided")


class CaseSummary(Record):
    """One case's trials, for a Proposer or a loop deciding whether a case is worth its time."""

    n_trials: int = 0
    n_passed: int = 0
    candidate_s: float | None = Field(None, description="candidate worker time over this case's trials")
    reference_s: float | None = Field(None, description="reference worker time over this case's trials")
    timed_out: bool = False


class CorrectnessRecord(Record):
    passed: bool = False
    atol: float
    rtol: float
    n_trials: int = 0
    n_passed: int = 0
    trials: list[TrialRecord] = Field(default_factory=list)
    first_failure: str | None = Field(None, description="one paragraph for the Coder")
    input_mutated: bool = False
    n_planned: int = Field(0, description="trial calls planned: cases x distributions x trials x 2 phases "
                                          "(comparison stops after a few failing trials)")
    score: float | None = Field(None, description="fraction of the planned (case, distribution) groups that "
                                                  "passed; every group is tried once before any is tried again, so "
                                                  "the score does not depend on the order of cases")
    cases: dict[str, CaseSummary] = Field(default_factory=dict)
    not_attempted: list[str] = Field(default_factory=list, description="groups the check's time ran out on")
    rule: str = Field("atol_rtol", description="numerics (the default: kiln.tools.tolerance) or atol_rtol "
                                               "(--atol/--rtol given)")
    legacy_atol_rtol_passed: bool | None = Field(None, description="what the fixed atol/rtol rule (before issue "
                                                                   "16) says over the same trials, hidden-error "
                                                                   "rejection included; None: not every trial "
                                                                   "was compared")
    dropped_distributions: dict[str, str] = Field(default_factory=dict, description="input distributions left "
                                                  "out for this problem, and why (the reference is not finite)")
    n_planned_by_case: dict[str, int] = Field(default_factory=dict, description="candidate calls planned per case "
                                              "(optional, issue 25; empty: n_planned split evenly over the cases)")


class TimingStat(Record):
    """Robust summary of one callable's per-call time."""

    median_us: float
    ci_low_us: float = Field(description="95% bootstrap CI of the median")
    ci_high_us: float
    half_width_pct: float
    n_samples: int
    mean_us: float | None = None
    min_us: float | None = None


class Speedup(Record):
    baseline: str
    value: float = Field(description="baseline median / candidate median")
    ci_low: float
    ci_high: float
    verdict: Verdict


class MemoryRecord(Record):
    candidate_peak_bytes: int | None = None
    reference_peak_bytes: int | None = None
    ratio: float | None = Field(None, description="candidate / reference peak memory")


class EnvRecord(Record):
    """Where a number was measured. NVML fields are None when NVML is absent."""

    device: str = "cpu"
    gpu_name: str | None = None
    gpu_index: int | None = None
    driver: str | None = None
    cuda: str | None = None
    torch: str = ""
    triton: str | None = None
    python: str = ""
    sm_clock_mhz_before: int | None = None
    sm_clock_mhz_after: int | None = None
    temp_c_before: int | None = None
    temp_c_after: int | None = None
    throttle_reasons: list[str] = Field(default_factory=list)
    throttled: bool = False
    other_gpu_processes: int | None = Field(
        None, description="processes beyond this check's own workers that held the GPU while kiln timed (the most "
                          "seen, before or after the candidate's laps); None: not known (no NVML, or NVML lists none)")


class TimingRecord(Record):
    measured: bool = False
    reason: str | None = Field(None, description="why not measured, in plain words")
    method: str = ""
    candidate: TimingStat | None = None
    baselines: dict[str, TimingStat] = Field(default_factory=dict)
    speedups: dict[str, Speedup] = Field(default_factory=dict)
    memory: MemoryRecord = Field(default_factory=lambda: MemoryRecord.model_validate({}))
    env: EnvRecord | None = None
    baseline_errors: dict[str, str] = Field(default_factory=dict, description="baselines that failed to run, and why")


# ----------------------------------------------------------------------------- integrity


class Finding(Record):
    rule: str = Field(description="rule id, e.g. 'static.try-except'")
    severity: Severity
    evidence: str
    line: int | None = None
    file: str | None = None


class OpAccounting(Record):
    """What ModelNew.forward dispatched (ATen ops) and launched (GPU kernels)."""

    aten_ops: dict[str, int] = Field(default_factory=dict)
    compute_ops: list[str] = Field(default_factory=list, description="PyTorch compute ops used")
    own_kernels: list[str] = Field(default_factory=list)
    library_kernels: list[str] = Field(default_factory=list)
    own_time_share: float | None = Field(None, description="GPU time in own kernels / all kernel time")
    decoy_kernels: list[str] = Field(default_factory=list)
    copy_kernels: list[str] = Field(default_factory=list, description="own kernels that only moved data "
                                    "(their outputs are copies of their inputs or of PyTorch results)")
    own_launches: dict[str, int] = Field(default_factory=dict, description="own kernel name -> launches seen")
    own_time_us: float | None = Field(None, description="GPU time in own kernels, one forward")
    library_time_us: float | None = Field(None, description="GPU time in library kernels, one forward")
    method: str = Field("", description="how own kernels were seen: launch hooks, profiler")


class PhysicsRecord(Record):
    bytes_moved: int | None = None
    flops: int | None = None
    peak_gbps: float | None = None
    peak_tflops: float | None = None
    floor_us: float | None = None
    measured_us: float | None = None
    pct_of_floor: float | None = Field(None, description="floor / measured, in %")
    bound: str | None = Field(None, description="'memory' or 'compute': which term sets the floor")
    peak_source: str | None = Field(None, description="where the peaks came from (measured, cache file)")


class DegenerateRecord(Record):
    degenerate: bool = False
    reasons: list[str] = Field(default_factory=list)


class TimingIntegrity(Record):
    """What kiln's own process measured and checked about a candidate's timing (`kiln.tools.check.timing`)."""

    method: str = Field("", description="'laps': kiln's clock over laps of calls (older records: events)")
    n_laps: int | None = Field(None, description="timed laps of the candidate")
    slots: int | None = Field(None, description="calls per lap, each on its own input set")
    span_bytes: int | None = Field(None, description="a lap's inputs and outputs together (L2 is cold above ~100 MB)")
    deferred_us_per_call: float | None = Field(None, description="the candidate's median refresh and commit "
                                                                 "beyond the baseline's, charged to its laps, per call")
    uncharged_us_per_call: float | None = Field(
        None, description="the refresh + commit time per call that goes uncharged (the baseline's, with its slack): "
                          "a worker whose harness was patched could do up to this much work there unseen "
                          "(docs/integrity.md, Out of reach)")
    cand_refresh_s: float | None = Field(None, description="median refresh (new inputs) of the candidate's worker")
    cand_commit_s: float | None = Field(None, description="median commit (projections of its outputs)")
    base_refresh_s: float | None = Field(None, description="the same steps in the baseline worker (eager)")
    base_commit_s: float | None = None
    base_steps_now: bool = Field(False, description="the baseline's refresh + commit were timed again in this check "
                                                    "(in the reference worker), because the cached eager run's would "
                                                    "have charged the candidate; eager's laps came from the cache")
    timed_outputs_checked: int = Field(0, description="timed (lap, slot) outputs the reference recomputed")
    timed_outputs_failed: int = 0
    audit_worst: float | None = Field(None, description="worst projection difference / its allowed bound (> 1 fails)")
    audit_why: str = Field("", description="the first failed audit, in words")
    distinct_inputs: bool = False
    # older records (events timed inside the candidate's worker): kept so they still load
    wall_over_event: float | None = None
    threads_before: int | None = None
    threads_after: int | None = None
    wall_us: float | None = None
    event_us: float | None = None
    n_calls: int | None = None
    parent_wall_s: float | None = None
    parent_event_s: float | None = None
    overhead_us: float | None = None
    hidden_us_per_call: float | None = None
    n_calls_loop: int | None = None
    parent_per_call_us: float | None = None
    median_us: float | None = None


class IntegrityRecord(Record):
    policy: Policy = "partial"
    static: StaticPolicy = Field("allowlist", description="the static scan's mode (CheckOptions.static)")
    findings: list[Finding] = Field(default_factory=list)
    accounting: OpAccounting | None = None
    physics: PhysicsRecord | None = None
    degenerate: DegenerateRecord | None = None
    timing: TimingIntegrity | None = None
    extra_round: bool = Field(False, description="a >10x speedup triggered an extra verification round")


# ----------------------------------------------------------------------------- the verdict


class IsolationRecord(Record):
    """The OS sandbox that contained this check's workers (`kiln.tools.sandbox.box`)."""

    level: Isolation = "best-effort"
    complete: bool = Field(False, description="every layer below is in force")
    layers: list[str] = Field(default_factory=list, description="layers in force (bwrap, pid-namespace, landlock-fs, ...)")
    missing: dict[str, str] = Field(default_factory=dict, description="layer -> why it is not in force")
    bwrap: str | None = Field(None, description="the bubblewrap binary used for the outer layer")
    bwrap_version: str | None = None
    landlock_abi: int = Field(0, description="the kernel's Landlock ABI (0: none)")


class ExtraRound(Record):
    """The second session after a speedup above 10x (more trials, a new secret seed)."""

    trials: int
    status: Status
    n_passed: int = 0


class CheckEvidence(Record):
    """How the check ran, beyond the verdict's sections: facts, never a verdict."""

    lang: Lang | None = Field(None, description="the candidate's language, from its source")
    n_weights_copied: int | None = Field(None, description="reference parameters/buffers copied into ModelNew")
    baselines_cached: list[str] = Field(default_factory=list, description="baselines read from kiln's cache")
    fork_server: Literal["resident", "process", "none"] | None = Field(
        None, description="what forked the workers: the user's resident server (kiln.tools.sandbox.resident), "
        "this process's own, or none (fresh interpreters)")
    extra_round: ExtraRound | None = None


class CheckRecord(Record):
    """The full verdict for one (problem, candidate). `kiln check --json` writes this."""

    kiln_version: str = "0.1.0"
    problem: str
    candidate: str
    device: str = "cpu"
    dtype: DType = "fp32"
    status: Status
    correct: bool = False
    reasons: list[str] = Field(default_factory=list)
    seed: int | None = None
    compile: CompileRecord | None = None
    correctness: CorrectnessRecord | None = None
    timing: TimingRecord | None = None
    integrity: IntegrityRecord | None = None
    env: EnvRecord | None = None
    isolation: IsolationRecord | None = None
    stages_s: dict[str, float] = Field(default_factory=dict, description="spawn, compile, correctness, timing")
    stderr_tail: str = ""
    evidence: CheckEvidence = Field(default_factory=CheckEvidence)
    extra: dict[str, Any] = Field(default_factory=dict, description="older records' untyped facts (now `evidence`)")

    @property
    def speedup_vs_eager(self) -> float | None:
        return _speedup(self, "eager")

    @property
    def speedup_vs_compile(self) -> float | None:
        return _speedup(self, "compile")


def _speedup(rec: CheckRecord, baseline: str) -> float | None:
    if rec.timing is None or not rec.timing.measured:
        return None
    sp = rec.timing.speedups.get(baseline)
    return sp.value if sp else None
