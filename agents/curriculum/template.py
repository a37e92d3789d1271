"""TemplateWriter: the built-in problem writer. An API set becomes a KernelBench-format module.

The ops are composed in order over symbolic shapes (`shapes.plan_chain`); every size is a
module-level constant, passed to `Model.__init__` through `get_init_inputs` where a weight needs
it, so a stress variant (the same source with other constants) keeps Model verbatim. All random
choices come from the task's seed: the same task always writes the same module.
"""

from __future__ import annotations

import random
import re

from kiln.agents.base import StressCase, Usage
from kiln.agents.curriculum.base import ProblemReply, ProblemTask
from kiln.agents.curriculum.catalogue import Scalar, placeholders
from kiln.agents.curriculum.shapes import PROFILES, Chain, Step, Sym, plan_chain

HEADER = '''"""kiln curriculum module {name}: {ops} (families: {families}).
Written by kiln's template problem writer from the API set above."""

import torch
import torch.nn as nn
import torch.nn.functional as F
'''
CONST_RE = re.compile(r"^([a-z][a-z0-9]*) = (\d+)$", re.MULTILINE)


def _value(v: Scalar) -> str:
    return v if isinstance(v, str) else repr(v)


def _fill(text: str, mapping: dict[str, str]) -> str:
    return text.format(**{k: mapping[k] for k in placeholders(text)})


def _init_line(st: Step, params: dict[str, str]) -> str | None:
    """`self.m<i> = <init>`, its sizes named by __init__ parameters (recorded in `params`)."""
    if not st.op.init:
        return None
    mapping = {k: _value(v) for k, v in st.values.items()}
    for name in placeholders(st.op.init) & set(st.init_sizes):
        param = f"{name}{st.index}"
        params[param] = st.init_sizes[name].expr
        mapping[name] = param
    return f"        self.m{st.index} = {_fill(st.op.init, mapping)}"


def _forward_line(st: Step) -> str:
    mapping = {k: _value(v) for k, v in st.values.items()}
    mapping.update(x="x", m=f"self.m{st.index}")
    if st.extra_input:
        mapping[st.extra_input[0].rstrip("0123456789")] = st.extra_input[0]
    return f"        x = {_fill(st.op.expr, mapping)}"


def _shape_text(shape: list[Sym]) -> str:
    return ", ".join(s.expr for s in shape)


def _input_expr(shape: list[Sym], how: str) -> str:
    if how.startswith("index:"):
        return f"torch.randint(0, {how.split(':', 1)[1]}, ({_shape_text(shape)},))"
    return f"torch.rand({_shape_text(shape)})"


def render(task: ProblemTask, chain: Chain) -> str:
    params: dict[str, str] = {}
    inits = [line for st in chain.steps if (line := _init_line(st, params))]
    extras = [st.extra_input for st in chain.steps if st.extra_input]
    args = ", ".join(["self", *params])
    fwd_args = ", ".join(["self", "x", *(e[0] for e in extras)])
    inputs = [_input_expr(chain.input_shape, "rand"), *(_input_expr(e[1], e[2]) for e in extras)]
    lines = [HEADER.format(name=task.name, ops=" -> ".join(task.api_set.ops),
                           families=", ".join(dict.fromkeys(task.api_set.families)))]
    lines += [f"{k} = {v}" for k, v in chain.constants.items()]
    lines += ["", "", "class Model(nn.Module):", f"    def __init__({args}):", "        super().__init__()", *inits,
              "", f"    def forward({fwd_args}):", *(_forward_line(st) for st in chain.steps), "        return x",
              "", "", "def get_inputs():", f"    return [{', '.join(inputs)}]",
              "", "", "def get_init_inputs():", f"    return [{', '.join(params.values())}]", ""]
    return "\n".join(lines)


def odd_sizes(source: str) -> str:
    """The stress variant: every size constant above 1 moved to the next odd number past it
    (off the power-of-two tile grid kernels like to assume)."""
    def bump(m: re.Match) -> str:
        v = int(m.group(2))
        return f"{m.group(1)} = {v + 1 if v % 2 == 0 else v + 2}" if v > 1 else m.group(0)

    return CONST_RE.sub(bump, source)


class TemplateWriter:
    """The problem-writing role's offline policy (`kiln.agents.curriculum.base.ProblemWriter`)."""

    def __init__(self, stress: int = 1, attempts: int = 8) -> None:
        self.stress = stress
        self.attempts = attempts

    def write_problem(self, task: ProblemTask) -> ProblemReply:
        rng = random.Random(task.seed)
        profile = PROFILES[task.device]
        for _ in range(self.attempts):
            chain = plan_chain(task.ops, rng, profile, task.max_numel)
            if chain is not None:
                return self._reply(task, render(task, chain))
        return ProblemReply(ok=False, error=f"the ops {' -> '.join(task.api_set.ops)} do not compose at any rank "
                                            "or size within the budget", usage=Usage(role="proposer", model="builtin"))

    def _reply(self, task: ProblemTask, source: str) -> ProblemReply:
        stress = [StressCase(name=f"{task.name}_odd", source=odd_sizes(source),
                             rationale="every size moved to an odd number past it")][: self.stress]
        return ProblemReply(ok=True, source=source, stress=stress, author="template",
                            usage=Usage(role="proposer", model="builtin"))
