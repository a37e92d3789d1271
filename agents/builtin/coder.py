"""BuiltinCoder: writes Triton ModelNew sources from the template library, no LLM.

generate: the family's default configuration. repair: another configuration (smaller tiles
after a resource error), never one already tried. optimize: the next step of the configuration
search from the best candidate, along the knob the Judge's plan names (`knob: NAME up|down`) or
an explicit `config: {...}` line. Problems outside the library get a clear `unsupported` error.
"""

from __future__ import annotations

import json
import re

from kiln.agents.base import CoderReply, CoderTask, Failure, Usage
from kiln.agents.builtin import space
from kiln.agents.builtin.problem import BrokenProblem, Unsupported
from kiln.agents.builtin.source import Analysis, analyze, read_header, render
from kiln.tools.errors import KilnInputError

UNSUPPORTED = "unsupported by the built-in coder: "
RESOURCE_WORDS = ("out of resource", "outofresources", "shared memory", "registers", "too many resources")
KNOB_RE = re.compile(r"^knob:\s*(\w+)\s+(up|down)\s*$", re.M)
CONFIG_RE = re.compile(r"^config:\s*(\{.*\})\s*$", re.M)


class BuiltinCoder:
    """The Coder role's offline policy (kiln.agents.base.Coder)."""

    def __init__(self, device: str | None = None) -> None:
        self.device = device  # "cuda" / "cpu" / "auto" from the run; task.gpu says what was found

    def write(self, task: CoderTask) -> CoderReply:
        if task.lang != "triton":
            return _fail(f"{UNSUPPORTED}--lang {task.lang} (the template library is Triton)", "unsupported")
        try:
            an = analyze(task.problem_src)
        except Unsupported as err:
            return _fail(f"{UNSUPPORTED}{err}", "unsupported")
        except BrokenProblem as err:
            raise KilnInputError(f"{task.problem_name}: the reference problem is broken: {err}") from None
        knobs, visited, note = self._choose(an, task)
        if knobs is None:
            return _fail(note)
        src = render(an, knobs, visited)
        return CoderReply(ok=True, source=src, raw=f"```python\n{src}```\n", notes=note, usage=Usage(role="coder", model="builtin"))

    def _choose(self, an: Analysis, task: CoderTask) -> tuple[dict | None, set[str], str]:
        """The configuration for this task; a beam sibling j takes the j-th one after it, so
        siblings of one parent never write the same kernel."""
        knobs, visited, note = self._choose_first(an, task)
        for _ in range(task.sibling):
            if knobs is None:
                break
            visited = visited | {space.key(knobs)}
            nxt = space.next_config(an.family, knobs, visited)
            if nxt is None:
                return None, visited, f"no {an.family} configuration left for alternative {task.sibling + 1}"
            knobs, note = nxt, f"{note}; alternative {task.sibling + 1}: {json.dumps(nxt, sort_keys=True)}"
        return knobs, visited, note

    def _choose_first(self, an: Analysis, task: CoderTask) -> tuple[dict | None, set[str], str]:
        fam = an.family
        last, best = read_header(task.last_src), read_header(task.best_src)
        visited = set().union(*(h.visited for h in (last, best) if h is not None and h.family == fam))
        if task.mode == "generate" or (last is None and best is None):
            dev = "cuda" if "cuda" in (task.gpu.device, self.device) else "cpu"
            knobs = space.default(fam, an.variant, dev)
            return knobs, visited, f"{an.variant} template, first configuration for {dev}"
        if task.mode == "repair":
            return _repair(fam, last or best, visited, task.feedback or "")
        base = best if best is not None and best.family == fam else last
        assert base is not None
        return _optimize(fam, base.knobs, visited, task.feedback or "")


def _repair(fam: str, failed, visited: set[str], feedback: str) -> tuple[dict | None, set[str], str]:
    resource = any(w in feedback.lower() for w in RESOURCE_WORDS)
    prefer = _smaller_knob(fam) if resource else None
    nxt = space.next_config(fam, failed.knobs, visited, prefer)
    if nxt is None:
        return None, visited, f"repair exhausted: every {fam} configuration tried so far failed or was kept"
    why = "smaller tiles after a resource error" if resource else "another configuration after a failure"
    return nxt, visited, f"repair: {why}: {json.dumps(nxt, sort_keys=True)}"


def _smaller_knob(fam: str) -> tuple[str, str]:
    return {"elementwise": ("block", "down"), "row": ("tile", "down"), "matmul": ("tile", "down"),
            "gnorm": ("block", "down"), "conv": ("block_m", "down"), "dwconv": ("block", "down"),
            "pool": ("block", "down"), "attn": ("block_n", "down"), "chanstats": ("block", "down"),
            "pipeline": ("preset", "up")}.get(fam, ("block", "down"))


def _optimize(fam: str, base: dict, visited: set[str], plan: str) -> tuple[dict | None, set[str], str]:
    m = CONFIG_RE.search(plan)
    if m:
        try:
            cfg = json.loads(m.group(1))
        except ValueError:
            cfg = None
        if isinstance(cfg, dict) and space.valid(fam, cfg) and space.key(cfg) not in visited:
            return cfg, visited, f"optimize: the Judge's configuration {space.key(cfg)}"
    k = KNOB_RE.search(plan)
    prefer = (k.group(1), k.group(2)) if k else None
    nxt = space.next_config(fam, base, visited, prefer)
    if nxt is None:
        return None, visited, f"search exhausted: {len(visited)} {fam} configurations tried"
    return nxt, visited, f"optimize: {json.dumps(nxt, sort_keys=True)} (from {json.dumps(base, sort_keys=True)})"


def _fail(msg: str, failure: Failure | None = None) -> CoderReply:
    return CoderReply(ok=False, error=msg, failure=failure, raw="", usage=Usage(role="coder", model="builtin"))
