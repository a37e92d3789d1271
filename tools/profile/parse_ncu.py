"""Parse: Nsight Compute output (CSV `--page raw`, CSV `--page details`, CSV `--page source`, and
`.ncu-rep` files through the `ncu_report` module) into per-kernel metric tables (pure functions,
except `read_ncu_rep`, which only reads a file)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from pydantic import Field

from kiln.tools.errors import KilnInputError
from kiln.tools.profile.records import NcuRule, SourceHotspot
from kiln.tools.records import Record

_ID_COLS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
            "Block Size", "Grid Size", "Device", "CC", "Function Name", "Demangled Name", "Estimated Speedup"}
_TRIPLE = re.compile(r"\(?\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)?")


class NcuKernelData(Record):
    """One profiled kernel launch as ncu reported it: metric name -> value."""

    id: str
    name: str
    block: list[int] | None = None
    grid: list[int] | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    text: dict[str, str] = Field(default_factory=dict, description="non-numeric metric values")
    rules: list[NcuRule] = Field(default_factory=list)
    hotspots: list[SourceHotspot] = Field(default_factory=list)


def to_number(value: str) -> float | None:
    """'1,234.5' -> 1234.5; 'n/a', '' -> None."""
    v = value.strip().replace(",", "")
    if not v or v.lower() in {"n/a", "nan", "-"}:
        return None
    try:
        return float(v)
    except ValueError:
        return None


def triple(value: str | None) -> list[int] | None:
    m = _TRIPLE.search(value or "")
    return [int(m.group(i)) for i in (1, 2, 3)] if m else None


def _rows(text: str) -> list[list[str]]:
    """CSV rows, skipping ncu's `==PROF==`/`==WARNING==` chatter before the header."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(lines))))


def parse_raw_csv(text: str) -> list[NcuKernelData]:
    """`ncu --csv --page raw`: a header row, a units row, then one row per kernel launch."""
    rows = _rows(text)
    if len(rows) < 2 or "Kernel Name" not in rows[0]:
        raise KilnInputError("not an ncu raw CSV page (no 'Kernel Name' header)")
    header = rows[0]
    body = rows[2:] if rows[1] and not to_number(rows[1][0] or "x") else rows[1:]
    kernels = []
    for row in body:
        cells = dict(zip(header, row, strict=False))
        k = NcuKernelData(id=cells.get("ID", str(len(kernels))), name=cells.get("Kernel Name", "?"),
                          block=triple(cells.get("Block Size")), grid=triple(cells.get("Grid Size")))
        for col, val in cells.items():
            if col in _ID_COLS:
                continue
            num = to_number(val)
            if num is not None:
                k.metrics[col] = num
            elif val.strip():
                k.text[col] = val.strip()
        kernels.append(k)
    return kernels


def parse_details_csv(text: str) -> list[NcuKernelData]:
    """`ncu --csv --page details`: one row per (kernel, section, metric), plus rule rows."""
    rows = _rows(text)
    if not rows or "Metric Name" not in rows[0]:
        raise KilnInputError("not an ncu details CSV page (no 'Metric Name' header)")
    header = rows[0]
    kernels: dict[str, NcuKernelData] = {}
    for row in rows[1:]:
        c = dict(zip(header, row, strict=False))
        kid = c.get("ID", "0")
        k = kernels.setdefault(kid, NcuKernelData(id=kid, name=c.get("Kernel Name", "?"),
                                                  block=triple(c.get("Block Size")), grid=triple(c.get("Grid Size"))))
        _details_row(k, c)
    return list(kernels.values())


def _details_row(k: NcuKernelData, c: dict[str, str]) -> None:
    rule = (c.get("Rule Name") or "").strip()
    if rule:
        est = to_number(c.get("Estimated Speedup", ""))
        k.rules.append(NcuRule(name=rule, kind=(c.get("Rule Type") or "").strip(),
                               message=" ".join((c.get("Rule Description") or "").split()), est_speedup_pct=est))
        return
    name = (c.get("Metric Name") or "").strip()
    if not name:
        return
    key = f"{(c.get('Section Name') or '').strip()}/{name}"
    num = to_number(c.get("Metric Value", ""))
    if num is not None:
        k.metrics[key] = _scale(num, (c.get("Metric Unit") or "").strip())
    else:
        k.text[key] = (c.get("Metric Value") or "").strip()


_UNIT_SCALE = {"usecond": 1e3, "msecond": 1e6, "second": 1e9, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9,
               "Kbyte/second": 1e3, "Mbyte/second": 1e6, "Gbyte/second": 1e9, "Tbyte/second": 1e12,
               "Kbyte/s": 1e3, "Mbyte/s": 1e6, "Gbyte/s": 1e9, "Tbyte/s": 1e12}


def _scale(value: float, unit: str) -> float:
    """Details values come in display units; bring time to ns and bytes to bytes."""
    return value * _UNIT_SCALE.get(unit, 1.0)


def parse_source_csv(text: str, top: int = 5) -> dict[str, list[SourceHotspot]]:
    """`ncu --csv --page source`: per kernel, the lines with the most warp-stall samples."""
    out: dict[str, list[SourceHotspot]] = {}
    kernel = "?"
    block: list[str] = []
    for line in text.splitlines():
        if line.startswith('"') or (block and line.strip()):
            block.append(line)
            continue
        if block:
            out.setdefault(kernel, []).extend(_hotspots(block, top))
            block = []
        stripped = line.strip()
        if stripped and not stripped.startswith("=="):
            kernel = stripped.split(":", 1)[-1].strip() or stripped
    if block:
        out.setdefault(kernel, []).extend(_hotspots(block, top))
    return out


def _hotspots(lines: list[str], top: int) -> list[SourceHotspot]:
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows:
        return []
    header = rows[0]
    scol = next((i for i, h in enumerate(header) if "Warp Stall Sampling (All" in h), None)
    if scol is None:
        return []
    loc_col = 0
    src_col = next((i for i, h in enumerate(header) if h.strip() == "Source"), 1 if len(header) > 1 else 0)
    samples = [(int(to_number(r[scol]) or 0), r) for r in rows[1:] if len(r) > scol]
    total = sum(s for s, _ in samples) or 1
    best = sorted(samples, key=lambda t: -t[0])[:top]
    return [SourceHotspot(location=r[loc_col].strip(), samples=s, pct=100.0 * s / total,
                          text=" ".join(r[src_col].split())[:120]) for s, r in best if s > 0]


def read_ncu_rep(path: Path) -> list[NcuKernelData]:
    """A `.ncu-rep` file through the `ncu_report` module (PyPI `ncu-report`, or the copy under the
    Nsight Compute install's extras/python)."""
    try:
        import ncu_report  # noqa: PLC0415 - optional extra
    except ImportError as exc:
        raise KilnInputError("reading .ncu-rep needs the ncu-report package: pip install 'kernelkiln[profile]'") from exc
    ctx = ncu_report.load_report(str(path))
    kernels = []
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            kernels.append(_action(rng.action_by_idx(a), f"{r}.{a}" if r else str(a)))
    return kernels


def _action(act: object, kid: str) -> NcuKernelData:
    k = NcuKernelData(id=kid, name=act.name())  # type: ignore[attr-defined]
    for name in act.metric_names():  # type: ignore[attr-defined]
        m = act.metric_by_name(name)  # type: ignore[attr-defined]
        val = m.value()
        if isinstance(val, (int, float)) and not isinstance(val, bool):
            k.metrics[name] = float(val)
        elif isinstance(val, str) and val:
            k.text[name] = val
    k.block = [int(k.metrics.get(f"launch__block_dim_{d}", 0)) for d in "xyz"] or None
    k.grid = [int(k.metrics.get(f"launch__grid_dim_{d}", 0)) for d in "xyz"] or None
    for rr in act.rule_results():  # type: ignore[attr-defined]
        k.rules.append(_rule(rr))
    return k


def _rule(rr: object) -> NcuRule:
    msg = rr.rule_message() if rr.has_rule_message() else None  # type: ignore[attr-defined]
    est = rr.speedup_estimation() if rr.has_speedup_estimation() else None  # type: ignore[attr-defined]
    kinds = {0: "", 1: "OK", 2: "WRN", 3: "ERR", 4: "OPT"}
    return NcuRule(name=rr.rule_identifier(),  # type: ignore[attr-defined]
                   kind=kinds.get(int(msg.type), str(msg.type)) if msg else "",
                   message=" ".join(msg.message.split()) if msg else "",
                   est_speedup_pct=float(est.speedup) if est else None)
