"""kiln.graphs: the LangGraph state machine that runs the agents (`kiln run`).

`run_problem` and `resume_run` are imported lazily so that importing this package stays cheap."""

from __future__ import annotations

from typing import Any

__all__ = ["run_problem", "resume_run"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from kiln.graphs import runner

        return getattr(runner, name)
    raise AttributeError(name)
