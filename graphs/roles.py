"""The roles of one run (`kiln.agents.registry.Roles`), from its options. `replay:SCRIPT.json`, which
only `kiln run` takes, selects the role-level scripted fakes (`kiln.agents.scripted`), replaying into
the run dir; every other spec goes to `kiln.agents.registry.resolve_roles` (LLM backends and
`builtin`), never guessed from the environment."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kiln.agents.registry import ROLES, Roles
from kiln.graphs.context import RunOptions

REPLAY = "replay:"


def _registry(opts: RunOptions, specs: dict[str, str], run_dir: Path) -> Roles:
    from kiln.agents.registry import resolve_roles

    cache = Path(opts.llm_cache) if opts.llm_cache else run_dir / "llm_cache.sqlite"
    return resolve_roles(opts.roles.llm, coder=specs["coder"], judge=specs["judge"], proposer=specs["proposer"],
                         base_url=opts.roles.base_url, lang=opts.lang, cache_path=cache, budgets=opts.budgets,
                         device=opts.device, no_progress_k=opts.budgets.no_progress_iters)


def resolve(opts: RunOptions, run_dir: Path) -> Roles:
    from kiln.agents.scripted import load_replay

    specs = {r: opts.roles.spec(r) for r in ROLES}
    replayed = [r for r in ROLES if specs[r].startswith(REPLAY)]
    live = {r: "builtin" if r in replayed else specs[r] for r in ROLES}
    resolved = _registry(opts, live, run_dir) if len(replayed) < len(ROLES) else None
    replays = {r: load_replay(Path(specs[r][len(REPLAY):]), r, memo_dir=run_dir) for r in replayed}
    if resolved is None:
        return Roles(**replays, specs={r: specs[r] for r in replayed})
    return replace(resolved, **replays, specs={**resolved.specs, **{r: specs[r] for r in replayed}})
