"""`check()` end to end on CPU: real worker subprocesses, the Triton interpreter, real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kiln.tools.check import LocalEvaluator, check
from kiln.tools.check.pipeline import extra_round
from kiln.tools.evaluator import Evaluator
from kiln.tools.problem import load_candidate, load_problem
from kiln.tools.records import CheckOptions, CheckRecord, Speedup, TimingRecord

DATA = Path(__file__).parent / "data"
PROBLEM = DATA / "add_problem.py"
FAST = CheckOptions(device="cpu", trials=1, timeout_s=120)
RUN_ANYWAY = FAST.model_copy(update={"run_rejected": True})  # fixtures the static scan refuses, run to test containment


def run(candidate: str, **kw) -> CheckRecord:
    return check(PROBLEM, DATA / candidate, FAST.model_copy(update=kw))


@pytest.fixture(scope="module")
def wrong() -> CheckRecord:
    return run("wrong_scale.py")


def test_correct_triton_candidate_passes_every_trial() -> None:
    rec = run("add_triton.py", trials=2)
    assert rec.status == "ok" and rec.correct, rec.reasons
    c = rec.correctness
    # (2 trials x 4 basic distributions + 1 trial x 3 wide ones) x first/second call
    assert c is not None and c.passed and c.n_trials == c.n_passed == (2 * 4 + 3) * 2
    assert {t.distribution for t in c.trials} == {"x1", "x3", "x0.01", "neg", "x1000", "x0.001", "heavy"}
    assert c.rule == "numerics" and c.legacy_atol_rtol_passed is True
    assert {t.phase for t in c.trials} == {"first_call", "second_call"}
    assert c.score == 1.0 and c.cases["problem"].n_trials == 11 and c.cases["problem"].candidate_s
    assert rec.compile and rec.compile.ok and rec.compile.backend == "triton-interpreter"
    assert rec.timing and not rec.timing.measured and rec.timing.reason == "not measured (no GPU)"
    assert {"spawn", "compile", "correctness", "total"} <= set(rec.stages_s)
    assert rec.seed is not None


def test_wrong_candidate_gets_a_diagnosis_a_coder_can_use(wrong: CheckRecord) -> None:
    rec = wrong
    assert rec.status == "incorrect" and not rec.correct
    c = rec.correctness
    assert c is not None and not c.passed and c.first_failure
    assert "constant 0.5" in c.first_failure and "max abs err" in c.first_failure
    bad = next(t for t in c.trials if not t.passed)
    assert bad.mismatch and bad.mismatch.n_mismatch == 1023 and bad.mismatch.first
    assert rec.timing and not rec.timing.measured


def test_input_mutation_fails() -> None:
    rec = run("mutate_inputs.py")
    assert not rec.correct and rec.correctness and rec.correctness.input_mutated
    assert any("correctness.input-mutation" in r for r in rec.reasons)


CRASHERS = [
    ("crash_segfault.py", "crashed", "SIGSEGV"),
    ("crash_import_segfault.py", "crashed", "SIGSEGV"),
    ("crash_exit.py", "crashed", "exited early"),
    ("crash_huge_alloc.py", "crashed", "can't allocate memory"),
    ("crash_raise.py", "crashed", "ValueError: kernel launch parameters are wrong"),
    ("crash_nvml_oom.py", "crashed", "torch.OutOfMemoryError: CUDA out of memory"),
    ("crash_hang.py", "timeout", "exceeded its"),
]


@pytest.fixture(scope="module")
def crash_run() -> dict[str, CheckRecord]:
    """Every crasher through one evaluator, then a correct candidate: it must still run normally."""
    ev: Evaluator = LocalEvaluator(FAST)
    opts = RUN_ANYWAY.model_copy(update={"timeout_s": 20, "compile_timeout_s": 6})
    out = {name: ev.check(PROBLEM, DATA / name, opts) for name, _, _ in CRASHERS}
    out["after"] = ev.check(PROBLEM, DATA / "add_triton.py", FAST)
    return out


@pytest.mark.parametrize("name, status, words", CRASHERS)
def test_crashing_candidates_are_contained(crash_run: dict[str, CheckRecord], name: str, status: str,
                                           words: str) -> None:
    rec = crash_run[name]
    assert not rec.correct
    # static integrity may also reject (ctypes); the crash itself must still be on record
    assert rec.status in (status, "rejected"), rec.reasons
    assert any(words in r for r in rec.reasons), rec.reasons
    if status == "timeout":
        assert rec.stages_s["total"] < 40


def test_the_next_candidate_runs_normally_after_crashes(crash_run: dict[str, CheckRecord]) -> None:
    assert crash_run["after"].status == "ok", crash_run["after"].reasons


def test_no_secret_reaches_the_worker(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-in-the-parent")
    monkeypatch.setenv("KILN_TEST_TOKEN", "planted-token")
    rec = check(PROBLEM, DATA / "env_dump.py", RUN_ANYWAY)  # it reads os.environ: statically rejected
    assert rec.correctness and rec.correctness.passed, rec.reasons  # computed right: its environment was clean


def test_extra_case_is_checked_too() -> None:
    rec = run("add_triton.py", cases=[str(DATA / "add_case_big.py")])
    assert rec.status == "ok", rec.reasons
    assert rec.correctness and {t.case for t in rec.correctness.trials} == {"problem", "add_case_big"}


def test_two_cases_are_judged_beside_the_problem() -> None:
    """The cases (one with its own Model) share a reference worker of their own; every group of each
    is judged, and a wrong kernel fails the problem's groups as well as theirs."""
    cases = [str(DATA / "add_case_big.py"), str(DATA / "add_case_wide.py")]
    rec = run("add_triton.py", cases=cases)
    assert rec.status == "ok", rec.reasons
    groups = {(t.case, t.distribution) for t in rec.correctness.trials}
    assert {c for c, _ in groups} == {"problem", "add_case_big", "add_case_wide"}
    assert all((c, "x1") in groups for c in ("problem", "add_case_big", "add_case_wide"))
    wrong = run("wrong_scale.py", cases=cases)
    assert wrong.status == "incorrect"
    assert {t.case for t in wrong.correctness.trials if not t.passed} >= {"problem"}


def test_cuda_candidate_on_cpu_is_unsupported(tmp_path: Path) -> None:
    cand = tmp_path / "cuda_cand.py"
    cand.write_text(
        "import torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
        "src = '__global__ void k(float* x) { x[threadIdx.x] = 0; }'\n"
        "mod = load_inline(name='k', cpp_sources='', cuda_sources=src, functions=[])\n"
        "class ModelNew(nn.Module):\n    def forward(self, x, y):\n        return x + y\n")
    rec = check(PROBLEM, cand, FAST)
    assert rec.status == "unsupported" and "needs a CUDA GPU" in rec.reasons[0]
    assert rec.timing and rec.timing.reason == "not measured (no GPU)"


def test_bf16_triton_on_cpu_is_unsupported() -> None:
    rec = run("add_triton.py", dtype="bf16")
    assert rec.status == "unsupported" and "no bf16" in rec.reasons[0]


def test_record_json_round_trip(wrong: CheckRecord) -> None:
    again = CheckRecord.model_validate_json(wrong.model_dump_json())
    assert again == wrong and json.loads(wrong.model_dump_json())["status"] == "incorrect"


def _fake_speedup(rec: CheckRecord, value: float) -> CheckRecord:
    rec = rec.model_copy(deep=True)
    rec.timing = TimingRecord(measured=True, speedups={"eager": Speedup(baseline="eager", value=value, ci_low=value - 1,
                                                                        ci_high=value + 1, verdict="faster")})
    return rec


@pytest.mark.parametrize("name, status", [("add_triton.py", "ok"), ("add_triton_flaky.py", "incorrect")])
def test_extra_round_after_a_big_speedup(name: str, status: str) -> None:
    first = run(name)
    assert first.status == "ok", first.reasons  # 1 trial: the flaky one is still right
    prob = load_problem(PROBLEM)
    out = extra_round(_fake_speedup(first, 20.0), prob, [], load_candidate(DATA / name, prob), FAST, static=[])
    assert out.integrity and out.integrity.extra_round and out.evidence.extra_round.trials == 10
    assert out.status == status, out.reasons
    if status != "ok":
        assert any("extra verification round" in r for r in out.reasons)


def test_plain_spawn_path_without_fork_server() -> None:
    rec = run("wrong_scale.py", fork_server=False)
    assert rec.status == "incorrect" and rec.stages_s["spawn"] > 0.2, rec.stages_s  # a fresh interpreter pays imports


def test_matching_weights_are_copied_into_modelnew() -> None:
    rec = check(DATA / "linear_problem.py", DATA / "linear_reordered.py", FAST)
    # (integrity may reject a PyTorch-only forward; the weights must still have agreed)
    assert rec.correctness and rec.correctness.passed, rec.reasons


def test_fp16_is_cast_and_uses_its_tolerance() -> None:
    rec = run("add_triton.py", dtype="fp16")
    assert rec.status == "ok", rec.reasons
    assert rec.correctness and rec.correctness.atol == 1e-2


def test_cli_exit_codes_and_json(tmp_path: Path, run_cli) -> None:
    out = tmp_path / "rec.json"
    bad = run_cli("check", str(PROBLEM), str(DATA / "wrong_scale.py"), "--device", "cpu", "--trials", "1",
                  "--json", str(out))
    assert bad.returncode == 1 and "INCORRECT" in bad.stdout and "Traceback" not in bad.stderr
    rec = CheckRecord.model_validate_json(out.read_text())
    assert rec.status == "incorrect" and not rec.correct and rec.reasons
    assert rec.compile and rec.correctness and rec.timing and rec.timing.reason == "not measured (no GPU)"
    good = run_cli("check", str(PROBLEM), str(DATA / "add_triton.py"), "--device", "cpu", "--trials", "1")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "OK" in good.stdout and "not measured (no GPU)" in good.stdout


def test_a_dead_fork_server_is_replaced() -> None:
    from kiln.tools.sandbox import zygote

    assert run("wrong_scale.py").status == "incorrect"
    assert zygote._POOL, "the check should have used the fork server"
    for server in zygote._POOL.values():
        server.proc.kill()
        server.proc.wait(timeout=10)
    rec = run("wrong_scale.py")
    assert rec.status == "incorrect" and all(s.alive() for s in zygote._POOL.values())


def test_a_forged_reply_is_a_record_not_an_exception() -> None:
    rec = run("forged_result.py", run_rejected=True)
    assert not rec.correct and any("broke the worker protocol" in r for r in rec.reasons), rec.reasons


def test_init_inputs_may_hold_a_shape_tuple() -> None:
    """KernelBench's 40_LayerNorm passes `normalized_shape` as a tuple in get_init_inputs()."""
    rec = check(DATA / "shape_init_problem.py", DATA / "shape_init_triton.py", FAST)
    assert rec.status == "ok" and rec.correct, rec.reasons


def test_a_wrong_softmax_hidden_under_atol_is_incorrect() -> None:
    """Every output of the problem lies below atol, so x * 2e-5 passes a fixed-atol test elementwise
    (the relative L2 error, 1.0, is what rejected it under that rule); the numerics rule's allowance
    scales with the data, so it fails element by element. The problem stays flagged near-zero."""
    rec = check(DATA / "flat_softmax_problem.py", DATA / "flat_softmax_scaled.py", FAST)
    assert rec.status == "incorrect" and not rec.correct, rec.reasons
    c = rec.correctness
    assert c is not None and c.trials[0].mismatch is not None and c.trials[0].mismatch.rule == "numerics"
    assert c.legacy_atol_rtol_passed is False  # the fixed rule's hidden-error rejection, recorded beside it
    assert rec.integrity and rec.integrity.degenerate and rec.integrity.degenerate.degenerate
    assert any(r.startswith("degenerate.near-zero") for r in rec.integrity.degenerate.reasons)


def test_a_0d_tensor_input_is_checked_like_any_other() -> None:
    rec = check(DATA / "scalar_input_problem.py", DATA / "scalar_input_triton.py", FAST)
    assert rec.status == "ok" and rec.correct, rec.reasons
