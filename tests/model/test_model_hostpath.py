"""The patch runtime's cheaper host path keeps every guarantee of the slow one: a patched pair or single
op equals eager on several seeds, a call of another shape, dtype, stride, or one that needs autograd
runs eagerly, the guard's one-C-call tensor check never passes what the full check refuses, the
fused pair's spare placeholder is never taken while anything holds it, and an in-place write before
the read still raises. The overhead probe's host-path counts are checked for their structure and a
bound (counts, not timings: they do not move with the machine's load)."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from kiln.evals.model import hostpath, overhead
from kiln.evals.model.guard import Guard
from kiln.evals.model.records import CallSig


class GnSilu(nn.Module):
    """A 'kernel' for silu(group_norm(x)) written in torch (equal bits to eager); counts its calls."""

    calls = 0

    def __init__(self, w: torch.Tensor, b: torch.Tensor) -> None:
        super().__init__()
        self.w, self.b = w, b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        GnSilu.calls += 1
        return F.silu(F.group_norm(x, 4, self.w, self.b, 1e-5))


class Gn(GnSilu):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        GnSilu.calls += 1
        return F.group_norm(x, 4, self.w, self.b, 1e-5)


class Keeps(hostpath.Pair):
    """Keeps its head's output after the tail (`saved`), and reads it on the next forward."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        y = self.act(h)
        self.saved.append(h)
        return y


def _eager(model: nn.Module, h: object, x: torch.Tensor) -> torch.Tensor:
    h.remove()  # type: ignore[attr-defined]
    try:
        return model(x)
    finally:
        h.install()  # type: ignore[attr-defined]


@pytest.mark.parametrize("cls, kind, kernel", [(hostpath.Pair, "fused", GnSilu),
                                               (hostpath.PairFunctional, "fused", GnSilu),
                                               (hostpath.Single, "function", Gn)])
def test_patched_equals_eager_and_other_calls_run_eagerly(cls: type, kind: str, kernel: type) -> None:
    model, x = cls().eval(), torch.randn(2, 8, 4, 4)
    with torch.no_grad():
        h, site = hostpath.patched(model, x, kind, kernel)
        for seed in range(4):
            torch.manual_seed(seed)
            xs = torch.randn_like(x)
            GnSilu.calls = 0
            assert torch.equal(model(xs), _eager(model, h, xs)) and GnSilu.calls == 1
        others = [torch.randn(2, 8, 5, 5), x.transpose(2, 3).contiguous().transpose(2, 3),  # (dtype: the guard test)
                  x.contiguous(memory_format=torch.channels_last)]
        for other in others:
            GnSilu.calls = 0
            assert torch.equal(model(other), _eager(model, h, other)) and GnSilu.calls == 0, other.stride()
        assert torch.equal(model(x), _eager(model, h, x)) and GnSilu.calls == 1  # back on the kernel
    GnSilu.calls = 0
    xg = x.clone().requires_grad_()
    out = model(xg)  # autograd needed: eager, and it backpropagates
    out.sum().backward()
    assert GnSilu.calls == 0 and xg.grad is not None and h.table.calls == {site.group: 5}
    h.remove()


def test_a_parameter_changed_behind_the_module_falls_back() -> None:
    model, x = hostpath.Pair().eval(), torch.randn(2, 8, 4, 4)
    with torch.no_grad():
        h, _ = hostpath.patched(model, x, "fused", GnSilu)
        model(x)
        model.norm.weight.data = torch.ones(16)[::2]  # the same object, another stride
        GnSilu.calls = 0
        assert torch.equal(model(x), _eager(model, h, x)) and GnSilu.calls == 0
        model.norm.weight.data = torch.full((8,), 2.0)  # back to the recorded layout: the kernel, new values
        assert torch.equal(model(x), _eager(model, h, x)) and GnSilu.calls == 1
    h.remove()


def test_the_fast_tensor_check_never_passes_what_the_full_check_refuses() -> None:
    x, w = torch.randn(2, 8, 4, 4), nn.Parameter(torch.ones(8))
    b = nn.Parameter(torch.zeros(8))
    from kiln.evals.model.capture import record

    rec, _ = record(nn.GroupNorm(4, 8), lambda: F.group_norm(x, 4, w, b, 1e-5))
    sig: CallSig = next(c.sig for c in rec.calls if c.sig.op == "F.group_norm")
    g = Guard(sig)
    with torch.no_grad():
        assert g.ok((x, 4, w, b, 1e-5)) and g.fast.guard is not None  # learned
        refused = [(x.double(), 4, w, b, 1e-5), (x.transpose(2, 3), 4, w, b, 1e-5), (x[:1], 4, w, b, 1e-5),
                   (x, 4, w.half(), b, 1e-5), (x, 4, w[:4], b, 1e-5), (x, 4, None, b, 1e-5), (x, 5, w, b, 1e-5),
                   (x, 4, w, b, 1e-6), (x, 4.0, w, b, 1e-5), (x, True, w, b, 1e-5)]
        assert [g.ok(v) for v in refused] == [False] * len(refused)
        assert g.ok((torch.randn(2, 8, 4, 4), 4, w, b, 1e-5))
        assert g.ok((x, 4, b, b, 1e-5))  # one tensor twice: the fast check says no, the full one yes
    assert not g.ok((x, 4, w, b, 1e-5))  # grad enabled and a parameter that requires it: autograd's
    with torch.no_grad():
        assert g.ok((x, 4, w, b, 1e-5))


def test_a_kept_head_output_is_never_reused_and_reads_right() -> None:
    model, x = Keeps().eval(), torch.randn(2, 8, 4, 4)
    with torch.no_grad():
        h, site = hostpath.patched(model, x, "fused", GnSilu)
        model.saved.clear()
        inputs = [torch.randn_like(x) for _ in range(3)]
        outs = [model(xi) for xi in inputs]
        kept = list(model.saved)
        assert len({id(t) for t in kept}) == 3  # each forward deferred into a new placeholder
        h.remove()
        for xi, out, hk in zip(inputs, outs, kept, strict=True):
            assert torch.equal(out, model.act(model.norm(xi))) and torch.equal(hk, model.norm(xi))


def test_a_spare_is_taken_again_only_when_nothing_holds_it() -> None:
    assert hostpath.spare_kept()


def test_a_head_input_written_before_the_tail_raises_on_a_later_forward_too() -> None:
    class Writes(hostpath.Pair):
        write = False

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.norm(x)
            if self.write:
                x.mul_(2.0)
            return self.act(h)

    model, x = Writes().eval(), torch.randn(2, 8, 4, 4)
    with torch.no_grad():
        h, _ = hostpath.patched(model, x, "fused", GnSilu)
        model(x)
        model(x)  # the spare in use
        model.write = True
        with pytest.raises(RuntimeError, match="written in place"):
            model(x.clone())
    h.remove()


def test_a_head_output_held_only_weakly_is_an_error_not_garbage() -> None:
    class Weak(hostpath.Pair):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.norm(x)
            self.ref = weakref.ref(h)
            return self.act(h)

    model, x = Weak().eval(), torch.randn(2, 8, 4, 4)
    with torch.no_grad():
        h, _ = hostpath.patched(model, x, "fused", GnSilu)
        model(x)
        gc.collect()
        ghost = model.ref()
        if ghost is not None:  # kept alive as the site's spare: reading it says so
            with pytest.raises(RuntimeError, match="let it go"):
                ghost + 1
    h.remove()


def test_the_host_path_counts_hold() -> None:
    c = hostpath.host_calls()
    assert set(c) == {f"{k}_{u}" for k in hostpath.RUNTIME for u in ("py_calls", "c_calls")}
    # the runtime's own calls (patched less its shell): 42 Python calls a fused pair, 47 with a
    # functional tail, 20 a single op before issue 24's host path work; 19, 23 and 10 after
    assert c["pair_runtime_py_calls"] <= 24 and c["functional_pair_runtime_py_calls"] <= 28, c
    assert c["single_runtime_py_calls"] <= 13, c
    assert min(c.values()) >= 0, c


def test_the_overhead_probe_reports_the_host_path() -> None:
    p = overhead.host_path("cpu")
    assert p["spare_kept"] is True
    for what, (case, shell) in hostpath.RUNTIME.items():  # each figure is its case less its shell
        assert isinstance(p[f"{what}_us"], float) and isinstance(p[f"{what}_py_calls"], int), (case, shell)
