"""What a newcomer hit at the edges (issue 26, items 7, 11, 13): outputs that cannot be written fail
first, in one line, for every command; a comparison with nothing in common says so; an unreachable
--base-url is one line before any run directory exists; a candidate without ModelNew is labelled as
not loaded; the curriculum's frontier shares sum to 1 per round. Real subprocesses and stores."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from pathlib import Path

from kiln.evals.batch.jobs import BatchConfig, outcome_from_record
from kiln.evals.batch.store import ResultStore

FIX = Path(__file__).parents[1] / "fixtures"
PROBLEM = FIX / "problems" / "relu.py"
CANDIDATE = FIX / "kernels" / "correct" / "triton" / "relu.py"
KILN = str(Path(sys.executable).parent / "kiln")


def kiln(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([KILN, *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "OPENAI_API_KEY": "EMPTY"})


def _one_line_error(done: subprocess.CompletedProcess, words: str) -> None:
    err = done.stderr.strip()
    assert done.returncode == 2 and words in err and len(err.splitlines()) == 1 and "Traceback" not in err, err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unwritable_outputs_fail_first_in_one_line(tmp_path: Path, filled_run: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    (filled_run / "report").write_text("a file where the report folder goes")
    cases = [
        (("report", str(filled_run)), "report folder"),
        (("eval", str(PROBLEM), "--out", str(afile / "sub")), "--out"),
        (("model", "timm:resnet18", "--out", "/proc/1/x"), "--out /proc/1/x: cannot write there"),
        (("profile", str(PROBLEM), str(CANDIDATE), "--json", "/proc/1/x.json"), "--json /proc/1/x.json: cannot"),
        (("profile", str(PROBLEM), str(CANDIDATE), "--json", str(tmp_path)), "it is a folder, not a file"),
    ]
    for argv, words in cases:
        _one_line_error(kiln(*argv, cwd=tmp_path), words)


def test_check_json_unwritable_fails_before_the_check(tmp_path: Path) -> None:
    done = kiln("check", str(PROBLEM), str(CANDIDATE), "--device", "cpu", "--trials", "1", "--json", "/proc/1/x.json")
    _one_line_error(done, "--json /proc/1/x.json: cannot write there")
    assert "kiln check" not in done.stdout  # refused before any check ran


def test_comparing_batches_with_nothing_in_common_says_so(filled_run: Path, tmp_path: Path) -> None:
    """A is filled_run (4 problems, 2 correct); B is 100% correct on 2 other problems."""
    from kiln.tools.records import CheckRecord, CompileRecord

    other = tmp_path / "other"
    store = ResultStore(other / "results.sqlite")
    store.set_meta("config", BatchConfig(mode="oneshot", samples=1).model_dump())
    for problem in ("level1/1_Square_matrix_multiplication_", "level1/2_Standard_matrix_multiplication_"):
        rec = CheckRecord(problem=problem, candidate="c.py", device="cpu", status="ok", correct=True,
                          compile=CompileRecord(ok=True))
        store.add_candidate(problem, 0, 0, rec, None)
        store.finish_sample(outcome_from_record(problem, 0, rec))
    store.close()
    done = kiln("report", str(filled_run), str(other))
    _one_line_error(done, "nothing to compare")
    assert "no problem in common" in done.stderr and "level1/1_Square" in done.stderr and "0.0%" not in done.stdout
    assert not (other / "compare").exists()


def test_an_unreachable_base_url_is_one_line_and_no_run_dir(tmp_path: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    run = kiln("run", str(PROBLEM), "--llm", "openai:some-model", "--base-url", url, "--out", str(tmp_path / "r"))
    _one_line_error(run, f"is a server listening at 127.0.0.1:{port}?")
    ev = kiln("eval", str(PROBLEM), "--llm", "openai:some-model", "--base-url", url, "--out", str(tmp_path / "e"))
    _one_line_error(ev, f"is a server listening at 127.0.0.1:{port}?")
    assert not (tmp_path / "r").exists() and not (tmp_path / "e").exists()


def test_a_candidate_without_modelnew_is_labelled_not_loaded(tmp_path: Path) -> None:
    cand = tmp_path / "no_model_new.py"
    cand.write_text("import torch\n\n\nclass Model(torch.nn.Module):\n    pass\n")
    done = kiln("check", str(PROBLEM), str(cand), "--device", "cpu", "--trials", "1")
    assert done.returncode == 1, done.stderr[-1500:]
    assert "compile      FAILED: the candidate did not load" in done.stdout and "ModelNew" in done.stdout
    assert "(unknown, ?)" not in done.stdout


def test_frontier_shares_sum_to_one_each_round() -> None:
    from kiln.agents.curriculum.base import ApiSet
    from kiln.evals.curriculum.frontier import Frontier
    from kiln.evals.curriculum.report import frontier_rows

    fr, rng, snaps = Frontier(), random.Random(3), []
    sets = [ApiSet(ops=[f"{fam}{i}"], families=[fam]) for fam in ("easy", "medium", "hard") for i in range(3)]
    sets.append(ApiSet(ops=["easy9", "hard9"], families=["easy", "hard"]))
    for r in range(1, 4):
        chosen, weights = fr.choose(sets, 3, rng)
        snaps.append(fr.snapshot(r, sorted({f for s in sets for f in s.families}), chosen, weights))
        for s in chosen:
            fr.record(s, passed=rng.randint(0, 4), n=4)
    rows = frontier_rows(snaps, [])
    for col in range(1, 4):
        total = sum(float(row[col].split()[0]) for row in rows)
        assert abs(total - 1.0) < 0.01, (col, total)


def test_eval_shows_its_figures_when_writing_them_fails_at_the_end(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "cumsum.py").write_text(PROBLEM.read_text().replace("torch.relu(x)", "torch.cumsum(x, dim=1)"))
    out = tmp_path / "out"
    (out / "metrics.json.tmp").mkdir(parents=True)  # the final write fails (a folder where its file goes)
    done = kiln("eval", str(tmp_path / "p"), "--device", "cpu", "--out", str(out))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "could not write" in done.stderr and "metrics.json" in done.stderr
    assert "correct rate" in done.stdout and "problems" in done.stdout  # the figures, shown anyway
