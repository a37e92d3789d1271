"""The run directory's layout lives in one type, `RunDir`: the writers take their paths from it and the
readers (batch jobs, the UI, model mode) read through it; `summary.json` lists the candidates and types
its status."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from graph_helpers import judge, reply, roles, run
from pydantic import ValidationError

from kiln.evals.batch.jobs import _candidate_rows
from kiln.graphs.rundir import RunDir
from kiln.graphs.summary import RunSummary, load_summary
from kiln.tools.records import CheckRecord

OLD_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "ui" / "runs" / "relu-mcts"  # written by an earlier kiln


def test_a_finished_run_is_read_through_its_run_dir(tmp_path):
    summary = run(tmp_path, roles([reply("no_relu"), reply("good")], [judge("repair"), judge("stop")]), max_iters=3)
    rd = RunDir(tmp_path / "run")
    assert summary.candidate_ids == rd.candidate_ids() == ["c0001", "c0002"]  # the summary lists its candidates
    assert load_summary(rd.root) == summary and rd.options.is_file() and rd.events.is_file()
    last = rd.last_check(summary.best.candidate)
    assert last is not None and str(last) == summary.best.check_path
    assert CheckRecord.model_validate_json(last.read_text()).correct
    assert [p.name for p in rd.llm_calls()][:2] == ["0001_coder.json", "0002_judge.json"]
    assert all(json.loads(p.read_text())["role"] in ("coder", "judge", "proposer") for p in rd.llm_calls())


def test_check_records_are_numbered_in_the_order_they_were_written(tmp_path):
    rd = RunDir(tmp_path)
    assert rd.next_rel("c0001", "check") == "candidates/c0001/check.json"
    for n in range(11):
        path = rd.root / rd.next_rel("c0001", "check")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(n))
    names = [p.name for p in rd.check_files("c0001")]
    assert names[:3] == ["check.json", "check_1.json", "check_2.json"] and names[-1] == "check_10.json"
    assert rd.last_check("c0001").read_text() == "10" and rd.last_check("c0002") is None


def test_an_old_summary_still_loads_and_its_candidates_come_from_the_folders(tmp_path):
    """summary.json files written before RunSummary listed its candidates: same status spellings."""
    old = load_summary(OLD_RUN)
    assert old.status == "solved" and old.candidate_ids == []
    rd = RunDir(OLD_RUN)
    ids = old.candidate_ids or rd.candidate_ids()
    assert len(ids) == old.candidates == 8 and len(rd.llm_calls()) == 12
    rows = _candidate_rows(rd, ids)
    assert [r.candidate for r in rows] == list(range(8)) and all(r.source_path for r in rows)
    assert rd.last_check("c0008").name == "check_1.json"
    copy = tmp_path / "run"
    shutil.copytree(OLD_RUN, copy, ignore=shutil.ignore_patterns("checkpoints*"))
    assert load_summary(copy) == old


def test_the_run_status_is_one_of_the_loops_own():
    data = json.loads((OLD_RUN / "summary.json").read_text())
    with pytest.raises(ValidationError):
        RunSummary.model_validate({**data, "status": "solved, more or less"})
    for status in ("solved", "solved_cpu_only", "stopped", "budget", "no_progress", "unsupported", "failed",
                   "llm_error", "no_code"):
        assert RunSummary.model_validate({**data, "status": status}).status == status


def test_one_check_cache_by_content_for_the_loop_and_model_mode(tmp_path: Path) -> None:
    """The loop's cache (RUN_DIR/checks/) and model mode's confirmations (RUN_DIR/confirm/) are one
    CheckCache: keyed by the source, the options but the seed, and the cases."""
    from kiln.graphs.rundir import CheckCache, cached_check, check_key, store_check
    from kiln.tools.records import CheckOptions, CheckRecord

    rec = CheckRecord(problem="p.py", candidate="c.py", status="ok", correct=True)
    key = check_key("src", [], CheckOptions(seed=1))
    assert key == check_key("src", [], CheckOptions(seed=2)) != check_key("src", [], CheckOptions(trials=3))
    assert cached_check(tmp_path, key) is None
    path = store_check(tmp_path, key, rec)
    assert path == RunDir(tmp_path).cached_check(key) and cached_check(tmp_path, key) == rec
    confirm = CheckCache(tmp_path / "confirm")
    assert confirm.get(key) is None and confirm.put(key, rec).parent == tmp_path / "confirm"
    assert confirm.get(key) == rec
