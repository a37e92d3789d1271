"""A module's group: k Coder samples, each checked by kiln's real check, then rewarded together."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kiln.agents.base import CoderTask, GpuFacts
from kiln.evals.curriculum.config import CurriculumConfig
from kiln.evals.curriculum.rewards import group_rewards
from kiln.evals.curriculum.store import CurriculumStore, ModuleRow, SampleRow
from kiln.tools.evaluator import Evaluator
from kiln.tools.inputs import derive_seed
from kiln.tools.records import CheckOptions


def module_dir(run_dir: Path, module: ModuleRow) -> Path:
    """modules/<id>/module.py and its stress variants, written once (the checks read them)."""
    d = run_dir / "modules" / module.id
    if not (d / "module.py").exists():
        (d / "stress").mkdir(parents=True, exist_ok=True)
        for name, src in module.stress_sources.items():
            (d / "stress" / f"{name}.py").write_text(src)
        (d / "module.py").write_text(module.source or "")
    return d


def coder_task(module: ModuleRow, sample: int, cfg: CurriculumConfig, gpu: Any) -> CoderTask:
    return CoderTask(mode="generate", lang=cfg.lang, problem_name=module.id, problem_src=module.source or "",
                     gpu=gpu or GpuFacts(), sibling=sample)


def check_options(cfg: CurriculumConfig, module: ModuleRow, sample: int, cases: list[Path]) -> CheckOptions:
    """The check's secret seed is fixed per (run seed, module, sample): a rerun checks on the same inputs."""
    return cfg.check.model_copy(update={"cases": [str(c) for c in cases],
                                        "seed": derive_seed(cfg.seed, module.id, sample)})


def completion_text(reply: Any) -> str:
    """What gets checked: the code block, else the raw reply (kiln's check turns it into a
    `compile_error` record), else a comment with the Coder's error."""
    if reply.ok and reply.source:
        return reply.source
    return reply.raw or f"# the coder wrote no code: {reply.error}\n"


def sample_one(module: ModuleRow, sample: int, *, coder: Any, evaluator: Evaluator, cfg: CurriculumConfig,
               run_dir: Path, gpu: Any) -> SampleRow:
    d = module_dir(run_dir, module)
    reply = coder.write(coder_task(module, sample, cfg, gpu))
    cand = d / f"sample{sample}.py"
    cand.write_text(completion_text(reply))
    t0 = time.monotonic()
    record = evaluator.check(d / "module.py", cand, check_options(cfg, module, sample, sorted(d.glob("stress/*.py"))))
    return SampleRow(module=module.id, sample=sample, candidate=cand.read_text(),
                     coder_error=None if reply.ok else reply.error, record=record,
                     check_s=round(time.monotonic() - t0, 3))


def reward_group(store: CurriculumStore, module: ModuleRow, cfg: CurriculumConfig) -> list[SampleRow]:
    """Score one finished group and store each sample's reward and advantage (idempotent)."""
    rows = store.samples(module.id)
    for row, rew in zip(rows, group_rewards([r.record for r in rows], cfg.reward), strict=True):
        if row.reward != rew:
            row.reward = rew
            store.add_sample(row)
    return rows
