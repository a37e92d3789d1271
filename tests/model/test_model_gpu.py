"""Whole-model mode on a GPU (`-m gpu`, the H200): the patch runtime's overhead, the lean launcher,
the never-slower rule end to end, and a budgeted `kiln model` run that ends in time."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from kiln.evals.model import launch, overhead
from kiln.evals.model.e2e import run_e2e
from kiln.evals.model.targets import Target
from tests.model.conftest import RESBLOCK, kiln
from tests.model.test_model_inmodel import Net, _bundle

pytestmark = [pytest.mark.gpu, pytest.mark.serial]


def test_patch_runtime_overhead_is_small() -> None:
    """Per call on the host: a call passing through a patched scope, the guard, and the runtime's
    wrapper around a kernel (patched call minus the kernel's own launch)."""
    p = overhead.probe()  # this 2-core CPU machine, loaded: 3-5 us each; a free H200 host is faster
    assert p["passthrough_us"] < 5.0, p
    assert p["guard_us"] < 5.0, p
    assert p["patched_calls"] > 0, p
    launch_us = p.get("kernel_lean_us", p["kernel_triton_us"])
    assert p["patched_call_us"] - launch_us < 20.0, p
    if p["lean_available"]:
        assert p["kernel_lean_us"] <= p["kernel_triton_us"] * 1.05, p
    assert p["gn_silu_max_abs_err"] < 1e-3 and p["gn_silu_speedup"] >= 1.0, p  # never slower than eager


def test_lean_launch_gives_triton_results(tmp_path: Path) -> None:
    if not launch.available():
        pytest.skip("Triton < 3.3: bundles launch through Triton's own path")
    mod = overhead.builtin_kernel(overhead.GN_SILU, tmp_path, "cuda")
    k = mod.ModelNew().cuda()
    shapes = [(2, 320, 64, 64), (1, 320, 32, 32), (2, 320, 64, 64)]
    inputs = [torch.randn(s, device="cuda") for s in shapes]
    with torch.no_grad():
        plain = [k(x) for x in inputs]
        assert launch.lean(mod) >= 1
        lean = [k(x) for x in inputs] + [k(x) for x in inputs]
    for a, b in zip(plain + plain, lean, strict=True):
        assert torch.equal(a, b)
    leans = [v for v in vars(mod).values() if isinstance(v, launch.LeanKernel)]
    assert sum(v.lean_calls for v in leans) > 0, [v.broken for v in leans]


def test_a_kernel_that_loses_in_the_model_is_unpatched_on_gpu(tmp_path: Path) -> None:
    torch.manual_seed(0)
    t = Target(name="net", model=Net().cuda().eval(), args=(torch.randn(256, 8192, device="cuda"),))
    b, ids = _bundle(tmp_path, t)
    groups = sorted(ids.values())
    rec, keep = run_e2e(t, b, groups, seeds=2, tol=1e-3, device="cuda",
                        share={g: 0.3 for g in groups}, faster_alone=set(groups))
    assert rec.passed and rec.measured
    assert ids["gelu"] not in keep and any(d.startswith(ids["gelu"] + ":") for d in rec.dropped)
    sp = rec.speedups.get("patched_vs_eager")
    assert not keep or (sp is not None and sp.value >= 1.0)
    assert {lat.variant for lat in rec.latency} == {"eager", "patched", "compile", "compile_patched"}
    assert rec.peak_bytes["eager"] > 0 and rec.in_model[ids["gelu"]].verdict == "slower"


def test_budgeted_run_on_gpu_ends_in_time(tmp_path: Path) -> None:
    out = tmp_path / "run"
    t0 = time.monotonic()
    proc = kiln("model", RESBLOCK, "--device", "cuda", "--budget-minutes", "2", "--max-iters", "2",
                "--out", str(out), cwd=tmp_path, timeout_s=400, interpret=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert time.monotonic() - t0 <= 126.0
    r = json.loads((out / "model.json").read_text())
    assert r["profile"]["method"] == "torch.profiler" and "kernel time" in r["profile"]["share_of"]
    singles = [g for g in r["profile"]["groups"] if g["kind"] != "fused"]
    assert all(g["share"] <= 1.0 for g in singles) and sum(g["share"] for g in singles) <= 1.0 + 1e-6
    assert r["budget_note"].startswith("--budget-minutes 2")
    if r["e2e"]:
        assert r["e2e"]["measured"]
        sp = r["e2e"]["speedups"].get("patched_vs_eager")
        assert sp is None or sp["value"] >= 1.0  # never slower than eager
