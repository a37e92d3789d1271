"""Beam siblings of one parent get different kernels from the built-in Coder, and LLM Coders are
told which alternative they are writing."""

from __future__ import annotations

from pathlib import Path

from kiln.agents.base import CoderTask, GpuFacts
from kiln.agents.builtin.coder import BuiltinCoder
from kiln.agents.prompts import render

ROOT = Path(__file__).resolve().parents[2]


def _task(sibling: int, mode: str = "generate", **kw) -> CoderTask:
    src = (ROOT / "examples" / "softmax.py").read_text()
    return CoderTask(mode=mode, problem_name="softmax", problem_src=src, gpu=GpuFacts(device="cuda"),
                     sibling=sibling, **kw)


def test_siblings_write_different_kernels() -> None:
    coder = BuiltinCoder()
    sources = [coder.write(_task(j)).source for j in range(3)]
    assert all(sources) and len(set(sources)) == 3


def test_a_sibling_of_an_optimize_step_differs_too() -> None:
    coder = BuiltinCoder()
    first = coder.write(_task(0)).source
    a, b = (coder.write(_task(j, mode="optimize", best_src=first, last_src=first)).source for j in (0, 1))
    assert a and b and a != b and first not in (a, b)


def test_prompt_names_the_alternative_only_for_siblings() -> None:
    common = dict(mode="generate", problem_name="p", problem_src="x", best_src=None, best_note="", last_src=None,
                  feedback=None, feedback_title="")
    assert "alternative 2." in " ".join(render("coder_user.j2", sibling=1, **common).split())
    assert "alternative" not in render("coder_user.j2", sibling=0, **common)
