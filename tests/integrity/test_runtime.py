"""Runtime accounting under the Triton interpreter: own kernels seen, PyTorch compute classified,
decoys found by poisoning, policies applied."""

from __future__ import annotations

import torch

from kiln.tools.integrity.ops import is_compute
from kiln.tools.integrity.runtime import (
    candidate_roots,
    inspect_forward,
    is_own_kernel,
    judge,
    own_kernel_names,
)
from kiln.tools.records import OpAccounting

X = (torch.randn(1000),)


def run(mod, policy: str = "partial"):  # noqa: ANN001, ANN201
    acc, findings = inspect_forward(mod.ModelNew(), X, policy=policy, device="cpu")
    return acc, {f.rule: f.severity for f in findings}


HONEST = """
class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
"""


def test_honest_kernel_is_seen_and_clean(load_candidate) -> None:  # noqa: ANN001
    acc, rules = run(load_candidate(HONEST), policy="strict")
    assert acc.own_launches == {"relu_kernel": 1}
    assert acc.compute_ops == [] and acc.decoy_kernels == []
    assert acc.aten_ops == {"aten::empty_like": 1}  # the interpreter's own copies are left out
    assert rules == {}


def test_pytorch_fallback_has_no_own_kernel(load_candidate) -> None:  # noqa: ANN001
    acc, rules = run(load_candidate("class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"))
    assert acc.own_kernels == [] and acc.compute_ops == ["aten::relu"]
    assert rules["runtime.no-own-kernel"] == "reject"


def test_decoy_kernel_is_caught(load_candidate) -> None:  # noqa: ANN001
    mod = load_candidate("""
class ModelNew(nn.Module):
    def forward(self, x):
        relu(x)                 # runs, output thrown away
        return torch.relu(x)
""")
    acc, rules = run(mod)
    assert acc.decoy_kernels == ["relu_kernel"]
    assert rules["runtime.decoy"] == "reject"


def test_decoy_hidden_behind_zero_times_output_is_caught(load_candidate) -> None:  # noqa: ANN001
    mod = load_candidate("""
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x) + 0.0 * relu(x)
""")
    assert run(mod)[1]["runtime.decoy"] == "reject"


def test_own_kernel_feeding_a_pytorch_epilogue_passes_partial_not_strict(load_candidate) -> None:  # noqa: ANN001
    mod = load_candidate("""
class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x) * 2.0
""")
    acc, partial = run(mod, "partial")
    assert acc.compute_ops == ["aten::mul"] and acc.decoy_kernels == []
    assert partial == {"runtime.torch-compute": "info"}
    assert run(mod, "strict")[1] == {"runtime.torch-compute": "reject"}


INT_KERNEL = """
@triton.jit
def sign_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.where(x > 0, 1, 0).to(tl.int64), mask=mask)


def sign(x):
    y = torch.empty(x.shape, dtype=torch.int64)
    sign_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    return y
"""


def test_a_kernel_with_only_integer_outputs_is_not_a_decoy(load_candidate) -> None:  # noqa: ANN001
    """Indices and masks are poisoned too (inside their range): an int64-only kernel (argmax) is
    judged on what it computes, and one whose integers are thrown away is still a decoy."""
    honest = load_candidate(INT_KERNEL + "\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return sign(x)\n")
    acc, rules = run(honest, policy="strict")
    assert acc.decoy_kernels == [] and "runtime.decoy" not in rules, (acc.decoy_kernels, rules)
    decoy = load_candidate(INT_KERNEL + "\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
                           "        sign(x)\n        return (x > 0).long()\n")
    acc, rules = run(decoy)
    assert acc.decoy_kernels == ["sign_kernel"] and rules["runtime.decoy"] == "reject"


def test_integer_poisons_stay_inside_the_values_held() -> None:
    """An index a later kernel reads must stay in bounds: flips and fills never leave [min, max]."""
    from kiln.tools.integrity.decoy import _poison_discrete

    t = torch.tensor([3, 7, 5, 7])
    _poison_discrete(t, "flip")
    assert t.tolist() == [7, 3, 5, 3]
    _poison_discrete(t, "fill")
    assert t.tolist() == [3, 3, 3, 3]
    b = torch.tensor([True, False])
    _poison_discrete(b, "flip")
    assert b.tolist() == [False, True]
    u = torch.tensor([250, 255], dtype=torch.uint8)
    _poison_discrete(u, "flip")
    assert u.tolist() == [255, 250]


def test_kernel_writing_into_a_stale_buffer_is_not_a_decoy(load_candidate) -> None:  # noqa: ANN001
    # The output buffer already holds the right values before the kernel runs (a cache the
    # kernel overwrites with the same numbers): no write is visible, yet the kernel feeds the result.
    mod = load_candidate("""
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.buf = None
    def forward(self, x):
        if self.buf is None or self.buf.shape != x.shape:
            self.buf = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 256),)](x, self.buf, x.numel(), BLOCK=256)
        return self.buf.clone()
""")
    acc, rules = run(mod)
    assert acc.decoy_kernels == [] and "runtime.decoy" not in rules


def test_judge_strict_without_any_compute_still_needs_an_own_kernel() -> None:
    rules = {f.rule for f in judge(OpAccounting(aten_ops={"aten::clone": 1}), "strict")}
    assert rules == {"runtime.no-own-kernel"}


def test_operator_classes() -> None:
    for op in ("aten::empty_like", "aten::view", "aten::copy_", "aten::_to_copy", "aten::reshape",
               "aten::fill_.Scalar", "aten::cat", "aten::t", "aten::sym_size"):
        assert not is_compute(op), op
    for op in ("aten::mm", "aten::_softmax", "aten::add_.Tensor", "aten::relu", "aten::sum.dim_IntList"):
        assert is_compute(op), op


EXT_MODULE = """
import types

ext = types.ModuleType("kiln_test_ext")
ext.__file__ = "/tmp/kiln_test_ext/kiln_test_ext.so"  # what a load_inline extension looks like


def _host_softmax(x):
    return torch.softmax(x, -1)  # a host function that only calls a PyTorch op


def _host_scaled_relu(x):
    y = x * 2.0                  # PyTorch part ...
    relu_kernel[(triton.cdiv(y.numel(), 256),)](y, y, y.numel(), BLOCK=256)  # ... then an own kernel on it
    return y


ext.softmax_fwd = _host_softmax
ext.scaled_relu = _host_scaled_relu
"""


def test_extension_returning_a_pytorch_result_untouched_is_a_decoy(load_candidate) -> None:  # noqa: ANN001
    mod = load_candidate(EXT_MODULE + """
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax_fwd(x)
""")
    acc, rules = run(mod)
    assert acc.own_launches == {"ext:kiln_test_ext.softmax_fwd": 1}
    assert acc.compute_ops == ["aten::_softmax"]  # operators called from the extension are the candidate's
    assert any("returns the output of aten::_softmax unchanged" in d for d in acc.decoy_kernels)
    assert rules["runtime.decoy"] == "reject"


def test_extension_whose_own_kernel_finishes_the_result_passes_partial(load_candidate) -> None:  # noqa: ANN001
    mod = load_candidate(EXT_MODULE + """
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.scaled_relu(x)
""")
    acc, rules = run(mod)
    assert "relu_kernel" in acc.own_kernels and acc.decoy_kernels == []
    assert rules == {"runtime.torch-compute": "info"}


def test_profiled_kernel_names_are_matched_as_whole_functions() -> None:
    own = {"row_softmax", "elementwise_kernel", "relu_kernel"}
    assert is_own_kernel("relu_kernel", own)                                   # Triton
    assert is_own_kernel("row_softmax(float const*, float*, int)", own)          # extern "C" / demangled
    assert is_own_kernel("void row_softmax<256>(float const*, float*, int)", own)
    assert is_own_kernel("_Z11row_softmaxPKfPfi", own)                          # mangled
    assert not is_own_kernel("void at::native::elementwise_kernel<128, 4>(int, at::native::F)", own)
    assert not is_own_kernel("cunn_SoftMaxForward<4, float>(float*, float const*, int)", own)
    assert not is_own_kernel("_Z12row_softmaxXPKf", own)


def test_a_string_naming_a_kernel_claims_nothing(load_candidate) -> None:  # noqa: ANN001
    # Own names come from launches and compiled extensions, never from strings in the file: a
    # string naming cuBLAS's kernel must not make cuBLAS's time the candidate's.
    mod = load_candidate("""
SRC = "extern \\"C\\" __global__ void ampere_sgemm_128x64_nn(float* x, int n) { }"

class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
""")
    acc, _ = run(mod)
    names = own_kernel_names(acc.own_launches, candidate_roots(mod.ModelNew()) + [mod])
    assert names == {"relu_kernel"}


def test_extension_kernels_are_read_from_the_build_folder(tmp_path) -> None:  # noqa: ANN001
    import types

    (tmp_path / "cuda.cu").write_text(
        "// __global__ void commented_out(float* x) { }\n"
        "__global__ void declared_only(float* x);\n"
        "extern \"C\" __global__ void __launch_bounds__(256) fused_gemm_epilogue(const float* __restrict__ a, float* b) {\n"
        "  const char* s = \"__global__ void in_a_string() {}\";\n}\n"
        "template <int B> __global__ void tiled(float* x) { x[0] = B; }\n")
    ext = types.ModuleType("kiln_ext_probe")
    ext.__file__ = str(tmp_path / "kiln_ext_probe.so")
    ext.run = lambda x: x
    holder = types.SimpleNamespace(ext=ext)
    assert own_kernel_names(["ext:kiln_ext_probe.run"], [holder]) == {"fused_gemm_epilogue", "tiled"}
    assert own_kernel_names([], [holder]) == set()  # never called: claims nothing


def test_profiled_kernels_launched_by_aten_ops_are_library_whatever_their_name() -> None:
    # Real profiler event records, as torch builds them from a trace: an aten::mm CPU op (correlation
    # id 7) that launched a GEMM, and the candidate's Triton kernel launched outside any operator.
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    from kiln.tools.integrity.own_kernels import classify

    def ev(i: int, name: str, dev: DeviceType, linked: int = 0, us: float = 10.0) -> FunctionEvent:
        return FunctionEvent(id=i, name=name, thread=0, start_us=0, end_us=us, device_type=dev, linked_correlation_id=linked)

    events = [ev(7, "aten::mm", DeviceType.CPU), ev(8, "cudaLaunchKernel", DeviceType.CPU, linked=7),
              ev(100, "ampere_sgemm_128x64_nn", DeviceType.CUDA, linked=7, us=40.0),
              ev(101, "ampere_sgemm_128x64_nn", DeviceType.CUDA, linked=0, us=2.0),   # an own kernel of that name
              ev(102, "row_softmax_kernel", DeviceType.CUDA, linked=0, us=5.0)]
    own, lib = classify(events, {"ampere_sgemm_128x64_nn", "row_softmax_kernel"})
    assert own == {"ampere_sgemm_128x64_nn": 2.0, "row_softmax_kernel": 5.0}
    assert lib == {"ampere_sgemm_128x64_nn": 40.0}


STABLE_LOG_SOFTMAX = """
@triton.jit
def row_max_kernel(x_ptr, m_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(m_ptr, tl.max(tl.load(x_ptr + offs, mask=offs < n, other=-float("inf")), axis=0))


@triton.jit
def log_softmax_kernel(x_ptr, m_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # log_softmax(x) = x - m - log(sum(exp(x - m))): m only keeps exp from overflowing.
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))
    m = tl.load(m_ptr)
    s = tl.sum(tl.exp(x - m), axis=0)
    tl.store(y_ptr + offs, x - m - tl.log(s), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        m = torch.empty(1, dtype=x.dtype)
        y = torch.empty_like(x)
        row_max_kernel[(1,)](x, m, x.numel(), BLOCK=1024)
        log_softmax_kernel[(1,)](x, m, y, x.numel(), BLOCK=1024)
        return y
"""


_IN_FRESH_PROCESS = """
import json, os, sys, warnings
os.environ["TRITON_INTERPRET"] = "1"
warnings.simplefilter("ignore", RuntimeWarning)  # the interpreter's numpy sees the overflow
import importlib.util, torch
from kiln.tools.integrity.runtime import inspect_forward
spec = importlib.util.spec_from_file_location("cand", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
torch.manual_seed(0)
acc, findings = inspect_forward(mod.ModelNew(), (torch.randn(1000),), policy="strict", device="cpu")
print(json.dumps({"decoys": acc.decoy_kernels, "rules": {f.rule: f.severity for f in findings}}))
"""


def test_a_stability_statistic_read_by_an_own_kernel_is_not_a_decoy(tmp_path) -> None:  # noqa: ANN001
    # The row max cancels out of log_softmax for any moderate value, so flipping it or filling it
    # with 7.0 moves nothing; only an overflow shows the result depends on it (the built-in Coder's
    # split log-softmax was rejected as a decoy for this).
    # In a fresh process: tl.max is one of Triton's own jit functions, interpretable only when Triton
    # was first imported under TRITON_INTERPRET=1, and this suite's sm_90 compile tests import it without.
    import json
    import subprocess
    import sys

    from tests.integrity.conftest import TRITON_HEAD

    cand = tmp_path / "cand.py"
    cand.write_text(TRITON_HEAD + STABLE_LOG_SOFTMAX)
    proc = subprocess.run([sys.executable, "-c", _IN_FRESH_PROCESS, str(cand)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == {"decoys": [], "rules": {}}


def test_a_decoy_mixed_in_with_a_tiny_weight_is_still_a_decoy(load_candidate) -> None:  # noqa: ANN001
    mod = load_candidate("""
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1e-6 * relu(x)
""")
    assert run(mod)[1]["runtime.decoy"] == "reject"
