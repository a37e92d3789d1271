"""The Proposer's problem-writing role: an API set in, a KernelBench-format module out.

Implementations: `TemplateWriter` (built-in, no LLM) and `LLMProblemWriter`. Either one's module
is untrusted until `validate.validate_module` has run it in the sandbox and the parent has judged
what it reported.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from pydantic import Field

from kiln.agents.base import AgentRecord, StressCase, Usage
from kiln.agents.curriculum.catalogue import OpSpec


class ApiSet(AgentRecord):
    """1-4 ops of the catalogue, in the order the module composes them."""

    ops: list[str] = Field(min_length=1, max_length=4)
    families: list[str] = Field(description="the family of each op, same order")

    @property
    def key(self) -> str:
        """The set's identity for the frontier: its op names, sorted."""
        return "+".join(sorted(self.ops))


class ProblemTask(AgentRecord):
    name: str = Field(description="file-stem name of the module to write, e.g. 'r01_m003'")
    api_set: ApiSet
    ops: list[OpSpec] = Field(description="the catalogue entries of api_set.ops, same order")
    device: Literal["cuda", "cpu"] = "cpu"
    seed: int = Field(0, description="drives every random choice of a built-in writer")
    max_numel: int = Field(1 << 16, description="largest tensor the module may build, in elements")


class ProblemReply(AgentRecord):
    ok: bool
    source: str | None = None
    stress: list[StressCase] = Field(default_factory=list, description="variants with other sizes, same Model")
    error: str | None = None
    raw: str = ""
    notes: str = ""
    author: Literal["template", "llm"] = Field("template", description="template modules are kiln's own code")
    usage: Usage = Field(default_factory=Usage)


@runtime_checkable
class ProblemWriter(Protocol):
    def write_problem(self, task: ProblemTask) -> ProblemReply: ...
