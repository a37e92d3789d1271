"""Class 10: kiln.rewards as a target. A reward loop's check seed was derived from the problem and
the completion (both in the candidate's hands), so a candidate recomputed the secret and answered
every trial from a table; a completion nested too deeply, or holding a lone surrogate, crashed the
whole batch (the honest neighbour's reward went with it); a string constant made the static scan
quadratic, outside every deadline. Real checks through `KilnReward`, as TRL calls it."""

from __future__ import annotations

import time
from pathlib import Path

from redteam_lib import CANDIDATES

from kiln.rewards import KilnReward
from kiln.tools.check import LocalEvaluator, check
from kiln.tools.records import CheckOptions

DATA = Path(__file__).parents[1] / "core" / "data"
PROBLEM = DATA / "add_problem.py"
HONEST = (DATA / "add_triton.py").read_text()
PATCHED = {"run_rejected": True, "static": "denylist"}


def _reward(**opts: object) -> KilnReward:
    return KilnReward(evaluator=LocalEvaluator(), device="cpu", options=CheckOptions(trials=1, **opts), timeout_s=120)


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def test_a_candidate_that_knows_the_reward_seed_cannot_draw_the_inputs(user) -> None:
    """Executed past the allowlist, it recomputes derive_seed(0, sha(problem), sha(code)) and its
    table answers nothing: the check's secret is that seed keyed by this machine's secret."""
    reward = _reward(**PATCHED)
    code = (CANDIDATES / "r_reward_seed.py").read_text()
    rewards = reward(prompts=["p"], completions=[_fenced(code)], problem=[PROBLEM.read_text()])
    rec = reward.records[0]
    assert rewards == [0.0] and rec.correctness is not None and not rec.correctness.passed, rec.reasons
    assert any("outside tolerance" in r for r in rec.reasons), rec.reasons


def test_a_completion_kiln_cannot_read_costs_only_its_own_reward(user) -> None:
    deep = HONEST + "\n\ndef _never_called():\n    return torch" + ".a" * 1500 + "\n"
    deeper = HONEST + "\n\ndef _never_called():\n    return torch" + ".a" * 5000 + "\n"
    lone = _fenced(HONEST + "\n# \ud800\n")
    reward = _reward()
    rewards = reward(prompts=["p"] * 4, completions=[_fenced(HONEST), _fenced(deep), _fenced(deeper), lone],
                     problem=[PROBLEM.read_text()] * 4)
    statuses = [r.status for r in reward.records]
    assert rewards[0] == 1.0 and statuses[0] == "ok", (rewards, [r.reasons for r in reward.records])
    assert statuses[1] == "rejected" and any("static.too-deep" in r for r in reward.records[1].reasons)
    assert statuses[2] == "compile_error" and "nests too deeply" in reward.records[2].reasons[0]
    assert rewards[1:3] == [0.0, 0.0] and reward.records[3].status in ("ok", "compile_error", "error")


def test_a_string_that_made_the_scan_quadratic_still_gives_a_record_in_time(user) -> None:
    """One string constant, "{" + "._" * 120000: the format-field rule's regex backtracked for 48 s in
    kiln's own process, before any deadline; a record is due within --timeout + 10 s."""
    cand = user / "project" / "quadratic.py"
    cand.write_text(HONEST + '\n\nNOTE = "{' + "._" * 120000 + '"\n')
    t0 = time.monotonic()
    rec = check(PROBLEM, cand, CheckOptions(device="cpu", trials=1, timeout_s=30))
    assert time.monotonic() - t0 < 40 and rec.status in ("ok", "rejected"), (rec.status, rec.reasons)


class _FailsOnce:
    """The real local evaluator, except that its first check fails as kiln would under a neighbour's
    load (`timeout`)."""

    n_slots = 1

    def __init__(self) -> None:
        self.inner, self.calls = LocalEvaluator(), 0

    def check(self, problem: Path, candidate: Path, options: CheckOptions):  # noqa: ANN201
        from kiln.tools.records import CheckRecord

        self.calls += 1
        if self.calls == 1:
            return CheckRecord(problem=str(problem), candidate=str(candidate), status="timeout", reasons=["load"])
        return self.inner.check(problem, candidate, options)


def test_a_timeout_is_not_kept_as_the_completions_verdict(user) -> None:
    """A neighbour's load can time an honest check out: that record is not cached for the run, so the
    same completion is checked again and earns its reward."""
    ev = _FailsOnce()
    reward = KilnReward(evaluator=ev, device="cpu", options=CheckOptions(trials=1), timeout_s=120)
    args = {"prompts": ["p"], "completions": [_fenced(HONEST)], "problem": [PROBLEM.read_text()]}
    assert reward(**args) == [0.0]
    assert reward(**args) == [1.0] and ev.calls == 2
