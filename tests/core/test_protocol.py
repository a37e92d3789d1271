"""The parent-driven check: what the candidate's worker is (not) given, how its replies are
treated, and verdicts that depend on no order. Real workers, real pipes, the Triton interpreter."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from kiln.tools.check import check
from kiln.tools.check.messages import CandCompile, CandTrial, CompileReply
from kiln.tools.check.worker import JobSpec
from kiln.tools.check.workers import WorkerGone, WorkerHandle
from kiln.tools.records import CheckOptions, CheckRecord

DATA = Path(__file__).parent / "data"
PROBLEM = DATA / "add_problem.py"
PROTO = DATA / "protocol"
FAST = CheckOptions(device="cpu", trials=1, timeout_s=120)


def run(name: str, **kw) -> CheckRecord:
    return check(PROBLEM, PROTO / name, FAST.model_copy(update=kw))


def test_the_candidate_job_carries_no_secret() -> None:
    assert not {"secret", "seed"} & set(JobSpec.model_fields)
    rec = run("reads_its_job.py", seed=12345678901, run_rejected=True)
    assert rec.correctness and rec.correctness.passed, rec.reasons


def test_a_reused_output_buffer_is_judged_on_each_call() -> None:
    rec = run("reused_buffer.py", trials=2)
    assert rec.correctness and rec.correctness.passed, rec.reasons  # each call's output packed before the next
    assert rec.status == "rejected" and "output.lazy" in rec.reasons[0]  # hygiene: a returned output changed later


def test_every_group_is_tried_once_so_the_score_does_not_depend_on_order() -> None:
    rec = run("wrong_on_negative.py", trials=3)
    c = rec.correctness
    assert rec.status == "incorrect" and c is not None
    assert {t.distribution for t in c.trials} == {"x1", "x3", "x0.01", "neg", "x1000", "x0.001", "heavy"}  # 'neg' failed, the rest still ran
    assert [t.distribution for t in c.trials if not t.passed] == ["neg", "neg"]  # its before- and after-sync trials
    assert c.score == pytest.approx(6 / 7) and not c.not_attempted
    assert all(t.trial == 0 for t in c.trials)  # after a failure no group is tried a second time


def test_a_statically_rejected_candidate_is_never_executed() -> None:
    rec = run("leaves_a_mark.py")
    assert rec.status == "rejected" and rec.compile is None and "spawn" not in rec.stages_s
    assert any("not executed" in r for r in rec.reasons)


def test_a_syntax_error_is_a_compile_error_record(tmp_path: Path, run_cli) -> None:
    out, cand = tmp_path / "rec.json", tmp_path / "syntax_error.py"
    cand.write_text("import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x, y)\n"
                    "        return x + y\n")
    res = run_cli("check", str(PROBLEM), str(cand), "--device", "cpu", "--json", str(out))
    assert res.returncode == 1, res.stderr
    rec = CheckRecord.model_validate_json(out.read_text())
    assert rec.status == "compile_error" and "syntax" in rec.reasons[0].lower()


def test_a_lone_surrogate_in_the_candidates_text_still_gives_a_written_record(tmp_path: Path, run_cli) -> None:
    """A lone UTF-16 surrogate in the candidate's exception message: no UTF-8 encoder takes it, and
    `kiln check` died printing the verdict, with no JSON written."""
    out = tmp_path / "rec.json"
    res = run_cli("check", str(PROBLEM), str(PROTO / "surrogate_in_error.py"), "--device", "cpu", "--json", str(out))
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    rec = CheckRecord.model_validate_json(out.read_text())
    assert rec.status == "crashed" and any("bad input ? here" in r for r in rec.reasons), rec.reasons


def test_a_failure_of_kiln_reported_by_the_candidates_worker_counts_against_the_candidate() -> None:
    rec = run("claims_kiln_failed.py", run_rejected=True, static="denylist")
    assert rec.correctness is None or not rec.correctness.passed
    assert rec.status in ("crashed", "rejected") and any("counts against the candidate" in r for r in rec.reasons), \
        (rec.status, rec.reasons)


FAKE_WORKER = r"""
import json, os, sys
work = sys.argv[1]
r = os.open(os.path.join(work, "cmd.fifo"), os.O_RDONLY)
w = os.open(os.path.join(work, "rsp.fifo"), os.O_WRONLY)
cmd = json.loads(os.read(r, 65536).split(b"\n")[0])
mode = sys.argv[2]
if mode == "huge":
    os.write(w, b"[" + b"1," * (9 << 20))
elif mode == "notjson":
    os.write(w, b"{this is not json\n")
elif mode == "wrongid":
    os.write(w, json.dumps({"ok": True, "id": "guessed"}).encode() + b"\n")
elif mode == "misfit":
    os.write(w, json.dumps({"ok": True, "id": cmd["id"], "compile": "not a record"}).encode() + b"\n")
else:
    os.write(w, json.dumps({"ok": True, "id": cmd["id"], "compile": {"ok": True, "backend": cmd["op"]}}).encode() + b"\n")
import time; time.sleep(30)
"""


class _Fake(WorkerHandle):
    """A WorkerHandle whose process is a scripted fake worker (the channel is the real one)."""

    def __init__(self, tmp: Path, mode: str) -> None:
        from kiln.tools.check.channel import ParentChannel
        from kiln.tools.sandbox.isolation import start_isolated

        self.spec = JobSpec(role="candidate", work_dir=str(tmp))
        self.role, self.pending, self.watch, self.watched = "candidate", [], None, 0.0
        self.chan = ParentChannel(tmp)
        script = tmp / "fake.py"
        script.write_text(FAKE_WORKER)
        self.proc = start_isolated([sys.executable, str(script), str(tmp), mode], env={"PATH": "/usr/bin"},
                                   cwd=tmp, timeout_s=60)


@pytest.mark.parametrize("mode, words", [("huge", "longer than"), ("notjson", "not JSON"), ("wrongid", "wrong id"),
                                         ("misfit", "is not valid")])
def test_a_reply_the_parent_cannot_trust_ends_the_worker(tmp_path: Path, mode: str, words: str) -> None:
    h = _Fake(tmp_path, mode)
    with pytest.raises(WorkerGone) as err:
        h.call(CandCompile(), time.monotonic() + 30)
    assert "broke the worker protocol" in str(err.value) and words in str(err.value)
    assert h.proc.poll() is not None  # killed, not left running


def test_a_good_reply_comes_back_as_its_record_and_a_silent_worker_times_out(tmp_path: Path) -> None:
    h = _Fake(tmp_path, "echo")
    reply = h.call(CandCompile(), time.monotonic() + 30)
    assert isinstance(reply, CompileReply) and reply.compile.backend == "compile"
    t0 = time.monotonic()
    with pytest.raises(WorkerGone) as err:
        h.call(CandTrial(case="problem"), time.monotonic() + 0.5)
    assert err.value.timed_out and time.monotonic() - t0 < 10


def test_closing_a_channel_twice_leaves_other_descriptors_alone(tmp_path: Path) -> None:
    """The timing stage closes the candidate's worker and the session's end closes every worker again:
    the second close must not close what another check (another thread) opened under the same numbers
    meanwhile, or that check's worker dies writing its reply (BrokenPipeError, seen in a reward burst
    of eight threads on the H200)."""
    import os

    from kiln.tools.check.channel import ParentChannel

    chan = ParentChannel(tmp_path)
    numbers = {chan._w, chan._r}
    chan.close()
    r, w = os.pipe()  # the lowest free numbers: the ones the channel just gave back
    try:
        assert numbers & {r, w}, "the test needs the freed numbers to be reused"
        chan.close()
        os.write(w, b"x")  # still open: the second close closed nothing
        assert os.read(r, 1) == b"x"
    finally:
        os.close(r)
        os.close(w)
