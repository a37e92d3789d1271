"""Export a curriculum run as a Hugging Face `datasets`-loadable folder (JSONL + a dataset card).

    sft.jsonl        prompt (the Coder's messages) -> a verified kernel; verified samples only
    grpo.jsonl       one row per module: prompt, problem, k completions, rewards, advantages,
                     statuses, labels, check records (JSON strings)
    proposer.jsonl   one row per generated module: the API set, the writer's prompt, the module,
                     accepted or the refusal, the Coder's pass rate and whether it landed at the frontier
    README.md        the card: configs for `load_dataset(DIR, "sft" | "grpo" | "proposer")`, counts,
                     families, pass rates, reward figures and the environment

Nothing comes from a sample whose verdict was not `ok` unless its row says `label: negative`.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

from kiln.agents.base import CoderTask
from kiln.evals.curriculum.rewards import verified
from kiln.evals.curriculum.store import CurriculumStore, ModuleRow, SampleRow

CONFIGS = ("sft", "grpo", "proposer")


def coder_messages(module: ModuleRow, lang: str) -> list[dict[str, str]]:
    """The messages kiln's LLM Coder would be sent for this module (generate mode)."""
    from kiln.agents.coder import LLMCoder

    task = CoderTask(mode="generate", lang=lang, problem_name=module.id, problem_src=module.source or "")
    msgs = LLMCoder(None).messages(task)  # messages() never touches the client
    return [{"role": "system" if m.type == "system" else "user", "content": str(m.content)} for m in msgs]


def _label(s: SampleRow) -> str:
    return "positive" if verified(s.record) else "negative"


def sft_rows(modules: list[ModuleRow], samples: dict[str, list[SampleRow]], lang: str) -> list[dict]:
    out = []
    for m in modules:
        prompt = coder_messages(m, lang)
        for s in samples.get(m.id, []):
            if verified(s.record):
                out.append({"module_id": m.id, "round": m.round, "families": sorted(set(m.api_set.families)),
                            "prompt": prompt, "completion": [{"role": "assistant",
                                                              "content": f"```python\n{s.candidate}```"}],
                            "reward": s.reward.reward if s.reward else None, "label": "positive"})
    return out


def grpo_rows(modules: list[ModuleRow], samples: dict[str, list[SampleRow]], lang: str) -> list[dict]:
    out = []
    for m in modules:
        rows = samples.get(m.id, [])
        if not rows:
            continue
        out.append({"module_id": m.id, "round": m.round, "api_set": m.api_set.ops,
                    "families": sorted(set(m.api_set.families)), "prompt": coder_messages(m, lang),
                    "problem": m.source, "completions": [s.candidate for s in rows],
                    "rewards": [s.reward.reward if s.reward else 0.0 for s in rows],
                    "advantages": [s.reward.advantage if s.reward else 0.0 for s in rows],
                    "statuses": [s.record.status for s in rows], "labels": [_label(s) for s in rows],
                    "checks": [s.record.model_dump_json() for s in rows]})
    return out


def pass_rate(rows: list[SampleRow]) -> float | None:
    return sum(verified(s.record) for s in rows) / len(rows) if rows else None


def proposer_rows(modules: list[ModuleRow], samples: dict[str, list[SampleRow]]) -> list[dict]:
    out = []
    for m in modules:
        p = pass_rate(samples.get(m.id, [])) if m.accepted else None
        at_frontier = p is not None and 0.0 < p < 1.0
        out.append({"module_id": m.id, "round": m.round, "api_set": m.api_set.ops,
                    "families": sorted(set(m.api_set.families)), "author": m.author,
                    "prompt": m.writer_prompt or "", "module": m.source or "", "accepted": m.accepted,
                    "reason": m.reason or "", "pass_rate": p,
                    "frontier_value": None if p is None else 4 * p * (1 - p), "at_frontier": at_frontier,
                    "label": "positive" if at_frontier else "negative"})
    return out


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def export(store: CurriculumStore, out: Path) -> dict[str, int]:
    """Write the three JSONL files and the card; returns the row count of each."""
    from kiln.evals.curriculum.card import render_card

    cfg = store.get_meta("config") or {}
    lang = cfg.get("lang", "triton")
    modules = store.modules()
    samples: dict[str, list[SampleRow]] = {}
    for s in store.samples():
        samples.setdefault(s.module, []).append(s)
    out.mkdir(parents=True, exist_ok=True)
    tables = {"sft": sft_rows(modules, samples, lang), "grpo": grpo_rows(modules, samples, lang),
              "proposer": proposer_rows(modules, samples)}
    for name, rows in tables.items():
        _write_jsonl(out / f"{name}.jsonl", rows)
    counts = {k: len(v) for k, v in tables.items()}
    (out / "README.md").write_text(render_card(cfg, modules, samples, counts, environment(samples)))
    return counts


def environment(samples: dict[str, list[SampleRow]]) -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                           "platform": platform.platform()}
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    recs = [s.record for rows in samples.values() for s in rows if s.record.env is not None]
    if recs and recs[0].env:
        env.update(gpu=recs[0].env.gpu_name, driver=recs[0].env.driver, cuda=recs[0].env.cuda)
    return env
