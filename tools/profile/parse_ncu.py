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
    kernels: list[NcuKernelData] = []
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
                               message=clean_message(c.get("Rule Description") or ""), est_speedup_pct=est))
        return
    name = (c.get("Metric Name") or "").strip()
    if not name:
        return
    # raw metric names (the "Command line profiler metrics" rows) stand alone; display names keep their section
    key = name if "__" in name else f"{(c.get('Section Name') or '').strip()}/{name}"
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
    """`ncu --csv --page source`: per function, the source lines with the most warp-stall samples.

    The page is a sequence of blocks: `"File Path",<file>`, `"Function Name",<kernel>`, a header row
    starting with "Line No", then one row per source line (followed by its SASS rows, no line number).
    """
    lines: dict[str, list[tuple[str, int, str]]] = {}
    path, func, header = "?", "?", None
    for row in _rows(text):
        if len(row) == 2 and row[0] in {"File Path", "Function Name"}:
            path, func = (row[1], func) if row[0] == "File Path" else (path, row[1])
            header = None if row[0] == "File Path" else header
        elif row and row[0] == "Line No":
            header = row
        elif header is not None and row and row[0].strip():
            cell = dict(zip(header, row, strict=False))
            samples = int(to_number(cell.get("Warp Stall Sampling (All Samples)", "")) or 0)
            lines.setdefault(func, []).append((f"{Path(path).name}:{row[0]}", samples, row[1]))
    return {f: _top_lines(rows, top) for f, rows in lines.items()}


def _top_lines(rows: list[tuple[str, int, str]], top: int) -> list[SourceHotspot]:
    total = sum(s for _, s, _ in rows) or 1
    best = sorted(rows, key=lambda r: -r[1])[:top]
    return [SourceHotspot(location=loc, samples=s, pct=round(100.0 * s / total, 1), text=" ".join(src.split())[:120])
            for loc, s, src in best if s > 0]


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
    if "launch__block_dim_x" in k.metrics:
        k.block = [int(k.metrics.get(f"launch__block_dim_{d}", 1)) for d in "xyz"]
        k.grid = [int(k.metrics.get(f"launch__grid_dim_{d}", 1)) for d in "xyz"]
    for rr in act.rule_results():  # type: ignore[attr-defined]
        rule = _rule(rr)
        if rule.message:
            k.rules.append(rule)
    return k


_KINDS = {0: "", 1: "INF", 2: "OPT", 3: "WRN", 4: "ERR"}
_MARKUP = re.compile(r"@(?:section|url):([^:@]*):[^@]*@")


def clean_message(text: str) -> str:
    """ncu's `@section:Id:Name@` / `@url:Text:link@` markup -> the readable part; one line."""
    return " ".join(_MARKUP.sub(r"\1", text).split())


def _rule(rr: object) -> NcuRule:
    msg = rr.rule_message() if rr.has_rule_message() else None  # type: ignore[attr-defined]
    est = rr.speedup_estimation() if rr.has_speedup_estimation() else None  # type: ignore[attr-defined]
    msg = msg if isinstance(msg, dict) else {}
    return NcuRule(name=rr.rule_identifier(),  # type: ignore[attr-defined]
                   kind=_KINDS.get(int(msg.get("type", 0)), str(msg.get("type", ""))),
                   message=clean_message(str(msg.get("message", ""))),
                   est_speedup_pct=float(est["speedup"]) if isinstance(est, dict) and "speedup" in est else None)
