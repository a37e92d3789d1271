"""Typed records of whole-model mode (`kiln model`): what was profiled, extracted, optimised, patched
and measured end to end. Units are in field names; every record round-trips through JSON."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kiln.tools.records import Speedup, TimingStat


class Rec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TensorSig(Rec):
    """A tensor argument as a kernel sees it."""

    shape: list[int]
    dtype: str = Field(description="torch dtype name without the prefix: float32, bfloat16, int64")
    stride: list[int]
    device: str = Field("cpu", description="device type: cpu | cuda")


class ValueStats(Rec):
    """What an activation looked like on real inputs: drawn back from its quantiles, not randn."""

    min: float
    max: float
    mean: float
    std: float
    zero_frac: float = Field(description="fraction of exact zeros (sparsity)")
    quantiles: list[float] = Field(description="evenly spaced quantiles 0..1 of a sample of the values")


class ArgSpec(Rec):
    """One argument of a captured call: an activation, a model parameter/buffer, or a plain value."""

    kind: Literal["tensor", "param", "value"]
    name: str = Field("", description="keyword name, '' for a positional argument")
    tensor: TensorSig | None = None
    param: str = Field("", description="the model's parameter/buffer name (kind 'param')")
    src: str = Field("", description="Python source of a plain value (kind 'value'), e.g. '-1', '(1, 1)'")
    stats: ValueStats | None = Field(None, description="activation values seen (kind 'tensor', floating)")


class CallSig(Rec):
    """An op call as the patch guard matches it: the function, its arguments, its output."""

    op: str = Field(description="how the call is written: 'F.group_norm', 'torch.softmax', '.softmax', "
                                "'module:Qwen3RMSNorm'")
    args: list[ArgSpec] = Field(default_factory=list)
    out: TensorSig | None = None

    def key(self) -> str:
        parts = []
        for a in self.args:
            t = a.tensor
            body = f"{a.kind}[{','.join(map(str, t.shape))}]{t.dtype}/{','.join(map(str, t.stride))}" if t else a.src
            parts.append(f"{a.name}={body}" if a.name else body)
        return f"{self.op}({', '.join(parts)})"


class OpGroup(Rec):
    """Calls with one signature: the unit that is ranked, extracted, optimised and patched."""

    id: str = Field(description="short stable id: <op>_<hash>")
    sig: CallSig
    kind: Literal["function", "module", "fused"] = "function"
    tail: CallSig | None = Field(None, description="fused groups: the op that consumes the head's output")
    count: int = 0
    module_paths: list[str] = Field(default_factory=list, description="innermost module of each call (distinct)")
    scopes: list[str] = Field(default_factory=list, description="modules whose forward the patch must watch")
    module_class: str = Field("", description="module sites: the module's class name")
    time_us: float = Field(0.0, description="per model forward, all calls (GPU: measured; CPU: cost model)")
    share: float = Field(0.0, description="time_us / the model's total")
    bytes_moved: int = 0
    flops: int = 0
    roofline_us: float = Field(0.0, description="the fastest its calls can be: bytes at copy bandwidth or FLOPs "
                                                "at the dtype's peak, per forward")
    skipped: str | None = Field(None, description="why this group cannot be extracted or patched")

    def headroom(self) -> float:
        """The fraction of the group's time its roofline says a kernel could save."""
        return max(0.0, 1.0 - self.roofline_us / self.time_us) if self.time_us > 0 else 0.0

    def gain(self) -> float:
        """Expected gain, as a fraction of the model's time: share x headroom (the optimise order)."""
        return self.share * self.headroom()


class ProfileRecord(Rec):
    """Where one forward's time goes, grouped by op signature."""

    method: Literal["torch.profiler", "cost-model"]
    note: str = ""
    share_of: str = Field("", description="what every group's share is a share of (its denominator)")
    device: str
    dtype: str
    total_us: float = Field(description="the model's forward (GPU: all kernels; CPU: the cost model's sum)")
    attributed_us: float = 0.0
    n_calls: int = 0
    groups: list[OpGroup] = Field(default_factory=list)
    dynamic: list[str] = Field(default_factory=list, description="signatures that differed between two runs")


class OpOutcome(Rec):
    """What happened to one group: extracted, optimised, confirmed, patched, or skipped (with why)."""

    group: str
    op: str
    share: float = 0.0
    status: Literal["patched", "not_faster", "incorrect", "unsupported", "skipped", "dropped", "pending",
                    "not_run"] = "pending"
    reason: str = ""
    trial: bool = Field(False, description="correct but not faster alone: tried in the model all the same")
    problem: str | None = None
    kernel: str | None = Field(None, description="the best kernel's path")
    check: str | None = Field(None, description="its confirmation check record (model dtype)")
    speedup: Speedup | None = Field(None, description="vs eager, with its CI, from the confirmation check")
    speedup_compile: Speedup | None = None
    in_model: Speedup | None = Field(None, description="the model's forward with only this group patched, vs eager "
                                                       "(interleaved; GPU)")
    gpu_us: list[float] | None = Field(None, description="[original, patched] kernel time of the group per forward "
                                                         "(torch.profiler; GPU)")


class LatencyRecord(Rec):
    variant: Literal["eager", "patched", "compile", "compile_patched"]
    stat: TimingStat | None = None
    error: str | None = None


class OutputCheck(Rec):
    """One model output leaf on one seed, patched against original."""

    seed: int
    output: str
    max_abs_err: float
    rel_l2_err: float
    tol: float
    passed: bool


class E2ERecord(Rec):
    measured: bool = False
    note: str = ""
    checks: list[OutputCheck] = Field(default_factory=list)
    passed: bool = False
    latency: list[LatencyRecord] = Field(default_factory=list)
    speedups: dict[str, Speedup] = Field(default_factory=dict, description="'patched_vs_eager', "
                                         "'patched_vs_compile', 'compile_patched_vs_compile'")
    peak_bytes: dict[str, int] = Field(default_factory=dict, description="eager / patched peak memory (GPU)")
    coverage: float = Field(0.0, description="share of the original forward's time in patched ops")
    compile_policy: Literal["kernels", "original"] = "kernels"
    dropped: list[str] = Field(default_factory=list, description="groups unpatched to keep the model correct/fast")
    in_model: dict[str, Speedup] = Field(default_factory=dict, description="group -> the forward with only it "
                                         "patched vs eager (interleaved CUDA-event forwards)")
    host_us: dict[str, float] = Field(default_factory=dict, description="eager / patched: the host's time to issue "
                                      "one forward (median); above the GPU time the forward is host-bound")
    group_gpu_us: dict[str, float] = Field(default_factory=dict, description="patched group -> its kernels' time "
                                           "per forward (torch.profiler)")
    compile_s: float | None = Field(None, description="seconds torch.compile of the original took (first call)")
    budget_notes: list[str] = Field(default_factory=list, description="what the time budget left out")


class EnvGuard(Rec):
    """Where a bundle may be applied: these must hold, or apply() refuses."""

    device: str
    gpu_name: str | None = None
    dtype: str
    torch: str
    triton: str | None = None


class BundleEntry(Rec):
    group: str
    kind: Literal["function", "module", "fused"]
    sig: CallSig
    tail: CallSig | None = None
    kernel: str = Field(description="kernel file, relative to the bundle")
    params: list[str] = Field(default_factory=list, description="argument names passed to ModelNew(...) in order")
    scopes: list[str] = Field(default_factory=list)
    module_paths: list[str] = Field(default_factory=list)
    module_class: str = ""
    speedup_vs_eager: float | None = None
    speedup_ci: list[float] | None = None


class BundleManifest(Rec):
    kiln_version: str = "0.1.0"
    model: str
    guard: EnvGuard
    compile_policy: Literal["kernels", "original"] = "kernels"
    entries: list[BundleEntry] = Field(default_factory=list)
    e2e: dict[str, Any] = Field(default_factory=dict, description="end-to-end figures at export")


class ModelReport(Rec):
    """model.json: the whole run."""

    target: str
    model: str
    device: str
    dtype: str
    status: Literal["done", "failed"] = "done"
    error: str | None = None
    profile: ProfileRecord | None = None
    ops: list[OpOutcome] = Field(default_factory=list)
    skipped: list[OpOutcome] = Field(default_factory=list, description="inputs and ops kiln could not use")
    e2e: E2ERecord | None = None
    bundle: str | None = None
    reload: str | None = Field(None, description="the one line that applies the bundle (as the README shows it)")
    selection: str = Field("", description="what --top and --min-share chose, in words")
    budget_minutes: float | None = None
    budget_note: str = ""
    stages_s: dict[str, float] = Field(default_factory=dict, description="wall seconds per stage, this invocation")
