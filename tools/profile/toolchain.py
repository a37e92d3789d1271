"""Collect: the CUDA binary tools (nvcc, cuobjdump, nvdisasm). `run_tool` is the only function that
spawns any of them; everything it returns is parsed by the pure functions in `sass.py`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from pydantic import Field

from kiln.tools.records import Record

TOOLS = ("nvcc", "cuobjdump", "nvdisasm")


class ToolRun(Record):
    tool: str
    argv: list[str] = Field(default_factory=list)
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    error: str | None = Field(None, description="not found / timed out, in plain words")

    @property
    def ok(self) -> bool:
        return self.error is None and self.returncode == 0


def find_tool(name: str) -> str | None:
    """PATH first, then CUDA_HOME/bin, then the copies Triton ships (cuobjdump, nvdisasm, ptxas)."""
    hit = shutil.which(name)
    if hit:
        return hit
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / name).is_file():
            return str(Path(root) / "bin" / name)
    try:
        import triton  # noqa: PLC0415 - optional, only to find its bundled binaries

        cand = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
        return str(cand) if cand.is_file() else None
    except ImportError:
        return None


def available_tools() -> list[str]:
    return [t for t in TOOLS if find_tool(t)]


def run_tool(name: str, args: list[str], *, timeout_s: float = 120.0, cwd: Path | None = None) -> ToolRun:
    """Spawn one CUDA binary tool; never raises for tool failures (they come back as data)."""
    path = find_tool(name)
    if path is None:
        return ToolRun(tool=name, error=f"{name} not found (PATH, CUDA_HOME/bin, triton's bundled bin)")
    argv = [path, *args]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=cwd, check=False)
    except subprocess.TimeoutExpired:
        return ToolRun(tool=name, argv=argv, error=f"{name} timed out after {timeout_s:.0f} s")
    return ToolRun(tool=name, argv=argv, returncode=proc.returncode, stdout=proc.stdout, stderr=proc.stderr)


def dump_sass(binary: Path) -> ToolRun:
    """SASS of a cubin, or of the fatbins inside an executable or a .so."""
    return run_tool("cuobjdump", ["-sass", str(binary)])


def resource_usage(binary: Path) -> ToolRun:
    return run_tool("cuobjdump", ["-res-usage", str(binary)])


def ptxas_verbose(source: Path, out_cubin: Path, *, arch: str, extra: list[str] | None = None) -> ToolRun:
    """`nvcc -cubin -Xptxas -v`: registers, spills, shared memory per kernel, and a cubin for SASS."""
    args = ["-cubin", f"-arch={arch}", "-Xptxas", "-v", "-lineinfo", "-o", str(out_cubin), str(source)]
    return run_tool("nvcc", [*args, *(extra or [])], timeout_s=180.0)
