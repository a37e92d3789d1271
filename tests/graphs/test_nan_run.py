"""The most common LLM bug, a kernel that leaves output elements unwritten (NaN), is a mismatch the
loop repairs: its check record (NaN in the mismatch report) is written and read back, never a crash
reported as `bad option correctness.trials.0.mismatch.first.0.actual`."""

from __future__ import annotations

import json
import math

from graph_helpers import judge, reply, roles, run

from kiln.tools.records import CheckRecord


def test_a_kernel_leaving_nan_is_repaired_not_a_crash(tmp_path):
    r = roles([reply("half_written"), reply("good")], [judge("repair", plan="cover every element")])
    summary = run(tmp_path, r, max_iters=3)
    assert summary.status == "solved" and summary.best.candidate == "c0002", summary.stop_reason
    raw = (tmp_path / "run" / "candidates" / "c0001" / "check.json").read_text()
    json.loads(raw)  # standard JSON
    record = CheckRecord.model_validate_json(raw)
    first = record.correctness.trials[0].mismatch.first
    assert record.status == "incorrect" and any(math.isnan(m.actual) for m in first)
    assert "NaN appears where the reference has none" in r.coder.tasks[1].feedback
