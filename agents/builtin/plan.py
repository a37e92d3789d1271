"""The plan records the template families share: which family covers a lowered DAG (`Plan`,
made by classify.py) and a pipeline of several families (`PipelinePlan`, made by pipeline.py).

The generators (gen_*.py, emit.py), the family dispatch and the Coder read these; keeping them
here, below all of those, keeps the built-in policies' imports one way."""

from __future__ import annotations

from dataclasses import dataclass, field

from kiln.agents.builtin.ir import KGraph


@dataclass
class Plan:
    family: str  # "elementwise" | "row" | "matmul"
    g: KGraph
    live: list[int]
    loads: list[int]  # live load nodes, in order; the kernel's tensor arguments
    roles: dict[int, str]  # load node -> "full" | "vec" (row) / "vec_n" | "full" | "a" | "b" (matmul)
    dims: tuple[int, int] = (0, 0)  # row family: first and last reduced dim (a contiguous range)
    full_shape: tuple[int, ...] = ()
    mm: int = -1
    dim_attr: str | None = None  # row family: the Model attribute that names the reduced dim, if any
    special: int = -1  # gnorm family: the group-norm node

    @property
    def variant(self) -> str:
        """The family, or "row_cols" for reductions over a dim that is not the last."""
        return "row_cols" if self.family == "row" and self.dims[1] != len(self.full_shape) - 1 else self.family


@dataclass
class Stage:
    name: str  # the intermediate it writes ("out" for the last)
    plan: Plan | None  # None: the value is a view of another stage's output (no kernel)
    expr: str = ""  # for a view: its expression


@dataclass
class PipelinePlan(Plan):
    stages: list[Stage] = field(default_factory=list)
