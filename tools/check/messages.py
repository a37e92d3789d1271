"""The check's worker protocol as typed records: one pydantic model per command and per reply.

A command is what kiln's process sends a worker (`op` picks the model: a discriminated union per
role); a reply is what comes back, validated by the parent against the model the command names
(`REPLIES`). Nothing a reply says is a path, a size the parent allocates by, or a verdict: the parent
decides where every file lives (and creates it) before it sends the command, reads outputs only
through descriptors it holds or has them judged by the reference worker, and takes times from its own
clock. Replies carry evidence, which counts only against the candidate that sent it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter

from kiln.tools.records import CompileRecord, Mismatch, OutputVerdict

MAX_LIST = 100_000  # no reply field holds more items than this (a reply is capped at 8 MiB anyway)
MAX_TEXT = 4000
"""Characters of a worker's text (an error message, a traceback, a compile log) that reach kiln's
record: the rest is cut, never a reason of megabytes in the record and in the Coder's next prompt."""
MAX_NAME = 200  # an output's name, class, dtype, device: short in every honest reply
MAX_DIMS = 64


def _clip(limit: int) -> Any:
    def clip(text: str) -> str:
        return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"

    return AfterValidator(clip)


Text = Annotated[str, _clip(MAX_TEXT)]
Name = Annotated[str, _clip(MAX_NAME)]


class Msg(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


class Reply(Msg):
    """Every successful reply: how long the command took inside the worker (its own claim; kiln's
    clock decides everything that matters)."""

    model_config = ConfigDict(extra="ignore", ser_json_inf_nan="strings")
    ok: Literal[True] = True
    worker_s: float = 0.0


class ErrorInfo(Msg):
    kind: Name = Field("candidate", description="whose fault: candidate | reference | kiln | protocol | input")
    where: Name = ""
    message: Text = ""
    traceback: Text = ""


class ErrorReply(Msg):
    model_config = ConfigDict(extra="ignore")
    ok: Literal[False] = False
    error: ErrorInfo = Field(default_factory=ErrorInfo)


# ----------------------------------------------------------------------------- what outputs look like

ITEM_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
              "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16}
"""Bytes per element of each dtype a leaf may name (the names `kiln.tools.check.outputs` writes): the
parent sizes outputs without importing torch (a fresh `kiln check` on the resident fork server would
otherwise wait ~1-2.5 s for torch's import in its compile stage)."""



class Leaf(Msg):
    """One leaf of a forward() result, as a worker describes it (`kiln.tools.check.outputs`): its
    kind and, for tensors, class, device, dtype and shape; for sketched tensors the whole-tensor
    counts; for numbers the value. A candidate's leaves are claims the judge checks."""

    name: Name
    kind: Literal["tensor", "sketch", "number", "other"]
    cls: Name = ""
    device: Name = ""
    dtype: Name = ""
    shape: list[int] = Field(default_factory=list, max_length=MAX_DIMS)
    value: bool | Annotated[int, Field(ge=-(1 << 63), lt=1 << 63)] | float | None = None  # an int a float can meet
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    sum_abs: float = 0.0


class CaseSeeds(Msg):
    init: int
    model: int


class Slot(Msg):
    """A file the parent created for a worker to fill; `dev`/`ino` let the judge verify it opened
    that very file (a renamed, replaced or linked path is refused)."""

    path: str
    dev: int = 0
    ino: int = 0


# ----------------------------------------------------------------------------- reference worker


class RefSetup(Msg):
    op: Literal["setup"] = "setup"
    seeds: dict[str, CaseSeeds]
    numerics_rule: bool = True
    weights: dict[str, str] = Field(description="per case, where to save the model's weights (feed dir)")


class RefSetupReply(Reply):
    weights_fp: dict[str, list[float]] = Field(default_factory=dict)


class RefTrial(Msg):
    op: Literal["trial"] = "trial"
    case: str
    dist: str
    trial: int
    seed: int
    key: int
    tag: str
    drop_nonfinite: bool = False
    inputs_file: str | None = Field(None, description="where to save the inputs when small (feed dir)")


class RefTrialReply(Reply):
    dropped: str | None = None
    input_fp: list[float] = Field(default_factory=list, max_length=MAX_LIST)
    mutated: bool = False
    inputs_saved: bool = False
    input_bytes: int = 0
    finite: bool = True
    leaves: list[Leaf] = Field(default_factory=list, max_length=MAX_LIST)
    reproducible: bool = Field(True, description="the inputs drawn again from the seed came out the same")


class RefJudge(Msg):
    """Judge the candidate's outputs for trial `tag` (read from `first`/`second`, described by
    `cand_first`/`cand_second`) against the reference's, on the reference's device."""

    op: Literal["judge"] = "judge"
    tag: str
    case: str
    dist: str
    trial: int
    first: Slot
    second: Slot
    cand_first: list[Leaf] = Field(max_length=MAX_LIST)
    cand_second: list[Leaf] = Field(max_length=MAX_LIST)
    atol: float
    rtol: float
    numerics: bool = True
    inputs_file: str | None = Field(None, description="the trial's inputs file in the feed dir, now done with")


class PhaseVerdict(Msg):
    """One call's verdict (`first_call` or `second_call`): the data of a `TrialRecord`."""

    phase: Literal["first_call", "second_call"]
    passed: bool
    mismatch: Mismatch | None = None
    rel_l2_err: float | None = None
    rule: str = "numerics"
    legacy_atol_rtol_passed: bool = True
    outputs: list[OutputVerdict] = Field(default_factory=list)
    error: str | None = None


class RefJudgeReply(Reply):
    phases: list[PhaseVerdict] = Field(max_length=2)
    same_bits: bool = False
    rms: dict[str, float] = Field(default_factory=dict, description="RMS of each floating reference output")


class RefWork(Msg):
    op: Literal["work"] = "work"
    seed: int


class RefWorkReply(Reply):
    bytes_moved: int | None = None
    flops: float | None = None


class RefDegenerate(Msg):
    """Is the problem's output independent of its weights (two weight seeds)?"""

    op: Literal["degenerate"] = "degenerate"
    seed_a: int
    seed_b: int


class RefDegenerateReply(Reply):
    degenerate: dict[str, Any] = Field(default_factory=dict, description="a DegenerateRecord: weight independence")


class RefDraws(Msg):
    """Is the problem's output independent of its inputs, across the trials' draws so far?"""

    op: Literal["draws"] = "draws"
    atol: float
    rtol: float
    numerics: bool = True


class RefDrawsReply(Reply):
    draws: dict[str, Any] | None = Field(None, description="a DegenerateRecord across the trials' input draws")


class RefAudit(Msg):
    """Recompute timed iterations (lap, slot) of the timing stage and judge the candidate's
    committed projections of them (`kiln.tools.timing.audit`)."""

    op: Literal["audit"] = "audit"
    ring: dict[str, Any]
    picks: list[tuple[int, int]] = Field(max_length=4096)
    projections: dict[str, Any] = Field(description="'lap.slot' -> the candidate's committed projection")
    commit_keys: dict[str, int] = Field(description="lap -> its commit key")
    input_keys: dict[str, int] = Field(description="lap -> its input key (the draw the lap's refresh wrote)")
    sigma: list[float]
    rel_err: float = Field(description="the candidate's relative L2 error on the x1 trials")
    tight: bool = Field(False, description="the numerics rule judged every x1 trial: hold timed outputs to the "
                                           "candidate's own accuracy, not to the default atol/rtol")
    atol: float
    rtol: float


class AuditVerdict(Msg):
    lap: int
    slot: int
    passed: bool
    why: str = ""
    stat: float | None = Field(None, description="mean squared projection difference / its bound")


class RefAuditReply(Reply):
    verdicts: list[AuditVerdict] = Field(default_factory=list, max_length=4096)


class Release(Msg):
    op: Literal["release"] = "release"


class Exit(Msg):
    op: Literal["exit"] = "exit"


# ----------------------------------------------------------------------------- candidate worker


class CandCompile(Msg):
    op: Literal["compile"] = "compile"


class CompileEvidence(CompileRecord):
    """A worker's compile record as its reply carries it: typed (a field of the wrong type is the
    worker breaking the protocol, not kiln failing), its texts clipped."""

    model_config = ConfigDict(extra="ignore", ser_json_inf_nan="strings")
    errors: Annotated[list[Text], AfterValidator(lambda errs: errs[:20])] = Field(default_factory=list)
    log_tail: Text = ""

    def record(self) -> CompileRecord:
        return CompileRecord.model_validate(self.model_dump())


class CompileReply(Reply):
    compile: CompileEvidence


class CaseBuild(Msg):
    seeds: CaseSeeds
    weights: str


class CandBuild(Msg):
    op: Literal["build"] = "build"
    cases: dict[str, CaseBuild]
    warmup_seed: int


class CandBuildReply(Reply):
    compile: CompileEvidence | None = None
    first_call_s: float | None = None
    n_weights_copied: int | None = None


class CandTrial(Msg):
    """The trial's first call; its output is held until `pack`."""

    op: Literal["trial"] = "trial"
    case: str
    dist: str = "x1"
    seed: int | None = None
    inputs_file: str | None = None


class CandTrialReply(Reply):
    input_fp: list[float] = Field(default_factory=list, max_length=MAX_LIST)
    mutated: bool = False
    call_s: float | None = None


class CandPack(Msg):
    """Write the held first output into `first` (raw, or its sketch drawn with `key`), call again on
    the same inputs and write that into `second`."""

    op: Literal["pack"] = "pack"
    key: int
    first: str
    second: str


class CandPackReply(Reply):
    first: list[Leaf] = Field(default_factory=list, max_length=MAX_LIST)
    second: list[Leaf] = Field(default_factory=list, max_length=MAX_LIST)
    mutated: bool = False
    call_s: float | None = None


class CandIntegrity(Msg):
    op: Literal["integrity"] = "integrity"
    policy: str
    seeds: list[int]


class CandIntegrityReply(Reply):
    accounting: dict[str, Any] | None = None
    findings: list[dict[str, Any]] = Field(default_factory=list, max_length=1000)


class TimeSetup(Msg):
    """Build the timing ring (`kiln.tools.timing.laps.RingSpec`) and warm up."""

    op: Literal["time_setup"] = "time_setup"
    ring: dict[str, Any]
    name: str = Field("candidate", description="the baseline worker: which baseline")


class Refresh(Msg):
    op: Literal["refresh"] = "refresh"
    lap: int
    key: int = Field(description="the lap's input key, drawn in secret by the parent and sent only now")
    name: str = "candidate"


class Lap(Msg):
    op: Literal["lap"] = "lap"
    name: str = "candidate"


class Commit(Msg):
    op: Literal["commit"] = "commit"
    key: int
    sigma: list[float]
    name: str = "candidate"


class LeafProjection(Msg):
    """One output leaf of one slot, as `kiln.tools.timing.audit` projects it: a float tensor's K
    keyed sums and non-finite counts, an integer tensor's digest, a number, or another object's class."""

    kind: Literal["tensor", "exact", "number", "other"]
    p: list[float] | None = Field(None, max_length=64)
    n: int | None = None
    dtype: Name | None = None
    shape: list[int] | None = Field(None, max_length=MAX_DIMS)
    nan: int | None = None
    posinf: int | None = None
    neginf: int | None = None
    digest: int | None = None
    value: bool | int | float | None = None
    cls: Name | None = None


class SlotProjection(Msg):
    leaves: list[LeafProjection] = Field(default_factory=list, max_length=4096)


class CommitReply(Reply):
    """Every slot's projections, one `SlotProjection` record each. They arrive inside the GPU's timing
    lock, where typing 176 small slots cost ~3 ms a commit (the parent's clock runs meanwhile, in the
    candidate's commits and the baseline's), so they are typed afterwards, all of them (`as_dicts`):
    a slot that does not fit is the worker breaking the protocol all the same, only later."""

    projections: list[dict[str, Any]] = Field(default_factory=list, max_length=4096)

    def as_dicts(self) -> list[dict[str, Any]]:
        """Each slot's projections as the audit reads them: the fields the worker sent, no others.
        Raises ValidationError when a slot is not a `SlotProjection`."""
        return [{"leaves": [lf.model_dump(exclude_unset=True) for lf in sp.leaves]}
                for sp in _SLOTS.validate_python(self.projections)]


_SLOTS = TypeAdapter(list[SlotProjection])


class PeakMemory(Msg):
    op: Literal["peak_memory"] = "peak_memory"
    name: str = "candidate"


class PeakMemoryReply(Reply):
    peak_bytes: int | None = Field(None, ge=0, le=1 << 50, description="a claim: no machine holds a PiB")


RefCommand = Annotated[RefSetup | RefTrial | RefJudge | RefWork | RefDegenerate | RefDraws | RefAudit | Release
                       | TimeSetup | Refresh | Lap | Commit | Exit, Field(discriminator="op")]

CandCommand = Annotated[CandCompile | CandBuild | CandTrial | CandPack | CandIntegrity | TimeSetup | Refresh | Lap
                        | Commit | PeakMemory | Exit, Field(discriminator="op")]


# ----------------------------------------------------------------------------- baseline worker


class BaseSetup(Msg):
    op: Literal["setup"] = "setup"
    seeds: CaseSeeds


class BasePrepare(Msg):
    op: Literal["prepare"] = "prepare"
    name: str
    ring: dict[str, Any]


BaseCommand = Annotated[BaseSetup | BasePrepare | Refresh | Lap | Commit | PeakMemory | Exit,
                        Field(discriminator="op")]

COMMANDS: dict[str, TypeAdapter[Any]] = {"reference": TypeAdapter(RefCommand), "candidate": TypeAdapter(CandCommand),
                                         "baseline": TypeAdapter(BaseCommand)}

REPLIES: dict[tuple[str, str], type[Reply]] = {
    ("reference", "setup"): RefSetupReply, ("reference", "trial"): RefTrialReply,
    ("reference", "judge"): RefJudgeReply, ("reference", "work"): RefWorkReply,
    ("reference", "degenerate"): RefDegenerateReply, ("reference", "draws"): RefDrawsReply,
    ("reference", "audit"): RefAuditReply, ("reference", "commit"): CommitReply,
    ("candidate", "compile"): CompileReply, ("candidate", "build"): CandBuildReply,
    ("candidate", "trial"): CandTrialReply, ("candidate", "pack"): CandPackReply,
    ("candidate", "integrity"): CandIntegrityReply, ("candidate", "commit"): CommitReply,
    ("candidate", "peak_memory"): PeakMemoryReply, ("baseline", "commit"): CommitReply,
    ("baseline", "peak_memory"): PeakMemoryReply,
}
"""The reply model of each (role, op); ops not listed reply with a bare `Reply`."""


def reply_model(role: str, op: str) -> type[Reply]:
    return REPLIES.get((role, op), Reply)
