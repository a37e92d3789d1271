"""Resolve the three roles from `--llm` and the per-role specs. `replay:SCRIPT.json` selects the
role-level scripted fakes (`kiln.agents.scripted`); everything else goes to
`kiln.agents.registry.resolve_roles` (LLM backends and `builtin`), never guessed from the
environment."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kiln.graphs.context import RunOptions

ROLES = ("coder", "judge", "proposer")
REPLAY = "replay:"


@dataclass
class Roles:
    coder: Any
    judge: Any
    proposer: Any
    usage: Any = None


def role_specs(opts: RunOptions) -> dict[str, str]:
    """Each role's spec: its own flag, else --llm, else builtin."""
    return {r: opts.roles.spec(r) for r in ROLES}


def _registry(opts: RunOptions, specs: dict[str, str], run_dir: Path) -> Any:
    from kiln.agents.registry import resolve_roles

    cache = Path(opts.llm_cache) if opts.llm_cache else run_dir / "llm_cache.sqlite"
    return resolve_roles(opts.roles.llm, coder=specs["coder"], judge=specs["judge"], proposer=specs["proposer"],
                         base_url=opts.roles.base_url, lang=opts.lang, cache_path=cache, budgets=opts.budgets,
                         device=opts.device, no_progress_k=opts.budgets.no_progress_iters,
                         case_timeout_s=None)  # the graph validates every case (graphs.cases): not twice, not as LLM time


def resolve(opts: RunOptions, run_dir: Path) -> Roles:
    from kiln.agents.scripted import load_replay

    specs = role_specs(opts)
    live = {r: s for r, s in specs.items() if not s.startswith(REPLAY)}
    resolved = _registry(opts, {r: specs[r] if r in live else "builtin" for r in ROLES}, run_dir) if live else None
    out = {}
    for r in ROLES:
        if specs[r].startswith(REPLAY):
            out[r] = load_replay(Path(specs[r][len(REPLAY):]), r, memo_dir=run_dir)
        else:
            out[r] = getattr(resolved, r)
    return Roles(**out, usage=getattr(resolved, "tracker", None))
