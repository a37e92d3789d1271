"""Which GPU kernels are the candidate's own: names from what it really compiled and launched.

Own names come only from
- the launch hooks: Triton functions and kiln `CudaKernel`s that actually launched;
- the `__global__` functions *defined* (with a body, read from tokens) in the sources of each
  compiled extension module (`load_inline`) whose functions the forward called; the sources are
  the ones torch compiled, in the module's build folder.
Never from a string in the candidate's file: a string naming `ampere_sgemm_128x64_nn` claims
nothing. On a GPU the torch profiler then lists every kernel; a kernel counts as own only if its
name matches an own name *and* it was not launched from inside an ATen operator (cuBLAS and
cuDNN kernels run under `aten::mm`, `aten::convolution`, ...; the profiler links each kernel to
the operator that launched it), so an own kernel named like a library kernel can't claim it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from kiln.tools.integrity.csource import global_definitions
from kiln.tools.integrity.launches import EXT, extension_modules
from kiln.tools.records import OpAccounting

_SOURCE_SUFFIXES = (".cu", ".cpp", ".cuh", ".h", ".cc")
_MAX_SOURCE_BYTES = 4 << 20


def own_kernel_names(launched: Iterable[str], roots: list[Any]) -> set[str]:
    """Names of the kernels the candidate compiled and launched (see the module doc)."""
    launched = list(launched)
    names = {n for n in launched if not n.startswith(EXT)}
    called = {n[len(EXT):].rsplit(".", 1)[0] for n in launched if n.startswith(EXT)}
    for mod in extension_modules(roots):
        if mod.__name__ in called:
            names |= extension_kernels(Path(str(mod.__file__)).parent)
    return {n for n in names if len(n) >= 3}


def extension_kernels(build_dir: Path) -> set[str]:
    """`__global__` functions defined in the sources torch compiled into an extension."""
    names: set[str] = set()
    for p in sorted(build_dir.iterdir()) if build_dir.is_dir() else []:
        if p.suffix in _SOURCE_SUFFIXES and p.is_file() and p.stat().st_size <= _MAX_SOURCE_BYTES:
            names |= global_definitions(p.read_text(errors="replace"))
    return names


def is_own_kernel(kernel: str, own_names: set[str]) -> bool:
    """Is a profiled kernel one of the candidate's? Matched as a whole function name (plain, as
    `name(...)` / `name<...>` after `void `, or Itanium-mangled `_Z<len><name>`), never inside a
    namespace, so naming a kernel `gemm` or `elementwise_kernel` doesn't claim library kernels."""
    for n in own_names:
        if kernel == n or re.search(rf"_Z{len(n)}{re.escape(n)}", kernel):
            return True
        if re.search(rf"(?:^|[\s*&])(?<!::){re.escape(n)}\s*[(<]", kernel):
            return True
    return False


def is_library_launcher(op_name: str) -> bool:
    """A CPU-side profiler event that launches library kernels: an ATen operator."""
    return op_name.startswith("aten::")


def classify(events: list[Any], own_names: set[str]) -> tuple[dict[str, float], dict[str, float]]:
    """Profiler events -> (own kernel -> us, library kernel -> us). A kernel is own when its name
    is an own name and the operator that launched it (if any) is not an ATen operator."""
    from torch.autograd import DeviceType

    aten = [e for e in events if e.device_type == DeviceType.CPU and is_library_launcher(e.name)]
    aten_ids = {e.id for e in aten}
    # torch's own association of kernels with the operator that launched them, where it made one
    aten_kernels = {k.name for e in aten for k in getattr(e, "kernels", []) if getattr(k, "name", None)}
    own: dict[str, float] = {}
    lib: dict[str, float] = {}
    for e in events:
        if e.device_type != DeviceType.CUDA:
            continue
        under_aten = getattr(e, "linked_correlation_id", 0) in aten_ids or e.name in aten_kernels
        bucket = lib if under_aten or not is_own_kernel(e.name, own_names) else own
        bucket[e.name] = bucket.get(e.name, 0.0) + float(e.time_range.elapsed_us())
    return own, lib


def profile_into(acc: OpAccounting, model_new: nn.Module, args: list[Any], roots: list[Any]) -> None:
    """Run one forward under the torch profiler (CPU operators and CUDA kernels) and fill the
    own/library split of `acc`."""
    from torch.profiler import ProfilerActivity, profile

    own_names = own_kernel_names(acc.own_launches, roots)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof, torch.no_grad():
        model_new(*args)
        torch.cuda.synchronize()
    own, lib = classify(list(prof.events()), own_names)
    own_us, lib_us = sum(own.values()), sum(lib.values())
    acc.library_kernels = sorted(lib)
    acc.own_time_us, acc.library_time_us = own_us, lib_us
    acc.own_time_share = own_us / (own_us + lib_us) if own_us + lib_us > 0 else None
    acc.method = "launch hooks + torch profiler"
    if own and not acc.own_kernels:  # own kernels launched from C++ (load_inline) show up here only
        acc.own_kernels = sorted(own)
