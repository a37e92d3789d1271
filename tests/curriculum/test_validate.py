"""Generated modules are validated in the sandbox: refused with the reason, deduplicated by graph."""

from __future__ import annotations

from kiln.agents.curriculum.base import ProblemTask
from kiln.agents.curriculum.catalogue import builtin_catalogue
from kiln.agents.curriculum.sets import api_set_of
from kiln.agents.curriculum.template import TemplateWriter
from kiln.agents.curriculum.validate import Budget, graph_hash, judge, probe_modules, validate_module

BASE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

batch = 4
features = {features}


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.fc = nn.Linear(features, 33)

    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.rand(batch, features)]


def get_init_inputs():
    return [features]
'''


def module(body: str, features: int = 97) -> str:
    return BASE.format(body=body, features=features)


def test_the_probe_measures_and_the_parent_refuses_with_the_reason() -> None:
    sources = {
        "good": module("torch.relu(self.fc(x))"),
        "same_graph": module("F.relu(self.fc(x))", features=100),  # other spelling, size in the same bucket
        "other_graph": module("torch.sigmoid(self.fc(x))"),
        "zeros": module("self.fc(x) * 0"),
        "constant": module("torch.ones_like(self.fc(x))"),
        "random": module("F.dropout(self.fc(x), 0.5)"),
        "nan_on_negative": module("torch.sqrt(x)"),
        "raises": module("x @ x"),
    }
    budget = Budget.for_device("cpu")
    reports = dict(zip(sources, probe_modules(list(sources.values()), device="cpu"), strict=True))
    why = {name: judge(rep, budget) for name, rep in reports.items()}
    assert why["good"] is None and why["same_graph"] is None and why["other_graph"] is None
    assert graph_hash(reports["good"].graph) == graph_hash(reports["same_graph"].graph)
    assert graph_hash(reports["good"].graph) != graph_hash(reports["other_graph"].graph)
    assert why["zeros"].startswith("degenerate:")  # all-zero output: weight-independent and near-zero, either is named
    assert "degenerate.near-zero" in why["zeros"] or "degenerate.weight-independent" in why["zeros"]
    assert "degenerate" in why["constant"]
    assert why["random"].startswith("nondeterministic")
    assert why["nan_on_negative"] == "non-finite outputs under the neg inputs"
    assert why["raises"].startswith("does not run: RuntimeError")
    assert judge(reports["good"], budget.model_copy(update={"time_ms": 1e-6})).startswith("too slow")
    assert judge(reports["good"], budget.model_copy(update={"memory_bytes": 1})).startswith("too large")


def test_a_template_module_and_its_stress_variant_are_accepted() -> None:
    cat = builtin_catalogue()
    ops = [cat.op("layer_norm"), cat.op("gelu")]
    reply = TemplateWriter().write_problem(ProblemTask(name="m", api_set=api_set_of(ops), ops=ops, seed=1))
    verdict = validate_module(reply.source, reply.stress, device="cpu", budget=Budget.for_device("cpu"))
    assert verdict.accepted and verdict.graph_hash and verdict.stress == ["m_odd"]
    assert type(verdict).model_validate_json(verdict.model_dump_json()) == verdict


def test_not_a_module_is_refused_before_anything_runs() -> None:
    verdict = validate_module("import os\nos.system('true')\n", [], device="cpu", budget=Budget.for_device("cpu"))
    assert not verdict.accepted and verdict.probe is None
    assert verdict.reason.startswith("not a problem module") and "get_inputs" in verdict.reason
