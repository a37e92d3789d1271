"""Issue 26, item 3: before any LLM call, a CPU run estimates what Triton's interpreter will cost and
refuses, in one line, a problem that cannot fit; `--shrink` halves the problem's size constants until
it fits, says what it changed, and records the original and the shrunk sizes (run.json, summary.json).
The problem is sized like KernelBench's 40_LayerNorm; the real file is used when it is at
third_party/KernelBench (a git-ignored checkout)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kiln.graphs.shrink import fit, size_constants, sizes_of

DATA = Path(__file__).parent / "data"
BIG = DATA / "layernorm_gpu_sized.py"
REAL = Path(__file__).parents[2] / "third_party" / "KernelBench" / "KernelBench" / "level1" / "40_LayerNorm.py"


def kiln_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kiln.evals.cli", "run", *args, "--quiet"], capture_output=True,
                          text=True, timeout=1200, env=os.environ.copy())


def test_size_constants_are_the_ones_get_inputs_reads() -> None:
    consts = size_constants(BIG.read_text())
    assert {k: [c.value for c in v] for k, v in consts.items()} == \
        {"batch_size": [16], "features": [64], "dim1": [256], "dim2": [256]}
    tuple_src = "n = 4096\nshape = (32768, 7)\ndef get_inputs():\n    return [shape, n]\ndef get_init_inputs():\n    return []\n"
    assert [c.value for c in size_constants(tuple_src)["shape"]] == [32768, 7]


def test_sizes_written_as_int_expressions_are_sizes_and_shrink_in_place(tmp_path: Path) -> None:
    """KernelBench's newer level-1 files write sizes as expressions (`N = 2048 * 2`, `K = 131072 * 8 # 1048576`)."""
    src = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, a, b, *rest):\n"
           "        return a @ b\n\nM = 256 * 8 # 2048\nK = 131072 * 8 # 1048576\nscale = 2.0 * 3\n"
           "shape = (1 << 4, 2 ** 3)\nother = M * 2\nheight = width = 64\ndepth, rows = 4, 48\n\n"
           "def get_inputs():\n    return [torch.rand(M, K), torch.rand(K, 1), scale, shape, other, height, width, depth, rows]\n\n"
           "def get_init_inputs():\n    return []\n")
    consts = size_constants(src)
    assert {k: [c.value for c in v] for k, v in consts.items()} == {"M": [2048], "K": [1048576], "shape": [16, 8],
                                                                 "height = width": [64], "depth": [4], "rows": [48]}
    path = tmp_path / "matvec.py"
    path.write_text(src)
    new, changed, (n_in, n_out) = fit(src, path, 200_000)
    assert n_in + n_out <= 200_000 and changed["K"][0] == 1048576 and changed["K"][1] < 1048576
    assert f"K = {changed['K'][1]} # 1048576" in new  # the expression replaced by its value, the comment kept
    assert "scale = 2.0 * 3" in new and "other = M * 2" in new  # not int literals: left as written
    compile(new, str(path), "exec")


def test_a_halving_the_problem_rejects_is_undone_and_equal_sizes_halve_together(tmp_path: Path) -> None:
    """`batch_size` and `input_shape` must agree (KernelBench's losses); `window` may not exceed the length."""
    src = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n"
           "    def __init__(self, window):\n        super().__init__()\n        self.window = window\n\n"
           "    def forward(self, a, b):\n        return F.avg_pool1d((a * b).unsqueeze(1), self.window)\n\n"
           "batch_size = 4096\ninput_shape = (4096,)\nwindow = 64\n\n"
           "def get_inputs():\n    return [torch.rand(batch_size, 64), torch.rand(*input_shape, 64)]\n\n"
           "def get_init_inputs():\n    return [window]\n")
    path = tmp_path / "pair.py"
    path.write_text(src)
    new, changed, (n_in, n_out) = fit(src, path, 1_000)
    assert changed["batch_size"] == changed["input_shape"] and changed["batch_size"][1] < 4096
    assert changed.get("window", [64, 64])[1] <= 64 and sizes_of(new, path) == (n_in, n_out)
    assert n_in + n_out <= 1_000 or changed["batch_size"][1] == 4  # as small as the sizes allow


def test_sizes_go_below_16_only_when_16_is_not_enough(tmp_path: Path) -> None:
    """A 3-D conv with batch, channels and three extents of 16 still holds a million elements."""
    src = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self, c):\n"
           "        super().__init__()\n        self.conv = nn.Conv3d(c, c, 3)\n\n    def forward(self, x):\n"
           "        return self.conv(x)\n\nbatch_size = 16\nchannels = 32\nextent = 64\n\n"
           "def get_inputs():\n    return [torch.rand(batch_size, channels, extent, extent, extent)]\n\n"
           "def get_init_inputs():\n    return [channels]\n")
    path = tmp_path / "conv3d.py"
    path.write_text(src)
    _, roomy, _ = fit(src, path, 2_000_000)
    assert roomy == {"channels": [32, 16], "extent": [64, 16]}  # 16 and above were enough: batch_size stays
    _, tight, (n_in, n_out) = fit(src, path, 20_000)
    assert n_in + n_out <= 20_000 and min(v[1] for v in tight.values()) >= 4  # a kernel of 3 needs an extent of 3+
    assert tight["extent"][1] >= 4 and "batch_size" in tight


FIXTURE_KB = Path(__file__).parents[1] / "fixtures" / "kernelbench_full" / "KernelBench"


@pytest.mark.parametrize(("real", "names"), [
    (FIXTURE_KB / "level1/98_KLDivLoss.py", {"batch_size", "input_shape"}),  # batch_size = 8192 * 2
    (FIXTURE_KB / "level2/4_Conv2d_Mish_Mish.py", {"batch_size", "in_channels", "out_channels", "height = width"}),
    (REAL.parent / "1_Square_matrix_multiplication_.py", {"N"}),  # N = 2048 * 2
    (REAL.parent / "100_HingeLoss.py", {"batch_size", "input_shape"}),  # must stay equal
], ids=lambda v: v.stem if isinstance(v, Path) else "")
def test_real_kernelbench_files_shrink(real: Path, names: set[str]) -> None:
    if not real.is_file():
        pytest.skip(f"no KernelBench checkout at {REAL.parents[2]}")
    new, changed, (n_in, n_out) = fit(real.read_text(), real, 120_000)
    assert set(changed) == names and n_in + n_out <= 120_000 and sizes_of(new, real) == (n_in, n_out)


def test_fit_halves_the_largest_until_the_sizes_fit() -> None:
    source = BIG.read_text()
    assert sizes_of(source, BIG) == (67_108_864, 67_108_864)  # on the meta device: nothing allocated
    new, changed, (n_in, n_out) = fit(source, BIG, 600_000)
    assert n_in + n_out <= 600_000 and sizes_of(new, BIG) == (n_in, n_out)
    assert changed == {"features": [64, 16], "dim1": [256, 32], "dim2": [256, 32]}
    assert "kernel_hint = 3" in new and "batch_size = 16" in new and "dim1 = 32" in new
    assert [ln for ln in new.splitlines() if "=" not in ln] == [ln for ln in source.splitlines() if "=" not in ln]


def test_a_problem_too_large_for_the_interpreter_is_one_line(tmp_path: Path) -> None:
    done = kiln_run(str(BIG), "--device", "cpu", "--out", str(tmp_path / "run"))
    err = done.stderr.strip()
    assert done.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "under Triton's interpreter: about" in err and "rerun with --shrink" in err
    assert not (tmp_path / "run").exists()  # refused before the run directory, and before any LLM call


@pytest.mark.slow
def test_shrink_runs_it_says_so_and_records_both_sizes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = kiln_run(str(BIG), "--device", "cpu", "--shrink", "--max-iters", "1", "--out", str(run))
    # how far it shrinks follows this machine's calibrated interpreter speed: read the sizes it chose
    said = re.search(r"kiln: --shrink: features 64 -> (\d+), dim1 256 -> (\d+), dim2 256 -> (\d+) "
                     r"\(input 67,108,864 -> ([\d,]+) elements", done.stderr)
    assert said, done.stderr[-2000:]
    features, dim1, dim2, n_after = (int(g.replace(",", "")) for g in said.groups())
    assert features < 64 and dim1 < 256 and dim2 < 256 and n_after == 16 * features * dim1 * dim2
    assert "note: checked at smaller sizes" in done.stdout, done.stdout[-1500:]
    opts, summary = json.loads((run / "run.json").read_text()), json.loads((run / "summary.json").read_text())
    for rec in (opts["shrunk"], summary["shrunk"]):
        assert rec["original_problem"] == str(BIG) and rec["input_numel_before"] == 67_108_864
        assert rec["input_numel_after"] == n_after and rec["estimate_s_after"] < rec["estimate_s_before"]
    copy = Path(opts["problem"])
    assert copy.parent == run / "problem_shrunk" and f"dim1 = {dim1}" in copy.read_text()
    assert "features = 64" in BIG.read_text()  # the user's file is never changed
    first = json.loads((run / "candidates" / "c0001" / "check.json").read_text())
    assert first["status"] == "ok", first["reasons"]  # at the shrunk sizes the check fits its budget
    # (whether the stress round's larger cases fit too is the Proposer's sizing, not --shrink's)


def test_the_real_40_layernorm() -> None:
    if not REAL.is_file():
        pytest.skip(f"no KernelBench checkout at {REAL.parents[2]} (ln -s a KernelBench clone there)")
    from kiln.graphs.interp import estimate
    from kiln.tools.records import CheckOptions

    source = REAL.read_text()
    sizes = sizes_of(source, REAL)
    assert sizes == (67_108_864, 67_108_864)
    assert not estimate(source, sizes, CheckOptions().trials, 90.0).fits
    new, changed, small = fit(source, REAL, 600_000)
    assert set(changed) <= {"batch_size", "features", "dim1", "dim2"} and sum(small) <= 600_000
    assert estimate(new, small, CheckOptions().trials, 90.0).fits
