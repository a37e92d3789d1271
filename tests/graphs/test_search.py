"""Beam and MCTS through the whole graph: several children per round, ranking by the gated reward."""

from __future__ import annotations

import pytest
from graph_helpers import judge, kernel, reply, roles, run


@pytest.mark.parametrize("strategy", ["beam", "mcts"])
def test_search_strategies_keep_the_correct_child(tmp_path, strategy):
    r = roles([reply("no_relu"), reply("good")], [judge("repair")])
    summary = run(tmp_path, r, strategy=strategy, beam_children=2, beam_width=1, mcts_children=2, max_iters=4)

    assert summary.status == "solved" and summary.best.candidate == "c0002"
    assert (tmp_path / "run" / "best_kernel.py").read_text() == kernel("good")
    assert [t.mode for t in r.coder.tasks] == ["generate", "generate"]  # two children of the root
    if strategy == "beam":
        assert [t.sibling for t in r.coder.tasks] == [0, 1]  # the Coder is told they are alternatives
        assert summary.iterations == 1  # k = 2 children in one round
        assert r.judge.inputs == []  # the correct child won; the hard rules needed no Judge
    else:
        assert summary.iterations == 2  # one expansion per round; the root is expanded twice
