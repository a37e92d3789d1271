"""Tokens per solved problem, before and after the loop and prompt changes of issue 12, on the real
model's four transcripts (CPU, Triton interpreter, the `scripted:` backend replaying the replies).

    python bench/transcript_replay.py [--out runs/transcripts] [--trials 1]

Before: the recorded runs (`tests/fixtures/llm-transcripts/*/original_calls.json`). After: the same
replies replayed through today's loop. Both sides are counted the same way, as characters / 4 of
every request's messages and of every reply (the scripted chat model's own estimate; the recorded
runs' server reported no usage), so the comparison is like for like. "Cacheable" is the part of
each request that is identical across a run's calls of that role (the system prompt and the problem
statement that opens every request), which providers' prefix caches serve at a discount.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kiln.agents.base import GpuFacts
from kiln.graphs.runner import run_problem
from kiln.tools.check import LocalEvaluator

TRANSCRIPTS = Path(__file__).parents[1] / "tests" / "fixtures" / "llm-transcripts"


def before(folder: Path) -> dict:
    calls = json.loads((folder / "original_calls.json").read_text())
    return {"calls": len(calls), "input_tokens": sum(c["request_chars"] for c in calls) // 4,
            "output_tokens": sum(c["reply_chars"] for c in calls) // 4}


def _cacheable_chars(run: Path) -> tuple[int, int]:
    """(chars of all prompts, chars of their stable prefixes: system prompt + problem block)."""
    total = stable = 0
    for path in sorted((run / "llm").glob("*.json")):
        prompt = json.loads(path.read_text()).get("prompt") or ""
        total += len(prompt)
        head, sep, _ = prompt.partition("```\n\n")  # the problem block ends the stable prefix
        stable += len(head) + len(sep) if sep else 0
    return total, stable


def after(folder: Path, out: Path, trials: int) -> dict:
    problem = next(folder.glob("*.py"))
    run = out / folder.relative_to(TRANSCRIPTS).as_posix().replace("/", "_")
    summary = run_problem(problem, out=run, llm=f"scripted:{folder / 'script.json'}", evaluator=LocalEvaluator(),
                          gpu=GpuFacts(), device="cpu", max_iters=4, trials=trials, check_timeout=150)
    total, stable = _cacheable_chars(run)
    return {"status": summary.status, "calls": sum(u.calls for u in summary.usage_by_role.values()),
            "input_tokens": summary.input_tokens, "output_tokens": summary.output_tokens,
            "cacheable_pct": round(100 * stable / total, 1) if total else None,
            "retired": list(summary.retired_cases)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("runs/transcripts"))
    ap.add_argument("--trials", type=int, default=1)
    args = ap.parse_args()
    recorded = {"76": "solved", "99": "solved", "45": "budget", "40": "solved",
                "run3/95": "solved", "run3/89": "solved", "run3/12": "solved", "run3/18": "solved"}
    rows = []
    for name, status in recorded.items():
        folder = TRANSCRIPTS / name
        rows.append({"problem": next(folder.glob("*.py")).stem, "before": {"status": status, **before(folder)},
                     "after": after(folder, args.out, args.trials)})
    print(json.dumps(rows, indent=1))
    for side in ("before", "after"):
        solved = sum(r[side]["status"] == "solved" for r in rows)
        tokens = sum(r[side]["input_tokens"] + r[side]["output_tokens"] for r in rows)
        print(f"{side}: {solved} solved, {tokens} tokens, {tokens / max(solved, 1):.0f} tokens per solved problem")


if __name__ == "__main__":
    main()
