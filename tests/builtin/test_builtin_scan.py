"""The scan family (KernelBench level 1's 89-93: cumsum, cumprod, reverse and exclusive cumsum,
masked cumsum): shrunk copies of each, and variants along other dims, with fused prologues and
epilogues and in pipelines, match the reference under the Triton interpreter; tiles smaller than
the row carry the prefix across blocks; one passes kiln's real check; the unchanged files get a
kernel; what the family does not cover is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.agents.base import CoderTask
from kiln.agents.builtin import BuiltinCoder
from kiln.agents.builtin.source import analyze, render

KB1 = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench_full" / "KernelBench" / "level1"
KB_FILES = ["89_cumsum.py", "90_cumprod.py", "91_cumsum_reverse.py", "92_cumsum_exclusive.py", "93_masked_cumsum.py"]

# KernelBench's forward bodies, verbatim (89-92; 93's is in the test below)
FORWARD = {
    "cumsum": "return torch.cumsum(x, dim=self.dim)",
    "cumprod": "return torch.cumprod(x, dim=self.dim)",
    "reverse": "return torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)",
    "exclusive": (
        "cumsum = torch.cumsum(x.narrow(dim=self.dim, start=0, length=x.size(self.dim)-1), dim=self.dim)\n"
        "        return torch.cat((torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim)), cumsum), "
        "dim=self.dim)"
    ),
}

TEMPLATE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, {args}):
        {body}


batch_size = {batch}
input_shape = {shape}
dim = {dim}


def get_inputs():
    {inputs}


def get_init_inputs():
    return [dim]
"""

ONE = "return [torch.rand(batch_size, *input_shape)]"
MASKED = ("x = torch.rand(batch_size, *input_shape)\n    mask = torch.randint(0, 2, x.shape).bool()\n"
          "    return [x, mask]")  # fmt: skip


def _problem(tmp: Path, name: str, body: str, batch: int, shape: tuple, dim: int, masked: bool = False) -> Path:
    src = TEMPLATE.format(args="x, mask" if masked else "x", body=body, batch=batch, shape=shape, dim=dim,
                          inputs=MASKED if masked else ONE)  # fmt: skip
    path = tmp / f"{name}.py"
    path.write_text(src)
    return path


CASES = [  # (name, forward body, batch, input_shape, dim)
    ("89_cumsum", FORWARD["cumsum"], 5, (1000,), 1),
    ("90_cumprod", FORWARD["cumprod"], 5, (1000,), 1),
    ("91_reverse", FORWARD["reverse"], 5, (1000,), 1),
    ("92_exclusive", FORWARD["exclusive"], 5, (1000,), 1),
    ("89_dim0", FORWARD["cumsum"], 37, (3, 5), 0),  # a leading dim: lanes across the contiguous dims
    ("90_middle", FORWARD["cumprod"], 3, (40, 5), 1),
    ("91_middle_negdim", FORWARD["reverse"], 4, (7, 129), -2),
    ("92_middle", FORWARD["exclusive"], 4, (300, 6), 1),
    ("92_length_one", FORWARD["exclusive"], 3, (1,), 1),  # the output is the zeros alone
]

EXTRA = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return {expr}


def get_inputs():
    return [torch.randn(4, 9, 130), torch.randn({y})]


def get_init_inputs():
    return []
"""

EXPRS = {  # name: (forward expression, y's shape)
    "epilogue": ("torch.cumsum(x, dim=2) * 0.5 + y", "4, 9, 130"),
    "broadcast_prologue": ("torch.cumsum(x * y, dim=1)", "130"),  # a pipeline: x * y, then the scan
    "then_a_reduction": ("torch.cumsum(x.relu(), dim=2).sum(dim=2) + y.mean()", "4, 9"),
    "exclusive_cumprod": ("torch.cat((torch.ones_like(x.select(1, 0).unsqueeze(1)), "
                          "torch.cumprod(x.narrow(1, 0, x.size(1) - 1), dim=1)), dim=1) + y",
                          "4, 9, 130"),  # fmt: skip
    "narrowed": ("torch.cumsum(torch.narrow(x, 2, 0, x.size(2) - 2), 2) + y", "4, 9, 128"),
    "two_scans": ("x.cumsum(-1) * y.sigmoid().cumprod(dim=-1)", "4, 9, 130"),
}


def test_scans_match_the_reference(tmp_path: Path, gen, run_selfcheck) -> None:
    problems = [_problem(tmp_path, *case) for case in CASES]
    problems.append(_problem(tmp_path, "93_masked", "return torch.cumsum(x * mask, dim=self.dim)", 6, (777,), 1,
                             masked=True))  # fmt: skip
    for name, (expr, y) in EXPRS.items():
        problems.append(tmp_path / f"{name}.py")
        problems[-1].write_text(EXTRA.format(expr=expr, y=y))
    cands = [gen(p, tmp_path) for p in problems]
    assert all('"family": "scan"' in c.read_text() or "# scan " in c.read_text() for c in cands)
    results = run_selfcheck(list(zip(problems, cands, strict=True)))
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]


def test_small_tiles_carry_the_prefix_across_blocks(tmp_path: Path, run_selfcheck) -> None:
    """1024-element tiles over rows of 3000 (the last block partial) and a 3-D middle-dim scan:
    what the Proposer's stress sizes past the tile exercise."""
    pairs = []
    rows = [(kind, 3, (3000,)) for kind in ("cumsum", "cumprod", "reverse", "exclusive")]
    for k, (kind, batch, shape) in enumerate([*rows, ("exclusive", 2, (700, 3))]):
        name = f"{kind}_{k}"
        prob = _problem(tmp_path, name, FORWARD[kind], batch, shape, 1)
        cand = tmp_path / f"cand_{name}.py"
        cand.write_text(render(analyze(prob.read_text()), {"block": 1024, "num_warps": 4}, set()))
        assert "BLOCK_N=bn" in cand.read_text()
        pairs.append((prob, cand))
    results = run_selfcheck(pairs)
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]


def test_exclusive_and_masked_cumsum_pass_kilns_check(tmp_path: Path, gen, monkeypatch) -> None:
    from kiln.tools.check import LocalEvaluator
    from kiln.tools.records import CheckOptions

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    prob = _problem(tmp_path, "92_exclusive", FORWARD["exclusive"], 4, (513,), 1)
    rec = LocalEvaluator().check(prob, gen(prob, tmp_path), CheckOptions(device="cpu"))
    assert rec.status == "ok" and rec.correct, rec.reasons
    masked = _problem(tmp_path, "93_masked", "return torch.cumsum(x * mask, dim=self.dim)", 5, (300,), 1, masked=True)
    rec = LocalEvaluator().check(masked, gen(masked, tmp_path), CheckOptions(device="cpu"))  # a bool input
    assert rec.status == "ok" and rec.correct, rec.reasons


def test_the_search_walks_the_scan_knobs() -> None:
    from kiln.agents.builtin import space
    from kiln.agents.builtin.judge import KNOB_CYCLE

    for dev in ("cpu", "cuda"):
        assert space.valid("scan", space.default("scan", "scan", dev))
    assert {k for k, _ in KNOB_CYCLE["scan"]} <= set(space.KNOBS["scan"])
    nxt = space.next_config("scan", space.default("scan", "scan", "cuda"), set(), ("block", "up"))
    assert nxt == {"block": 8192, "num_warps": 8}


@pytest.mark.parametrize("name", KB_FILES)
def test_kernelbench_files_get_a_scan_kernel(name: str) -> None:
    src = (KB1 / name).read_text()
    reply = BuiltinCoder().write(CoderTask(mode="generate", problem_name=name[:-3], problem_src=src))
    assert reply.ok, reply.error
    assert reply.source is not None and "@triton.jit" in reply.source and '"family": "scan"' in reply.source
    assert "torch.cumsum" not in reply.source.split("class ModelNew")[1]  # no torch compute in forward


REFUSED = {
    "x.flip(1).sigmoid().cumsum(1)": "operand of type Flipped",
    "torch.cumsum(x.flip(0), 1)": "flipped along another dim",
    "torch.cumsum(x.narrow(1, 1, x.size(1) - 1), 1)": "narrow other than",
    "torch.cumsum(x.narrow(1, 0, 5), 1)": "narrow other than",
    "torch.cumsum(x, 1, dtype=torch.float64)": "cumsum with a dtype",
    "torch.cat((torch.zeros_like(x[:, :1]), x.cumsum(1)), 1)": "indexing or slicing a tensor",
    "torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), x.narrow(1, 0, x.size(1) - 1).cumprod(1)), 1)":
        "torch.cat (covered",  # zeros before a product: not an exclusive scan (ones are)
    "torch.cat((x, x), 1)": "torch.cat (covered",
}


@pytest.mark.parametrize("expr", sorted(REFUSED))
def test_what_is_not_a_scan_is_refused_by_name(expr: str) -> None:
    src = EXTRA.format(expr=expr, y="1")
    reply = BuiltinCoder().write(CoderTask(mode="generate", problem_name="p", problem_src=src))
    assert not reply.ok and reply.source is None
    assert REFUSED[expr] in (reply.error or ""), reply.error
