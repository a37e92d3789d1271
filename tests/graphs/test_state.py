"""The state schema's promises: a docstring and an explicit reducer per field, records that
round-trip through JSON, and a checkpointer that loads exactly the types the schema names."""

from __future__ import annotations

import ast
import inspect
import logging
import typing

from pydantic import BaseModel

from kiln.agents.base import JudgeDecision, Usage
from kiln.graphs import state as state_mod
from kiln.graphs.persist import open_checkpointer, state_allowlist
from kiln.graphs.state import Candidate, ProfileNote, RunState, StressCase, TimeEntry, TreeStats


def test_every_state_field_has_a_docstring_and_a_reducer():
    tree = ast.parse(inspect.getsource(state_mod))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RunState")
    body = cls.body
    fields = [n.target.id for n in body if isinstance(n, ast.AnnAssign)]
    for i, node in enumerate(body):
        if isinstance(node, ast.AnnAssign):
            doc = body[i + 1] if i + 1 < len(body) else None
            assert isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant), node.target.id
            assert "\n" not in doc.value.value.strip()
    hints = typing.get_type_hints(RunState, include_extras=True)
    assert set(hints) == set(fields)
    for name, hint in hints.items():
        assert typing.get_origin(hint) is typing.Annotated, name
        assert callable(hint.__metadata__[0]), name


def _sample() -> dict:
    return {
        "candidates": {"c0001": Candidate(id="c0001", iteration=1, mode="generate", reward=0.5)},
        "decisions": {"c0001|x": JudgeDecision(mode="correction", diagnosis="d", next="repair")},
        "usage": [Usage(role="coder", input_tokens=3)],
        "cases": [StressCase(name="n", path="cases/n.py", valid=True, round=1)],
        "times": [TimeEntry(iteration=1, kind="llm", seconds=0.5)],
        "profiles": {"c0001": ProfileNote(candidate="c0001", skipped="cpu")},
        "tree": {"root": TreeStats(visits=1, value_sum=0.5)},
    }


def test_records_round_trip_through_json():
    for value in _sample().values():
        items = value.values() if isinstance(value, dict) else value
        for rec in items:
            assert type(rec).model_validate_json(rec.model_dump_json()) == rec


class NotInSchema(BaseModel):
    x: int = 1


def test_checkpointer_loads_schema_types_and_blocks_others(tmp_path, caplog):
    allow = state_allowlist()
    assert ("kiln.graphs.state", "Candidate") in allow and ("kiln.agents.base", "JudgeDecision") in allow
    serde = open_checkpointer(tmp_path).serde
    with caplog.at_level(logging.WARNING):
        back = serde.loads_typed(serde.dumps_typed(_sample()))
    assert back == _sample()
    assert not [r for r in caplog.records if "unregistered" in r.getMessage()]
    blocked = serde.loads_typed(serde.dumps_typed({"x": NotInSchema()}))
    assert not isinstance(blocked["x"], NotInSchema)


def test_progress_folds_stream_parts_into_the_live_numbers():
    from rich.console import Console

    from kiln.graphs.progress import Progress

    p = Progress(console=Console(file=open("/dev/null", "w")), live=False)  # noqa: SIM115 - closed with the process
    cand = Candidate(id="c0001", iteration=1, mode="generate", correct=True, speedup_vs_eager=1.7)
    p.feed({"type": "custom", "ns": (), "data": {"stage": "code", "iteration": 1, "mode": "generate"}})
    assert (p.stage, p.iteration) == ("code", 1)
    p.feed({"type": "updates", "ns": (), "data": {"code": {"iteration": 1, "candidates": {"c0001": cand},
                                                          "usage": [Usage(input_tokens=10, output_tokens=5,
                                                                          cost_usd=0.01)]}}})
    p.feed({"type": "updates", "ns": (), "data": {"evaluate": {"best_id": "c0001"}}})
    assert (p.tokens, p.cost, p.best, p.best_speedup, p.best_correct) == (15, 0.01, "c0001", 1.7, True)
    assert len(p.render().renderables) == 2  # the live view: where the run is, what it has
    assert p.line() == "kiln run · iteration 1 · evaluate · best c0001 (correct, 1.70x vs eager) · tokens 15 · cost $0.0100"


def test_langgraph_json_points_at_a_compiled_graph():
    import importlib.util
    import json
    from pathlib import Path

    root = Path(__file__).parents[2]
    spec = json.loads((root / "langgraph.json").read_text())
    path, attr = spec["graphs"]["kiln"].split(":")
    mod_spec = importlib.util.spec_from_file_location("kiln_studio_entry", root / path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    drawn = getattr(mod, attr).get_graph()
    assert {"code", "evaluate", "profile", "judge", "propose", "finish"} <= set(drawn.nodes)
    edges = {(e.source, e.target) for e in drawn.edges}
    assert {("judge", "code"), ("judge", "propose"), ("judge", "finish"), ("evaluate", "finish")} <= edges


def test_a_checkpoint_written_before_stress_case_moved_to_agents_still_loads(tmp_path):
    from pydantic import Field

    class OldStressCase(BaseModel):  # graphs.state's own record before issue 27
        name: str
        path: str = Field(description="run-dir-relative case file")
        valid: bool
        reason: str = ""
        rationale: str = ""
        round: int

    OldStressCase.__module__, OldStressCase.__name__, OldStressCase.__qualname__ = (
        "kiln.graphs.state", "StressCase", "StressCase")
    serde = open_checkpointer(tmp_path).serde
    back = serde.loads_typed(serde.dumps_typed({"cases": [OldStressCase(name="n", path="cases/n.py", valid=True,
                                                                        round=1)]}))
    assert back["cases"] == [StressCase(name="n", path="cases/n.py", valid=True, round=1)]
