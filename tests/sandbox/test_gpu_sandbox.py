"""The sandbox on a CUDA GPU (the H200, `-m gpu`; `bench/device.sh sandbox` runs these): CUDA, Triton
and load_inline work in confined workers, a strict check passes, and a hostile candidate with the
GPU's device nodes in reach still reaches nothing else."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import pytest

from kiln.tools.check import caches
from kiln.tools.check.messages import CandCompile
from kiln.tools.check.servers import fork_server_for
from kiln.tools.sandbox import scratch
from kiln.tools.sandbox.box import Sandbox, _without_namespaces
from kiln.tools.sandbox.confine import Confinement, Plan
from kiln.tools.sandbox.isolation import run_isolated, scrubbed_env
from tests.sandbox.conftest import Planted, assert_contained, gone_within, report_of
from tests.sandbox.test_confined import layered
from tests.sandbox.test_fork_server import start_candidate

pytestmark = pytest.mark.gpu
FIXTURES = Path(__file__).parents[1] / "fixtures"

GPU_PROGRAM = """
import torch, triton, triton.language as tl

@triton.jit
def square_minus(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < n
    a = tl.load(a_ptr + offs, mask=keep)
    tl.store(out_ptr + offs, a * a - tl.load(b_ptr + offs, mask=keep), mask=keep)

m = torch.randn(1024, 1024, device="cuda")
assert torch.allclose(m @ m, (m.double() @ m.double()).float(), atol=1e-2, rtol=1e-2)
a, b = torch.randn(4097, device="cuda"), torch.randn(4097, device="cuda")
out = torch.empty_like(a)
square_minus[(triton.cdiv(4097, 512),)](a, b, out, 4097, BLOCK=512)
torch.cuda.synchronize()
assert torch.allclose(out, a * a - b, atol=1e-5)  # Triton fuses a*a-b into one FMA
print("gpu ok", torch.cuda.get_device_name(0), flush=True)
"""


def on_gpu(box: Sandbox, layers: str) -> Sandbox:
    """`layered`, with the inner layer alone as kiln runs it on a GPU machine without bubblewrap
    (its namespaces, Landlock and capability drop left out: CUDA fails with error 304 under them)."""
    if layers != "inner":
        return layered(box, layers)
    plan = _without_namespaces({"plan": dataclasses.asdict(box.plan), "missing": {}})["plan"]
    return dataclasses.replace(box, bwrap=None, plan=Plan(**plan))


@pytest.mark.parametrize("layers", ["both", "outer", "inner"])
def test_cuda_and_triton_run_in_a_confined_worker(box: Sandbox, layers: str) -> None:
    work = scratch.root() / f"gpu-{layers}-{time.monotonic_ns()}"
    work.mkdir()
    (work / "prog.py").write_text(GPU_PROGRAM)
    env = scrubbed_env(device="cuda", gpu_index=0, cache_dir=work / "cache")
    res = run_isolated([sys.executable, str(work / "prog.py")], env=env, cwd=work, timeout_s=300,
                       confinement=Confinement(write=(str(work),)), sandbox=on_gpu(box, layers))
    assert res.returncode == 0, res.stderr_tail


@pytest.mark.parametrize(("problem", "candidate"), [
    ("problems/relu.py", "kernels/correct/triton/relu.py"),
    ("problems/relu.py", "kernels/correct/cuda/relu_load_inline.py"),
])
def test_a_strict_check_runs_and_times_on_the_gpu(problem: str, candidate: str) -> None:
    from kiln.tools.check import check
    from kiln.tools.records import CheckOptions

    rec = check(FIXTURES / problem, FIXTURES / candidate, CheckOptions(device="cuda", trials=2, isolation="strict"))
    assert rec.isolation and rec.isolation.complete and rec.isolation.level == "strict"
    assert rec.status == "ok", rec.reasons
    assert rec.timing and rec.timing.measured, rec.timing


def test_a_hostile_gpu_worker_reaches_nothing(box: Sandbox, planted: Planted) -> None:
    server = fork_server_for("cuda", 0, caches.root(), box)
    assert server is not None and server.confined
    token = f"35{time.monotonic_ns() % 10**6}.5"
    h, work = start_candidate(box, server, planted, daemon=token, device="cuda")
    try:
        assert h.call(CandCompile(), time.monotonic() + 120).compile.ok
    finally:
        h.close()
    report = json.loads(report_of(work).read_text())
    assert_contained(report, planted)
    assert report["pids"] == [1, 2] and gone_within(token)
