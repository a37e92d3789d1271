"""Profile, rank and extract (in this process: no kernels run here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from kiln.evals.model import capture, extract, profile, targets
from kiln.evals.model.leaves import OutputError, inputs_for_seed, tensor_leaves
from tests.model.conftest import BLOCK, CNN, REPO


def _profiled(spec: str):
    t = targets.place(targets.build(spec), "cpu", "fp32")
    a1, k1 = inputs_for_seed(t.args, t.kwargs, 1)
    return t, profile.profile_model(t.model, [lambda: t.call(), lambda: t.call(a1, k1)], "cpu", "float32")


def test_cnn_profile_ranks_by_cost_and_offers_fusions() -> None:
    t, prof = _profiled(CNN)
    assert prof.method == "cost-model" and "not measured" in prof.note
    times = [g.time_us for g in prof.groups]
    assert times == sorted(times, reverse=True)
    ops = {g.sig.op for g in prof.groups if g.kind == "function"}
    assert {"F.conv2d", "F.group_norm", "F.silu", "F.adaptive_avg_pool2d", "F.linear"} <= ops
    gn = next(g for g in prof.groups if g.sig.op == "F.group_norm" and g.kind == "function")
    assert gn.count == 2 and gn.module_paths == ["blocks.0.norm", "blocks.1.norm"]
    fused = next(g for g in prof.groups if g.kind == "fused" and g.sig.op == "F.group_norm")
    assert fused.tail is not None and fused.tail.op == "F.silu" and fused.scopes == ["blocks.0", "blocks.1"]
    assert abs(sum(g.share for g in prof.groups if g.kind != "fused") - 1.0) < 1e-6
    chosen = profile.select(prof, 3, 0.0)
    assert len([g for g in chosen if g.kind != "fused"]) == 3
    assert all(g.kind != "fused" or g.sig.key() in {c.sig.key() for c in chosen} or
               (g.tail and g.tail.key() in {c.sig.key() for c in chosen}) for g in chosen)


@pytest.mark.parametrize("spec", [CNN, BLOCK])
def test_extracted_problems_reproduce_their_ops(spec: str, tmp_path: Path) -> None:
    t, prof = _profiled(spec)
    chosen = [g for g in profile.select(prof, 8, 0.0) if g.kind != "fused"]
    rec, _ = capture.record(t.model, lambda: t.call(), keep={g.sig.key() for g in chosen}, save_dir=tmp_path)
    for g in chosen:
        kept = rec.kept[g.sig.key()]
        p = extract.write_problem(g, t.model, t.name, tmp_path / "problems", kept)
        assert p.verified, (g.id, p.error)
        src = p.path.read_text()
        assert "_kiln_draw" in src or "randint" in src or "return []" in src
        if p.params:  # the module's real parameters reach the problem's Model
            spec_ = importlib.util.spec_from_file_location("prob", p.path)
            mod = importlib.util.module_from_spec(spec_)
            spec_.loader.exec_module(mod)
            real = dict(t.model.named_parameters())[p.params[0]]
            assert torch.equal(mod.get_init_inputs()[0], real.detach())


def test_a_wrong_extraction_is_caught(tmp_path: Path) -> None:
    t, prof = _profiled(CNN)
    g = next(g for g in prof.groups if g.sig.op == "F.group_norm" and g.kind == "function")
    rec, _ = capture.record(t.model, lambda: t.call(), keep={g.sig.key()}, save_dir=tmp_path)
    wrong = g.model_copy(deep=True)
    wrong.sig.args[1].src = "2"  # 2 groups instead of 4
    p = extract.write_problem(wrong, t.model, t.name, tmp_path / "p", rec.kept[g.sig.key()])
    assert not p.verified and "does not reproduce" in (p.error or "")


def test_inputs_are_drawn_from_real_activations(tmp_path: Path) -> None:
    t, prof = _profiled(CNN)
    g = next(g for g in prof.groups if g.sig.op == "F.adaptive_avg_pool2d")
    rec, _ = capture.record(t.model, lambda: t.call(), keep={g.sig.key()}, save_dir=tmp_path)
    stats = rec.kept[g.sig.key()]["sig"].args[0].stats
    assert stats is not None and stats.min < stats.max and len(stats.quantiles) == capture.N_QUANTILES
    p = extract.write_problem(g, t.model, t.name, tmp_path / "p", rec.kept[g.sig.key()])
    spec = importlib.util.spec_from_file_location("prob2", p.path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = mod.get_inputs()[0]
    assert stats.min - 1e-6 <= float(x.min()) and float(x.max()) <= stats.max + 1e-6


class Branchy(torch.nn.Module):
    """Data-dependent control flow: a softmax or a sigmoid, depending on the input's sign."""

    def forward(self, x):
        y = torch.relu(x) * 2
        return torch.softmax(y, -1) if float(x.sum()) > 0 else torch.sigmoid(y)


def test_data_dependent_control_flow_is_skipped() -> None:
    m = Branchy()
    pos, neg = torch.rand(4, 8), -torch.rand(4, 8)
    prof = profile.profile_model(m, [lambda: m(pos), lambda: m(neg)], "cpu", "float32")
    skipped = {g.sig.op: g.skipped for g in prof.groups}
    assert "dynamic" in (skipped["torch.softmax"] or "") and skipped["torch.relu"] is None
    assert all(g.sig.op != "torch.softmax" for g in profile.select(prof, 8, 0.0))


def _factory_file(tmp_path: Path, body: str) -> str:
    f = tmp_path / "factory.py"
    f.write_text("import torch\n" + body)
    return f"{f}:make"


def test_bad_targets_give_one_line(tmp_path: Path) -> None:
    with pytest.raises(targets.TargetError, match="raised ValueError: no weights"):
        targets.build(_factory_file(tmp_path, "def make():\n    raise ValueError('no weights')\n"))
    with pytest.raises(targets.TargetError, match="bad target"):
        targets.build("resnet50")
    with pytest.raises(targets.TargetError, match="not a torch.nn.Module"):
        targets.build(_factory_file(tmp_path, "def make():\n    return 3, ()\n"))
    body = ("class M(torch.nn.Module):\n    def forward(self, x):\n        raise RuntimeError('needs CUDA')\n"
            "def make():\n    return M(), (torch.ones(2),)\n")
    with pytest.raises(targets.TargetError, match="does not run on cpu/fp32: RuntimeError: needs CUDA"):
        targets.place(targets.build(_factory_file(tmp_path, body)), "cpu", "fp32")
    with pytest.raises(targets.TargetError, match="not found"):
        targets.build(f"{REPO}/nope.py:make")


def test_non_tensor_outputs_are_named() -> None:
    with pytest.raises(OutputError, match="non-tensor outputs"):
        tensor_leaves({"logits": torch.ones(2), "cache": object()})
    with pytest.raises(OutputError, match="no tensor"):
        tensor_leaves("text")
    assert [n for n, _ in tensor_leaves((torch.ones(1), {"a": torch.ones(2)}))] == ["out[0]", "out[1].a"]


def test_resnet_stage4_shares_and_residual_pairs() -> None:
    """The benchmark's ResNet-50 stage 4 (CPU size): single shares add up to 100% of the cost model's
    total, and the bottleneck's end offers both its pairs (batch_norm -> add, add -> relu)."""
    t, prof = _profiled(f"{REPO}/examples/model/resnet_stage4.py:make_small")
    singles = [g for g in prof.groups if g.kind != "fused"]
    assert abs(sum(g.share for g in singles) - 1.0) < 1e-6 and "cost model's total" in prof.share_of
    pairs = {(g.sig.op, g.tail.op) for g in prof.groups if g.kind == "fused"}
    assert ("F.batch_norm", "F.relu") in pairs and ("F.batch_norm", ".add") in pairs and (".add", "F.relu") in pairs
    assert all(0.0 <= g.gain() <= g.share for g in prof.groups)
