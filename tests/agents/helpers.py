"""Builders shared by the agent tests: tasks, check records, roles against the local server."""

from __future__ import annotations

from pathlib import Path

from kiln.agents.base import CoderTask, JudgeInput, ProposerInput
from kiln.agents.llm.transport import TransportSettings
from kiln.agents.llm.usage import Budgets
from kiln.agents.registry import resolve_roles
from kiln.tools.records import CheckRecord, CorrectnessRecord, TimingRecord

PROBLEM = (Path(__file__).parent / "data" / "softmax.py").read_text()
GOOD_KERNEL = (Path(__file__).parent / "data" / "triton_softmax.py").read_text()
FAST = TransportSettings(timeout_s=5.0, max_attempts=3, backoff_base_s=0.01, backoff_max_s=0.05)


def fenced(code: str, lang: str = "python") -> str:
    return f"Here is the kernel.\n```{lang}\n{code}```\nDone."


def coder_task(mode: str = "generate", **kw) -> CoderTask:
    return CoderTask(mode=mode, problem_name="softmax", problem_src=PROBLEM, **kw)


def check(status: str = "ok", correct: bool = True, first_failure: str | None = None) -> CheckRecord:
    return CheckRecord(
        problem="softmax.py", candidate="cand.py", status=status, correct=correct,
        correctness=CorrectnessRecord(atol=1e-4, rtol=1e-4, n_trials=5, n_passed=5 if correct else 1,
                                      passed=correct, first_failure=first_failure),
        timing=TimingRecord(measured=False, reason="no GPU"),
    )


def judge_input(correct: bool = True, **kw) -> JudgeInput:
    rec = check("ok" if correct else "incorrect", correct, None if correct else "out[0, 999]: expected 0.1, got 0.3")
    return JudgeInput(problem_name="softmax", problem_src=PROBLEM, candidate_src=GOOD_KERNEL, check=rec, **kw)


def proposer_input(**kw) -> ProposerInput:
    return ProposerInput(problem_name="softmax", problem_src=PROBLEM, candidate_src=GOOD_KERNEL, **kw)


def local_roles(server_url: str, *, env: dict | None = None, budgets: Budgets | None = None,
                cache_path: Path | None = None, model: str = "local-model", **kw):
    return resolve_roles(f"openai:{model}", base_url=server_url, env=env if env is not None else {},
                         budgets=budgets, cache_path=cache_path, transport=kw.pop("transport", FAST), **kw)


def case_source(get_inputs_body: str = "return [torch.rand(1, 1025)]") -> str:
    """A problem-format case: the softmax problem's Model verbatim, new inputs."""
    head = PROBLEM.split("batch_size")[0]
    return f"{head}\ndef get_inputs():\n    {get_inputs_body}\n\n\ndef get_init_inputs():\n    return []\n"
