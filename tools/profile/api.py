"""`profile_candidate` and `import_report`: collect -> parse -> enrich -> analyze, one rung named."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from kiln.tools import peaks
from kiln.tools.errors import KilnInputError
from kiln.tools.profile import collect, enrich, from_ncu, parse_ncu, parse_torch, rung
from kiln.tools.profile.analyze import roofline
from kiln.tools.profile.findings import kernel_findings, report_findings
from kiln.tools.profile.floors import floors
from kiln.tools.profile.records import KernelProfile, Peaks, ProfileReport

RUNGS = ("ncu", "torch_profiler", "static")


def analyze(report: ProfileReport) -> ProfileReport:
    """Roofline and findings for every kernel, report-level findings, slowest kernel first."""
    pk = report.peaks or Peaks()
    kernels = [roofline(k, pk, report.dtype) for k in report.kernels]
    kernels = [k.model_copy(update={"findings": kernel_findings(k, pk)}) for k in kernels]
    kernels.sort(key=lambda k: -((k.duration_us or 0) * k.launches))
    total = sum((k.duration_us or 0) * k.launches for k in kernels) or None
    return report.model_copy(update={"kernels": kernels, "total_kernel_us": total,
                                     "findings": report_findings(kernels)})


def kernels_from_ncu_files(files: dict[str, str]) -> list[KernelProfile]:
    raw = parse_ncu.parse_raw_csv(Path(files["raw"]).read_text()) if "raw" in files else []
    details = parse_ncu.parse_details_csv(Path(files["details"]).read_text()) if "details" in files else []
    data = from_ncu.merge(raw, details)
    if "source" in files:
        hot = parse_ncu.parse_source_csv(Path(files["source"]).read_text())
        data = [d.model_copy(update={"hotspots": hot.get(d.name, [])}) for d in data]
    return dedupe_launches([from_ncu.kernel_profile(d) for d in data])


def dedupe_launches(kernels: list[KernelProfile]) -> list[KernelProfile]:
    """One entry per kernel name: the first profiled launch, with the launch count."""
    seen: dict[str, KernelProfile] = {}
    for k in kernels:
        if k.name in seen:
            seen[k.name].launches += 1
        else:
            seen[k.name] = k.model_copy()
    return list(seen.values())


def _enrich(kernels: list[KernelProfile], target: dict[str, Any], target_dir: Path, candidate: Path, *,
            fallback: bool) -> tuple[list[KernelProfile], list[str]]:
    triton = {t["name"]: t for t in target.get("triton_kernels", [])}
    binaries = [_local(Path(t["cubin"]), target_dir) for t in triton.values() if t.get("cubin")]
    binaries += [Path(f) for f in target.get("extension_files", [])]
    sass = enrich.sass_from_binaries([b for b in binaries if b.is_file()])
    sources = target.get("cuda_sources") or enrich.cuda_sources_of(candidate)
    ptx, sass_cu, notes = enrich.ptxas_and_sass(sources, target.get("arch", "sm_90")) if sources else ({}, {}, [])
    sass = {**sass_cu, **sass}
    kernels = [enrich.attach(k, triton, ptx, sass) for k in kernels]
    return enrich.apportion_work(kernels, target.get("work") or {}, bytes_too=fallback), notes


def _local(path: Path, target_dir: Path) -> Path:
    """A cubin recorded with an absolute path, looked up next to target.json if it moved."""
    return path if path.is_file() else target_dir / path.name


def _collect(problem: Path, candidate: Path, work: Path, level: str, dtype: str, chosen: str,
             cache_dir: Path, gpu: str, timeout_s: float, isolation: str = "best-effort",
             bwrap: str | None = None) -> tuple[str, str, dict[str, str]]:
    detail = ""
    if chosen == "ncu":
        col = collect.collect_ncu(problem, candidate, work=work / "ncu", level=level, dtype=dtype,
                                  mset=collect.metric_set(cache_dir, gpu), timeout_s=timeout_s)
        if col.ok:
            return "ncu", "Nsight Compute counters", col.files
        detail = f"ncu failed ({col.error}); "
    col = collect.collect_torch(problem, candidate, work=work / "torch", dtype=dtype, timeout_s=timeout_s,
                                isolation=isolation, bwrap=bwrap)
    if not col.ok:
        raise KilnInputError(f"profiling failed: {detail}{col.error}")
    return "torch_profiler", detail + "torch profiler (CUPTI activity), compiled metadata, counted work", col.files


def build_report(used: str, files: dict[str, str], *, candidate: Path, peaks_: Peaks, dtype: str = "fp32",
                 level: str = "quick", detail: str = "", problem: str = "") -> ProfileReport:
    """Parse what a rung collected (ncu CSV pages, or the torch trace) plus target.json, enrich, analyze."""
    target_path = Path(files["target"])
    target = enrich.load_target(target_path)
    if used == "ncu":
        kernels = kernels_from_ncu_files(files)
    else:
        kernels = parse_torch.parse_trace(Path(files["trace"]).read_text(), reps=int(target.get("reps", 1)))
    kernels, notes = _enrich(kernels, target, target_path.parent, candidate, fallback=used != "ncu")
    if peaks_.sm_count is None and target.get("sm_count"):
        peaks_ = peaks_.model_copy(update={"sm_count": target["sm_count"]})
    work = target.get("work") or {}
    report = ProfileReport(source=used, source_detail=detail, problem=problem, candidate=str(candidate),
                           level=level, dtype=dtype, gpu_name=target.get("gpu_name"), peaks=peaks_,
                           kernels=kernels, notes=notes,
                           floors=floors(work.get("bytes"), work.get("flops"), gbps=peaks_.copy_gbps,
                                         tflops=peaks_.floor_tflops(dtype)))
    return analyze(report)


def profile_candidate(problem: Path, candidate: Path, *, level: str = "quick", device: str = "cuda",
                      force_rung: str | None = None, dtype: str = "fp32", cache_dir: Path | None = None,
                      keep_dir: Path | None = None, timeout_s: float = 240.0,
                      measure_peaks: bool = True, isolation: str = "best-effort",
                      bwrap: str | None = None) -> ProfileReport:
    """Profile one candidate on the best rung available (or `force_rung`) and analyze it. The
    candidate's program runs in the OS sandbox at `isolation` (strict refuses an incomplete one)."""
    for p, what in ((problem, "problem"), (candidate, "candidate")):
        if not p.is_file():
            raise KilnInputError(f"{what} file not found: {p}")
    if force_rung is not None and force_rung not in RUNGS:
        raise KilnInputError(f"unknown rung '{force_rung}' (choose from {', '.join(RUNGS)})")
    cache_dir = cache_dir or rung.default_cache_dir()
    t0 = time.monotonic()
    info = rung.detect_rung(cache_dir) if force_rung is None else None
    chosen = force_rung or (info.rung if info else "static")
    if device == "cpu" or chosen in {"static", "none"}:
        return analyze(static_report(problem, candidate, dtype=dtype, level=level, wall_t0=t0, isolation=isolation,
                                     bwrap=bwrap))
    gpu = rung.gpu_name() or ""
    work = Path(tempfile.mkdtemp(prefix="kiln-profile-"))
    try:
        used, detail, files = _collect(problem, candidate, work, level, dtype, chosen, cache_dir, gpu, timeout_s,
                                       isolation, bwrap)
        if info is not None and used != "ncu":
            detail = f"{info.reason}; {detail}"
        pk, peak_s = _peaks(cache_dir, enrich.load_target(Path(files["target"])).get("gpu_name") or gpu, measure_peaks)
        report = build_report(used, files, candidate=candidate, peaks_=pk, dtype=dtype, level=level, detail=detail,
                              problem=str(problem))
    finally:
        if keep_dir is not None:
            shutil.copytree(work, keep_dir, dirs_exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    if peak_s:
        report.notes.append(f"peaks measured for this GPU in {peak_s:.1f} s (cached; not counted in wall_s)")
    return report.model_copy(update={"wall_s": round(time.monotonic() - t0 - peak_s, 2)})


def _peaks(cache_dir: Path, gpu: str, measure: bool) -> tuple[Peaks, float]:
    """kiln's one peaks cache (`kiln.tools.peaks`); measured now (once per GPU, in a process of its
    own) when none are cached, with the seconds spent; else recorded or datasheet leads."""
    hit = peaks.cached(0)
    if hit is not None or not measure or not gpu:
        return hit or peaks.known(gpu), 0.0
    t = time.monotonic()
    return peaks.get(0) or peaks.known(gpu), time.monotonic() - t


def static_report(problem: Path, candidate: Path, *, dtype: str, level: str, wall_t0: float,
                  isolation: str = "best-effort", bwrap: str | None = None) -> ProfileReport:
    """No GPU: plain CUDA through ptxas -v, Triton kernels built offline for sm_90; SASS for both."""
    notes: list[str] = []
    target: dict[str, Any] = {}
    target_dir = Path(".")
    work = Path(tempfile.mkdtemp(prefix="kiln-static-"))
    try:
        if "@triton.jit" in candidate.read_text(errors="replace"):
            col = collect.collect_static(problem, candidate, work=work, dtype=dtype, isolation=isolation, bwrap=bwrap)
            if col.ok:
                target_dir = Path(col.files["target"]).parent
                target = enrich.load_target(Path(col.files["target"]))
                notes += target.get("errors", [])
            else:
                notes.append(col.error or "Triton offline build failed")
        names = [t["name"] for t in target.get("triton_kernels", [])]
        kernels = [KernelProfile(name=n, source="static") for n in names]
        sources = enrich.cuda_sources_of(candidate)
        ptx, _, cu_notes = enrich.ptxas_and_sass(sources, "sm_90") if sources else ({}, {}, [])
        kernels += [KernelProfile(name=n, source="static") for n in sorted(ptx) if n not in names]
        kernels, more = _enrich(kernels, target, target_dir, candidate, fallback=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    notes += cu_notes + more
    if not kernels:
        notes.append("no Triton launch recorded and no plain CUDA source found")
    return ProfileReport(source="static" if kernels else "none",
                         source_detail="no GPU run: Triton kernels built offline for sm_90, CUDA through ptxas -v; SASS",
                         problem=str(problem), candidate=str(candidate), level=level, dtype=dtype,
                         kernels=kernels, notes=list(dict.fromkeys(notes)), wall_s=round(time.monotonic() - wall_t0, 2))


def import_report(path: Path, *, dtype: str = "fp32", cache_dir: Path | None = None, gpu_name: str | None = None) -> ProfileReport:
    """Analyze an existing Nsight Compute report (.ncu-rep, or a raw/details CSV page)."""
    if not path.is_file():
        raise KilnInputError(f"report not found: {path}")
    if path.suffix == ".ncu-rep":
        data = parse_ncu.read_ncu_rep(path)
    else:
        text = path.read_text(errors="replace")
        first = next((ln for ln in text.splitlines() if ln.startswith('"')), "")
        data = parse_ncu.parse_details_csv(text) if "Metric Name" in first else parse_ncu.parse_raw_csv(text)
    if not data:
        raise KilnInputError(f"no kernels in {path}")
    kernels = dedupe_launches([from_ncu.kernel_profile(d) for d in data])
    gpu = gpu_name or _device_name(data)
    pk = peaks.cached(0) or peaks.known(gpu)
    report = ProfileReport(source="ncu", source_detail=f"imported {path.name}", problem="", candidate=str(path),
                           dtype=dtype, gpu_name=gpu, peaks=pk, kernels=kernels)
    return analyze(report)


def _device_name(data: list[parse_ncu.NcuKernelData]) -> str | None:
    for d in data:
        for key in ("device__attribute_display_name", "Device", "device__attribute_device_name"):
            if key in d.text:
                return d.text[key]
    return None
