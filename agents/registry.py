"""Resolve `--llm` / `--coder-llm` / `--judge-llm` / `--proposer-llm` into the three role objects.

`--llm PROVIDER:MODEL` sets every role; a per-role flag overrides it; with nothing configured every
role is `builtin` (kiln's offline policies). Providers are looked up by name and imported only when
chosen; an unknown name, a missing package or a missing key fails here, before the run starts.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from kiln.agents.base import Coder, Judge, Proposer
from kiln.agents.llm.backends import (
    LLMSpec,
    api_key_for,
    build_chat_model,
    parse_spec,
    rate_limiter,
    structured_method,
)
from kiln.agents.llm.redact import Redactor, install_log_redaction
from kiln.agents.llm.transport import TransportSettings
from kiln.agents.llm.usage import Budgets, UsageTracker, check_usd_budget_priceable
from kiln.tools.errors import KilnConfigError
from kiln.tools.records import JSON_SAFE

if TYPE_CHECKING:  # langchain (2-3 s of import) loads when a run builds its roles, not on `kiln run --help`
    from kiln.agents.llm.cache import SqliteLLMCache
    from kiln.agents.llm.client import LLMClient

ROLES = ("coder", "judge", "proposer")
BUILTIN_CLASSES = {"coder": "BuiltinCoder", "judge": "BuiltinJudge", "proposer": "BuiltinProposer"}


class RoleSpecs(BaseModel):
    """Which backend plays each role, as the user gave it: `--llm` sets all three, a per-role flag
    overrides it, nothing means `builtin`. The one model of this concept (`kiln run`, `kiln eval`)."""

    model_config = JSON_SAFE

    llm: str | None = Field(None, description="--llm: PROVIDER:MODEL for every role")
    coder_llm: str | None = Field(None, description="--coder-llm")
    judge_llm: str | None = Field(None, description="--judge-llm")
    proposer_llm: str | None = Field(None, description="--proposer-llm")
    base_url: str | None = Field(None, description="--base-url: an OpenAI-compatible server")

    def spec(self, role: str) -> str:
        """The spec text of one role: its own flag, else --llm, else builtin."""
        return getattr(self, f"{role}_llm") or self.llm or "builtin"

    def kwargs(self) -> dict[str, str | None]:
        """The keyword arguments of `resolve_roles` these specs stand for."""
        return {"coder": self.coder_llm, "judge": self.judge_llm, "proposer": self.proposer_llm,
                "base_url": self.base_url}


@dataclass
class Roles:
    """The three roles of one run, the shared usage tracker and what built them."""

    coder: Coder
    judge: Judge
    proposer: Proposer
    tracker: UsageTracker = field(default_factory=UsageTracker)
    specs: dict[str, str] = field(default_factory=dict)
    redactor: Redactor = field(default_factory=Redactor)
    cache: SqliteLLMCache | None = None
    chat_models: dict[str, Any] = field(default_factory=dict)

    @property
    def usage(self) -> UsageTracker:
        return self.tracker


def role_specs(roles: RoleSpecs) -> dict[str, LLMSpec]:
    """The spec of each role (`RoleSpecs.spec`: the per-role flag, else --llm, else builtin), parsed."""
    out = {}
    for role in ROLES:
        text = roles.spec(role)
        out[role] = parse_spec(text, base_url=roles.base_url if text.strip().lower().startswith("openai") else None)
    return out


def _builtin(role: str, lang: str, device: str, no_progress_k: int) -> Any:
    try:
        import kiln.agents.builtin as builtin
    except ImportError as exc:
        raise KilnConfigError(f"the built-in {role} is not available: {exc}") from None
    cls = getattr(builtin, BUILTIN_CLASSES[role], None)
    if cls is None:
        raise KilnConfigError(f"kiln.agents.builtin has no {BUILTIN_CLASSES[role]}")
    params = inspect.signature(cls).parameters
    offered = {"lang": lang, "device": device, "patience": no_progress_k}
    kwargs = {k: v for k, v in offered.items() if k in params}
    return cls(**kwargs)


def _model_name(spec: LLMSpec, script: Mapping[str, Any] | None) -> str:
    if spec.provider == "scripted":
        return str((script or {}).get("model", "scripted"))
    return spec.model


def _role_object(role: str, client: LLMClient, no_progress_k: int) -> Any:
    from kiln.agents.coder import LLMCoder
    from kiln.agents.judge import LLMJudge
    from kiln.agents.proposer import LLMProposer

    if role == "coder":
        return LLMCoder(client)
    if role == "judge":
        return LLMJudge(client, no_progress_k=no_progress_k)
    return LLMProposer(client)  # screens its cases statically: the caller runs each reference once


def resolve_roles(
    llm: str | None,
    *,
    coder: str | None = None,
    judge: str | None = None,
    proposer: str | None = None,
    base_url: str | None = None,
    lang: str = "triton",
    cache_path: Path | None = None,
    budgets: Budgets | None = None,
    transport: TransportSettings | None = None,
    structured: str | None = None,
    device: str = "cpu",
    no_progress_k: int = 3,
    env: Mapping[str, str] | None = None,
) -> Roles:
    """Build the roles of one run. Fails fast (KilnConfigError) on any configuration problem.

    The LLM Proposer checks its cases statically only; the caller runs each case's reference, once,
    under its own isolation and case timeout (`kiln.graphs.cases`, the curriculum's validation)."""
    from kiln.agents.llm.cache import SqliteLLMCache
    from kiln.agents.llm.client import LLMClient
    from kiln.agents.llm.scripted import load_script

    env = os.environ if env is None else env
    if lang not in ("triton", "cuda"):
        raise KilnConfigError(f"unknown --lang {lang!r}; valid: triton, cuda")
    specs = role_specs(RoleSpecs(llm=llm, coder_llm=coder, judge_llm=judge, proposer_llm=proposer, base_url=base_url))
    if base_url and not any(s.provider == "openai" for s in specs.values()):
        raise KilnConfigError("--base-url needs an OpenAI-compatible spec: --llm openai:MODEL")
    scripts = {s.model: load_script(Path(s.model)) for s in specs.values() if s.provider == "scripted"}
    budgets = budgets or Budgets()
    llm_specs = {r: s for r, s in specs.items() if s.provider != "builtin"}
    check_usd_budget_priceable(budgets, [_model_name(s, scripts.get(s.model)) for s in llm_specs.values()])
    keys = [api_key_for(s, env) for s in llm_specs.values()]  # a missing key fails here, at start
    redactor = Redactor([k for k in keys if k], env=env)
    install_log_redaction(redactor)
    tracker = UsageTracker(budgets)
    cache = SqliteLLMCache(cache_path, redact=redactor) if cache_path is not None and llm_specs else None
    settings = transport or TransportSettings()
    limiter = rate_limiter(settings)  # one per run: the limit holds across the three roles
    built: dict[str, Any] = {}
    models: dict[str, Any] = {}
    for role, spec in specs.items():
        if spec.provider == "builtin":
            built[role] = _builtin(role, lang, device, no_progress_k)
            continue
        script = scripts.get(spec.model)
        chat = build_chat_model(spec, settings=settings, env=env, cache=cache, limiter=limiter,
                                script=(script or {}).get(role) if script is not None else None)
        models[role] = chat
        client = LLMClient(role, chat, model_name=_model_name(spec, script), tracker=tracker,
                           redactor=redactor, settings=settings, method=structured_method(spec, structured),
                           label=str(spec), cache_breakpoints=spec.provider == "anthropic")
        built[role] = _role_object(role, client, no_progress_k)
    return Roles(coder=built["coder"], judge=built["judge"], proposer=built["proposer"], tracker=tracker,
                 specs={r: str(s) for r, s in specs.items()}, redactor=redactor, cache=cache, chat_models=models)
