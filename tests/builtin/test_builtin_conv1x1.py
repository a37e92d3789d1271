"""1x1 convolutions (stride 1, padding 0, one group) are batched GEMMs on the NCDHW tensors in place
(gen_conv1x1.py): out[n] = W @ x[n] over the flattened positions, no relayout copy. Under the
interpreter against PyTorch: 1-D, 2-D and 3-D, bias on and off, batch 1 and 3, 1023 positions, output
channels that are not a multiple of the channel tile, input channels past the one-tile K (a K loop),
a channels-last input, a fused epilogue that reads a residual per position, 1x1 convs inside a
pipeline; runs of several position tiles per program with a short last run. Strided, padded and
grouped 1x1 convs keep the implicit-GEMM template. KernelBench's 87 (unchanged file) takes the GEMM
with no relayout, and its kernel compiles for sm_90 with no register spills."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import triton

from kiln.agents.base import CoderTask, GpuFacts
from kiln.agents.builtin import BuiltinCoder, gen_conv1x1, space

HERE = Path(__file__).parent / "conv1x1"
KB1 = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench_full" / "KernelBench" / "level1"
KB87 = KB1 / "87_conv_pointwise_2D.py"
KEEP = "c_strided_grouped_keep.py"  # stride 2, then padding 1 with 2 groups: the implicit GEMM
RELAYOUT = ("_kiln_cl5(", "permute(", ".contiguous(", "_kiln_chan_inner[")


def _forward(src: str) -> str:
    return src[src.index("    def forward(") :]


def _gpu_source(path: Path) -> str:
    """The Coder's first candidate as written for a GPU (the GPU's first configuration)."""
    task = CoderTask(mode="generate", problem_name=path.stem, problem_src=path.read_text(), gpu=GpuFacts(device="cuda"))
    reply = BuiltinCoder().write(task)
    assert reply.ok and reply.source, reply.error
    return reply.source


def test_1x1_convs_are_batched_gemms_and_match(tmp_path: Path, gen, run_selfcheck) -> None:
    files = sorted(HERE.glob("*.py"))
    assert len(files) == 6
    pairs = [(p, gen(p, tmp_path)) for p in files]
    for p, cand in pairs:
        src, fwd = cand.read_text(), _forward(cand.read_text())
        if p.name == KEEP:
            assert "conv1x1" not in src and fwd.count("_kiln_s0_conv[grid]") == 1, p.name
            continue
        launches = re.findall(r"(_kiln_(?:s\d+_)?conv1x1)\[grid\]\(x3, w5, out", src)
        assert launches == (["_kiln_s1_conv1x1", "_kiln_s2_conv1x1"] if p.name.startswith("p_") else ["_kiln_conv1x1"]), p.name
        bodies = [m for m in fwd.split("\n    def ") if "conv1x1[grid]" in m]  # forward, or the stage methods
        assert "_kiln_conv[" not in src and not any(r in m for r in RELAYOUT for m in bodies), p.name
    results = run_selfcheck(pairs)
    assert [r["ok"] for r in results] == [True] * len(files), [r for r in results if not r["ok"]]


RUNS = """
import importlib.util, json, sys, torch, triton
out = {}
for prob_path, cand_path in zip(sys.argv[1::2], sys.argv[2::2]):
    mods = []
    for name, path in (("prob", prob_path), ("cand", cand_path)):
        spec = importlib.util.spec_from_file_location(name, path)
        mods.append(importlib.util.module_from_spec(spec))
        spec.loader.exec_module(mods[-1])
    prob, cand = mods
    kern, names, seen = cand._kiln_conv1x1, cand._kiln_conv1x1.arg_names, []

    class Runs:  # the same launch with PER position tiles a program, the grid recomputed to match
        per = 1

        def __getitem__(self, grid):
            def launch(*a, **k):
                a = list(a)
                a[names.index("PER")] = self.per
                tiles_s = triton.cdiv(a[names.index("S")], k["BLOCK_N"])
                grid = (a[names.index("TILES_M")] * triton.cdiv(tiles_s, self.per) * a[0].shape[0],)
                seen.append((tiles_s, grid[0]))
                return kern[grid](*a, **k)
            return launch

    runs = cand._kiln_conv1x1 = Runs()
    torch.manual_seed(0)
    ref = prob.Model(*prob.get_init_inputs())
    new = cand.ModelNew(*prob.get_init_inputs())
    new.load_state_dict(ref.state_dict())
    x = prob.get_inputs()
    errs = {}
    for per in (1, 2, 3, 5):
        runs.per = per
        with torch.no_grad():
            got, want = new(*x), ref.double()(*[t.double() for t in x])
        errs[per] = float((got.double() - want).abs().max() / want.abs().max())
    out[prob_path] = {"errs": errs, "launches": seen}
print(json.dumps(out))
"""


def test_runs_of_position_tiles_cover_every_tile(tmp_path: Path, gen) -> None:
    """A program runs PER consecutive position tiles of one sample (the forward picks up to 32 on a GPU;
    1 at the interpreter's sizes): 1, 2, 3 and 5 tiles a run over 4 tiles a sample (a short last run,
    a run longer than the sample) give the same output, in the one-tile K path, the K loop and an
    epilogue that reads a residual per (d, h, w)."""
    names = ["c1d_one_k_nobias.py", "c2d_odd_general_k.py", "c3d_epilogue.py"]
    pairs = [str(p) for n in names for p in (HERE / n, gen(HERE / n, tmp_path))]
    proc = subprocess.run([sys.executable, "-c", RUNS, *pairs], env=dict(os.environ, TRITON_INTERPRET="1"),
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    for n in names:
        r = res[str(HERE / n)]
        assert all(e < 1e-5 for e in r["errs"].values()), (n, r)
    grids = [g for _, g in res[str(HERE / "c1d_one_k_nobias.py")]["launches"]]
    assert grids == [4, 2, 2, 1], grids  # S = 1023 in 4 tiles of 256 positions (CPU), one channel block


def test_a_wrong_1x1_conv_fails_the_selfcheck(tmp_path: Path, gen, run_selfcheck) -> None:
    """The checks above can fail: a run that skips its last position tile is caught."""
    prob = HERE / "c1d_one_k_nobias.py"
    cand = gen(prob, tmp_path)
    src = cand.read_text()
    assert "min(PER, tiles_s - first)" in src
    cand.write_text(src.replace("min(PER, tiles_s - first)", "min(PER, tiles_s - first - 1)"))
    (res,) = run_selfcheck([(prob, cand)])
    assert not res["ok"], res


def _tiles(src: str, **shape: int) -> dict:
    """The forward's tile lines run for a shape on a 132-SM GPU (an H200)."""
    fwd = _forward(src)
    lines = fwd[fwd.index("one_k = ") : fwd.index("prec = ")]
    scope = {"triton": triton, "_kiln_sm_count": lambda device: 132, "x3": types.SimpleNamespace(device=None)} | shape
    exec("\n".join(ln.strip() for ln in lines.splitlines()), scope)  # noqa: S102 - kiln's own generated lines
    return {k: scope[k] for k in ("one_k", "bm", "bn", "bk", "ns", "tiles_m", "tiles_s", "per")}


def test_kernelbench_87_reads_nchw_in_place() -> None:
    """The unchanged 87 (16 x 64 x 1024 x 1024 -> 128 channels): one GEMM launch on the input as given,
    no relayout; a program holds all 128 output channels (each x tile read once) and all 64 input
    channels (W's block loaded once), 32 runs of 128 positions, 4096 programs."""
    src = _gpu_source(KB87)
    fwd = _forward(src)
    assert json.loads(src.splitlines()[0].split(": ", 1)[1])["family"] == "conv"
    assert "x3 = x5.reshape(NB, CIN, S)" in fwd and fwd.count("[grid](") == 1
    assert "_kiln_conv1x1[grid](x3, w5, out, CIN, COUT, S," in fwd
    assert not any(r in fwd for r in RELAYOUT) and "def _kiln_conv(" not in src
    assert "prec = _kiln_f32_dot(x3, CIN, 'bf16x3')" in fwd  # bf16x3 on a GPU (K = 64), tf32x3 on the interpreter
    t = _tiles(src, CIN=64, COUT=128, S=1024 * 1024, NB=16)
    assert t == {"one_k": True, "bm": 128, "bn": 128, "bk": 64, "ns": 3, "tiles_m": 1, "tiles_s": 8192, "per": 32}, t
    assert _tiles(src, CIN=256, COUT=200, S=56 * 56, NB=8) | {"tiles_s": 0} == {  # a ResNet-style 1x1: the K loop
        "one_k": False, "bm": 128, "bn": 128, "bk": 16, "ns": 4, "tiles_m": 2, "tiles_s": 0, "per": 1}
    dws = _gpu_source(KB1 / "86_conv_depthwise_separable_2D.py")  # its pointwise stage reads the depthwise output
    assert "_kiln_s1_conv1x1[grid](x3, w5, out" in dws and "_kiln_cl5(" not in _forward(dws)


# --------------------------------------------------------------------------- sm_90, offline

CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
ALIGNED = {"S", "sxn", "sxc", "swo", "CIN"}  # 87: 1048576, 64 Mi, 1 Mi, 64, 64 (multiples of 16)


def _compile(fn, tmp: Path, bm: int, bn: int, bk: int, one_k: bool, prec: str, warps: int, stages: int,
             ptr: str = "*fp32") -> tuple[str, str]:  # fmt: skip
    """(PTX, cuobjdump's resource line) of the kernel for sm_90, specialised as Triton's launcher does
    for 87 (a position and a weight stride of 1 become constants, sizes divisible by 16)."""
    from triton.backends.compiler import GPUTarget

    consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "ONE_K": one_k, "PREC": prec, "sxs": 1, "swi": 1}
    sig = {a: "constexpr" if a in consts else (ptr if a.endswith("_ptr") else "i32") for a in fn.arg_names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(fn.arg_names) if a.endswith("_ptr") or a in ALIGNED}
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
    cubin = tmp / "k.cubin"
    cubin.write_bytes(kernel.asm["cubin"])
    usage = subprocess.run([str(CUOBJDUMP), "--dump-resource-usage", str(cubin)], capture_output=True, text=True).stdout
    found = re.search(r"REG:\d+ STACK:\d+", usage)
    assert found, usage
    return kernel.asm["ptx"], found.group(0)


def test_the_1x1_kernel_compiles_for_sm90_without_spills(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """87's kernel at the GPU's first configuration (128 channels x 128 positions x all 64 input
    channels, 8 warps, 3 stages), the K loop's (16-deep steps, 4 stages) and every autotune
    configuration: tensor-core MMAs (wgmma), the x tiles fetched by 16-byte async copies (the
    pipelined prefetch), 16-byte stores, and no register spills (cuobjdump's STACK is 0), in bf16x3 and
    tf32x3 (a pipeline's conv stage, K < 64), and for bf16 tensors."""
    if not os.access(CUOBJDUMP, os.X_OK):
        pytest.skip("Triton ships no cuobjdump here")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "k87.py"
    path.write_text(_gpu_source(KB87))
    spec = importlib.util.spec_from_file_location("k87_sm90", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    d, g = space.DEFAULTS["conv"], gen_conv1x1.GENERAL_TILES
    first = (d["block_n"], d["block_m"], gen_conv1x1.ONE_K_MAX, True)
    configs = [(*first, p, d["num_warps"], d["num_stages"]) for p in ("bf16x3", "tf32x3")]
    configs += [(d["block_n"], d["block_m"], g["block_k"], False, p, d["num_warps"], g["num_stages"]) for p in ("bf16x3", "tf32x3")]
    configs += [(d["block_n"], bn, gen_conv1x1.ONE_K_MAX, True, "bf16x3", w, s) for bn, w, s in gen_conv1x1.TUNED]
    for cfg in configs:
        ptx, usage = _compile(mod._kiln_conv1x1, tmp_path, *cfg)
        assert usage.endswith("STACK:0"), (cfg, usage)
        assert "wgmma.mma_async" in ptx and re.search(r"cp\.async\.cg\.shared\.global .*, 0x10", ptx), cfg
        assert re.search(r"st\.global(\.[\w:]+)*\.v4", ptx), cfg
    ptx, usage = _compile(mod._kiln_conv1x1, tmp_path, *first, "tf32", 8, 3, ptr="*bf16")
    assert usage.endswith("STACK:0") and "wgmma.mma_async" in ptx and "bf16" in ptx, usage
