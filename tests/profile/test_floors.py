"""The I/O floor beside the algorithm floor (issue 25 item 11), on level2/18 at KernelBench's sizes
(flops and bytes counted by kiln's physics counter on the meta device: 137,438,953,472 FLOPs;
33.5 MB of inputs, 268.5 MB of weights, 4 KB of output) and on the H200's recorded peaks. Its
sum folds into the GEMM (about 30x): a kernel at 90% of the algorithm's roofline is still far from
the fastest, and the Judge is told, in the profile digest and in its evaluation."""

from __future__ import annotations

from kiln.agents.judge import LLMJudge, rule_decision
from kiln.tools.peaks import known
from kiln.tools.profile.floors import floor_lines, floors
from kiln.tools.profile.records import ProfileReport
from kiln.tools.profile.render import render_digest
from kiln.tools.records import IntegrityRecord, PhysicsRecord

H200 = known("NVIDIA H200")
L2_18 = {"io_bytes": 33_554_432 + 268_468_224 + 4096, "flops": 137_438_953_472}


def test_floors_of_a_foldable_problem_differ_and_say_so():
    f = floors(L2_18["io_bytes"], L2_18["flops"], gbps=H200.copy_gbps, tflops=H200.floor_tflops("fp32"))
    assert 55 < f.io_floor_us < 62 and 140 < f.algorithm_floor_us < 150 and f.differ
    text = "\n".join(floor_lines(f))
    assert "I/O floor 58." in text and "(no algorithm beats it)" in text and "algorithm floor 144." in text
    assert "algebraic simplification that does less work than the reference" in text
    elementwise = floors(2 * 4 * 2**28, 2**28, gbps=H200.copy_gbps, tflops=H200.floor_tflops("fp32"))
    assert not elementwise.differ and "simplification" not in "\n".join(floor_lines(elementwise))


def test_the_profile_digest_shows_both_floors():
    f = floors(L2_18["io_bytes"], L2_18["flops"], gbps=H200.copy_gbps, tflops=H200.floor_tflops("fp32"))
    report = ProfileReport(source="torch_profiler", candidate="c.py", peaks=H200, gpu_name="NVIDIA H200", floors=f)
    text = render_digest(report)
    assert "floors: I/O floor 58." in text and "floors: algorithm floor 144." in text
    assert ProfileReport.model_validate_json(report.model_dump_json()) == report


def _physics_input(measured_us: float):
    from kiln.agents.base import JudgeInput
    from kiln.tools.records import CheckRecord

    check = CheckRecord(problem="18.py", candidate="c.py", status="ok", correct=True)
    inp = JudgeInput(problem_name="18", problem_src="x", candidate_src="y", check=check, stress_passed=True,
                     best_speedup=1.2, target_speedup=3.0)
    f = floors(L2_18["io_bytes"], L2_18["flops"], gbps=H200.copy_gbps, tflops=H200.floor_tflops("fp32"))
    physics = PhysicsRecord(bytes_moved=L2_18["io_bytes"], flops=L2_18["flops"], peak_gbps=H200.copy_gbps,
                            peak_tflops=H200.floor_tflops("fp32"), floor_us=f.algorithm_floor_us,
                            measured_us=measured_us, pct_of_floor=100 * f.algorithm_floor_us / measured_us,
                            bound="compute")
    check = inp.check.model_copy(update={"integrity": IntegrityRecord(physics=physics)})
    return inp.model_copy(update={"check": check, "gpu": inp.gpu.model_copy(update={"device": "cuda"})})


def test_the_judge_is_not_stopped_at_the_algorithm_roofline_while_a_fold_may_remain():
    inp = _physics_input(measured_us=150.0)  # 96% of the algorithm floor
    assert rule_decision(inp, no_progress_k=4) is None  # the rules leave it to the Judge
    user = LLMJudge(None).messages(inp)[1].content
    assert "96% of roofline" in user and "I/O floor 58." in user and "algorithm floor 144." in user
    assert "algebraic simplification" in user
    system = LLMJudge(None).messages(inp)[0].content
    assert "the I/O floor (moving the data once: no algorithm" in system
