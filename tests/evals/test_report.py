"""Reports from a run directory: files, numbers, comparison, and the HTML in a real headless Chromium."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kiln.evals.batch.compare import compare
from kiln.evals.batch.report import load_run, write_report


def test_report_files_and_numbers(filled_run: Path) -> None:
    index = write_report(filled_run)
    out = index.parent
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_problems"] == 4
    assert metrics["correct_rate"] == 0.5
    assert metrics["fast_p"]["eager"]["1.0"] == 0.25  # only ReLU is correct and faster than 1x
    assert metrics["rejection_rate"] == {"static.stream": 0.25}
    rows = list(csv.DictReader((out / "problems.csv").open()))
    assert {r["problem"]: r["status"] for r in rows}["level1/40_LayerNorm"] == "rejected"
    md = (out / "summary.md").read_text()
    assert "| level1/19_ReLU | ok | 1.80x |" in md
    html = index.read_text()
    assert "<script src" not in html and "http://" not in html and "https://" not in html  # self-contained
    # links to the best kernel and its check record resolve from the report folder
    assert (out / "../level1__19_ReLU.py").resolve().exists()
    assert (out / "records" / "level1__19_ReLU.json").exists()


def test_compare_two_runs(filled_run: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(filled_run, other)
    import sqlite3

    db = sqlite3.connect(other / "results.sqlite")
    db.execute("DELETE FROM samples WHERE problem = 'level1/54_conv'")
    db.commit()
    db.close()
    rows, summary = compare(load_run(filled_run), load_run(other))
    assert summary["common_problems"] == 3
    assert summary["only_a"] == ["level1/54_conv"]
    assert all(r.change == "same" for r in rows)


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("headless Chromium is required for the report test: apt-get install chromium (make test does)")
    return path


def test_html_renders_in_headless_chromium(filled_run: Path, tmp_path: Path) -> None:
    index = write_report(filled_run)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([_chromium(), *flags, "--dump-dom", index.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    assert 'data-rendered="1"' in dom, dom[-2000:]
    assert "data-error" not in dom
    assert 'data-rows="4"' in dom
    assert dom.count('class="plot"') >= 3
    shot = tmp_path / "report.png"
    subprocess.run([_chromium(), *flags, "--window-size=1200,1600", f"--screenshot={shot}", index.as_uri()],
                   capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 10_000
