"""The dataset card (README.md) of an export, and the per-family figures it shares with the report."""

from __future__ import annotations

import json
from typing import Any

from kiln.evals.curriculum.rewards import verified
from kiln.evals.curriculum.store import ModuleRow, SampleRow


def family_rates(modules: list[ModuleRow], samples: dict[str, list[SampleRow]]) -> dict[str, dict[int, tuple[int, int]]]:
    """family -> round -> (verified samples, samples)."""
    out: dict[str, dict[int, tuple[int, int]]] = {}
    for m in modules:
        rows = samples.get(m.id, [])
        if not m.accepted or not rows:
            continue
        ok = sum(verified(s.record) for s in rows)
        for fam in set(m.api_set.families):
            p, n = out.setdefault(fam, {}).get(m.round, (0, 0))
            out[fam][m.round] = (p + ok, n + len(rows))
    return out


def _rate_table(rates: dict[str, dict[int, tuple[int, int]]]) -> list[str]:
    rounds = sorted({r for by in rates.values() for r in by})
    lines = ["| family | " + " | ".join(f"round {r}" for r in rounds) + " |", "|---|" + "---|" * len(rounds)]
    for fam, by in sorted(rates.items()):
        cells = [f"{by[r][0]}/{by[r][1]}" if r in by else "—" for r in rounds]
        lines.append(f"| {fam} | " + " | ".join(cells) + " |")
    return lines


def render_card(cfg: dict[str, Any], modules: list[ModuleRow], samples: dict[str, list[SampleRow]],
                counts: dict[str, int], env: dict[str, Any]) -> str:
    accepted = [m for m in modules if m.accepted]
    all_samples = [s for rows in samples.values() for s in rows]
    n_ok = sum(verified(s.record) for s in all_samples)
    rewards = [s.reward.reward for s in all_samples if s.reward]
    front = ["---", "configs:"] + [f"- config_name: {c}\n  data_files: {c}.jsonl" for c in ("sft", "grpo", "proposer")]
    front += ["tags:", "- kernels", "- triton", "- reinforcement-learning", "---", ""]
    body = [
        "# kiln curriculum export", "",
        "Written by `kiln curriculum`: modules a Proposer wrote at the Coder's frontier, Coder samples for each, "
        "every sample checked by kiln's sandboxed check (verdicts computed outside the candidate's process). "
        "Rewards and advantages follow kiln's CA-GRPO formula (docs/curriculum.md).", "",
        "Load with `datasets.load_dataset(DIR, \"sft\")` (or `\"grpo\"`, `\"proposer\"`).", "",
        "## Counts", "",
        f"- modules written: {len(modules)}, accepted: {len(accepted)}, refused: {len(modules) - len(accepted)}",
        f"- samples checked: {len(all_samples)}, verified: {n_ok}",
        f"- rows: sft {counts.get('sft', 0)}, grpo {counts.get('grpo', 0)}, proposer {counts.get('proposer', 0)}",
        f"- mean reward: {sum(rewards) / len(rewards):.3f}" if rewards else "- mean reward: —", "",
        "Rows from a sample that was not verified are labelled `negative` (grpo `labels`, proposer `label`); "
        "sft holds verified samples only.", "",
        "## Pass rate per family and round (verified / samples)", "", *_rate_table(family_rates(modules, samples)), "",
        "## Settings and environment", "", "```json", json.dumps({"config": cfg, "environment": env}, indent=2,
                                                                  sort_keys=True), "```", "",
    ]
    return "\n".join(front + body)
