"""Problems that need several kernels (a conv then a norm, pooling or a reduction over channels; two
GEMMs; views of computed tensors): the pipeline cuts the DAG into stages, each one family's kernel,
the earlier ones writing intermediates the later ones read (agents/builtin/pipeline.py).

Checked under the Triton interpreter on shrunk copies of KernelBench level-2 files (same code,
small sizes: tests/fixtures/kernelbench_shrunk/level2); the stage structure is checked on the
unchanged files (tests/fixtures/kernelbench_full)."""

from __future__ import annotations

from pathlib import Path

import pytest
from spatial_lib import LEVEL2 as PIPELINE  # same directory (pytest puts it on sys.path)

from kiln.agents.builtin.source import analyze

LEVEL2 = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench_full" / "KernelBench" / "level2"


def _stages(number: int) -> list[str]:
    an = analyze(next(LEVEL2.glob(f"{number}_*.py")).read_text())
    if an.family != "pipeline":
        return [an.family]
    return [s.plan.family if s.plan is not None else "view" for s in an.plan.stages]


@pytest.mark.parametrize(
    ("number", "stages"),
    [
        (1, ["conv"]),  # conv + ReLU + bias: one kernel, the epilogue fused
        (93, ["conv"]),  # transposed conv + add, min with torch.tensor(0.0), GELU, scale: one kernel
        (23, ["conv", "gnorm", "row"]),  # conv, group norm, mean over every dim
        (45, ["matmul", "matmul", "row"]),  # a GEMM's output feeds another GEMM, then logsumexp
        (52, ["conv", "chanstats", "elementwise"]),  # training-mode batch norm: statistics, then normalise
        (28, ["matmul", "row", "elementwise"]),  # unsqueeze/squeeze around instance norm: views, no kernel
        (92, ["conv", "gnorm", "row"]),  # the conv output is read twice (norm, residual): written once
    ],
)
def test_stages_of_unchanged_level2_files(number: int, stages: list[str]) -> None:
    assert _stages(number) == stages


def test_pipelines_match_the_reference(tmp_path: Path, gen, run_selfcheck) -> None:
    files = sorted(PIPELINE.glob("*.py"))
    pairs = [(p, gen(p, tmp_path)) for p in files]
    results = run_selfcheck(pairs)
    bad = [r for r in results if not r["ok"]]
    assert not bad, bad
    assert len(results) == len(files) >= 9


def test_a_pipeline_is_one_modelnew_with_a_method_per_stage(tmp_path: Path, gen) -> None:
    src = gen(PIPELINE / "92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp.py", tmp_path).read_text()
    fwd = src[src.index("    def forward(") : src.index("    def _kiln_s0(")]
    assert fwd.split("\n")[1:4] == ["        h0 = self._kiln_s0(x)", "        h1 = self._kiln_s1(h0)",
                                   "        return self._kiln_s2(h1)"]  # fmt: skip
    for k, kernel in enumerate(("_kiln_s0_conv", "_kiln_s1_gn_onepass", "_kiln_s2_row_onepass")):
        assert f"def {kernel}(" in src, kernel
        assert kernel in src[src.index(f"    def _kiln_s{k}(") :].split("\n    def ")[0]  # stage k launches it
