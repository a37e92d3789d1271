"""The physics floor's peaks come from trusted processes only: the reference worker's cache read,
or a `peaks` worker the parent starts once both workers are gone; never from the candidate's own
result file (which its code could write)."""

from __future__ import annotations

from pathlib import Path

from kiln.tools.check.pipeline import trusted_peaks
from kiln.tools.records import CheckOptions, CheckRecord, TimingRecord


def _rec(measured: bool) -> CheckRecord:
    return CheckRecord(problem="p.py", candidate="c.py", device="cpu", dtype="fp32", status="ok",
                       timing=TimingRecord(measured=measured))


def test_the_reference_workers_peaks_are_used(tmp_path: Path) -> None:
    ref = {"peaks": {"device": "cuda", "gbps": 4000.0}}
    assert trusted_peaks(tmp_path, ref, _rec(True), CheckOptions(device="cpu")) == ref["peaks"]


def test_missing_peaks_are_measured_by_a_peaks_worker(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    got = trusted_peaks(tmp_path, {"peaks_missing": True}, _rec(True), CheckOptions(device="cpu"))
    # a real worker process ran the `peaks` role (on this CPU machine: no GPU, empty peaks)
    assert got is not None and got["device"] == "cpu" and got["gbps"] is None
    assert (tmp_path / "peaks" / "result.json").exists()


def test_no_peaks_without_a_timing_or_a_trusted_source(tmp_path: Path) -> None:
    opts = CheckOptions(device="cpu")
    assert trusted_peaks(tmp_path, {"peaks_missing": True}, _rec(False), opts) is None  # nothing timed
    assert trusted_peaks(tmp_path, {}, _rec(True), opts) is None  # the reference said nothing: no floor data
