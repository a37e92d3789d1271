"""Every record kiln writes round-trips through JSON with NaN, +-Inf and huge values in it.

A kernel that leaves elements unwritten puts NaN into its check record (the mismatch's `actual`).
pydantic's default writes NaN as `null`, which a float field then refuses to read back: the run
died with `bad option correctness.trials.0.mismatch.first.0.actual`. This test builds an instance
of every record type with extreme values in every numeric field it can, writes it, reads it back
and compares, so a new record (or a new base config) cannot bring the bug back.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import types
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

MODULES = [
    "kiln.tools.records", "kiln.tools.profile.records", "kiln.agents.base", "kiln.agents.llm.usage",
    "kiln.agents.llm.transport", "kiln.graphs.state", "kiln.graphs.summary", "kiln.graphs.context",
    "kiln.graphs.reward", "kiln.graphs.rules", "kiln.evals.batch.metrics", "kiln.evals.batch.jobs", "kiln.evals.batch.run",
    "kiln.evals.batch.compare",
]
FLOATS = [math.nan, math.inf, -math.inf, 1.7e308, -5e-324, 0.0]
INTS = [2**70, -(2**63), 0]


def record_types() -> list[type[BaseModel]]:
    out: dict[str, type[BaseModel]] = {}
    for name in MODULES:
        mod = importlib.import_module(name)
        for _, obj in inspect.getmembers(mod, inspect.isclass):
            if issubclass(obj, BaseModel) and obj.__module__ == name and not obj.model_config.get(
                    "arbitrary_types_allowed"):
                out[f"{name}.{obj.__name__}"] = obj
    return [out[k] for k in sorted(out)]


def value_for(tp: object, k: int, depth: int = 0) -> object:
    """An extreme value of type `tp` (the k-th of each kind, so fields get different ones)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return value_for(args[0], k, depth)
    if origin in (typing.Union, types.UnionType):
        real = [a for a in args if a is not type(None)]
        return value_for(real[0], k, depth)
    if origin is typing.Literal:
        return args[k % len(args)]
    if origin in (list, tuple, set):
        return [] if depth > 3 else [value_for(args[0] if args else float, k + 1, depth + 1)]
    if origin is dict:
        return {} if depth > 3 else {"key": value_for(args[1] if len(args) > 1 else float, k + 1, depth + 1)}
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return extreme_dict(tp, k, depth + 1)
    return scalar(tp, k)


def scalar(tp: object, k: int) -> object:
    if tp in (float, typing.Any, object):
        return FLOATS[k % len(FLOATS)]
    if tp is int:
        return INTS[k % len(INTS)]
    return {bool: bool(k % 2), str: f"s{k}", Path: "/tmp/x"}.get(tp)


def extreme_dict(model: type[BaseModel], k: int = 0, depth: int = 0) -> dict:
    hints = typing.get_type_hints(model, include_extras=True)
    return {name: value_for(hints[name], k + i, depth) for i, name in enumerate(model.model_fields)}


def build(model: type[BaseModel]) -> BaseModel:
    """An instance with extreme values wherever the field's own constraints allow them."""
    data = extreme_dict(model)
    for _ in range(60):
        try:
            return model.model_validate(data)
        except ValidationError as err:
            for e in err.errors():
                _soften(data, list(e["loc"]), model)
    raise AssertionError(f"could not build {model.__name__}")


def _soften(data: object, loc: list, model: type[BaseModel]) -> None:
    """A constrained field (gt=0, ge=1, a pattern) gets an ordinary value instead."""
    for key in loc[:-1]:
        if isinstance(data, dict) and key in data or isinstance(data, list) and isinstance(key, int) and key < len(data):
            data = data[key]
        else:
            return
    last = loc[-1] if loc else None
    if isinstance(data, dict) and last in data:
        current = data[last]
        data[last] = 1 if isinstance(current, int) and not isinstance(current, bool) else \
            1.0 if isinstance(current, float) else None if current is not None else 1.0
    elif isinstance(data, dict) and last is not None and not isinstance(last, int):
        data[last] = 1.0


JSON_NAMES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def same(a: object, b: object) -> bool:
    """Equal, NaN included. An `Any` field (free-form `extra` data) reads a non-finite float back as
    its JSON name ("NaN"), which still loads: that counts as equal."""
    a, b = (JSON_NAMES.get(x, x) if isinstance(x, str) else x for x in (a, b))
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[x], b[x]) for x in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def count_nonfinite(obj: object) -> int:
    if isinstance(obj, float):
        return int(not math.isfinite(obj))
    if isinstance(obj, dict):
        return sum(count_nonfinite(v) for v in obj.values())
    if isinstance(obj, list):
        return sum(count_nonfinite(v) for v in obj)
    return 0


TYPES = record_types()


def test_every_layer_has_records() -> None:
    assert len(TYPES) > 40
    names = {t.__name__ for t in TYPES}
    assert {"CheckRecord", "Candidate", "RunSummary", "SampleOutcome", "JudgeDecision", "ProfileReport"} <= names


@pytest.mark.parametrize("model", TYPES, ids=lambda t: t.__name__)
def test_extreme_values_round_trip(model: type[BaseModel]) -> None:
    rec = build(model)
    text = rec.model_dump_json()
    json.loads(text)  # standard JSON: no bare NaN / Infinity tokens
    assert "NaN," not in text and "Infinity," not in text
    back = model.model_validate_json(text)
    assert same(back.model_dump(), rec.model_dump()), model.__name__


def test_nan_mismatch_check_record_round_trips() -> None:
    """The record from the issue: a kernel that left output elements unwritten."""
    from kiln.tools.records import CheckRecord

    data = {"problem": "p.py", "candidate": "c.py", "status": "incorrect", "correctness": {
        "atol": 1e-4, "rtol": 1e-4, "n_trials": 1, "trials": [{
            "case": "problem", "distribution": "x1", "trial": 0, "passed": False, "mismatch": {
                "max_abs_err": math.nan, "max_rel_err": math.inf,
                "first": [{"index": [0, 7], "expected": 1.5, "actual": math.nan},
                          {"index": [0, 8], "expected": -math.inf, "actual": 1e308 * 10}]}}]}}
    rec = CheckRecord.model_validate(data)
    back = CheckRecord.model_validate_json(rec.model_dump_json(indent=2))
    first = back.correctness.trials[0].mismatch.first
    assert math.isnan(first[0].actual) and first[1].expected == -math.inf and first[1].actual == math.inf
    assert math.isnan(back.correctness.trials[0].mismatch.max_abs_err)


def test_extreme_instances_really_hold_nonfinite_values() -> None:
    """The generator is not vacuous: most record types carry a NaN or an infinity somewhere."""
    with_nonfinite = [t for t in TYPES if count_nonfinite(build(t).model_dump())]
    assert len(with_nonfinite) >= 15
