"""Progress a newcomer can read (issue 26, item 6): off a terminal `kiln eval` prints one plain line
per finished sample with every figure labelled (it used to print nothing until the end), `kiln run`
one line per step and per check started; on an 80-column terminal the live views keep each field
whole on its line."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from kiln.agents.base import Usage
from kiln.evals.batch.progress import live_bar
from kiln.graphs.progress import Progress
from kiln.graphs.state import Candidate

UNSUPPORTED = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.cummax(x, dim={dim})[0]


def get_inputs():
    return [torch.rand(8, 33)]


def get_init_inputs():
    return []
'''
LINE = re.compile(r"^kiln eval (\d)/2 · (cumsum_\d): unsupported · correct 0/\d · fast_1 — · tokens 0 · cost \$0\.00 · \d+ s$")


def test_eval_off_a_terminal_prints_a_labelled_line_per_sample(tmp_path: Path) -> None:
    for dim in (0, 1):
        (tmp_path / "problems").mkdir(exist_ok=True)
        (tmp_path / "problems" / f"cumsum_{dim}.py").write_text(UNSUPPORTED.format(dim=dim))
    done = subprocess.run([sys.executable, "-m", "kiln.evals.cli", "eval", str(tmp_path / "problems"), "--device",
                           "cpu", "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "kiln eval: 2 of 2 samples to run (0 already done)", lines
    samples = [LINE.match(ln) for ln in lines[1:]]
    assert len(samples) == 2 and all(samples), lines
    assert sorted(m[1] for m in samples) == ["1", "2"]


def test_the_eval_bar_keeps_its_fields_whole_at_80_columns() -> None:
    console = Console(width=80, file=io.StringIO(), force_terminal=True, color_system=None, record=True)
    bar = live_bar(console)  # drawn once, as the live display redraws it
    bar.add_task("eval", total=250, completed=123, correct="118/123", fast1="0.42", tokens="1234567", cost="12.34")
    console.print(*bar.get_renderables())
    lines = [ln for ln in console.export_text().splitlines() if ln.strip()]
    assert all(len(ln) <= 80 for ln in lines), lines
    assert any("123/250" in ln for ln in lines)
    assert any(ln.startswith("correct 118/123 · fast_1 0.42 · tokens 1234567 · cost $12.34") for ln in lines), lines


def _feed(p: Progress) -> None:
    p.feed({"type": "custom", "ns": (), "data": {"stage": "code", "iteration": 3, "mode": "repair"}})
    cand = Candidate(id="c0017", iteration=3, mode="repair", correct=True, speedup_vs_eager=None)
    p.feed({"type": "updates", "ns": (), "data": {"code": {"iteration": 3, "candidates": {"c0017": cand},
                                                          "usage": [Usage(input_tokens=41000, output_tokens=9000,
                                                                          cost_usd=0.3121)]}}})
    p.feed({"type": "custom", "ns": (), "data": {"stage": "evaluate", "candidate": "c0017"}})
    p.feed({"type": "updates", "ns": (), "data": {"evaluate": {"best_id": "c0017"}}})


def test_run_off_a_terminal_prints_whole_labelled_lines() -> None:
    out = io.StringIO()
    _feed(Progress(console=Console(file=out, width=80), live=True))  # not a terminal: plain lines
    lines = out.getvalue().splitlines()
    assert lines == [
        "kiln run · iteration 3 · code mode=repair ...",
        "kiln run · iteration 3 · code · best: none yet · tokens 50000 · cost $0.3121",
        "kiln run · iteration 3 · evaluate candidate=c0017 ...",
        "kiln run · iteration 3 · evaluate · best c0017 (correct, speed not measured) · tokens 50000 · cost $0.3121",
    ], lines


def test_the_run_view_keeps_its_fields_whole_at_80_columns() -> None:
    console = Console(width=80, file=io.StringIO(), force_terminal=True, color_system=None, record=True)
    p = Progress(console=console, live=False)
    _feed(p)
    console.print(p.render())
    lines = console.export_text().splitlines()
    assert lines == ["kiln run · iteration 3 · evaluate candidate=c0017",
                     "best c0017 (correct, speed not measured) · tokens 50000 · cost $0.3121"], lines
