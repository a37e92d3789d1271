"""The LLM problem writer (a scripted chat model through kiln's real LLM client), its module
validated in the sandbox, and the built-in Coder run confined on it (an LLM's module never runs
in kiln's process)."""

from __future__ import annotations

import json
from pathlib import Path

from kiln.agents.base import CoderTask
from kiln.agents.curriculum import problem_writer
from kiln.agents.curriculum.base import ProblemTask
from kiln.agents.curriculum.catalogue import builtin_catalogue
from kiln.agents.curriculum.confined_coder import ConfinedCoder
from kiln.agents.curriculum.llm_writer import LLMProblemWriter
from kiln.agents.curriculum.sets import api_set_of
from kiln.agents.curriculum.validate import Budget, validate_module
from kiln.agents.registry import resolve_roles
from kiln.evals.curriculum.runner import _coder_for
from kiln.evals.curriculum.store import ModuleRow

MODULE = '''import torch
import torch.nn as nn

rows = 37
cols = 65


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(torch.relu(x) * 1.5, dim=-1)


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return []
'''


def test_scripted_llm_writes_a_module_that_is_validated_and_coded_confined(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"proposer": [f"Here it is.\n```python\n{MODULE}```\n", "no code, sorry"]}))
    roles = resolve_roles(None, proposer=f"scripted:{script}")
    writer = problem_writer(roles)
    assert isinstance(writer, LLMProblemWriter)
    cat = builtin_catalogue()
    ops = [cat.op("relu"), cat.op("softmax")]
    task = ProblemTask(name="r00_m000", api_set=api_set_of(ops), ops=ops)
    prompt = "\n".join(str(m.content) for m in writer.messages(task))
    assert "`relu` (family elementwise" in prompt and "`softmax`" in prompt and "scaled by 3" in prompt
    reply = writer.write_problem(task)
    assert reply.ok and reply.author == "llm" and reply.source == MODULE
    assert validate_module(reply.source, [], device="cpu", budget=Budget.for_device("cpu")).accepted
    second = writer.write_problem(task)
    assert not second.ok and "found 0" in (second.error or "")

    coder = _coder_for(resolve_roles(None), "cpu")(ModuleRow(id="m", round=0, attempt=0, api_set=task.api_set,
                                                               author="llm", source=MODULE))
    assert isinstance(coder, ConfinedCoder)
    out = coder.write(CoderTask(mode="generate", problem_name="m", problem_src=MODULE))
    assert out.ok and "class ModelNew" in (out.source or "") and "@triton.jit" in (out.source or "")
