"""The check pipeline: one candidate against one problem, judged outside the candidate's process.

`check()` and `LocalEvaluator` are the public entry points (`api`); the rest are its stages and
processes: `pipeline` (rounds and the extra round), `rounds` (workers side by side), `compare` and
`merge` (the parent's verdict), `worker`, `reference`, `candidate`, `after`, `poison` (what runs in
the workers), `isolation` and `zygote` (process containment and the fork server), `cli`.
"""

from kiln.tools.check.api import LocalEvaluator, check, resolve_device

__all__ = ["LocalEvaluator", "check", "resolve_device"]
