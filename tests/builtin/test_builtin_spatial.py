"""The conv, depthwise conv, pooling, attention and batch-statistics families: the generated kernels
match the reference under the Triton interpreter (one selfcheck subprocess) on shrunk copies of
KernelBench level-1 files (same code, small sizes: tests/fixtures/kernelbench_shrunk/level1) and on
problems for modes KernelBench leaves at their defaults (tests/builtin/spatial: groups with a
residual, ceil_mode and count_include_pad, adaptive pools, causal attention, a head dim past the
flash kernel)."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from spatial_lib import CHECKED, EXTRA, LEVEL1  # same directory (pytest puts it on sys.path)

from kiln.agents.builtin.source import analyze


def _families(path: Path) -> set[str]:
    an = analyze(path.read_text())
    stages = an.plan.stages if an.family == "pipeline" else []
    return {an.family} | {s.plan.family for s in stages if s.plan is not None}


def _forward_code(src: str) -> str:
    """ModelNew.forward and its stage methods: what runs on every call."""
    return src[src.index("    def forward(") :]


def test_spatial_families_match_the_reference(tmp_path: Path, gen, run_selfcheck) -> None:
    """Every problem here but those test_builtin_spatial_check runs through kiln's real check."""
    files = [p for p in sorted(LEVEL1.glob("*.py")) + sorted(EXTRA.glob("*.py")) if p not in CHECKED]
    pairs = [(p, gen(p, tmp_path)) for p in files]
    families = set().union(*(_families(p) for p in files + CHECKED))
    assert families >= {"conv", "dwconv", "pool", "attn", "chanstats", "pipeline"}, families
    results = run_selfcheck(pairs)
    bad = [r for r in results if not r["ok"]]
    assert not bad, bad
    assert len(results) == len(files) >= 16


def test_conv_kernels_are_implicit_gemms_and_honest(tmp_path: Path, gen) -> None:
    """fp32 convs are tl.dot GEMMs in bf16x3 on a GPU (tf32x3 where it can't: `_kiln_f32_dot`), never
    one TF32 product although PyTorch lets cuDNN use TF32 (one TF32 product failed kiln's rule on 29
    of 30 level-1 convs on the H200); transposed convs gather (no atomics:
    deterministic); depthwise is its own direct kernel; forward only allocates, views and launches."""
    conv = gen(LEVEL1 / "55_conv_standard_2D__asymmetric_input__square_kernel.py", tmp_path).read_text()
    assert torch.backends.cudnn.allow_tf32  # PyTorch's default
    assert "tl.dot(a, b, acc, input_precision=PREC)" in conv
    assert "prec = _kiln_f32_dot(x5, CIG * KD * KH * KW, 'bf16x3') if x5.dtype == torch.float32" in conv
    convt = gen(LEVEL1 / "75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded"
                "____dilated__.py", tmp_path).read_text()  # fmt: skip
    assert "def _kiln_convt(" in convt and "atomic" not in convt
    dw = gen(LEVEL1 / "82_conv_depthwise_2D_square_input_square_kernel.py", tmp_path).read_text()
    assert "def _kiln_dwconv(" in dw and "tl.dot(" not in dw
    for src in (conv, convt, dw):
        fwd = _forward_code(src)
        assert "[grid](" in fwd
        assert not re.search(r"\bF\.|torch\.nn\.functional|torch\.conv|self\.conv\w*\(|\.sum\(|torch\.(matmul|mean)", fwd)


def test_depthwise_separable_is_two_kernels_and_pointwise_one_flat_gemm(tmp_path: Path, gen) -> None:
    an = analyze((LEVEL1 / "86_conv_depthwise_separable_2D.py").read_text())
    assert an.family == "pipeline" and [s.plan.family for s in an.plan.stages] == ["dwconv", "conv"]
    assert "_kiln_s1_conv1x1[grid](x3, w5, out" in gen(LEVEL1 / "86_conv_depthwise_separable_2D.py", tmp_path).read_text()
    src = gen(LEVEL1 / "87_conv_pointwise_2D.py", tmp_path).read_text()
    assert "_kiln_conv1x1[grid](x3, w5, out" in src and "_kiln_cl5(x5)" not in src  # a GEMM on NCHW, no relayout


def test_a_wrong_conv_fails_the_selfcheck(tmp_path: Path, gen, run_selfcheck) -> None:
    """The check above can fail: a conv whose taps are shifted by one row is caught."""
    prob = LEVEL1 / "55_conv_standard_2D__asymmetric_input__square_kernel.py"
    cand = gen(prob, tmp_path)
    src = cand.read_text()
    assert "ih0 = oh * SH - PH\n" in src
    cand.write_text(src.replace("ih0 = oh * SH - PH\n", "ih0 = oh * SH - PH + 1\n"))
    (res,) = run_selfcheck([(prob, cand)])
    assert not res["ok"] and "differ" in res["error"]


def test_fp32_matmul_precision_follows_pytorchs_own(monkeypatch) -> None:
    """`auto`: bf16x3 (tf32x3 where the forward can't take it) unless the user allowed TF32 for fp32
    matmuls; NVIDIA_TF32_OVERRIDE=0 (cuBLAS kept off TF32) keeps the kernel off it too; an explicit
    precision is kept."""
    from kiln.agents.builtin.space import fp32_dot

    cublas = torch.backends.cuda.matmul
    saved = cublas.allow_tf32
    monkeypatch.delenv("NVIDIA_TF32_OVERRIDE", raising=False)
    try:
        cublas.allow_tf32 = False  # PyTorch's default
        assert (fp32_dot("auto"), fp32_dot("ieee"), fp32_dot("tf32")) == ("bf16x3", "ieee", "tf32")
        cublas.allow_tf32 = True
        assert fp32_dot("auto") == "tf32"
        monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
        assert fp32_dot("auto") == "bf16x3"
    finally:
        cublas.allow_tf32 = saved


def test_bf16x3_is_taken_only_where_it_can_run_and_the_sum_is_long(monkeypatch) -> None:
    """The generated forward's precision choice: bf16x3 on a CUDA tensor with Triton >= 3.6 and a dot
    of at least 64 products; tf32x3 on CPU (the interpreter has no bf16x3), with an older Triton and
    for short sums; any other precision is kept as asked."""
    import types

    import triton

    from kiln.agents.builtin.emit import F32_DOT_HELPER

    ns: dict = {"triton": triton}
    exec(F32_DOT_HELPER, ns)  # noqa: S102 - kiln's own helper text, as the generated module holds it
    choose = ns["_kiln_f32_dot"]
    gpu, cpu = types.SimpleNamespace(is_cuda=True), types.SimpleNamespace(is_cuda=False)
    monkeypatch.setattr(triton, "__version__", "3.6.0")
    assert choose(gpu, 576, "bf16x3") == "bf16x3"
    assert choose(gpu, 20, "bf16x3") == "tf32x3"  # a transposed grouped conv's short sum (75: 0.56 of its allowance)
    assert choose(cpu, 576, "bf16x3") == "tf32x3"
    assert choose(gpu, 576, "ieee") == "ieee" and choose(gpu, 576, "tf32x3") == "tf32x3"
    monkeypatch.setattr(triton, "__version__", "3.5.1")
    assert choose(gpu, 576, "bf16x3") == "tf32x3"
    monkeypatch.setattr(triton, "__version__", "3.10.0+git1234")
    assert choose(gpu, 576, "bf16x3") == "bf16x3"


def test_pipeline_stages_keep_tf32x3_and_single_ops_take_bf16x3(tmp_path: Path, gen) -> None:
    """A conv or GEMM stage of a pipeline (a norm after it can magnify its error past the reference's
    own: KernelBench level 2's 21 and 73 in TF32) asks for tf32x3; a conv alone asks for bf16x3, which the
    forward takes only where it can run."""
    from spatial_lib import SHRUNK

    alone = gen(LEVEL1 / "55_conv_standard_2D__asymmetric_input__square_kernel.py", tmp_path).read_text()
    assert "_kiln_f32_dot(x5, CIG * KD * KH * KW, 'bf16x3')" in alone
    piped = gen(SHRUNK / "level2" / "52_Conv2d_Activation_BatchNorm.py", tmp_path).read_text()
    assert "_kiln_f32_dot(x5, CIG * KD * KH * KW, 'tf32x3')" in piped and "'bf16x3')" not in piped
