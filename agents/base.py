"""The three agent roles as small interfaces, and the records they exchange.

Every backend (an LLM through langchain, a scripted fake, or the built-in offline policies)
implements these Protocols; the graph depends on nothing else. Hard stopping rules are enforced
by the graph, not trusted to a Judge.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field, model_validator

from kiln.agents.checkcost import CheckBudget, CheckCost
from kiln.agents.targetwork import TargetWork
from kiln.tools.profile.records import ProfileReport
from kiln.tools.records import JSON_SAFE, CheckRecord, DType

KernelLang = Literal["triton", "cuda"]
CoderMode = Literal["generate", "repair", "optimize"]
NextStep = Literal["repair", "optimize", "stress", "stop"]
Failure = Literal["call", "budget", "reply", "unsupported"]
"""Why a role produced nothing usable: the LLM call itself failed for good (server unreachable, an
HTTP error after the retries, a malformed body), a budget was spent so no call was made, the
reply came back but held nothing usable (no code block, invalid structured output), or the role
declined a problem it cannot do rather than fake a kernel (the built-in Coder outside its library)."""


class AgentRecord(BaseModel):
    model_config = JSON_SAFE


class Usage(AgentRecord):
    """Tokens and cost of one LLM call (cost None when the model has no known price)."""

    role: str = ""
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    latency_s: float = 0.0
    cached: bool = False
    cache_read_tokens: int = Field(0, description="input tokens the provider served from its prompt cache")


class GpuFacts(AgentRecord):
    """Facts about the target machine, read from it (never hard-coded into prompts)."""

    device: Literal["cuda", "cpu"] = "cpu"
    name: str = "cpu (Triton interpreter)"
    sm_count: int | None = None
    capability: str | None = None
    smem_per_sm_bytes: int | None = None
    l2_bytes: int | None = None
    copy_gbps: float | None = Field(None, description="measured device copy bandwidth")
    tflops: dict[str, float] = Field(default_factory=dict, description="measured matmul rate per dtype")


class CoderTask(AgentRecord):
    mode: CoderMode
    lang: KernelLang = "triton"
    dtype: DType = Field("fp32", description="the dtype the verifier runs the problem in (inputs cast to it)")
    problem_name: str
    problem_src: str
    best_src: str | None = Field(None, description="current best candidate (bounded context)")
    best_correct: bool = Field(True, description="whether best_src passes every check of today's suite")
    best_note: str = Field("", description="what is true of best_src in a few words (why it fails, if it does)")
    last_src: str | None = Field(None, description="last candidate tried")
    feedback: str | None = Field(
        None,
        description="compile error, mismatch report, integrity rejection, counterexample, or the Judge's plan",
    )
    gpu: GpuFacts = Field(default_factory=GpuFacts)
    iteration: int = 0
    sibling: int = Field(0, ge=0, description="which of this round's children of the same parent (beam): "
                                               "siblings should each try something different")
    budget: CheckBudget | None = Field(None, description="the check's time budget and its planned calls")
    cost: CheckCost | None = Field(None, description="what the last kernel's check cost, per case (measured)")
    target: TargetWork | None = Field(None, description="the real problem's sizes and the target GPU's floors, "
                                                        "when the run checks shrunk sizes")


class CoderReply(AgentRecord):
    ok: bool
    source: str | None = None
    error: str | None = Field(None, description="why no usable code: no block, several blocks, ...")
    failure: Failure | None = Field(None, description="which kind of failure `error` is (None when ok)")
    raw: str = ""
    notes: str = ""
    usage: Usage = Field(default_factory=Usage)


class CaseView(AgentRecord):
    """A stress case as the Judge sees it: what it is, its sizes, its source."""

    name: str
    sizes: str = Field("", description="its module-level constants, e.g. 'batch_size = 1024, output_size = 513'")
    source: str = ""
    outcome: str = Field("", description="what the kernel did on it: failed, or ran out of time")


class JudgeInput(AgentRecord):
    problem_name: str
    problem_src: str
    candidate_src: str
    check: CheckRecord
    profile: ProfileReport | None = Field(None, description="the candidate's profile (the LLM Judge's prompt renders "
                                                            "its digest)")
    gpu: GpuFacts = Field(default_factory=GpuFacts)
    iteration: int = 0
    best_speedup: float | None = Field(None, description="the best kernel's speedup (median) vs the target's baseline")
    best_speedup_ci_low: float | None = Field(None, description="its 95% CI low end: what the target rule reads")
    target_speedup: float = 1.0
    iters_without_progress: int = 0
    stress_passed: bool = False
    stress_cases: int = 0
    failing_case: CaseView | None = Field(None, description="the smallest stress case the kernel fails")
    last_override: str | None = Field(None, description="the Judge's previous decision that a rule changed, and how")
    cost: CheckCost | None = Field(None, description="what the check cost, per case, and its time budget")
    retired_cases: list[str] = Field(default_factory=list, description="stress cases retired unverified (too slow "
                                                                       "to check), named wherever stress is reported")

    @model_validator(mode="before")
    @classmethod
    def _drop_old_digest(cls, data: object) -> object:
        """Requests logged before the profile was typed carry its rendered digest, which cannot be read back."""
        if isinstance(data, dict) and "profile_digest" in data:
            data = {k: v for k, v in data.items() if k != "profile_digest"}
        return data


JudgeMode = Literal["correction", "too_slow", "optimization"]
"""`too_slow`: every call that ran passed, but the check's time ran out: no bug to fix, a kernel too
slow to finish the check (under the CPU interpreter, typically)."""


class JudgeDecision(AgentRecord):
    mode: JudgeMode
    diagnosis: str = Field(description="what is wrong / what limits speed, in one or two sentences")
    bottleneck: str | None = Field(None, description="exactly one bottleneck (optimization mode)")
    evidence: list[str] = Field(default_factory=list, description="numbers from the profile or check")
    plan: str = Field("", max_length=1200, description="one fix or one optimization, bounded length")
    next: NextStep
    stop_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    error: str | None = Field(None, description="the Judge's call or reply failed; the decision is the rules'")
    failure: Failure | None = Field(None, description="which kind of failure `error` is")
    overridden: str | None = Field(None, description="which hard rule changed the Judge's own decision")


class StressCase(AgentRecord):
    """One stress case. A Proposer writes its name, source and rationale; once the graph has validated
    it against the reference, the case lies in the run dir at `path` (the graph's state holds no
    source) and the rest says what the reference made of it."""

    name: str = Field(description="file-stem-safe name, e.g. 'tile_edge_1025'")
    source: str = Field("", description="a problem-format module: Model, get_inputs, get_init_inputs "
                                        "(as proposed; empty once it lies at `path`)")
    rationale: str = ""
    path: str = Field("", description="run-dir-relative case file (problem format), once validated")
    valid: bool | None = Field(None, description="whether it passed validation against the reference; None: not yet")
    reason: str = Field("", description="why rejected, or 'ok'")
    round: int = Field(0, description="propose round that produced it")
    reference_s: float | None = Field(None, description="the reference's forward on it, seconds (validation run)")
    input_numel: int | None = Field(None, description="elements in its inputs")


class ProposerInput(AgentRecord):
    problem_name: str
    problem_src: str
    candidate_src: str
    existing_cases: list[str] = Field(default_factory=list, description="names of cases already held")
    max_cases: int = 4
    device: Literal["cuda", "cpu"] = Field("cpu", description="cpu: candidates run under the Triton interpreter")
    budget: CheckBudget | None = Field(None, description="the check's time budget and its planned calls per case")
    cost: CheckCost | None = Field(None, description="the candidate's last check, per case (measured)")


class ProposerReply(AgentRecord):
    cases: list[StressCase] = Field(default_factory=list)
    error: str | None = None
    failure: Failure | None = Field(None, description="which kind of failure `error` is (None when cases came)")
    usage: Usage = Field(default_factory=Usage)
    rejected: list[str] = Field(default_factory=list, description="'name: why' for each case refused")


@runtime_checkable
class Coder(Protocol):
    def write(self, task: CoderTask) -> CoderReply: ...


@runtime_checkable
class Judge(Protocol):
    def decide(self, inp: JudgeInput) -> JudgeDecision: ...


@runtime_checkable
class Proposer(Protocol):
    def propose(self, inp: ProposerInput) -> ProposerReply: ...
