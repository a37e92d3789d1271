"""BuiltinProposer: a fuzzer of shapes and values that writes stress-case modules, no LLM.

A case is the problem's own source with its module-level size constants changed (so Model,
get_inputs and get_init_inputs stay consistent), or with get_inputs wrapped to scale the
values. Sizes are aimed at the candidate's tile constants: exactly a tile, one past it, a
non-power of two, batch 1, and past the one-pass limit. Each case runs the reference first and
is dropped if it fails, produces non-finite values, or is too slow.
"""

from __future__ import annotations

import ast
import copy
import re
import time
from dataclasses import dataclass

import torch

from kiln.agents.base import ProposerInput, ProposerReply, StressCase, Usage
from kiln.agents.builtin import space
from kiln.agents.builtin.problem import Unsupported, load_problem_src, meta_inputs
from kiln.agents.builtin.source import read_header
from kiln.tools import pyparse

BLOCK_RE = re.compile(r"\b(?:BLOCK\w*|TILE\w*|ROWS\w*)\s*(?::\s*tl\.constexpr\s*)?=\s*(\d+)")
SIZE_NAME_RE = re.compile(r"features|hidden|channels", re.I)


@dataclass
class Idea:
    name: str
    sizes: dict[str, int]
    scale: float | None
    rationale: str


class BuiltinProposer:
    """The Proposer role's offline policy (kiln.agents.base.Proposer)."""

    def __init__(self, max_numel: int | None = None, max_ref_s: float = 10.0, device: str | None = None) -> None:
        # cases run the interpreter on CPU: keep them small there; on a GPU allow 16M elements
        self.max_numel = max_numel or (1 << 24 if device == "cuda" else 1 << 20)
        self.max_ref_s = max_ref_s

    def propose(self, inp: ProposerInput) -> ProposerReply:
        sizes = size_globals(inp.problem_src)
        batch = _batch_name(sizes)
        cases: list[StressCase] = []
        held = set(inp.existing_cases)
        for idea in ideas(sizes, candidate_blocks(inp.candidate_src)):
            if len(cases) >= inp.max_cases:
                break
            if idea.name in held:
                continue
            src = self._fitted(inp.problem_src, idea, sizes, batch)
            if src is not None:
                cases.append(StressCase(name=idea.name, source=src, rationale=idea.rationale))
                held.add(idea.name)
        err = None if cases else "no new valid stress case (sizes exhausted or the reference rejects them)"
        return ProposerReply(cases=cases, error=err, usage=Usage(role="proposer", model="builtin"))

    def _fitted(self, problem_src: str, idea: Idea, sizes: dict[str, int], batch: str | None) -> str | None:
        """The case's source if valid; a case over the size cap is retried with a smaller batch."""
        src = case_source(problem_src, idea.sizes, idea.scale)
        numel = self._numel(src)
        if numel is not None and numel > self.max_numel and batch and batch not in idea.sizes:
            shrunk = max(1, sizes[batch] * self.max_numel // numel)
            src = case_source(problem_src, idea.sizes | {batch: shrunk}, idea.scale)
        return src if self._valid(src) else None

    def _numel(self, src: str) -> int | None:
        try:
            inputs = meta_inputs(load_problem_src(src))
        except (Unsupported, Exception):  # noqa: BLE001 - judged again by _valid
            return None
        return sum(t.numel() for t in inputs if isinstance(t, torch.Tensor))

    def _valid(self, src: str) -> bool:
        """Run the reference on the case: it must build, stay small enough, finish and be finite.
        Seeded (without touching the caller's generator), so the verdict does not depend on what
        ran in this process before."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            return self._valid_seeded(src)

    def _valid_seeded(self, src: str) -> bool:
        try:
            ns = load_problem_src(src)
            inputs = list(ns["get_inputs"]())
            if sum(t.numel() for t in inputs if isinstance(t, torch.Tensor)) > self.max_numel:
                return False
            model = ns["Model"](*ns["get_init_inputs"]())
            start = time.perf_counter()
            with torch.no_grad():
                out = model(*inputs)
            ok = isinstance(out, torch.Tensor) and bool(torch.isfinite(out).all())
            return ok and time.perf_counter() - start < self.max_ref_s and _well_conditioned(model, inputs, out)
        except (Unsupported, Exception):  # noqa: BLE001 - any failure means an invalid case
            return False


def _well_conditioned(model: torch.nn.Module, inputs: list, out: torch.Tensor) -> bool:
    """The fp32 reference agrees with an fp64 run within kiln's fp32 tolerance (1e-4), so a
    mismatch on this case would be the candidate's, not rounding noise (e.g. x1000 inputs to a
    matmul whose outputs cancel to near zero)."""
    ref64 = copy.deepcopy(model).double()
    with torch.no_grad():
        out64 = ref64(*[t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs])
    return bool(torch.allclose(out.double(), out64, atol=1e-4, rtol=1e-4))


def _batch_name(sizes: dict[str, int]) -> str | None:
    return next((k for k in sizes if "batch" in k.lower()), None)


def size_globals(src: str) -> dict[str, int]:
    """Module-level int constants that size the inputs (used in get_inputs, or named like sizes)."""
    tree = pyparse.parse(src)
    consts = {
        n.targets[0].id: n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
        and isinstance(n.value, ast.Constant) and type(n.value.value) is int
    }  # fmt: skip
    used = _names_in(tree, "get_inputs")
    return {k: v for k, v in consts.items() if v >= 1 and (k in used or SIZE_NAME_RE.search(k))}


def _names_in(tree: ast.Module, fn: str) -> set[str]:
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and n.name == fn:
            return {x.id for x in ast.walk(n) if isinstance(x, ast.Name)}
    return set()


def candidate_blocks(src: str) -> list[int]:
    """Tile sizes the candidate relies on: its built-in header, else BLOCK-like constants."""
    head = read_header(src)
    vals: set[int] = set()
    if head is not None:
        cfg = space.expand(head.family, head.knobs)
        vals |= {int(v) for k, v in cfg.items() if isinstance(v, int) and k not in ("num_warps", "num_stages", "waves", "persistent")}
    vals |= {int(m) for m in BLOCK_RE.findall(src or "")}
    return sorted(v for v in vals if v >= 8 and v & (v - 1) == 0)  # tile sizes are powers of two


def ideas(sizes: dict[str, int], blocks: list[int]) -> list[Idea]:
    batch = _batch_name(sizes)
    dims = sorted((k for k in sizes if k != batch), key=lambda k: -sizes[k])
    out: list[Idea] = []
    for d in dims[:2]:  # the two largest sizes (a row and a K dim) at a tile edge
        b = _edge(sizes[d], blocks)
        out.append(Idea(f"{d}_{b + 1}", {d: b + 1}, None, f"{d} one past the tile size {b} (masking of a partial tile)"))
    if dims:
        d = dims[0]
        out.append(Idea(f"{d}_97", {d: 97}, None, f"{d} = 97, a prime below typical tiles"))
    if batch:
        out.append(Idea(f"{batch}_1", {batch: 1}, None, "batch 1 (a single row / program)"))
    out.append(Idea("magnitude_1e3", {}, 1e3, "inputs x1000 (overflow in exp / variance cancellation)"))
    if dims:
        d = dims[0]
        out += [Idea(f"{d}_{b}", {d: b}, None, f"{d} exactly the tile size {b}") for b in blocks[:2]]
        big = max(blocks) + 3 if blocks else 4099
        out.append(Idea(f"{d}_{big}", {d: big} | ({batch: 2} if batch else {}), None, f"{d} past the largest tile"))
    for d in dims[2:]:
        out.append(Idea(f"{d}_{sizes[d] + 1}", {d: sizes[d] + 1}, None, f"{d} one past its usual size"))
    out.append(Idea("magnitude_1e-3", {}, 1e-3, "tiny inputs x0.001"))
    return out


def _edge(size: int, blocks: list[int]) -> int:
    """The tile boundary at or just below `size`: a candidate constant or a power of two."""
    below = [b for b in blocks if b <= size] + [1 << (size.bit_length() - 1)]
    return max(b for b in below if b >= 1)


def case_source(problem_src: str, sizes: dict[str, int], scale: float | None) -> str:
    src = problem_src
    for name, val in sizes.items():
        src = re.sub(rf"^{re.escape(name)}\s*=\s*\d+\s*$", f"{name} = {val}", src, flags=re.M)
    if scale is not None:
        src += (
            "\n\n_kiln_case_base_inputs = get_inputs\n\n\ndef get_inputs():\n"
            f'    """Stress case: the problem\'s inputs scaled by {scale!r}."""\n'
            f"    return [t * {scale!r} if isinstance(t, torch.Tensor) and t.is_floating_point() else t "
            "for t in _kiln_case_base_inputs()]\n"
        )
    return src
