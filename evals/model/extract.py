"""Write a hot op group as a KernelBench-format problem: the real shapes, dtypes, strides and argument
values, the module's real parameters (a `.params.pt` file next to the problem, loaded by
`get_init_inputs`, so ModelNew gets them through the same constructor), and inputs drawn from the
real activations' quantiles (their range, skew and sparsity), not randn.

Each problem is then run on the call's real inputs and must reproduce the call's real output; one
that does not is skipped, with the error, never optimised.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kiln.evals.model import sigs
from kiln.evals.model.records import ArgSpec, CallSig, OpGroup
from kiln.evals.model.sigs import HEAD_MARK
from kiln.tools.check.worker import load_module

DRAW_HELPER = '''

def _kiln_draw(shape, stride, q):
    """Values drawn by inverse CDF from the activation's quantiles q (range, skew, zeros kept), laid
    out with the call's strides (a broadcast dim, stride 0, is drawn once and expanded)."""
    qs = torch.tensor(q, dtype=torch.float64)
    base = [1 if st == 0 else n for n, st in zip(shape, stride)]
    pos = torch.rand(base, dtype=torch.float64) * (len(q) - 1)
    i = pos.floor().long().clamp(max=len(q) - 2)
    x = (qs[i] + (qs[i + 1] - qs[i]) * (pos - i)).float()
    if 0 in stride:
        return x.expand(shape)
    out = torch.empty_strided(shape, stride, dtype=torch.float32)
    out.copy_(x)
    return out
'''

TOL = {"float32": 1e-4, "bfloat16": 2e-2, "float16": 1e-2}


@dataclass
class Problem:
    group: str
    path: Path
    params: list[str]  # the model's parameter names, in ModelNew(*init) order
    verified: bool
    error: str | None = None


class Names:
    """Python names for a problem's forward inputs (x0, x1, ...) and parameters (self.w0, ...)."""

    def __init__(self) -> None:
        self.inputs: list[ArgSpec] = []
        self.params: list[ArgSpec] = []

    def expr(self, a: ArgSpec, head: str | None = None) -> str:
        if a.param == HEAD_MARK and head is not None:
            return head
        if a.kind == "value":
            return a.src
        if a.kind == "param":
            self.params.append(a)
            return f"self.w{len(self.params) - 1}"
        self.inputs.append(a)
        return f"x{len(self.inputs) - 1}"


def _canonical(sig: CallSig) -> CallSig:
    """softmax(x, dim, dtype=<x's own dtype>) is softmax(x, dim): the dtype argument is dropped."""
    if not sig.op.endswith("softmax"):
        return sig
    x = next((a.tensor for a in sig.args if a.tensor is not None), None)
    keep = [a for a in sig.args if not (a.name == "dtype" and x is not None and a.src == f"torch.{x.dtype}")]
    return sig.model_copy(update={"args": keep})


def call_source(sig: CallSig, names: Names, head: str | None = None) -> str:
    if sig.op.startswith("module:"):
        x, w = sig.args[0], sig.args[1]
        eps = next(a.src for a in sig.args if a.name == "eps")
        return f"F.rms_norm({names.expr(x, head)}, ({x.tensor.shape[-1]},), {names.expr(w, head)}, {eps})"
    sig = _canonical(sig)
    pos = [names.expr(a, head) for a in sig.args if not a.name]
    kw = [(a.name, names.expr(a, head)) for a in sig.args if a.name]
    return sigs.render_call(sig.op, pos, kw)


def forward_source(g: OpGroup) -> tuple[str, Names]:
    names = Names()
    body = call_source(g.sig, names)
    if g.tail is not None:
        if g.tail.op == ".to" and g.sig.op.endswith("softmax"):  # softmax in fp32, cast back: one softmax
            x = next(a.tensor for a in g.sig.args if a.tensor is not None)
            tgt = next((a.src for a in g.tail.args if a.kind == "value"), "")
            if tgt == f"torch.{x.dtype}":
                fresh = Names()
                return call_source(_drop_dtype(g.sig), fresh), fresh
        body = call_source(g.tail, names, head=body)
    return body, names


def _drop_dtype(sig: CallSig) -> CallSig:
    return sig.model_copy(update={"args": [a for a in sig.args if a.name != "dtype"]})


def _input_line(i: int, a: ArgSpec) -> str:
    t, st = a.tensor, a.stats
    assert t is not None
    if not t.dtype.startswith(("float", "bfloat")):
        lo, hi = (int(st.min), int(st.max)) if st else (0, 1)
        return f"    x{i} = torch.randint({lo}, {hi + 1}, {tuple(t.shape)}, dtype=torch.{t.dtype})"
    q = st.quantiles if st else [-1.0, 1.0]
    qsrc = "[" + ", ".join(sigs.value_src(v) for v in q) + "]"
    return f"    x{i} = _kiln_draw({tuple(t.shape)}, {tuple(t.stride)}, {qsrc})"


def _doc(g: OpGroup, model: str) -> str:
    where = ", ".join(p or "<model>" for p in g.module_paths[:4]) + (" ..." if len(g.module_paths) > 4 else "")
    tail = f"\n  then: {g.tail.key()}" if g.tail else ""
    return (f'"""kiln model: op group {g.id} of {model}, {g.count} call(s) per forward, '
            f'{100 * g.share:.1f}% of its time.\n  call: {g.sig.key()}{tail}\n  in: {where}\n'
            'Inputs are drawn from the quantiles of the real activations; parameters are the real ones."""\n')


def render(g: OpGroup, model: str, params_file: Path | None, buffers: set[str] = frozenset()  # type: ignore[assignment]
           ) -> tuple[str, Names]:
    """The problem's source; the model's buffers (running statistics, ...) stay buffers."""
    body, names = forward_source(g)
    ins = [f"x{i}" for i in range(len(names.inputs))]
    ws = [f"w{i}" for i in range(len(names.params))]
    init = ["        super().__init__()"] + [
        f"        self.register_buffer('w{i}', {w})" if a.param in buffers else
        f"        self.w{i} = nn.Parameter({w}, requires_grad={w}.is_floating_point())"
        for i, (w, a) in enumerate(zip(ws, names.params, strict=True))]
    lines = [_doc(g, model), "from pathlib import Path", "", "import torch", "import torch.nn as nn", "import torch.nn.functional as F", "",
             f"PARAMS = {str(params_file)!r}" if params_file else "PARAMS = None", DRAW_HELPER, "",
             "class Model(nn.Module):", f"    def __init__({', '.join(['self', *ws])}):", *init, "",
             f"    def forward({', '.join(['self', *ins])}):", f"        return {body}", "", "",
             "def get_inputs():", *[_input_line(i, a) for i, a in enumerate(names.inputs)],
             f"    return [{', '.join(ins)}]", "", "",
             "def get_init_inputs():",
             "    if PARAMS is None:", "        return []",
             "    here = globals().get('__file__')  # a check stages the parameters beside its copy",
             "    local = Path(here).with_suffix('.params.pt') if here else None",
             "    path = local if local is not None and local.is_file() else Path(PARAMS)",
             "    return list(torch.load(path, weights_only=True))", ""]
    return "\n".join(lines), names


def _param_tensors(model: torch.nn.Module, names: list[str]) -> list[torch.Tensor]:
    table = dict(model.named_parameters(remove_duplicate=False)) | dict(model.named_buffers(remove_duplicate=False))
    return [table[n].detach().cpu() for n in names]


def write_problem(g: OpGroup, model: torch.nn.Module, model_name: str, folder: Path,
                  kept: dict[str, Any] | None) -> Problem:
    """The problem file for a group (and its params file), verified on the real call when kept."""
    folder.mkdir(parents=True, exist_ok=True)
    if kept is not None and kept["sig"].key() == g.sig.key():  # the real call's activation statistics
        g = g.model_copy(update={"sig": kept["sig"]})
    path = folder / f"{g.id}.py"
    buffers = {n for n, _ in model.named_buffers(remove_duplicate=False)}
    src, names = render(g, model_name, folder / f"{g.id}.params.pt", buffers)
    pnames = [a.param for a in names.params]
    if pnames:
        torch.save(_param_tensors(model, pnames), folder / f"{g.id}.params.pt")
    else:
        src = src.replace(f"PARAMS = {str(folder / f'{g.id}.params.pt')!r}", "PARAMS = None")
    path.write_text(src)
    ok, err = verify(path, names, kept, g)
    return Problem(group=g.id, path=path, params=pnames, verified=ok, error=err)


def verify(path: Path, names: Names, kept: dict[str, Any] | None, g: OpGroup) -> tuple[bool, str | None]:
    """Run the problem's Model on the real call's inputs: it must give the real output."""
    try:
        mod = load_module(str(path), "model_problem")
        ref = mod.Model(*mod.get_init_inputs())
        drawn = mod.get_inputs()
    except Exception as err:  # noqa: BLE001 - a broken extraction is a skipped group, with why
        return False, f"the extracted problem does not run: {type(err).__name__}: {err}"
    if [list(t.shape) for t in drawn] != [a.tensor.shape for a in names.inputs]:
        return False, "get_inputs() draws other shapes than the call's"
    if kept is None or kept.get("file") is None or g.kind == "fused":
        return True, None
    saved = torch.load(kept["file"], weights_only=True)
    acts = [v for v, a in zip(saved["values"], g.sig.args, strict=True) if a.kind == "tensor"]
    dev = "cuda" if g.sig.out is not None and g.sig.out.device == "cuda" and torch.cuda.is_available() else "cpu"
    with torch.no_grad():  # on the call's own device (a bf16 convolution on a CPU takes seconds)
        got = ref.to(dev)(*[a.to(dev) for a in acts]).float().cpu()
    want = saved["out"].float()
    diff = float((got - want).abs().max()) if got.shape == want.shape else float("inf")
    tol = TOL.get(g.sig.out.dtype if g.sig.out else "float32", 1e-4) * (1 + float(want.abs().max()))
    if not diff <= tol:
        return False, f"the extracted problem does not reproduce the call (max abs err {diff:.3g} > {tol:.3g})"
    return True, None


def with_stats(g: OpGroup, kept: dict[str, dict]) -> OpGroup:
    """The group with the activation statistics of its first real call(s)."""
    head = kept.get(g.sig.key())
    sig = head["sig"] if head else g.sig
    tail = g.tail
    if tail is not None and tail.key() in kept:
        real = kept[tail.key()]["sig"]
        tail = tail.model_copy(update={"args": [a.model_copy(update={"stats": r.stats}) for a, r in
                                                zip(tail.args, real.args, strict=True)]})
    return g.model_copy(update={"sig": sig, "tail": tail})
