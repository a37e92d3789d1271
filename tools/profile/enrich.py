"""Analyze: join what the rungs measured with compiled metadata, SASS and the problem's counted work."""

from __future__ import annotations

import ast
import json
import tempfile
from pathlib import Path
from typing import Any

from kiln.tools import pyparse
from kiln.tools.profile import sass as sass_mod
from kiln.tools.profile import toolchain
from kiln.tools.profile.records import KernelProfile, SassSummary


def _match(kernel_name: str, names: list[str]) -> str | None:
    """ncu/CUPTI names may be demangled signatures or carry suffixes; match on the function name."""
    for n in names:
        if kernel_name == n or kernel_name.startswith(n + "(") or kernel_name.split("(")[0].endswith(n):
            return n
    return None


def sass_from_binaries(paths: list[Path]) -> dict[str, SassSummary]:
    """Disassemble cubins / shared objects; add resource usage (registers, stack, shared)."""
    out: dict[str, SassSummary] = {}
    for p in paths:
        dump = toolchain.dump_sass(p)
        if not dump.ok:
            continue
        res = sass_mod.parse_res_usage(toolchain.resource_usage(p).stdout)
        for s in sass_mod.summarize_sass(dump.stdout):
            out[s.kernel] = sass_mod.with_resources(s, res.get(s.kernel))
    return out


def cuda_sources_of(path: Path) -> list[str]:
    """String constants in a candidate file that hold CUDA kernels (no import, works without a GPU)."""
    try:
        tree = pyparse.parse(path.read_text())
    except (OSError, SyntaxError):
        return []
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and "__global__" in n.value]


def ptxas_and_sass(sources: list[str], arch: str) -> tuple[dict[str, dict[str, int]], dict[str, SassSummary], list[str]]:
    """`nvcc -cubin -Xptxas -v` each plain CUDA source; torch-header sources are skipped (too slow to
    rebuild here: their extension's .so is disassembled instead)."""
    ptx: dict[str, dict[str, int]] = {}
    sass: dict[str, SassSummary] = {}
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="kiln-ptxas-") as tmp:
        for i, src in enumerate(sources):
            if "torch/extension.h" in src or "ATen" in src:
                notes.append("CUDA source with torch headers: ptxas -v skipped, SASS from the built extension")
                continue
            cu, cubin = Path(tmp) / f"k{i}.cu", Path(tmp) / f"k{i}.cubin"
            cu.write_text(src)
            run = toolchain.ptxas_verbose(cu, cubin, arch=arch)
            if not run.ok:
                notes.append(f"nvcc -Xptxas -v failed: {(run.error or run.stderr.strip()[-200:])}")
                continue
            ptx.update(sass_mod.parse_ptxas(run.stderr + run.stdout))
            sass.update(sass_from_binaries([cubin]))
    return ptx, sass, notes


def load_target(path: Path | None) -> dict[str, Any]:
    if path is None or not path.is_file():
        return {}
    return json.loads(path.read_text())


def attach(k: KernelProfile, triton: dict[str, dict[str, Any]], ptx: dict[str, dict[str, int]],
           sass: dict[str, SassSummary]) -> KernelProfile:
    """Fill what the rung did not measure from Triton metadata, ptxas and the SASS summary."""
    upd: dict[str, Any] = {}
    if (n := _match(k.name, list(triton))) is not None:
        t = triton[n]
        upd.update(num_warps=t.get("num_warps"), num_stages=t.get("num_stages"))
        if k.registers_per_thread is None and t.get("n_regs"):
            upd["registers_per_thread"] = t["n_regs"]
        if k.shared_mem_bytes is None and t.get("shared") is not None:
            upd["shared_mem_bytes"] = t["shared"]
        if k.spill_bytes is None and t.get("n_spills") is not None:
            upd["spill_bytes"] = int(t["n_spills"]) * 4  # Triton counts spilled 32-bit registers
    if (n := _match(k.name, list(ptx))) is not None:
        p = ptx[n]
        upd.setdefault("registers_per_thread", k.registers_per_thread or p.get("registers"))
        if k.spill_bytes is None:
            upd["spill_bytes"] = p.get("spill_store_bytes", 0) + p.get("spill_load_bytes", 0)
    if (n := _match(k.name, list(sass))) is not None:
        s = sass[n]
        upd["sass"] = s
        if k.wgmma is None:
            upd["wgmma"] = s.tensor_core == "wgmma"
        if k.registers_per_thread is None and "registers_per_thread" not in upd and s.registers:
            upd["registers_per_thread"] = s.registers
        if k.spill_bytes is None and upd.get("spill_bytes") is None and not (s.local_loads or s.local_stores):
            upd["spill_bytes"] = 0  # no LDL/STL in the SASS: nothing spilled
    return k.model_copy(update=upd)


def apportion_work(kernels: list[KernelProfile], work: dict[str, Any], *, bytes_too: bool) -> list[KernelProfile]:
    """Counted FLOPs (and, on the fallback rung, bytes) of one forward, shared by kernel time."""
    total = sum((k.duration_us or 0) * k.launches for k in kernels)
    if not total or not work:
        return kernels
    out = []
    for k in kernels:
        share = (k.duration_us or 0) * k.launches / total
        upd: dict[str, Any] = {}
        if work.get("flops"):
            upd["flops"] = work["flops"] * share / k.launches
        if bytes_too and work.get("bytes"):
            upd["dram_bytes"] = work["bytes"] * share / k.launches
            if k.duration_us:
                upd["dram_gbps"] = round(upd["dram_bytes"] / (k.duration_us * 1e-6) / 1e9, 1)
        out.append(k.model_copy(update=upd))
    return out
