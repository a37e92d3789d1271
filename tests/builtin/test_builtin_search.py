"""The Coder's configuration search: generate, optimize along the Judge's knob, repair, exhaust."""

from __future__ import annotations

from pathlib import Path

from kiln.agents.base import CoderTask, GpuFacts
from kiln.agents.builtin import BuiltinCoder, space
from kiln.agents.builtin.source import read_header

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


SRC = (EXAMPLES / "softmax.py").read_text()
GPU = GpuFacts(device="cuda", name="H200", sm_count=132)


def _write(mode: str, best: str | None = None, last: str | None = None, feedback: str | None = None):
    return BuiltinCoder().write(CoderTask(mode=mode, problem_name="softmax", problem_src=SRC, best_src=best,
                                          last_src=last, feedback=feedback, gpu=GPU))  # fmt: skip


def test_generate_uses_the_measured_default_then_the_search_visits_distinct_configs() -> None:
    first = _write("generate")
    assert first.ok and first.source
    head = read_header(first.source)
    assert head is not None and head.knobs == space.DEFAULTS["row"]
    seen = [space.key(head.knobs)]
    best = last = first.source
    for _ in range(space.MAX_VISITED - 1):
        r = _write("optimize", best=best, last=last, feedback="knob: num_warps up")
        assert r.ok and r.source, r.error
        last = r.source
        h = read_header(last)
        assert h is not None and space.key(h.knobs) not in seen
        seen.append(space.key(h.knobs))
        assert len(h.visited) == len(seen)
    r = _write("optimize", best=best, last=last)
    assert not r.ok and (r.error or "").startswith("search exhausted")


def test_optimize_follows_the_named_knob_from_the_best_candidate() -> None:
    best = _write("generate").source
    r = _write("optimize", best=best, last=best, feedback="Raise warps.\nknob: num_warps up")
    h = read_header(r.source)
    assert h is not None and h.knobs == space.DEFAULTS["row"] | {"num_warps": 16}
    r = _write("optimize", best=best, last=r.source, feedback="knob: tile down")
    h = read_header(r.source)
    assert h is not None and h.knobs == space.DEFAULTS["row"] | {"tile": 4096}


def test_optimize_takes_an_explicit_config_line() -> None:
    best = _write("generate").source
    cfg = '{"num_stages": 2, "num_warps": 4, "persistent": 1, "tile": 2048}'
    r = _write("optimize", best=best, last=best, feedback=f"config: {cfg}")
    h = read_header(r.source)
    assert h is not None and space.key(h.knobs) == cfg


def test_repair_after_a_resource_error_shrinks_the_tile_and_never_repeats() -> None:
    last = _write("generate").source
    r = _write("repair", last=last, feedback="triton OutOfResources: shared memory, Required: 300000")
    h = read_header(r.source)
    assert r.ok and h is not None and h.knobs["tile"] < space.DEFAULTS["row"]["tile"]
    r2 = _write("repair", last=r.source, feedback="mismatch at out[3]")
    h2 = read_header(r2.source)
    assert h2 is not None and h2.knobs not in (h.knobs, space.DEFAULTS["row"])


def test_repair_of_a_foreign_candidate_regenerates_from_the_templates() -> None:
    r = _write("repair", last="import torch\n# an LLM's kernel", feedback="compile error")
    h = read_header(r.source)
    assert r.ok and h is not None and h.knobs == space.DEFAULTS["row"]


def test_generated_source_is_deterministic() -> None:
    assert _write("generate").source == _write("generate").source
