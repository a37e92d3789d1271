"""The graph's state: one TypedDict whose every field names its reducer, plus the pydantic records
kept in it.

State stays small: full check records, prompts and replies live in the run directory; the state
holds their run-dir-relative paths and the few numbers that routing needs. Every type stored here
is named in this module's schema, so the checkpointer can load it under a strict msgpack
allowlist (see `graphs.persist`).
"""

from __future__ import annotations

from typing import Annotated, Literal, TypedDict, TypeVar

from pydantic import BaseModel, Field

from kiln.agents.base import CoderMode, Failure, JudgeDecision, StressCase, Usage
from kiln.tools.records import JSON_SAFE

T = TypeVar("T")

Stage = Literal["start", "code", "evaluate", "profile", "judge", "propose", "finish"]
RunStatus = Literal["running", "solved", "solved_cpu_only", "stopped", "budget", "no_progress", "unsupported", "failed",
                    "llm_error", "no_code"]
"""Every status the loop writes (the state's, then `summary.json`'s, spelled the same in JSON).
`running`: not finished (the state only); `solved`: the best kernel passes every check and met the
target (or, without a GPU, is correct); `solved_cpu_only`: solved on a CPU run by a kernel that
branches on the device, so only its CPU branch was verified and its CUDA branch never ran
(`kiln.agents.devicepath`); `stopped`: the Judge stopped a correct kernel, Ctrl-C, or nothing else
applied; `budget`: a budget (iterations, minutes, tokens, cost) ran out; `no_progress`: no better
kernel in K rounds; `unsupported`: the Coder declined every child as a problem it cannot do (its
`unsupported` failure), never faking a kernel; `failed`: the best kernel fails a check where the
run would have been solved; `llm_error`: a role's LLM call failed for good (server unreachable,
HTTP errors after the retries, a malformed body); `no_code`: the Coder answered, but none of its
replies held a usable kernel."""


# ----------------------------------------------------------------------------- reducers


def replace(_old: T, new: T) -> T:
    """Last write wins."""
    return new


def add(old: float, new: float) -> float:
    """Counters: updates are increments."""
    return (old or 0) + (new or 0)


def append(old: list[T], new: list[T]) -> list[T]:
    """Logs: updates are new entries."""
    return [*(old or []), *(new or [])]


def merge(old: dict[str, T], new: dict[str, T]) -> dict[str, T]:
    """Keyed records: an update replaces the entries it names."""
    return {**(old or {}), **(new or {})}


# ----------------------------------------------------------------------------- records


class StateRecord(BaseModel):
    model_config = JSON_SAFE


class Candidate(StateRecord):
    """One Coder output and what the evaluator said about it (full record on disk)."""

    id: str = Field(description="'c0003': creation order")
    parent: str | None = Field(None, description="candidate it was derived from")
    iteration: int = Field(description="Coder round that wrote it")
    mode: CoderMode
    source_path: str | None = Field(None, description="run-dir-relative kernel file")
    source_sha: str | None = None
    coder_error: str | None = Field(None, description="why the Coder's reply had no usable code")
    coder_failure: Failure | None = Field(None, description="'call' (the LLM call failed), 'budget', 'reply' or "
                                                            "'unsupported' (the Coder declined the problem)")
    status: str = Field("pending", description="'pending', 'no_code', or the CheckRecord status")
    correct: bool = False
    frac_passed: float = Field(0.0, description="the check's correctness score (groups passed / planned; "
                                                "trials passed / run for older records); 0 if it never ran")
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    speedup_eager_ci_low: float | None = Field(None, description="low end of the 95% CI vs eager")
    speedup_compile_ci_low: float | None = Field(None, description="low end of the 95% CI vs torch.compile")
    pct_of_roofline: float | None = Field(None, description="physics floor / measured time, in %")
    floors_ratio: float | None = Field(None, description="the algorithm floor (the reference's FLOPs) over the I/O "
                                                         "floor (moving the data once)")
    reward: float = Field(0.0, description="correctness-gated reward (graphs.reward)")
    check_path: str | None = Field(None, description="run-dir-relative CheckRecord JSON")
    cases_checked: list[str] = Field(default_factory=list, description="stress cases in its last check")
    failed_cases: list[str] = Field(default_factory=list, description="stress cases it failed")
    timed_out_case: str | None = Field(None, description="the case its check's time ran out in, if it did")
    device_queries: list[str] = Field(default_factory=list, description="where its source asks which device it "
                                      "runs on ('line 80: `x.is_cuda`'): a check verifies one device's path only")
    feedback: str | None = Field(None, description="what a repair needs: error, mismatch, repro")


class TimeEntry(StateRecord):
    """Seconds spent in one kind of work during one iteration. `llm`: waiting on LLM requests only;
    `cases`: validating stress cases against the reference and timing them on the candidate (one-trial
    probes); `check_setup`: a check's time outside its workers (loading the files, the static scan,
    starting the fork server: the first check of a run pays most of it)."""

    iteration: int
    kind: Literal["llm", "compile", "verify", "time", "profile", "cases", "check_setup", "other"]
    seconds: float


class ProfileNote(StateRecord):
    """Profile of one candidate: its report for the Judge (and its digest, for people), or why there is none."""

    candidate: str
    report_path: str | None = Field(None, description="run-dir-relative ProfileReport JSON")
    digest_path: str | None = Field(None, description="run-dir-relative rendered digest")
    skipped: str | None = Field(None, description="reason when not profiled")
    seconds: float = 0.0


class TreeStats(StateRecord):
    """MCTS statistics of one candidate node."""

    visits: int = 0
    value_sum: float = 0.0


# ----------------------------------------------------------------------------- the state


class RunState(TypedDict, total=False):
    iteration: Annotated[int, replace]
    """Coder rounds started so far (one round = the children of one step)."""
    stage: Annotated[str, replace]
    """The node that last wrote the state (for progress displays)."""
    candidates: Annotated[dict[str, Candidate], merge]
    """Every candidate so far, by id."""
    pending: Annotated[list[str], replace]
    """Candidate ids written by the Coder and not yet evaluated."""
    frontier: Annotated[list[str], replace]
    """Candidate ids the next Coder round starts from (beam members, MCTS leaf, linear last)."""
    decisions: Annotated[dict[str, JudgeDecision], merge]
    """The Judge's latest decision per candidate id (after hard rules)."""
    last_override: Annotated[str | None, replace]
    """When the Judge's last decision was changed by a hard rule: what it asked and what happened."""
    best_id: Annotated[str | None, replace]
    """Highest-reward candidate."""
    no_progress: Annotated[int, replace]
    """Consecutive Coder rounds without a better best reward."""
    cases: Annotated[list[StressCase], append]
    """Every Proposer case with its validation result."""
    problem_numel: Annotated[int | None, replace]
    """Elements in the problem's own inputs (measured at the first propose round)."""
    retired: Annotated[dict[str, str], merge]
    """Cases taken out of the suite by rule (a correct candidate could not finish them), with why."""
    stress_rounds: Annotated[int, add]
    """Propose rounds run."""
    usage: Annotated[list[Usage], append]
    """Token usage and cost of every LLM call."""
    times: Annotated[list[TimeEntry], append]
    """Wall time per iteration and kind of work."""
    elapsed_s: Annotated[float, add]
    """Wall seconds spent inside nodes (survives resume; the minutes budget reads it)."""
    profiles: Annotated[dict[str, ProfileNote], merge]
    """Profile digest or skip reason, by candidate id."""
    tree: Annotated[dict[str, TreeStats], merge]
    """MCTS visit counts and value sums, by candidate id ('root' for the root)."""
    status: Annotated[RunStatus, replace]
    """'running' until the finish node sets the final status (a node may set it earlier to stop)."""
    llm_failures: Annotated[list[str], append]
    """'role: what failed' for every LLM call or reply that failed (the summary lists them)."""
    stop_reason: Annotated[str | None, replace]
    """Why the run stopped, in plain words."""
