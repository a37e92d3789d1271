"""Norms, losses, batched and triangular matmuls, einsum contractions and Python-number operands
(KernelBench level 1's 3, 5, 11, 14, 15, 37, 39, 96, 98, 99 and their argument variants): generated kernels match the reference under the Triton interpreter, one goes
through kiln's real check, and what is not covered is refused by name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kiln.agents.base import CoderTask
from kiln.agents.builtin import BuiltinCoder

HERE = Path(__file__).resolve().parent
SHRUNK = HERE.parent / "fixtures" / "kernelbench_shrunk" / "level1"
NUMBERS = ("3_", "5_", "11_", "14_", "15_", "37_", "39_", "96_", "98_", "99_")
PROBLEMS = sorted(p for p in SHRUNK.glob("*.py") if p.name.startswith(NUMBERS)) + sorted((HERE / "losses").glob("*.py"))


def test_kernels_match_the_reference(tmp_path: Path, gen, run_selfcheck) -> None:
    assert len(PROBLEMS) == 16
    results = run_selfcheck([(p, gen(p, tmp_path)) for p in PROBLEMS])
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]


def test_kl_div_in_batchmean_passes_kilns_check(tmp_path: Path, gen, monkeypatch) -> None:
    from kiln.tools.check import LocalEvaluator
    from kiln.tools.records import CheckOptions

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    prob = next(SHRUNK.glob("98_*.py"))
    rec = LocalEvaluator().check(prob, gen(prob, tmp_path), CheckOptions(device="cpu"))
    assert rec.status == "ok", rec.reasons
    assert os.environ["TRITON_INTERPRET"] == "1"


def test_number_operands_pass_kilns_check_and_compile_for_sm90(tmp_path: Path, gen, monkeypatch) -> None:
    """A float forward input goes to the kernel by value (no tensor made of it in forward)."""
    import importlib.util

    from kiln.tools.check import LocalEvaluator
    from kiln.tools.records import CheckOptions

    prob = next(SHRUNK.glob("5_*.py"))
    cand = gen(prob, tmp_path)
    fwd = cand.read_text()[cand.read_text().index("    def forward("):]
    assert "float(s)" in fwd and "torch.full" not in fwd and "tensor(" not in fwd
    spec = importlib.util.spec_from_file_location("kiln_scalar_sm90", cand)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget

    fn = mod._kiln_ew_flat
    sig = {"out_ptr": "*fp32", "p0": "*fp32", "p1": "fp32", "n": "i32", "BLOCK": "constexpr"}
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs={"BLOCK": 1024})
    assert "ld.global" in triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    rec = LocalEvaluator().check(prob, cand, CheckOptions(device="cpu"))
    assert rec.status == "ok", rec.reasons


def _write(src: str):
    return BuiltinCoder().write(CoderTask(mode="generate", problem_name="p", problem_src=src))


BODY = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n"
        "    def forward(self, a, b):\n        return {expr}\n\ndef get_inputs():\n"
        "    return [torch.randn(4, 8), torch.randn(8, 8)]\n\ndef get_init_inputs():\n    return []\n")


@pytest.mark.parametrize(("expr", "why"), [
    ("torch.einsum('ij,kj->ik', a, b)", "einsum 'ij,kj->ik'"),
    ("torch.matmul(a.unsqueeze(0), b.unsqueeze(0).unsqueeze(0))", "matmul of shapes [1, 4, 8] x [1, 1, 8, 8]"),
    ("torch.norm(a, p='nuc')", "p='nuc'"),
    ("torch.norm(a, p=-2, dim=1)", "p=-2"),
    ("torch.triu(a) + 1.0", "triu/tril outside a matmul's epilogue"),
    ("(a * 2.0).sum(dim=1) * b.shape[0]", "a tensor size used as a number"),
    ("torch.einsum('ij,jk,kl->il', a, b, b)", "einsum other than two operands"),
])  # fmt: skip
def test_what_is_not_covered_is_named(expr: str, why: str) -> None:
    reply = _write(BODY.format(expr=expr))
    assert not reply.ok and why in (reply.error or ""), reply.error
