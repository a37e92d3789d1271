"""The check pipeline: one candidate against one problem, judged outside the candidate's process.

`check()` and `LocalEvaluator` are the public entry points (`api`); `session` drives one check's
workers (`reference`, `candidate`, `baseline` in `worker` processes, over `channel`), `compare`,
`merge` and `timing` judge what they report in kiln's own process, `caches` is the only code that
reads or writes kiln's caches, `isolation`, `zygote` and `servers` contain and start the processes,
inside the OS sandbox (`sandbox`: bubblewrap outside, `confine`'s namespaces and Landlock inside).
Submodules import without this package pulling in the whole pipeline (workers import them).
"""

from __future__ import annotations

from typing import Any

__all__ = ["LocalEvaluator", "check", "resolve_device"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from kiln.tools.check import api

        return getattr(api, name)
    raise AttributeError(f"module 'kiln.tools.check' has no attribute {name!r}")
