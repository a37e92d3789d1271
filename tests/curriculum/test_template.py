"""The built-in problem writer: composable API sets become runnable KernelBench modules."""

from __future__ import annotations

import random

import torch

from kiln.agents.casecheck import static_problem_error
from kiln.agents.curriculum.base import ProblemTask
from kiln.agents.curriculum.catalogue import builtin_catalogue
from kiln.agents.curriculum.sets import api_set_of, candidate_pool
from kiln.agents.curriculum.template import TemplateWriter


def _run(source: str) -> torch.Tensor:
    ns: dict = {}
    exec(compile(source, "<module>", "exec"), ns)  # noqa: S102 - kiln's own template output
    torch.manual_seed(0)
    return ns["Model"](*ns["get_init_inputs"]())(*ns["get_inputs"]())


def _task(ops: list[str], seed: int = 0) -> ProblemTask:
    cat = builtin_catalogue()
    specs = [cat.op(o) for o in ops]
    return ProblemTask(name="t", api_set=api_set_of(specs), ops=specs, seed=seed)


def test_every_family_composes_into_modules_that_run_with_their_stress_variant() -> None:
    cat = builtin_catalogue()
    pool = candidate_pool(cat, random.Random(3), device="cpu", size=40, max_ops=3)
    assert {f for s in pool for f in s.families} == set(cat.families)
    for i, aset in enumerate(pool):
        reply = TemplateWriter().write_problem(ProblemTask(name=f"m{i}", api_set=aset,
                                                           ops=[cat.op(o) for o in aset.ops], seed=i))
        assert reply.ok and reply.source, reply.error
        out = _run(reply.source)
        assert out.numel() <= 1 << 16
        variant = reply.stress[0].source
        assert static_problem_error(variant, reply.source) is None  # the same Model, verbatim
        assert _run(variant).shape != out.shape or variant != reply.source


def test_shapes_follow_the_ops() -> None:
    reply = TemplateWriter().write_problem(_task(["conv2d", "max_pool2d", "sum"]))
    assert reply.ok
    assert "nn.Conv2d(channels1, out1" in reply.source and "F.max_pool2d(x" in reply.source
    assert _run(reply.source).dim() == (4 if "keepdim=True" in reply.source else 3)


def test_same_task_same_module_and_incompatible_ops_are_refused() -> None:
    a, b = TemplateWriter().write_problem(_task(["linear", "gelu"], 7)), TemplateWriter().write_problem(_task(["linear", "gelu"], 7))
    assert a.source == b.source
    bad = TemplateWriter().write_problem(_task(["bmm", "conv2d"]))
    assert not bad.ok and "do not compose" in (bad.error or "")
