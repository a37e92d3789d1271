"""`kiln model` end to end on a CPU (built-in policies, Triton's interpreter): a small CNN and a small
transformer block are profiled, extracted, optimised, patched, checked end to end and bundled."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kiln.evals.model.optimise import decide
from kiln.evals.model.records import CallSig, OpGroup
from kiln.tools.records import CheckRecord, Speedup, TimingRecord
from tests.model.conftest import BLOCK, CNN, kiln

FAST = ["--device", "cpu", "--patch", "correct", "--max-iters", "1", "--trials", "1", "--seeds", "2",
        "--timeout", "240", "--cpu-slots", "2"]


def _report(folder: Path) -> dict:
    return json.loads((folder / "model.json").read_text())


def _isolation() -> str:
    """strict where this machine has the full sandbox, else best-effort (the flag is tested either way)."""
    from kiln.tools.errors import KilnConfigError
    from kiln.tools.sandbox.box import sandbox_for

    try:
        sandbox_for("strict", None)
    except KilnConfigError:
        return "best-effort"
    return "strict"


@pytest.mark.slow
def test_cnn_end_to_end_and_resume(tmp_path: Path) -> None:
    out = tmp_path / "cnn"
    level = _isolation()
    proc = kiln("model", CNN, "--top", "3", "--out", str(out), "--isolation", level, *FAST, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    assert "optimising 3 op group(s) (--top 3" in proc.stdout and "plus 2 fused pair(s) on them" in proc.stdout
    assert f'kiln.load("{out / "bundle"}").apply(model)' in proc.stdout
    confirms = [json.loads(p.read_text()) for p in (out / "confirm").glob("*.json")]  # the CheckCache's records
    assert confirms and all(c["isolation"]["level"] == level for c in confirms)  # --isolation reaches every check
    r = _report(out)
    line = next(ln for ln in proc.stdout.splitlines() if "in order of expected gain: " in ln)
    order = line.split("in order of expected gain: ")[1].split(", ")
    gains = {g["id"]: g["share"] * max(0.0, 1 - g["roofline_us"] / g["time_us"]) for g in r["profile"]["groups"]}
    assert order == sorted(order, key=lambda k: -gains[k])  # share x roofline headroom, highest first
    assert r["reload"] == f'import kiln; kiln.load("{out / "bundle"}").apply(model)'
    assert "cost model" in r["profile"]["share_of"] and set(r["stages_s"]) >= {"profile", "optimise", "e2e"}
    status = {o["group"].split("_")[0] if not o["group"].startswith("fused") else "fused": o["status"]
              for o in r["ops"]}
    assert status.get("conv2d") == "patched"  # the built-in conv family (issue 23) lowers it
    assert "patched" in status.values()
    assert r["e2e"]["passed"] and not r["e2e"]["measured"] and "no GPU" in r["e2e"]["note"]
    manifest = json.loads((out / "bundle" / "manifest.json").read_text())
    assert {e["group"] for e in manifest["entries"]} == {o["group"] for o in r["ops"] if o["status"] == "patched"}
    html = (out / "report.html").read_text()
    assert "Where the time goes" in html and "<svg" in html and "cost model" in html and "conv2d" in html
    assert "kiln.load(" in html and "kiln.evals.model" not in html  # the line the README shows
    t0 = time.monotonic()
    again = kiln("model", "--resume", str(out), cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resuming" in again.stdout and "  optimised " not in again.stdout  # nothing re-optimised
    assert time.monotonic() - t0 < 120
    assert [o["status"] for o in _report(out)["ops"]] == [o["status"] for o in r["ops"]]


@pytest.mark.slow
def test_transformer_block_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "block"
    proc = kiln("model", BLOCK, "--top", "2", "--min-share", "0.05", "--out", str(out), *FAST, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    r = _report(out)
    patched = [o for o in r["ops"] if o["status"] == "patched"]
    assert patched and r["e2e"]["passed"]
    assert any(o["op"].startswith("F.layer_norm") for o in r["ops"])
    assert all(c["rel_l2_err"] <= c["tol"] for c in r["e2e"]["checks"])


def test_bad_isolation_is_one_line(tmp_path: Path) -> None:
    proc = kiln("model", CNN, "--device", "cpu", "--isolation", "strict", "--bwrap", str(tmp_path / "no-bwrap"),
                "--out", str(tmp_path / "run"), cwd=tmp_path, timeout_s=120)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()  # refused before any work
    bad = kiln("model", CNN, "--device", "cpu", "--isolation", "loose", cwd=tmp_path, timeout_s=120)
    assert bad.returncode == 2 and "--isolation must be strict or best-effort" in bad.stderr


def test_bad_target_exits_2_with_a_skipped_row(tmp_path: Path) -> None:
    f = tmp_path / "broken.py"
    f.write_text("def make():\n    raise RuntimeError('weights missing')\n")
    out = tmp_path / "run"
    proc = kiln("model", f"{f}:make", "--device", "cpu", "--out", str(out), cwd=tmp_path, timeout_s=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "raised RuntimeError: weights missing" in proc.stderr
    assert "Traceback" not in proc.stderr
    r = _report(out)
    assert r["status"] == "failed" and r["skipped"][0]["status"] == "skipped"
    assert "weights missing" in (out / "report.html").read_text()


def _group() -> OpGroup:
    return OpGroup(id="softmax_1", sig=CallSig(op="torch.softmax"), share=0.2)


def test_only_confidently_faster_kernels_are_patched(tmp_path: Path) -> None:
    k = tmp_path / "k.py"
    untimed = CheckRecord(problem="p", candidate="c", status="ok", correct=True,
                          timing=TimingRecord(measured=False, reason="not measured (no GPU)"))
    assert decide(_group(), k, k, "", untimed, "faster").status == "not_faster"
    assert decide(_group(), k, k, "", untimed, "correct").status == "patched"

    def timed(lo: float, hi: float, verdict: str) -> CheckRecord:
        sp = Speedup(baseline="eager", value=(lo + hi) / 2, ci_low=lo, ci_high=hi, verdict=verdict)  # type: ignore[arg-type]
        return untimed.model_copy(update={"timing": TimingRecord(measured=True, speedups={"eager": sp})})

    assert decide(_group(), k, k, "", timed(1.3, 1.5, "faster"), "faster").status == "patched"
    tie = decide(_group(), k, k, "", timed(0.95, 1.2, "tie"), "faster")
    assert tie.status == "not_faster" and "not faster alone with confidence" in tie.reason
    assert tie.trial and "tried in the model" in tie.reason  # the end-to-end check decides
    wrong = untimed.model_copy(update={"correct": False, "status": "incorrect"})
    assert decide(_group(), k, k, "", wrong, "correct").status == "incorrect"
    why = "unsupported by the built-in coder: op `conv2d`"
    assert decide(_group(), k, None, why, None, "faster", status="unsupported").status == "unsupported"


def test_unsupported_is_the_run_status_not_a_word_in_its_reason(tmp_path: Path) -> None:
    """An LLM server refusing a parameter is an LLM error, though its message says 'unsupported'."""
    why = "the Coder's LLM call failed: HTTP 400: unsupported parameter 'seed'"
    assert decide(_group(), tmp_path / "k.py", None, why, None, "faster", status="llm_error").status == "incorrect"


def test_the_model_decides_what_stays_patched() -> None:
    """after_e2e: a kernel not faster alone that wins in the model is patched; one faster alone that
    loses there is dropped, with the end-to-end check's why."""
    from kiln.evals.model.outcomes import after_e2e
    from kiln.evals.model.records import E2ERecord, OpOutcome

    def sp(v: float, verdict: str) -> Speedup:
        return Speedup(baseline="eager", value=v, ci_low=v - 0.01, ci_high=v + 0.01, verdict=verdict)  # type: ignore[arg-type]

    trial = OpOutcome(group="gn", op="F.group_norm", status="not_faster", trial=True, speedup=sp(0.4, "slower"),
                      reason="not faster alone with confidence: 0.40x (CI 0.39-0.41); tried in the model")
    fast = OpOutcome(group="sm", op="torch.softmax", status="patched", speedup=sp(1.3, "faster"), reason="1.30x")
    rec = E2ERecord(in_model={"gn": sp(1.04, "faster"), "sm": sp(0.99, "tie")},
                    dropped=["sm: loses in the model: the forward with it alone is 0.990x eager"],
                    group_gpu_us={"gn": 11.0})
    groups = {"gn": OpGroup(id="gn", sig=CallSig(op="F.group_norm"), time_us=30.0)}
    after_e2e([trial, fast], rec, ["gn"], groups)
    assert trial.status == "patched" and "wins in the model" in trial.reason and trial.gpu_us == [30.0, 11.0]
    assert fast.status == "dropped" and fast.reason.startswith("loses in the model")
    assert fast.in_model is not None and fast.in_model.value == 0.99


def test_report_of_a_measured_run_and_coverage(tmp_path: Path) -> None:
    from kiln.evals.model.records import E2ERecord, LatencyRecord, ModelReport, OpOutcome, ProfileRecord
    from kiln.evals.model.report import write_report
    from kiln.evals.model.run import coverage
    from kiln.tools.records import TimingStat

    head = CallSig(op="F.group_norm")
    tail = CallSig(op="F.silu")
    gn = OpGroup(id="gn", sig=head, count=4, share=0.3, time_us=30.0)
    silu = OpGroup(id="silu", sig=tail, count=8, share=0.2, time_us=20.0)
    fused = OpGroup(id="fused_gn", sig=head, tail=tail, kind="fused", count=4, share=0.5, time_us=50.0)
    assert coverage([gn, silu, fused], ["fused_gn"]) == pytest.approx(0.3 + 0.2 * 4 / 8)
    assert coverage([gn, silu, fused], ["gn", "silu"]) == pytest.approx(0.5)

    def stat(us: float) -> TimingStat:
        return TimingStat(median_us=us, ci_low_us=us * 0.99, ci_high_us=us * 1.01, half_width_pct=1.0, n_samples=50)

    def sp(v: float, verdict: str) -> Speedup:
        return Speedup(baseline="x", value=v, ci_low=v * 0.98, ci_high=v * 1.02, verdict=verdict)  # type: ignore[arg-type]

    e2e = E2ERecord(measured=True, passed=True, coverage=0.4, compile_policy="original",
                    latency=[LatencyRecord(variant="eager", stat=stat(1000)), LatencyRecord(variant="patched", stat=stat(800)),
                             LatencyRecord(variant="compile", stat=stat(500)),
                             LatencyRecord(variant="compile_patched", stat=stat(505))],
                    speedups={"patched_vs_eager": sp(1.25, "faster"), "compile_vs_eager": sp(2.0, "faster"),
                              "patched_vs_compile": sp(0.62, "slower"), "compile_patched_vs_compile": sp(0.99, "tie")},
                    peak_bytes={"eager": 1 << 30, "patched": 1 << 30})
    prof = ProfileRecord(method="torch.profiler", note="CUDA time per op (torch.profiler)", device="cuda",
                         dtype="float32", total_us=100.0, groups=[fused, gn, silu])
    op = OpOutcome(group="gn", op="F.group_norm", share=0.3, status="patched", speedup=sp(1.8, "faster"))
    r = ModelReport(target="t", model="m", device="cuda", dtype="fp32", profile=prof, ops=[op], e2e=e2e)
    write_report(tmp_path, r)
    html = (tmp_path / "report.html").read_text()
    assert "torch.compile already wins end to end here" in html and "2.00x vs eager" in html
    assert "1.80x [1.76, 1.84]" in html and "compile_patched" in html and "1024.0 MiB" in html
    assert ModelReport.model_validate_json((tmp_path / "model.json").read_text()) == r
