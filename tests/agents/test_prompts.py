"""Prompt templates: StrictUndefined, bounded context, facts from the machine, the CUDA forms."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from kiln.agents import prompts
from kiln.agents.base import GpuFacts, JudgeInput
from kiln.agents.coder import LLMCoder, clip
from kiln.agents.judge import LLMJudge
from kiln.agents.llm.client import LLMClient
from kiln.agents.llm.redact import Redactor
from kiln.agents.llm.scripted import ScriptedChatModel
from kiln.agents.llm.usage import UsageTracker
from kiln.agents.proposer import LLMProposer
from kiln.tools.profile.records import KernelProfile, ProfileReport
from kiln.tools.profile.render import render_digest

from .helpers import coder_task, judge_input, proposer_input

STATIC = {"lang_triton.j2", "lang_cuda.j2", "check_cost.j2"}  # check_cost.j2: macros only
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TEMPLATES = sorted(p.name for p in prompts.PROMPTS_DIR.glob("*.j2"))


def client(role: str = "coder") -> LLMClient:
    return LLMClient(role, ScriptedChatModel(replies=[]), model_name="scripted", tracker=UsageTracker(),
                     redactor=Redactor())


@pytest.mark.parametrize("name", TEMPLATES)
def test_every_template_fails_on_a_missing_variable(name):
    if name in STATIC:
        assert prompts.render(name)  # no variables at all
        return
    with pytest.raises(jinja2.UndefinedError):
        prompts.render(name)


def test_missing_variable_in_coder_user_names_it():
    with pytest.raises(jinja2.UndefinedError, match="feedback_title"):
        prompts.render("coder_user.j2", mode="repair", dtype="fp32", problem_name="p", problem_src="x", best_src=None,
                       best_note="", last_src=None, feedback="err")


def test_coder_prompt_is_bounded_to_task_best_last_feedback():
    task = coder_task("repair", best_src="BEST_KERNEL_SRC", last_src="LAST_KERNEL_SRC",
                      feedback="IndexError at line 12", iteration=7)
    system, user = LLMCoder(client()).messages(task)
    assert isinstance(system, SystemMessage) and isinstance(user, HumanMessage)
    for part in ("BEST_KERNEL_SRC", "LAST_KERNEL_SRC", "IndexError at line 12", "class Model(nn.Module)"):
        assert part in user.content
    assert "What went wrong" in user.content and "Fix exactly the problem" in user.content
    assert "row_clip_kernel" in system.content  # the few-shot example, pasted verbatim
    long = coder_task("repair", feedback="x" * 50_000)
    assert len(LLMCoder(client(), max_feedback_chars=1000).messages(long)[1].content) < 8000


def test_optimize_mode_shows_the_plan_and_generate_has_no_best():
    _, user = LLMCoder(client()).messages(coder_task("optimize", best_src="B", feedback="use 8 warps"))
    assert "The Judge's plan" in user.content and "use 8 warps" in user.content
    _, user = LLMCoder(client()).messages(coder_task("generate"))
    assert "current best" not in user.content and "first correct" in user.content


def test_gpu_facts_come_from_the_record_never_hard_coded():
    gpu = GpuFacts(device="cuda", name="Some GPU", sm_count=77, capability="9.0", smem_per_sm_bytes=233472,
                   l2_bytes=12345678, copy_gbps=3210.5, tflops={"bf16": 654.3})
    system = LLMCoder(client()).messages(coder_task(gpu=gpu))[0].content
    for value in ("77", "233472", "12345678", "3210.5 GB/s", "654.3 TFLOP/s", "Some GPU"):
        assert value in system
    cpu = LLMCoder(client()).messages(coder_task())[0].content
    assert "Triton interpreter" in cpu and "- SMs:" not in cpu
    unmeasured = LLMCoder(client()).messages(coder_task(gpu=GpuFacts(device="cuda", name="g")))[0].content
    assert "measured copy bandwidth: not measured" in unmeasured


def test_cuda_prompt_teaches_kiln_fast_path_and_load_inline_form():
    system = LLMCoder(client()).messages(coder_task(lang="cuda"))[0].content
    assert "kiln.tools.cuda.CudaKernel" in system and "i64(" in system
    assert "no_implicit_headers=True" in system and "getCurrentCUDAStream" in system
    assert "fake_quant_f32" in system and "scale_add_launch" in system  # both CUDA examples
    assert "row_clip_kernel" not in system


def test_judge_and_proposer_prompts_render_from_records():
    system, user = LLMJudge(client("judge"), no_progress_k=4).messages(judge_input(correct=False, iteration=3))
    assert "no progress for 4 iterations" in system.content
    assert "expected 0.1, got 0.3" in user.content and "status: incorrect" in user.content
    assert "speed is not measured" in user.content
    system, user = LLMProposer(client("proposer")).messages(proposer_input(existing_cases=["batch1"], max_cases=2))
    assert "verbatim" in system.content and "batch1" in user.content and "at most 2" in user.content


def test_the_llm_judge_reads_the_profile_as_its_rendered_digest():
    """The profile reaches the Judge typed; only the LLM Judge's prompt renders it, as `kiln profile` does."""
    k = KernelProfile(name="triton_softmax", duration_us=140.0, dram_pct=41.0, bound="memory", roofline_pct=41.0)
    report = ProfileReport(source="ncu", candidate="c.py", kernels=[k])
    _, user = LLMJudge(client("judge")).messages(judge_input(profile=report))
    assert "Profile digest:" in user.content and render_digest(report).strip() in user.content
    _, bare = LLMJudge(client("judge")).messages(judge_input())
    assert "Profile digest:" not in bare.content


def test_judge_requests_logged_with_the_old_digest_field_still_load():
    """Run directories written before the profile was typed logged `profile_digest` in each request."""
    logged = sorted((FIXTURES / "ui" / "runs" / "relu-mcts" / "llm").glob("*_judge.json"))
    assert logged
    for path in logged:
        request = json.loads(path.read_text())["request"]
        assert "profile_digest" in request and JudgeInput.model_validate(request).profile is None


def test_clip_keeps_head_and_tail():
    text = "A" * 100 + "B" * 100
    out = clip(text, 50)
    assert out.startswith("A" * 25) and out.endswith("B" * 25) and "150 characters cut" in out
    assert clip("short", 50) == "short" and clip(None, 5) is None


def test_check_summary_renders_every_part_of_a_record():
    from kiln.tools.records import (
        CheckRecord,
        CompileRecord,
        CorrectnessRecord,
        Finding,
        IntegrityRecord,
        PhysicsRecord,
        Speedup,
        TimingRecord,
        TimingStat,
    )

    stat = TimingStat(median_us=12.5, ci_low_us=12.0, ci_high_us=13.0, half_width_pct=0.8, n_samples=40)
    rec = CheckRecord(
        problem="p.py", candidate="c.py", status="rejected", reasons=["static.stream"],
        compile=CompileRecord(ok=False, backend="nvrtc", compile_s=0.3, errors=["kernel.cu:4: error: x undefined"]),
        correctness=CorrectnessRecord(atol=1e-4, rtol=1e-4, n_trials=6, n_passed=6, passed=True, input_mutated=True),
        integrity=IntegrityRecord(findings=[Finding(rule="static.stream", severity="reject", evidence="torch.cuda.Stream()", line=9)],
                                  physics=PhysicsRecord(floor_us=3.1, measured_us=12.5, pct_of_floor=24.8)),
        timing=TimingRecord(measured=True, method="cuda-events", candidate=stat, speedups={
            "compile": Speedup(baseline="compile", value=0.91, ci_low=0.9, ci_high=0.92, verdict="slower")}),
        stderr_tail="Traceback: boom",
    )
    text = prompts.render("check_summary.j2", check=rec, cost=None, floor_lines=["I/O floor 1.00 us: 4096 bytes"])
    for part in ("status: rejected (static.stream)", "compile: FAILED via nvrtc, 0.3 s", "kernel.cu:4: error",
                 "6 of 6 candidate calls passed", "MUTATED an input", "[reject] static.stream: torch.cuda.Stream() (line 9)",
                 "floor 3.10 us, measured 12.50 us, 25% of roofline", "  I/O floor 1.00 us: 4096 bytes",
                 "candidate median 12.50 us",
                 "vs compile: 0.910x (95% CI 0.900-0.920, slower)", "Traceback: boom"):
        assert part in text, part
