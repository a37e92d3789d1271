"""Triton candidates do what the manifest says, checked under TRITON_INTERPRET=1 without kiln.

Correct kernels match the reference on every hidden trial; wrong kernels really mismatch (at the
index the manifest names, where it names one); cheats pass a naive check (so they are real cheats)
and those meant to end "incorrect" really fail the hidden trials.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .corpus_lib import (
    KERNELS,
    entry_id,
    load_manifest,
    must_fail_hidden_trials,
    problem_path,
    run_candidates,
    run_parallel,
)

TRITON = [e for e in load_manifest() if e["lang"] == "triton" and not e["gpu_only"]]
CORRECT = [e for e in TRITON if e["kind"] == "correct"]
WRONG = [e for e in TRITON if e["kind"] == "wrong"]
ADV_HIDDEN = [e for e in TRITON if e["kind"] == "adversarial" and e["policy"] == "partial"
              and (must_fail_hidden_trials(e) or e["expect_status"] == "ok")]
ADV_NAIVE = [e for e in TRITON if e["kind"] == "adversarial" and e.get("naive_passes")]


def pairs(entries: list[dict]) -> list[tuple[Path, Path]]:
    """Unique (problem, candidate) pairs (an entry may appear once per policy)."""
    return list(dict.fromkeys((problem_path(e), KERNELS / e["path"]) for e in entries))


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[tuple[str, str], list[dict]]:
    """{(mode, candidate path): trials}. Three interpreter subprocesses, two at a time."""
    out_dir = tmp_path_factory.mktemp("corpus")
    hidden = pairs(CORRECT + WRONG + ADV_HIDDEN)
    half = len(hidden) // 2
    jobs = [("hidden", hidden[:half]), ("hidden", hidden[half:]), ("naive", pairs(ADV_NAIVE))]

    def run(job):
        mode, todo = job
        return mode, run_candidates(mode, todo, out_dir / f"{mode}-{len(todo)}-{id(todo)}.json")

    merged = {}
    for mode, found in run_parallel(jobs, run):
        merged.update({(mode, path): trials for path, trials in found.items()})
    return merged


def trials_for(results, mode: str, entry: dict) -> list[dict]:
    return results[(mode, str(KERNELS / entry["path"]))]


def report(trials: list[dict]) -> str:
    """The corpus's own one-line mismatch report, to test expect_reason substrings against."""
    parts = []
    for t in trials:
        if "why" in t:
            parts.append(t["why"])
        elif not t["ok"]:
            parts.append(f"x{t['scale']}: {t['bad_count']} mismatches, first at {t['first_bad']}")
    return "; ".join(parts)


@pytest.mark.parametrize("entry", CORRECT, ids=entry_id)
def test_correct_triton_kernel_matches_reference(results, entry):
    trials = trials_for(results, "hidden", entry)
    assert len(trials) == 4 and all(t["ok"] and not t["mutated_inputs"] for t in trials), report(trials)


@pytest.mark.parametrize("entry", WRONG, ids=entry_id)
def test_wrong_triton_kernel_mismatches_with_its_diagnosis(results, entry):
    trials = trials_for(results, "hidden", entry)
    assert all("why" not in t or t["why"].startswith("shape") for t in trials), "crashed instead of mismatching"
    assert not any(t["ok"] for t in trials)
    reason = entry["expect_reason"]
    if reason != "mismatch":  # a specific index or "shape": the corpus's own report must show it
        assert reason in report(trials)


@pytest.mark.parametrize("entry", ADV_NAIVE, ids=entry_id)
def test_cheat_fools_a_naive_check(results, entry):
    trials = trials_for(results, "naive", entry)
    assert trials[0]["ok"], report(trials)


@pytest.mark.parametrize("entry", ADV_HIDDEN, ids=entry_id)
def test_cheat_meant_to_be_incorrect_fails_hidden_trials(results, entry):
    trials = trials_for(results, "hidden", entry)
    failed = [t for t in trials if not t["ok"] or t.get("mutated_inputs")]
    if entry["expect_status"] == "ok":
        assert not failed, report(trials)
    else:
        assert failed and all("why" not in t for t in trials), report(trials)
    if entry.get("expect_reason"):
        assert entry["expect_reason"] in report(trials)
