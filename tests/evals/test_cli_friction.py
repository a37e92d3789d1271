"""What a new user hit: --version, --config in the help, errors that name the flag (worded like
`kiln check`'s), environment variables named after the flag, help text on every eval option,
comparisons that say "not measured", a live display without LangGraph's own keys."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from kiln.evals.batch.compare import compare, render_markdown
from kiln.evals.batch.report import load_run

FIX = Path(__file__).parents[1] / "fixtures"
PROBLEM = FIX / "problems" / "relu.py"
CANDIDATE = FIX / "kernels" / "correct" / "triton" / "relu.py"


def kiln(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kiln.evals.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})}, cwd=cwd)


def test_version_and_config_are_in_the_help():
    version = kiln("--version")
    assert version.returncode == 0 and version.stdout.startswith("kiln 0.")
    top = kiln("--help").stdout
    assert "--config" in top and "--version" in top and "KILN_VERSION" not in top


def test_option_errors_name_the_flag(tmp_path):
    run = kiln("run", str(PROBLEM), "--device", "cpu", "--max-iters", "0", "--out", str(tmp_path / "r"))
    assert run.returncode == 2 and run.stderr.strip() == "kiln: error: --max-iters must be >= 1 (got 0)"
    strat = kiln("run", str(PROBLEM), "--device", "cpu", "--strategy", "sideways", "--out", str(tmp_path / "s"))
    assert "--strategy must be one of linear, beam, mcts (got 'sideways')" in strat.stderr
    ev = kiln("eval", str(PROBLEM), "--device", "cpu", "--llm", "builtin", "--trials", "0", "--out", str(tmp_path / "e"))
    assert ev.returncode == 2 and "--trials must be >= 1 (got 0)" in ev.stderr
    dev = kiln("run", str(PROBLEM), "--device", "gpu")
    assert "--device must be one of auto, cuda, cpu (got 'gpu')" in dev.stderr
    for out in (run, strat, ev, dev):
        assert "Traceback" not in out.stderr and "budgets." not in out.stderr and "bad option" not in out.stderr


def test_every_eval_option_has_help():
    text = kiln("eval", "--help").stdout
    for flag in ("--coder-llm", "--judge-llm", "--proposer-llm", "--target-speedup", "--check-timeout", "--dtype"):
        line = next(ln for ln in text.splitlines() if flag in ln)
        assert len(line.split(flag, 1)[1].strip(" │")) > 12, line  # a flag followed by words, not only its type


def test_environment_variables_follow_the_flag(tmp_path):
    out = tmp_path / "rec.json"
    done = kiln("check", str(PROBLEM), str(CANDIDATE), "--device", "cpu", "--trials", "1",
                env={"KILN_CHECK_JSON": str(out)})
    assert done.returncode == 0, done.stderr[-1500:]
    assert out.exists()
    assert "KILN_CHECK_JSON]" in kiln("check", "--help").stdout


def test_config_file_keys_are_the_flags(tmp_path):
    out = tmp_path / "from_config.json"
    (tmp_path / "kiln.toml").write_text(f'[check]\njson = "{out}"\ntrials = 1\n')
    done = kiln("check", str(PROBLEM), str(CANDIDATE), "--device", "cpu", cwd=tmp_path)
    assert done.returncode == 0 and out.exists(), done.stderr[-1500:]


def test_a_comparison_without_timings_says_not_measured(filled_run: Path, tmp_path: Path):
    import sqlite3

    con = sqlite3.connect(filled_run / "results.sqlite")  # a CPU batch: no check record holds a timing
    con.execute("DELETE FROM candidates")
    con.commit()
    con.close()
    other = tmp_path / "other"
    shutil.copytree(filled_run, other)
    a, b = load_run(filled_run), load_run(other)
    rows, summary = compare(a, b)
    text = render_markdown(a, b, rows, summary)
    assert "fast_1 vs eager: A not measured, B not measured" in text
    assert "changes: 0 fixed, 0 broke, 0 faster, 0 slower, 4 same" in text and "{" not in text


def test_the_live_display_skips_langgraph_keys():
    from rich.console import Console

    from kiln.graphs.progress import Progress

    p = Progress(console=Console(file=open(os.devnull, "w")), live=False)  # noqa: SIM115
    p.feed({"type": "updates", "data": {"code": {"iteration": 1}}})
    p.feed({"type": "updates", "data": {"__metadata__": {"cached": True}}})
    assert p.stage == "code" and "__metadata__" not in p.line()


def test_bf16_on_cpu_is_refused_before_any_work(tmp_path):
    """Every candidate would come back `unsupported` (the interpreter has no bf16): one line, exit 2,
    nothing written, for the loop's commands (`kiln check` still writes its unsupported record)."""
    line = ("kiln: error: --dtype bf16 needs a GPU: on CPU, Triton's interpreter has no bf16 and CUDA kernels "
            "cannot run; use --dtype fp32 or fp16 there")
    runs = [kiln("run", str(PROBLEM), "--device", "cpu", "--dtype", "bf16", "--out", str(tmp_path / "r")),
            kiln("model", f"{FIX.parent.parent / 'examples' / 'model' / 'small_cnn.py'}:make", "--device", "cpu",
                 "--dtype", "bf16", "--out", str(tmp_path / "m")),
            kiln("eval", str(PROBLEM), "--device", "cpu", "--dtype", "bf16", "--llm", "builtin", "--out", str(tmp_path / "e"))]
    for r in runs:
        assert r.returncode == 2 and r.stderr.strip() == line, r.stderr[-600:]
    assert not any((tmp_path / d).exists() for d in ("r", "m", "e"))


def test_eval_dtype_reaches_every_check_of_an_agent_sample():
    """`kiln eval --mode agent --dtype bf16` used to check fp32: the run options had no dtype."""
    from kiln.evals.batch.jobs import BatchConfig
    from kiln.graphs.runner import make_options

    cfg = BatchConfig(mode="agent", dtype="bf16", trials=2, device="cpu", check_timeout=77)
    opts = make_options(PROBLEM, {}, cfg.loop)
    assert (opts.check.dtype, opts.check.trials, opts.check.timeout_s) == ("bf16", 2, 77)


def test_one_default_for_trials_everywhere():
    def default(cmd: str, flag: str) -> str:
        lines = kiln(cmd, "--help").stdout.splitlines()
        i = next(i for i, ln in enumerate(lines) if f"{flag} " in ln)
        return re.search(r"default: ([^\];]+)", " ".join(lines[i:i + 6]))[1].strip()

    assert default("run", "--trials") == default("eval", "--trials") == default("check", "--trials") == "2"
