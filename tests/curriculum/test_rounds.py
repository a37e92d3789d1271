"""Two rounds of the curriculum with the built-in policies on Triton's interpreter: killed in the
middle, resumed, exported (loaded back with `datasets`) and reported."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kiln.agents.curriculum.validate import static_error
from kiln.evals.curriculum.config import CurriculumConfig
from kiln.evals.curriculum.executors import build_executors
from kiln.evals.curriculum.rewards import verified
from kiln.evals.curriculum.runner import build, finish
from kiln.tools.records import CheckOptions, CheckRecord

CFG = CurriculumConfig(rounds=2, per_round=2, samples=2, families=["elementwise", "reduction", "convolution"],
                       max_ops=2, device="cpu", trials=1, seed=3)


class Killed(BaseException):
    """Stands in for kill -9 in the middle of a round."""


class Evaluator:
    """The real evaluator; counts checks and, when asked, dies after `die_after` of them."""

    def __init__(self, die_after: int | None = None) -> None:
        self.inner, _ = build_executors("local", "cpu", cpu_slots=2)
        self.n_slots, self.calls, self.die_after, self.lock = 2, 0, die_after, threading.Lock()

    def check(self, problem: Path, candidate: Path, options: CheckOptions) -> CheckRecord:
        with self.lock:
            self.calls += 1
            if self.die_after is not None and self.calls > self.die_after:
                raise Killed()
        return self.inner.check(problem, candidate, options)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("curriculum")
    _, prober = build_executors("local", "cpu", cpu_slots=2)
    first = Evaluator(die_after=2)
    with pytest.raises(Killed):
        build(CFG, out, evaluator=first, prober=prober, concurrency=2).run()
    done_before = len(build(CFG, out, evaluator=first, prober=prober).store.samples())
    second = Evaluator()
    cur = build(CFG, out, evaluator=second, prober=prober, concurrency=2)
    cur.run()
    counts, report = finish(cur)
    return cur, done_before, second.calls, counts, report


def test_two_rounds_resume_where_they_stopped(run) -> None:
    cur, done_before, calls_after, _, _ = run
    modules, samples = cur.store.modules(), cur.store.samples()
    accepted = [m for m in modules if m.accepted]
    assert len(accepted) == 4 and {m.round for m in accepted} == {0, 1}
    assert done_before == 2 and len(samples) == 8
    assert calls_after == 8 - done_before  # nothing stored was checked again
    assert all(s.reward is not None for s in samples)
    assert len({(s.module, s.sample) for s in samples}) == 8


def test_modules_are_valid_distinct_and_refusals_keep_their_reason(run) -> None:
    cur, *_ = run
    modules = cur.store.modules()
    accepted = [m for m in modules if m.accepted]
    assert all(static_error(m.source) is None and m.verdict and m.verdict.probe for m in accepted)
    assert all(not m.verdict.probe.degenerate for m in accepted)
    assert len({m.verdict.graph_hash for m in accepted}) == len(accepted)
    assert all(m.reason for m in modules if not m.accepted)


def test_the_frontier_is_recorded_per_round_and_moves(run) -> None:
    cur, *_ = run
    snaps = cur.store.snapshots()
    assert [s.round for s in snaps] == [0, 1]
    assert all(p.n == 0 for p in snaps[0].families.values())
    seen = {f for m in cur.store.modules(0) if m.accepted for f in m.api_set.families}
    assert {f for f, p in snaps[1].families.items() if p.n} == seen
    assert any(snaps[1].families[f].weight != snaps[0].families[f].weight for f in seen)


def test_the_export_loads_with_datasets_and_holds_only_labelled_negatives(run) -> None:
    datasets = pytest.importorskip("datasets")
    cur, _, _, counts, _ = run
    root = cur.run_dir / "export"
    # a cache of its own: datasets keys its cache by the folder's name, so another run's "export" can answer
    cache = str(cur.run_dir / "hf-cache")
    sft, grpo, proposer = (datasets.load_dataset(str(root), name, split="train", cache_dir=cache)
                           for name in ("sft", "grpo", "proposer"))
    assert (len(sft), len(grpo), len(proposer)) == (counts["sft"], counts["grpo"], counts["proposer"])
    samples = {(s.module, s.sample): s for s in cur.store.samples()}
    assert len(sft) == sum(verified(s.record) for s in samples.values())
    assert sft[0]["prompt"][0]["role"] == "system" and "class Model" in sft[0]["prompt"][1]["content"]
    for row in grpo:
        assert len(row["completions"]) == len(row["rewards"]) == len(row["checks"]) == 2
        for i, label in enumerate(row["labels"]):
            assert (label == "positive") == verified(CheckRecord.model_validate_json(row["checks"][i]))
    assert set(proposer["label"]) <= {"positive", "negative"}
    card = (root / "README.md").read_text()
    assert "config_name: grpo" in card and "Pass rate per family" in card and '"torch"' in card


def test_the_report_shows_rates_frontier_and_rewards(run) -> None:
    *_, report = run
    html = report.read_text()
    for section in ("Pass rate per family", "Frontier", "Rewards per round"):
        assert section in html
    assert (report.parent / "report.md").exists()
