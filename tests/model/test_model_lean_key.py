"""The lean launcher's kinds, on CPU: a cached kernel is only reused for a call of the very same kind
(grid, device, each tensor's dtype and 16-byte alignment, each other argument's type and value, the
keywords in the call's order); anything else goes through Triton's path, which here is a stand-in
that records its calls (no GPU: the compiled kernel's launcher is the one thing stubbed)."""

from __future__ import annotations

import inspect
import math
from typing import Any

import pytest
import torch

from kiln.evals.model import launch
from kiln.evals.model.launch import LeanKernel, kind
from kiln.evals.model.patch import Kernel


def _kernel(out_ptr, p0, n, BLOCK):  # the parameters of a `@triton.jit` function
    pass


class Compiled:
    """What `jit[grid](...)` returns: a compiled kernel whose launcher records each launch."""

    function, packed_metadata = "fn", "meta"

    def __init__(self) -> None:
        self.launches: list[tuple] = []

    def run(self, *a: Any) -> None:
        self.launches.append(a)


class Jit:
    """Triton's path: counts its calls and hands back one compiled kernel."""

    def __init__(self) -> None:
        self.signature, self.pre_run_hooks, self.calls, self.k = inspect.signature(_kernel), [], 0, Compiled()

    def __getitem__(self, grid: Any) -> Any:
        def call(*a: Any, **kw: Any) -> Compiled:
            self.calls += 1
            return self.k
        return call


@pytest.fixture
def lean(monkeypatch: pytest.MonkeyPatch) -> tuple[LeanKernel, Jit]:
    pytest.importorskip("triton.knobs")
    monkeypatch.setattr(launch, "_device", lambda: 0)
    monkeypatch.setattr(launch, "_stream", lambda device: 7)
    jit = Jit()
    return LeanKernel(jit), jit


def _buf(n: int, dtype: torch.dtype = torch.float32, misalign: bool = False) -> torch.Tensor:
    t = torch.empty(n + 4, dtype=dtype)
    return t[1:n + 1] if misalign else t[:n]


def test_a_changed_dtype_alignment_value_or_type_is_a_new_kind() -> None:
    x, out = _buf(64), _buf(64)
    base = kind((2,), 0, (out, x, 64), {"BLOCK": 32})
    assert base == kind((2,), 0, (_buf(64), _buf(64), 64), {"BLOCK": 32})  # other storage, same kind
    others = [kind((2,), 0, (out, _buf(64, torch.float16), 64), {"BLOCK": 32}),
              kind((2,), 0, (out, _buf(64, misalign=True), 64), {"BLOCK": 32}),
              kind((2,), 0, (out, x, 65), {"BLOCK": 32}),
              kind((2,), 0, (out, x, 64.0), {"BLOCK": 32}),
              kind((2,), 0, (out, x, 64), {"BLOCK": 64}),
              kind((2,), 0, (out, x, 64), {"BLOCK": True}),
              kind((3,), 0, (out, x, 64), {"BLOCK": 32}),
              kind((2,), 1, (out, x, 64), {"BLOCK": 32}),
              kind((2,), 0, (out, x), {"n": 64, "BLOCK": 32})]
    assert len({base, *others}) == len(others) + 1
    assert kind((1,), 0, (1,), {}) != kind((1,), 0, (True,), {})
    assert kind((1,), 0, (_buf(4),), {}) != kind((1,), 0, (torch.float32, True), {})  # a tensor is no value
    assert kind((1,), 0, (), {"a": 1, "b": 2}) != kind((1,), 0, (), {"b": 2, "a": 1})  # order: finer, never coarser


def test_an_unhashable_argument_has_no_kind() -> None:
    with pytest.raises(TypeError):
        kind((1,), 0, ([1, 2],), {})


def test_the_second_call_of_a_kind_launches_lean_with_this_calls_tensors(lean: tuple[LeanKernel, Jit]) -> None:
    lk, jit = lean
    out, x = _buf(64), _buf(64)
    lk[(2,)](out, x, 64, BLOCK=32, num_warps=4)
    assert jit.calls == 1 and lk.lean_calls == 0 and not jit.k.launches
    out2, x2 = _buf(64), _buf(64)
    lk[(2,)](out2, x2, 64, BLOCK=32, num_warps=4)
    assert jit.calls == 1 and lk.lean_calls == 1
    (gx, gy, gz, stream, fn, meta, _, _, exit_hook, *vals), = jit.k.launches
    assert (gx, gy, gz, stream, fn, meta, exit_hook) == (2, 1, 1, 7, "fn", "meta", None)
    assert vals[0] is out2 and vals[1] is x2 and vals[2:] == [64, 32]


@pytest.mark.parametrize("change", ["misaligned", "dtype", "size", "constexpr", "grid"])
def test_another_kind_goes_through_triton(lean: tuple[LeanKernel, Jit], change: str) -> None:
    lk, jit = lean
    lk[(2,)](_buf(64), _buf(64), 64, BLOCK=32)
    x = {"misaligned": _buf(64, misalign=True), "dtype": _buf(64, torch.float16)}.get(change, _buf(64))
    grid = (3,) if change == "grid" else (2,)
    lk[grid](_buf(64), x, 65 if change == "size" else 64, BLOCK=64 if change == "constexpr" else 32)
    assert jit.calls == 2 and lk.lean_calls == 0 and len(lk.plans) == 2


def test_unhashable_arguments_hooks_and_callable_grids_take_tritons_path(lean: tuple[LeanKernel, Jit]) -> None:
    knobs = pytest.importorskip("triton.knobs")
    lk, jit = lean
    lk[(2,)](_buf(64), _buf(64), [64], BLOCK=32)
    lk[(2,)](_buf(64), _buf(64), [64], BLOCK=32)
    assert jit.calls == 2 and not lk.plans
    lk[lambda meta: (2,)](_buf(64), _buf(64), 64, BLOCK=32)
    lk[lambda meta: (2,)](_buf(64), _buf(64), 64, BLOCK=32)
    assert jit.calls == 4 and not lk.plans
    lk[(2,)](_buf(64), _buf(64), 64, BLOCK=32)  # a plan now
    hook = knobs.runtime.launch_enter_hook
    hook.add(print) if isinstance(hook, knobs.HookChain) else pytest.skip("this Triton has no HookChain")
    try:
        lk[(2,)](_buf(64), _buf(64), 64, BLOCK=32)
    finally:
        hook.remove(print)
    assert jit.calls == 6 and lk.lean_calls == 0
    lk[(2,)](_buf(64), _buf(64), 64, BLOCK=32)
    assert jit.calls == 6 and lk.lean_calls == 1


class Scale(torch.nn.Module):
    def __init__(self, w: torch.Tensor) -> None:
        super().__init__()
        self.w = w

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.w


def test_a_kernel_instance_is_rebuilt_when_a_parameter_changes() -> None:
    k = Kernel(type("M", (), {"ModelNew": Scale}), None, "test_lean_key_scale")
    w = torch.ones(4)
    a = k.instance([w])
    assert k.instance([w]) is a
    w.mul_(2)  # in place: a new version
    b = k.instance([w])
    assert b is not a and k.instance([w]) is b
    assert k.instance([w.half()]) is not b and k.instance([torch.ones(4)]) is not b
    assert torch.equal(k.run([torch.ones(4)], [w]), torch.full((4,), 2.0))


def test_the_overhead_probe_reports_each_layer_on_cpu() -> None:
    from kiln.evals.model import overhead

    p = overhead.layers("cpu")  # raises when the fused pair never ran as one kernel
    assert set(p) == {"scope_us", "instance_us", "lean_kind_us", "runtime_call_us", "fused_pair_us"}
    assert all(math.isfinite(v) and v > 0 for v in p.values()), p  # their order is a benchmark's, not a test's


def test_a_quick_key_never_finds_another_kinds_plan(lean: tuple[LeanKernel, Jit]) -> None:
    lk, jit = lean
    lk[(2,)](_buf(64), _buf(64), 64, BLOCK=32)
    lk[(2,)](_buf(64), _buf(64), 64, BLOCK=32)  # found by its layout's quick key
    assert jit.calls == 1 and lk.lean_calls == 1 and len(lk.quick_keys) == 1 and len(lk.quick) == 1
    others = [lambda: lk[(2,)](_buf(64), _buf(64), 64.0, BLOCK=32),  # another type, an equal value
              lambda: lk[(2,)](_buf(64), _buf(64), True, BLOCK=32),
              lambda: lk[(2,)](_buf(64), _buf(64), 64, BLOCK=True),
              lambda: lk[(2,)](_buf(64), _buf(64), n=64, BLOCK=32),  # another layout: a keyword
              lambda: lk[(2,)](_buf(64), _buf(64), _buf(4), BLOCK=32),  # a tensor where a value was
              lambda: lk[(2,)](_buf(64), 3, 64, BLOCK=32),  # a value where a tensor was
              lambda: lk[(2,)](_buf(64), _buf(64, misalign=True), 64, BLOCK=32)]
    for i, call in enumerate(others, start=2):
        call()
        assert jit.calls == i and lk.lean_calls == 1, i  # Triton's path: a new kind, never a lean launch
    call()  # the misaligned kind's second call: found by `kind` (no quick key for it), launched lean
    assert jit.calls == len(others) + 1 and lk.lean_calls == 2
    (*_, exit_hook, a0, a1, n, block), = jit.k.launches[-1:]
    assert n == 64 and block == 32 and a1.data_ptr() % 16
