"""The crossent family (KernelBench level 1's 95: F.cross_entropy with int64 class indices): the
unchanged file gets a kernel; a shrunk copy and variants (nn.CrossEntropyLoss, every reduction, a
custom ignore_index) match torch under the Triton interpreter; chunks shorter than the row carry the
online logsumexp across chunks; ignored rows, every row ignored, logits x1000, fp16/bf16, a
non-contiguous input and out-of-range targets give torch's numbers (NaN where torch raises); one
case passes kiln's real check; what the family does not cover is refused by name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kiln.agents.base import CoderTask
from kiln.agents.builtin import BuiltinCoder
from kiln.agents.builtin.source import analyze, render

KB95 = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench_full" / "KernelBench" / "level1" / "95_CrossEntropyLoss.py"
SHRINK = {"batch_size = 32768": "batch_size = 37", "num_classes = 4096": "num_classes = 1000"}
SMALL = {"block": 1024, "chunk": 128, "num_warps": 4}  # 8 chunks over C = 1000, the last one partial


def _shrunk(tmp: Path, sizes: dict[str, str] = SHRINK) -> Path:
    """KernelBench's file, the same code with its size constants shrunk for the interpreter."""
    src = KB95.read_text()
    for old, new in sizes.items():
        assert old in src
        src = src.replace(old, new)
    path = tmp / KB95.name
    path.write_text(f"# KernelBench level1/{KB95.name}: the same code, size constants shrunk for the interpreter\n{src}")
    return path


TEMPLATE = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}
    def forward(self, x, t):
        return {expr}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""
INPUTS = "torch.randn(37, 1000), torch.randint(0, 1000, (37,))"

VARIANTS = {  # name: (__init__ lines, forward expression)
    "sum": ("", "F.cross_entropy(x, t, reduction='sum')"),
    "none": ("", "F.cross_entropy(x, t, reduction='none')"),
    "module_mean_ignore_7": ("        self.loss = nn.CrossEntropyLoss(ignore_index=7)\n", "self.loss(x, t)"),
    "module_none": ("        self.loss = nn.CrossEntropyLoss(reduction='none')\n", "self.loss(x, t)"),
    "keywords": ("", "F.cross_entropy(input=x, target=t, ignore_index=0, reduction='sum')"),
}


def _variant(tmp: Path, name: str, inputs: str = INPUTS) -> Path:
    init, expr = VARIANTS[name]
    path = tmp / f"{name}.py"
    path.write_text(TEMPLATE.format(init=init, expr=expr, inputs=inputs))
    return path


def test_kernelbench_file_gets_a_crossent_kernel() -> None:
    reply = BuiltinCoder().write(CoderTask(mode="generate", problem_name=KB95.stem, problem_src=KB95.read_text()))
    assert reply.ok, reply.error
    assert reply.source is not None and '"family": "crossent"' in reply.source
    fwd = reply.source.split("class ModelNew")[1]
    assert "_kiln_crossent_rows[grid](" in fwd and "_kiln_crossent_reduce[(1,)](" in fwd
    assert "cross_entropy" not in fwd and "F." not in fwd  # no torch compute in forward


def test_crossent_matches_the_reference(tmp_path: Path, gen, run_selfcheck) -> None:
    problems = [_shrunk(tmp_path)] + [_variant(tmp_path, v) for v in VARIANTS]
    cands = [gen(p, tmp_path) for p in problems]
    assert all('"family": "crossent"' in c.read_text() for c in cands)
    results = run_selfcheck(list(zip(problems, cands, strict=True)))
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]


def test_small_chunks_carry_the_online_logsumexp(tmp_path: Path, run_selfcheck) -> None:
    """128-wide chunks: 8 of them over KernelBench's classes shrunk to 1000, the last partial."""
    pairs = []
    for prob in (_shrunk(tmp_path), _variant(tmp_path, "none")):
        cand = tmp_path / f"cand_{prob.stem}.py"
        src = render(analyze(prob.read_text()), SMALL, set())
        assert "bc = min(128," in src
        cand.write_text(src)
        pairs.append((prob, cand))
    results = run_selfcheck(pairs)
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]


CHECK = """
import importlib.util, sys, torch
import torch.nn.functional as F

TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def close(got, want, dt):
    return got.dtype == want.dtype and got.shape == want.shape and torch.allclose(
        got.float(), want.float(), rtol=TOL[dt], atol=TOL[dt], equal_nan=True)


def cases(C, ignore):
    torch.manual_seed(0)
    x = torch.randn(37, C)
    t = torch.randint(0, C, (37,))
    t[::5] = ignore  # ignored rows: 0 and not counted
    yield "plain", x, torch.randint(0, C, (37,))
    yield "ignored", x, t
    yield "all_ignored", x, torch.full((37,), ignore)  # mean: 0 / 0 = NaN, as torch
    yield "x1000", x * 1000, t  # the online logsumexp must not overflow (fp16 itself does: not run)
    yield "one_row", x[:1], t[:1]
    yield "noncontig", torch.randn(C, 37).t(), t


bad = []
for path, red, ignore in zip(sys.argv[1::3], sys.argv[2::3], map(int, sys.argv[3::3])):
    spec = importlib.util.spec_from_file_location("cand", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    new = mod.ModelNew()
    for C in (1000, 100, 3):
        for name, x, t in cases(C, ignore):
            for dt in (torch.float32, torch.bfloat16) if name == "x1000" else TOL:
                want = F.cross_entropy(x.to(dt), t, reduction=red, ignore_index=ignore)
                if not close(new(x.to(dt), t), want, dt):
                    bad.append((red, ignore, C, name, str(dt)))
    x, t = torch.randn(6, 50), torch.randint(0, 50, (6,))
    t[0], t[1] = 50, -3  # out of range: torch raises; the kernel reads nothing outside and gives NaN
    per_row = F.cross_entropy(x[2:], t[2:], reduction="none")
    got = new(x, t)
    nan_ok = bool(torch.isnan(got).all()) if red != "none" else bool(torch.isnan(got[:2]).all())
    if not nan_ok or (red == "none" and not torch.allclose(got[2:], per_row, rtol=1e-5, atol=1e-5)):
        bad.append((red, ignore, "out_of_range"))
print("BAD", bad)
"""


def test_reductions_ignored_rows_dtypes_and_magnitudes_match_torch(tmp_path: Path) -> None:
    """The generated ModelNew called directly (interpreter, 128-wide chunks) against
    F.cross_entropy for every reduction, ignore_index -100 and a custom one, fp32/fp16/bf16."""
    argv = []
    for red, ignore in [("mean", -100), ("sum", -100), ("none", -100), ("mean", 3), ("none", 3)]:
        prob = tmp_path / f"{red}{ignore}.py"
        expr = f"F.cross_entropy(x, t, reduction={red!r}, ignore_index={ignore})"
        prob.write_text(TEMPLATE.format(init="", expr=expr, inputs=INPUTS))
        cand = tmp_path / f"cand_{red}{ignore}.py"
        cand.write_text(render(analyze(prob.read_text()), SMALL, set()))
        argv += [str(cand), red, str(ignore)]
    script = tmp_path / "direct.py"
    script.write_text(CHECK)
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, str(script), *argv], env=env, capture_output=True, text=True, timeout=600)
    assert "BAD []" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_the_whole_kiln_check_passes(tmp_path: Path, gen, monkeypatch) -> None:
    """Correctness on kiln's own input distributions, integrity (no torch fallback, decoys) included."""
    from kiln.tools.check import LocalEvaluator
    from kiln.tools.records import CheckOptions

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    prob = _shrunk(tmp_path, {"batch_size = 32768": "batch_size = 29", "num_classes = 4096": "num_classes = 300"})
    rec = LocalEvaluator().check(prob, gen(prob, tmp_path), CheckOptions(device="cpu"))
    assert rec.status == "ok" and rec.correct, rec.reasons
    assert rec.correctness is not None and rec.correctness.n_passed == rec.correctness.n_trials > 0


def test_the_search_walks_the_crossent_knobs() -> None:
    from kiln.agents.builtin import space
    from kiln.agents.builtin.judge import KNOB_CYCLE

    for dev in ("cpu", "cuda"):
        assert space.valid("crossent", space.default("crossent", "crossent", dev))
    assert space.valid("crossent", SMALL)
    assert {k for k, _ in KNOB_CYCLE["crossent"]} <= set(space.KNOBS["crossent"])


PROBS = "torch.randn(37, 1000), torch.randn(37, 1000).softmax(dim=1)"
REFUSED = {  # name: (__init__ lines, forward expression, get_inputs, the reason)
    "weight": ("        self.register_buffer('w', torch.ones(1000))\n", "F.cross_entropy(x, t, weight=self.w)", INPUTS,
               "with a class weight"),
    "module_weight": ("        self.loss = nn.CrossEntropyLoss(weight=torch.ones(1000))\n", "self.loss(x, t)", INPUTS,
                      "with a class weight"),
    "label_smoothing": ("", "F.cross_entropy(x, t, label_smoothing=0.1)", INPUTS, "label_smoothing=0.1"),
    "probability_targets": ("", "F.cross_entropy(x, t)", PROBS, "floating (probability) target"),
    "integer_elsewhere": ("", "x + t.float()[:, None]", INPUTS, "an op on the integer input `t`"),
    "integer_also_elsewhere": ("", "F.cross_entropy(x, t) + t.float().sum()", INPUTS,
                               "an op on the integer input `t`"),
    "integer_as_logits": ("", "F.cross_entropy(x, t)", "torch.randint(0, 9, (37, 9)), torch.randint(0, 9, (37,))",
                          "an op on the integer input `x`"),
    "op_on_the_loss": ("", "F.cross_entropy(x, t) * 2.0", INPUTS, "an op on cross_entropy's result"),
    "k_dim": ("", "F.cross_entropy(x, t)", "torch.randn(4, 10, 5), torch.randint(0, 10, (4, 5))",
              "cross_entropy of input [4, 10, 5] and target [4, 5]"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_the_family_does_not_cover_is_refused_by_name(name: str) -> None:
    init, expr, inputs, why = REFUSED[name]
    src = TEMPLATE.format(init=init, expr=expr, inputs=inputs)
    reply = BuiltinCoder().write(CoderTask(mode="generate", problem_name=name, problem_src=src))
    assert not reply.ok and reply.source is None
    assert (reply.error or "").startswith("unsupported by the built-in coder: ") and why in (reply.error or ""), reply.error
