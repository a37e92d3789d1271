"""The built-in Proposer: cases aimed at the candidate's tiles, valid against the reference."""

from __future__ import annotations

from pathlib import Path

from kiln.agents.base import CoderTask, ProposerInput
from kiln.agents.builtin import BuiltinCoder, BuiltinProposer
from kiln.agents.builtin.problem import load_problem_src
from kiln.agents.builtin.proposer import candidate_blocks, size_globals

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _propose(name: str, **kw):
    src = (EXAMPLES / f"{name}.py").read_text()
    cand = BuiltinCoder().write(CoderTask(mode="generate", problem_name=name, problem_src=src)).source
    return src, cand, BuiltinProposer().propose(ProposerInput(problem_name=name, problem_src=src, candidate_src=cand, **kw))


def test_sizes_and_blocks_are_read_from_problem_and_candidate() -> None:
    src, cand, _ = _propose("linear_gelu", max_cases=1)
    assert size_globals(src) == {"batch_size": 64, "in_features": 256, "out_features": 384}
    assert candidate_blocks("BLOCK_M = 128\nBLOCK_SIZE: tl.constexpr = 1024\nf[g](x, ROWS=8)") == [8, 128, 1024]
    assert 128 in candidate_blocks(cand)


def test_cases_are_problem_modules_at_tile_edges_batch_one_and_extreme_values() -> None:
    src, _, reply = _propose("softmax", max_cases=6)
    names = [c.name for c in reply.cases]
    assert names[:4] == ["dim_513", "dim_97", "batch_size_1", "magnitude_1e3"]
    ns = load_problem_src(reply.cases[0].source)
    assert [tuple(t.shape) for t in ns["get_inputs"]()] == [(64, 513)]
    big = load_problem_src(reply.cases[3].source)["get_inputs"]()[0]
    assert big.abs().max() > 100.0
    assert all("class Model" in c.source and c.rationale for c in reply.cases)


def test_existing_cases_are_not_proposed_again() -> None:
    _, _, first = _propose("softmax", max_cases=2)
    held = [c.name for c in first.cases]
    _, _, again = _propose("softmax", max_cases=2, existing_cases=held)
    assert not {c.name for c in again.cases} & set(held)


def test_invalid_cases_are_dropped() -> None:
    """A reference that only accepts its own size rejects the resized cases; values cases stay."""
    src = (EXAMPLES / "softmax.py").read_text().replace(
        "        return torch.softmax(x, dim=-1)",
        "        assert x.shape[1] == 1000\n        return torch.softmax(x, dim=-1)",
    )
    reply = BuiltinProposer().propose(ProposerInput(problem_name="s", problem_src=src, candidate_src="", max_cases=8))
    names = [c.name for c in reply.cases]
    assert names and all(not n.startswith("dim_") for n in names)
    assert "magnitude_1e3" in names and "batch_size_1" in names


def test_ill_conditioned_cases_are_dropped_and_k_tails_are_aimed_at() -> None:
    """x1000 inputs to a linear layer cancel to near zero: fp32 and fp64 references disagree
    beyond 1e-4, so that case would fail any candidate; it is not proposed. The K dim gets an edge."""
    _, _, reply = _propose("linear_gelu", max_cases=8)
    names = [c.name for c in reply.cases]
    assert "magnitude_1e3" not in names
    assert names[:2] == ["out_features_257", "in_features_257"]
