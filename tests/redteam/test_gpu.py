"""GPU-only attacks (run on the H200: `-m gpu`): forged timing fields in replies (from Python) and
a timing harness rewritten to defer the work (from C++ through the Python C API), the eager baseline slowed by GPU contention
while it is timed, the peaks and baseline caches poisoned, a cuBLAS kernel claimed by name, work
hidden on a side stream, native host code with side effects, and the CPU's accounting escapes run
on the device. `executed-anyway` cases run what the allowlist refuses (`run_rejected`), to test the
layers behind it: the C++ route shows a candidate can get there.

Timing claims are checked against the test's own measurement: the test times the honest GEMM the
attacks ride on, and eager, in its own process with CUDA events, and kiln's figures must agree
within a factor of 1.5 (the attacks move them by 2.4x to tens of x)."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

import pytest
import torch
from redteam_lib import (
    MATMUL_GPU,
    RELU_GPU,
    assert_contained,
    assert_rejected,
    candidate,
    check,
    reject_rules,
    tcp_sink,
)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
GPU = {"device": "cuda", "timeout_s": 300}
AGREE = 1.5  # kiln's time over the test's own (or the inverse) at most this


def _median_us(fn, args: tuple, n: int = 30) -> float:
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def _true_times(dest: Path) -> tuple[float, float]:
    """(honest GEMM, eager torch.matmul) per call, measured here, in microseconds."""
    path = candidate("gpu_matmul", dest)
    spec = importlib.util.spec_from_file_location("redteam_gpu_matmul", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    a, b = (torch.randn(2048, 2048, device="cuda") for _ in range(2))
    with torch.no_grad():
        return _median_us(mod.ModelNew(), (a, b)), _median_us(torch.matmul, (a, b))


def _agrees(reported: float, true: float) -> bool:
    return 1 / AGREE < reported / true < AGREE


def test_forged_timing_is_not_believed(user):
    """The Python route to kiln's worker (`torch.sys`): refused by the allowlist on main."""
    rec = check(candidate("g_flatter_samples", user / "project"), problem=MATMUL_GPU, **GPU)
    if rec.status != "ok":
        assert_rejected(rec, "static.", "timing.", "runtime.")
        return
    cand_us, eager_us = _true_times(user / "control")
    reported = rec.timing.candidate.median_us
    assert _agrees(reported, cand_us), f"kiln says {reported:.0f} us, the kernel takes {cand_us:.0f} us"
    speedup = rec.timing.speedups["eager"].value
    assert _agrees(speedup, eager_us / cand_us), f"kiln says {speedup:.2f}x, it is {eager_us / cand_us:.2f}x"


@pytest.mark.parametrize("run_rejected", [False, True], ids=["as-is", "executed-anyway"])
def test_deferred_work_from_native_code_is_charged(user, run_rejected):
    """The C++ route, executed anyway: the harness rewritten so the lap computes nothing and the commit
    does the work; kiln's figure must still agree with the naive GEMM's true time (milliseconds a call)."""
    rec = check(candidate("g_cpp_pyrun_flatter", user / "project"), problem=MATMUL_GPU, compile_timeout_s=300,
                run_rejected=run_rejected, **GPU)
    if not run_rejected:
        assert_rejected(rec, "static.")
        return
    assert rec.timing and rec.timing.measured, rec.reasons
    assert rec.integrity.timing.deferred_us_per_call > 0
    # the oracle: an fp32 CUDA-core GEMM of 2048^3 cannot beat the H200's 67 TFLOP/s fp32 peak; the lap
    # alone (nothing computed) takes tens of microseconds
    floor_us = 2 * 2048**3 / 67e12 * 1e6
    assert rec.timing.candidate.median_us > floor_us, (rec.timing.candidate.median_us, floor_us)


@pytest.mark.parametrize("run_rejected", [False, True], ids=["as-is", "executed-anyway"])
def test_eager_baseline_is_timed_honestly(user, run_rejected):
    rec = check(candidate("g_slow_baseline", user / "project"), problem=MATMUL_GPU, run_rejected=run_rejected, **GPU)
    if not run_rejected:
        assert_rejected(rec, "static.", "timing.")
        return
    assert rec.timing and rec.timing.measured and "eager" in rec.timing.baselines, rec.reasons
    _, eager_us = _true_times(user / "control")
    reported = rec.timing.baselines["eager"].median_us
    assert _agrees(reported, eager_us), f"kiln timed eager at {reported:.0f} us, it takes {eager_us:.0f} us"


@pytest.mark.private_cache
def test_peaks_and_baseline_caches_cannot_be_poisoned(user):
    """Executed anyway (`run_rejected`): the sandbox, not the allowlist, is under test."""
    first = check(candidate("gpu_matmul", user / "project"), problem=MATMUL_GPU, **GPU)  # fills both caches
    assert first.status == "ok" and first.timing and first.timing.measured, first.reasons
    files = [user / "cache" / "peaks.json", *(user / "cache" / "baselines").glob("*.json")]
    before = {f: f.read_bytes() for f in files}
    rec = check(candidate("g_poison_caches", user / "project"), problem=MATMUL_GPU, run_rejected=True, **GPU)
    changed = [f.name for f, data in before.items() if f.read_bytes() != data]
    later = check(candidate("gpu_matmul", user / "project"), problem=MATMUL_GPU, **GPU)
    assert not changed, f"the candidate rewrote kiln's caches: {changed}"
    was, now = first.timing.baselines["eager"].median_us, later.timing.baselines["eager"].median_us
    assert _agrees(now, was), f"eager read {was:.0f} us, then {now:.0f} us after the poisoner"
    assert later.integrity.physics.peak_gbps == pytest.approx(first.integrity.physics.peak_gbps)
    assert_contained(rec)


@pytest.mark.parametrize("run_rejected", [False, True], ids=["as-is", "executed-anyway"])
def test_a_claimed_library_kernel_is_not_its_own(user, run_rejected):
    """Executed anyway, kiln's runtime accounting rejects it (`runtime.no-own-kernel`): on the H200
    2026-12-01 (this was an expected failure until then; it passed once the fork server mounted
    the test's cache root)."""
    rec = check(candidate("g_claim_cublas", user / "project"), problem=MATMUL_GPU, dtype="bf16",
                run_rejected=run_rejected, **GPU)
    assert_rejected(rec, "runtime.no-own-kernel", "static.")
    if run_rejected:
        assert "runtime.no-own-kernel" in reject_rules(rec), reject_rules(rec)


def test_side_stream_cannot_hide_its_work(user):
    """Expected to pass on main (kiln's clock around the loop, timed outputs sketched and re-checked);
    not yet run on the H200."""
    rec = check(candidate("g_side_stream", user / "project"), problem=RELU_GPU, **GPU)
    if rec.status == "ok":  # a judge that timed the real work (a trace) may let it pass, at its true speed
        speedup = rec.timing.speedups["eager"].value
        assert speedup < AGREE, f"a ReLU at {speedup:.1f}x eager: the work escaped the timer"
        return
    assert_rejected(rec, "timing.", "physics.", "static.", "runtime.")


def test_native_host_code_is_sandboxed(user):
    with tcp_sink() as sink:
        cand = candidate("g_native_side_effects", user / "project", home=user / "home", port=sink.port)
        rec = check(cand, problem=RELU_GPU, compile_timeout_s=300, **GPU)
        sent = list(sink.accepted)
    created = user / "home" / "redteam-native-created.txt"
    damage = [f"created {created}"] * created.exists() + [f"connected and sent {d!r}" for d in sent]
    assert not damage, damage
    assert_contained(rec)


@pytest.mark.parametrize(("name", "policy"), [("c7_numpy_forward", "strict"), ("c7_grid_callable", "strict"),
                                              ("c7_launch_hook", "strict"), ("c8_launder_copy", "partial")])
def test_work_hidden_from_the_accounting_is_rejected_on_the_gpu(user, name, policy):
    rec = check(candidate(name, user / "project"), policy=policy, run_rejected=True, **GPU)
    assert_rejected(rec, "runtime.")
