"""What a curriculum run was asked to do; stored with the run so a rerun can check it matches."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kiln.evals.curriculum.rewards import RewardParams


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
    llm: str | None = None
    coder_llm: str | None = None
    proposer_llm: str | None = None
    base_url: str | None = None
    lang: Literal["triton", "cuda"] = "triton"
    device: Literal["cuda", "cpu"] = "cpu"
    dtype: Literal["fp32", "bf16", "fp16"] = "fp32"
    trials: int = Field(2, ge=1)
    check_timeout_s: float = 300.0
    seed: int = 0
    isolation: Literal["strict", "best-effort"] = Field("best-effort", description="the OS sandbox of checks, "
                                                                                  "probes and the confined Coder")
    bwrap: str | None = None
    reward: RewardParams = Field(default_factory=RewardParams)
