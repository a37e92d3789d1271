"""A patched model pays nothing for the ops no kernel takes: the SD ResBlocks' fused group norm -> SiLU
pairs are taken at their stock modules and through the placeholder, with no TorchFunctionMode over
the convs, linears and adds around them; the results match eager exactly; a head read by another op
after its tail, a head input written in place, and remove() all behave."""

from __future__ import annotations

import importlib.util
import math
import types

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from kiln.evals.model import profile
from kiln.evals.model.apply import Applied, apply_entries
from kiln.evals.model.capture import record
from kiln.evals.model.defer import Placeholder
from kiln.evals.model.guard import Guard
from kiln.evals.model.patch import Kernel, Site
from kiln.evals.model.records import BundleEntry
from kiln.evals.model.stock import CALLS
from tests.model.conftest import REPO


class GnSilu(nn.Module):
    """A 'kernel' for silu(group_norm(x)) written in torch: the same ops as eager, so equal bits."""

    calls = 0

    def __init__(self, w: torch.Tensor, b: torch.Tensor, groups: int = 32, eps: float = 1e-6) -> None:
        super().__init__()
        self.w, self.b, self.groups, self.eps = w, b, groups, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        GnSilu.calls += 1
        return F.silu(F.group_norm(x, self.groups, self.w, self.b, self.eps))


def _resblocks() -> tuple[nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    spec = importlib.util.spec_from_file_location("sd_resblock", REPO / "examples/model/sd_resblock.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model, inputs = mod.make_small()
    return model.eval(), inputs


def _patch(model: nn.Module, run: object, kernel: type = GnSilu, name: str = "narrow") -> tuple[Applied, str]:
    prof = profile.profile_model(model, [run], "cpu", "float32")
    g = next(g for g in prof.groups if g.kind == "fused" and g.sig.op == "F.group_norm")
    entry = BundleEntry(group=g.id, kind="fused", sig=g.sig, tail=g.tail, kernel="", scopes=g.scopes,
                        module_paths=g.module_paths)
    site = Site(entry, Kernel(types.SimpleNamespace(ModelNew=kernel), g.tail.out, f"test_{name}_{g.id}"))
    return apply_entries(model, [site], compile_kernels=False), g.id


def test_sd_resblocks_match_eager_with_no_mode_over_the_other_ops() -> None:
    model, (x, temb) = _resblocks()
    seen: list[tuple[bool, type]] = []
    for m in (model.blocks[0].conv1, model.blocks[0].conv2, model.blocks[1].time_emb_proj):
        m.register_forward_pre_hook(lambda _m, a: seen.append((torch._C._is_torch_function_mode_enabled(),
                                                               type(a[0]))))
    h, gid = _patch(model, lambda: model(x, temb), name="sd")
    with torch.no_grad():
        for seed in range(3):
            torch.manual_seed(seed)
            xs, ts = torch.randn_like(x), torch.randn_like(temb)
            h.remove()
            want = model(xs, ts)
            h.install()
            seen.clear()
            GnSilu.calls, h.table.calls = 0, {}
            got = model(xs, ts)
            assert torch.equal(want, got)
            assert GnSilu.calls == 4 and h.table.calls == {gid: 4}  # both norms of both blocks, fused
            assert seen == [(False, torch.Tensor)] * 3  # no mode on, no placeholder reaches a conv
    assert not h.table.pending
    h.remove()
    assert all("forward" not in m.__dict__ for m in model.modules())


class Reuse(nn.Module):
    """`h = norm(x); y = act(h)`, and (with `reuse`, set only after profiling) `h` read again later."""

    def __init__(self) -> None:
        super().__init__()
        self.norm, self.act, self.proj = nn.GroupNorm(4, 8), nn.SiLU(), nn.Conv2d(8, 8, 1)
        self.reuse, self.write = False, False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        if self.write:
            x.mul_(2.0)  # a head input written before the tail: the deferred head cannot be computed
        y = self.act(h)
        return self.proj(y) + h if self.reuse else self.proj(y)


class GnSilu4(GnSilu):
    def __init__(self, w: torch.Tensor, b: torch.Tensor) -> None:
        super().__init__(w, b, groups=4, eps=1e-5)


def test_a_head_read_after_its_tail_gets_its_real_result() -> None:
    net, x = Reuse().eval(), torch.randn(2, 8, 3, 3)
    h, gid = _patch(net, lambda: net(x), GnSilu4, "reuse")
    net.reuse = True
    with torch.no_grad():
        GnSilu.calls = 0
        got = net(x)
        h.remove()
        want = net(x)
    assert torch.equal(want, got) and GnSilu.calls == 1 and h.table.calls == {gid: 1}


def test_a_head_input_written_before_the_tail_is_an_error_not_a_wrong_result() -> None:
    net, x = Reuse().eval(), torch.randn(2, 8, 3, 3)
    h, _ = _patch(net, lambda: net(x), GnSilu4, "write")
    net.write = True
    with torch.no_grad(), pytest.raises(RuntimeError, match="written in place"):
        net(x.clone())
    h.remove()


def test_an_unpatched_op_in_a_patched_model_meets_no_interception() -> None:
    model, (x, temb) = _resblocks()
    h, _ = _patch(model, lambda: model(x, temb), name="count")
    calls = {"mode": 0, "placeholder": 0}
    mode_tf, ph_tf = type(h.mode).__torch_function__, Placeholder.__torch_function__.__func__

    def count_mode(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202 - a spy on torch's protocol
        calls["mode"] += 1
        return mode_tf(self, *a, **k)

    def count_ph(cls, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202 - the same, for the placeholder
        calls["placeholder"] += 1
        return ph_tf(cls, *a, **k)

    h.mode.__class__ = type("Counting", (type(h.mode),), {"__torch_function__": count_mode})
    Placeholder.__torch_function__ = classmethod(count_ph)  # type: ignore[assignment, method-assign]
    try:
        with torch.no_grad():
            model(x, temb)
    finally:
        Placeholder.__torch_function__ = classmethod(ph_tf)  # type: ignore[assignment, method-assign]
    assert calls == {"mode": 0, "placeholder": 0}  # heads and tails taken at their modules, nothing else


@pytest.mark.parametrize("cls", list(CALLS))
def test_stock_calls_are_the_calls_a_mode_records(cls: type) -> None:
    mod = cls(4, 8) if cls is nn.GroupNorm else cls(8) if cls is nn.LayerNorm else cls()
    x = torch.randn(2, 8, 3, 8)
    rec, _ = record(mod, lambda: mod(x))
    func, build = CALLS[cls]
    call = next(c for c in rec.calls if c.sig.op == f"F.{func.__name__}")
    with torch.no_grad():  # the guard refuses tensors that need autograd
        assert Guard(call.sig).match(build(mod, x), {}) is not None


def test_the_overhead_probe_reports_a_forward_on_cpu() -> None:
    from kiln.evals.model import overhead

    p = overhead.per_forward("cpu", reps=1)  # raises when the pairs never ran fused
    assert set(p) == {"forward_eager_us", "forward_patched_free_us", "forward_pairs_eager_us", "forward_runtime_us"}
    # timings on a loaded CI host order any way (a timing is a benchmark, never a pass/fail test): only what
    # the probe computes from them is checked
    assert all(math.isfinite(v) for v in p.values()), p
    assert min(p["forward_eager_us"], p["forward_patched_free_us"], p["forward_pairs_eager_us"]) > 0, p
    want = p["forward_patched_free_us"] - p["forward_eager_us"] + p["forward_pairs_eager_us"]
    assert p["forward_runtime_us"] == pytest.approx(want), p
