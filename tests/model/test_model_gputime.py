"""GPU time per call from torch.profiler's events (torch's own FunctionEvent records, as a CUDA
profile of one forward produces them): shares stay at most 100% and add up."""

from __future__ import annotations

from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEvent

from kiln.evals.model.gputime import attribute


def _ev(i: int, name: str, parent: FunctionEvent | None = None, kernels: dict[str, float] | None = None,
        device: DeviceType = DeviceType.CPU) -> FunctionEvent:
    ev = FunctionEvent(id=i, name=name, thread=0, start_us=i, end_us=i + 1, device_type=device)
    for k, us in (kernels or {}).items():
        ev.append_kernel(k, 0, us)
    if parent is not None:
        ev.set_cpu_parent(parent)
    return ev


def test_annotations_are_not_device_work() -> None:
    """A cuDNN convolution (two kernels with a gap) inside kiln.call.0, a SiLU inside kiln.call.1, a
    copy outside any call. torch.profiler also lists each range's device-side annotation (its span,
    gaps included) among the range's kernels and as a CUDA event: counting those gave 153.8%."""
    conv_range = _ev(0, "kiln.call.0", kernels={"kiln.call.0": 70.0})  # the GPU-side span, gap included
    conv = _ev(1, "aten::cudnn_convolution", conv_range, kernels={"implicit_gemm": 40.0, "add_bias": 10.0})
    silu_range = _ev(2, "kiln.call.1", kernels={"kiln.call.1": 8.0})
    launch = _ev(3, "aten::silu", silu_range)
    silu = _ev(4, "cudaLaunchKernel", launch, kernels={"silu_kernel": 8.0})
    copy = _ev(5, "aten::copy_", kernels={"memcpy": 2.0})
    gpu_annotation = _ev(6, "kiln.call.0", device=DeviceType.CUDA)
    a = attribute([conv_range, conv, silu_range, launch, silu, copy, gpu_annotation])
    assert a.per_call_us == {0: 50.0, 1: 8.0}
    assert a.total_us == 60.0 and a.outside_us == 2.0
    shares = [v / a.total_us for v in a.per_call_us.values()]
    assert all(s <= 1.0 for s in shares) and abs(sum(shares) + a.outside_us / a.total_us - 1.0) < 1e-12


def test_group_ranges_are_keyed_by_group() -> None:
    """The patched model's kernels, per `kiln.group.<id>` range (measure.py's kernel time per group)."""
    r = _ev(0, "kiln.group.fused_group_norm_1")
    k = _ev(1, "aten::empty", r, kernels={"_kiln_gn_apply": 6.5, "_kiln_gn_stats": 3.0})
    other = _ev(2, "aten::conv2d", kernels={"conv": 90.0})
    a = attribute([r, k, other], prefix="kiln.group.")
    assert a.per_call_us == {"fused_group_norm_1": 9.5} and a.total_us == 99.5 and a.outside_us == 90.0


def _dev(i: int, name: str, start: float, end: float, corr: int = 0, annotation: bool = False) -> FunctionEvent:
    return FunctionEvent(id=i, name=name, thread=0, start_us=start, end_us=end, device_type=DeviceType.CUDA,
                         linked_correlation_id=corr, is_user_annotation=annotation)


def test_triton_kernels_launched_from_python_are_counted() -> None:
    """A Triton kernel launches from Python, outside every aten op: torch links it to the range open at
    its launch (it is among the range's own kernels), or, launched with nothing open, to no CPU event
    at all. Both count, once; a kernel some CPU op already lists is not counted again (H200, torch
    2.11: the fused group norm's kernel time read 0 us and the overhead probe divided by it)."""
    r = _ev(10, "kiln.group.gn", kernels={"kiln.group.gn": 12.0, "_kiln_gn_fused": 9.0})
    listed = _ev(11, "aten::conv2d", kernels={"conv": 90.0})
    listed_dev = _dev(12, "conv", 0.0, 90.0, corr=11)  # the same conv kernel as a device event
    annotation = _dev(13, "kiln.group.late", 100.0, 150.0, corr=14, annotation=True)
    late_range = _ev(14, "kiln.group.late")
    bare_in = _dev(15, "_kiln_late", 110.0, 114.0)  # linked to nothing, inside late's span
    bare_out = _dev(16, "_kiln_bare", 200.0, 203.0)  # linked to nothing, no span
    a = attribute([r, listed, listed_dev, annotation, late_range, bare_in, bare_out], prefix="kiln.group.")
    assert a.per_call_us == {"gn": 9.0, "late": 4.0}
    assert a.total_us == 106.0 and a.outside_us == 93.0
