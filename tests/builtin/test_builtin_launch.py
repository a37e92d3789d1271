"""Which kernels ModelNew.forward launches, and with what grid (launches recorded, not run)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

PROBLEMS = Path(__file__).resolve().parent / "problems"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class _Recorder:
    def __init__(self, name: str, calls: list) -> None:
        self.name, self.calls = name, calls

    def __getitem__(self, grid):
        return lambda *args, **kw: self.calls.append((self.name, tuple(grid), kw))


def _launches(problem: Path, tmp_path: Path, gen) -> list:
    cand = gen(problem, tmp_path)
    spec = importlib.util.spec_from_file_location(f"launch_{problem.stem}", cand)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    calls: list = []
    for name in [n for n in vars(mod) if n.startswith("_kiln_") and hasattr(getattr(mod, n), "fn")]:
        setattr(mod, name, _Recorder(name, calls))
    ns: dict = {}
    exec(problem.read_text(), ns)  # noqa: S102 - the test's own problem file
    mod.ModelNew(*ns["get_init_inputs"]())(*ns["get_inputs"]())
    return calls


LEVELS = ["_kiln_lvl1_split", "_kiln_lvl1_finish", "_kiln_lvl2_split", "_kiln_lvl2_finish", "_kiln_lvl_out"]


@pytest.mark.parametrize(("problem", "expected"), [
    ("split_full", ["_kiln_row_split", "_kiln_row_finish"]),
    ("split_cols", ["_kiln_row_split", "_kiln_row_finish"]),
    ("split_rows", ["_kiln_row_split", "_kiln_row_finish"]),
    ("log_softmax_long", LEVELS),  # 2 rows: too few to fill even the CPU's 4 "SMs"
    ("softmax_long_masked", ["_kiln_row_looped"]),
    ("layernorm_2d_long", ["_kiln_row_looped"]),
    ("layernorm_few_long_rows", LEVELS),
    ("max_middle", ["_kiln_row_onepass_c"]),
    ("softmax_middle", ["_kiln_row_onepass"]),
    ("broadcast_two", ["_kiln_ew_bcast"]),
    ("activations", ["_kiln_ew_flat"]),
])  # fmt: skip
def test_forward_picks_the_kernel_for_the_shape(problem: str, expected: list, tmp_path: Path, gen) -> None:
    calls = _launches(PROBLEMS / f"{problem}.py", tmp_path, gen)
    assert [c[0] for c in calls] == expected


def test_split_uses_many_programs_for_a_full_reduction(tmp_path: Path, gen) -> None:
    calls = _launches(PROBLEMS / "split_full.py", tmp_path, gen)
    (name, grid, _), (_, fgrid, fkw) = calls
    assert grid[0] == 1 and grid[1] > 1 and fgrid == (1,) and fkw["SP"] >= grid[1]


def test_few_long_rows_are_split_across_programs(tmp_path: Path, gen) -> None:
    """KernelBench's 40_LayerNorm in small (3 rows of 51200): every level's split kernel and the
    output kernel run (rows x slices) programs; the finish kernels one per row."""
    calls = _launches(PROBLEMS / "layernorm_few_long_rows.py", tmp_path, gen)
    grids = {name: grid for name, grid, _ in calls}
    assert grids["_kiln_lvl1_split"][0] == 3 and grids["_kiln_lvl1_split"][1] > 1
    assert grids["_kiln_lvl_out"] == grids["_kiln_lvl2_split"] == grids["_kiln_lvl1_split"]
    assert grids["_kiln_lvl1_finish"] == grids["_kiln_lvl2_finish"] == (3,)


def test_row_tile_follows_the_row_length(tmp_path: Path, gen) -> None:
    (call,) = _launches(EXAMPLES / "softmax.py", tmp_path, gen)
    assert call[0] == "_kiln_row_onepass" and call[2]["BLOCK_R"] == 1024
    assert call[2]["ROWS"] == 16 and call[2]["ROWS"] * call[1][0] == 64  # CPU tiles: 16384 elements
