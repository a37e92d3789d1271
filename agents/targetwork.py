"""The problem at its real sizes, for a run that checks shrunk ones (issue 25 item 10): the sizes,
the reference's work at them (counted on the meta device by `kiln.agents.case_runner`, sandboxed),
and the target GPU's floors for that work, so the Coder writes for the GPU problem, not the toy one.

The run names the unshrunk problem in `RunOptions.original_problem` (`kiln run --shrink` sets it).
On a CPU run the target GPU is the H200 kiln is measured on (its recorded peaks); on a GPU run, the
run's own GPU.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from kiln.tools.records import JSON_SAFE

CPU_TARGET = "NVIDIA H200"
UNITS = (("fp32", "fp32 FMA units"), ("tf32", "TF32 tensor cores (tf32x3 takes about three times this)"),
         ("bf16", "bf16 tensor cores"))


class TargetWork(BaseModel):
    model_config = JSON_SAFE

    sizes: str = Field(description="the real problem's module-level constants")
    flops: int | None = Field(None, description="the reference's FLOPs at those sizes")
    io_bytes: int | None = Field(None, description="its inputs, parameters and outputs, once each")
    gpu: str = Field(description="the target GPU")
    peak_source: str = Field("none", description="where the peaks come from (recorded, datasheet, measured)")
    copy_gbps: float | None = None
    tflops: dict[str, float] = Field(default_factory=dict, description="matmul rate per unit")
    error: str | None = Field(None, description="why the work could not be counted")

    def floor_lines(self) -> list[str]:
        from kiln.tools.profile.floors import floors

        out = []
        io = floors(self.io_bytes, None, gbps=self.copy_gbps, tflops=None).io_floor_us
        if io is not None and self.io_bytes is not None:
            out.append(f"moving the {self.io_bytes / 1e6:.1f} MB of inputs, weights and outputs once: at least "
                       f"{io:.1f} us ({self.copy_gbps:.0f} GB/s copy bandwidth); no algorithm beats this")
        for unit, words in UNITS:
            alg = floors(None, self.flops, gbps=None, tflops=self.tflops.get(unit)).algorithm_floor_us
            if alg is not None and self.flops is not None:
                out.append(f"the reference's {self.flops / 1e9:.1f} GFLOP on {words}: at least {alg:.1f} us "
                           f"({self.tflops[unit]:.0f} TFLOP/s)")
        return out


def measure_target(original_src: str, *, gpu_name: str | None, isolation: str = "best-effort",
                   bwrap: str | None = None, timeout_s: float = 120.0) -> TargetWork:
    """Count the real problem's work (sandboxed, on the meta device) and take the target GPU's peaks."""
    from kiln.agents.casecheck import module_sizes, run_runner
    from kiln.tools.peaks import known

    peaks = known(gpu_name or CPU_TARGET)
    base = TargetWork(sizes=module_sizes(original_src), gpu=peaks.gpu_name or gpu_name or CPU_TARGET,
                      peak_source=peaks.source, copy_gbps=peaks.copy_gbps, tflops=dict(peaks.matmul_tflops))
    res, result = run_runner(original_src, device="cpu", timeout_s=timeout_s, isolation=isolation, bwrap=bwrap,
                             mode="work")
    if result is None or not result.get("ok"):
        why = (result or {}).get("error") or ("timed out" if res.timed_out else res.stderr_tail.strip()[-300:])
        return base.model_copy(update={"error": f"its work could not be counted: {why}"})
    return base.model_copy(update={"flops": result.get("flops"), "io_bytes": result.get("io_bytes")})
