"""The check pipeline: one candidate against one problem, judged outside the candidate's process.

`check()` and `LocalEvaluator` are the public entry points (`api`); the rest are its stages and
processes: `pipeline` (rounds and the extra round), `session` (the parent driving the workers),
`compare` and `merge` (the parent's verdict), `worker`, `reference`, `candidate`, `baseline` (what
runs in the workers), `isolation`, `zygote` and `sandbox` (process containment, the fork server,
the OS sandbox), `cli`. Imported lazily: the sandbox's launcher (`launch`) must start fast.
"""

from typing import Any

__all__ = ["LocalEvaluator", "check", "resolve_device"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from kiln.tools.check import api

        return getattr(api, name)
    raise AttributeError(f"module 'kiln.tools.check' has no attribute {name!r}")
