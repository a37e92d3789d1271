"""--isolation strict refuses without the full sandbox; best-effort falls back loudly and says so in
the record; `kiln doctor` shows the level; kiln's own process is non-dumpable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kiln.tools.errors import KilnConfigError
from kiln.tools.records import CheckRecord, IsolationRecord
from kiln.tools.sandbox.box import describe, sandbox_for
from tests.sandbox.conftest import run_cli

DATA = Path(__file__).parents[1] / "core" / "data"
MISSING = "/nonexistent/kiln-test/bwrap"


def test_strict_refuses_without_bubblewrap() -> None:
    with pytest.raises(KilnConfigError, match=r"--isolation strict: .*bwrap: no bubblewrap binary at /nonexistent"):
        sandbox_for("strict", MISSING)


def test_strict_passes_where_every_layer_is_in_force(box) -> None:
    assert sandbox_for("strict").record.complete


def test_best_effort_falls_back_loudly_once(capsys: pytest.CaptureFixture[str]) -> None:
    import kiln.tools.sandbox.box as sb

    sb._WARNED.clear()
    for _ in range(2):
        b = sandbox_for("best-effort", MISSING)
    err = capsys.readouterr().err
    assert err.count("kiln: warning: the OS sandbox is partial") == 1, err
    assert b.bwrap is None and "bwrap" in b.record.missing and not b.record.complete
    assert {"pid-namespace", "landlock-fs", "net-namespace"} <= set(b.record.layers)  # the inner layer still holds


def test_the_cli_refuses_strict_in_one_line(tmp_path: Path) -> None:
    res = run_cli("check", str(DATA / "add_problem.py"), str(DATA / "add_triton.py"), "--device", "cpu",
                  "--isolation", "strict", "--bwrap", MISSING, "--json", str(tmp_path / "r.json"))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kiln: error: --isolation strict"), lines
    assert not (tmp_path / "r.json").exists()


def test_a_best_effort_check_runs_and_records_what_is_missing() -> None:
    """bubblewrap missing: the workers (exec'd through the one-shot launcher, no fork server) run
    with the inner layer alone, and the record says which layer is missing and why."""
    from kiln.tools.check import check
    from kiln.tools.records import CheckOptions

    rec = check(DATA / "add_problem.py", DATA / "add_triton.py",
                CheckOptions(device="cpu", trials=1, fork_server=False, bwrap=MISSING))
    assert rec.status == "ok", rec.reasons
    assert rec.isolation and rec.isolation.level == "best-effort" and not rec.isolation.complete
    assert "bwrap" in rec.isolation.missing and {"landlock-fs", "pid-namespace"} <= set(rec.isolation.layers)


def test_isolation_record_round_trips_and_old_records_load(box) -> None:
    rec = box.record
    assert IsolationRecord.model_validate_json(rec.model_dump_json()) == rec
    old = {"problem": "p.py", "candidate": "c.py", "status": "ok"}  # a record from before the sandbox
    assert CheckRecord.model_validate_json(json.dumps(old)).isolation is None


def test_doctor_shows_the_sandbox_line() -> None:
    from kiln.tools.cli_doctor import check_sandbox

    item = check_sandbox(MISSING)
    assert item.status == "WARN" and "bwrap" in item.detail and "bubblewrap" in item.fix
    assert check_sandbox().status == "OK" and describe().complete


def test_kiln_makes_its_own_process_non_dumpable() -> None:
    code = ("import sys\nfrom kiln.evals.cli import main\nfrom kiln.tools.sandbox import nsutil\n"
            "sys.argv = ['kiln', '--help']\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('dumpable', nsutil.dumpable())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.strip().endswith("dumpable False"), out
