"""What a curriculum run was asked to do; stored with the run so a rerun can check it matches.

The roles and the check are the shared models (`RoleSpecs`, `CheckOptions`, as `kiln run` has them);
the rest is the curriculum's own. Flat keywords (`device=`, `trials=`, `llm=`; the config stored by
older runs) go into them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kiln.agents.registry import RoleSpecs
from kiln.evals.curriculum.rewards import RewardParams
from kiln.graphs.context import fold_flat
from kiln.tools.records import CheckOptions

# flat keyword -> (nested model, field); the curriculum's `seed` is its own (it drives every choice;
# each check's seed is derived from it), not the check's
_FLAT: dict[str, tuple[str, str]] = {
    **{k: ("roles", k) for k in ("llm", "coder_llm", "judge_llm", "proposer_llm", "base_url")},
    **{k: ("check", k) for k in ("device", "dtype", "trials", "isolation", "bwrap")},
    "check_timeout_s": ("check", "timeout_s"),
}


class CurriculumConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rounds: int = Field(3, ge=1)
    per_round: int = Field(8, ge=1, description="accepted modules per round")
    samples: int = Field(4, ge=1, description="Coder samples per module (the GRPO group size k)")
    families: list[str] | None = Field(None, description="None: every family of the catalogue")
    catalogues: list[str] = Field(default_factory=list, description="extra family files (TOML or JSON)")
    max_ops: int = Field(3, ge=1, le=4)
    attempts_factor: float = Field(3.0, ge=1.0, description="modules written per round at most: factor x per_round")
    pool_factor: int = Field(6, ge=1, description="candidate API sets drawn per module wanted")
    stress: int = Field(1, ge=0, le=1, description="stress variants per module (size-changed copies)")
    roles: RoleSpecs = Field(default_factory=RoleSpecs, description="the Coder writes samples, the Proposer modules")
    lang: Literal["triton", "cuda"] = "triton"
    check: CheckOptions = Field(default_factory=lambda: CheckOptions(device="cpu"),
                                description="every check's options (and the probes' and the confined Coder's "
                                            "sandbox); each check adds its stress cases and a derived seed")
    seed: int = 0
    reward: RewardParams = Field(default_factory=RewardParams)

    @model_validator(mode="before")
    @classmethod
    def _fold(cls, data: Any) -> Any:
        out = fold_flat(data, _FLAT)
        if isinstance(out, dict) and isinstance(out.get("check"), dict):
            out["check"] = {"device": "cpu", **out["check"]}  # the curriculum's default device
        return out

    @model_validator(mode="after")
    def _resolved(self) -> CurriculumConfig:
        if self.check.device == "auto":
            raise ValueError("device must be cuda or cpu: the CLI resolves auto")
        return self

    @property
    def device(self) -> Literal["cuda", "cpu"]:
        return "cuda" if self.check.device == "cuda" else "cpu"
