"""Targets built from library configs (no weights downloaded): transformers' causal LMs and diffusers'
blocks are profiled and their hot ops extracted. Skipped when the library is not installed
(`pip install 'kernelkiln[models]'`; timm needs a torchvision matching torch, which CPU CI lacks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.evals.model import capture, extract, profile, targets
from kiln.evals.model.leaves import inputs_for_seed


def _extract_all(spec: str, tmp_path: Path, top: int = 8) -> tuple[dict, list]:
    t = targets.place(targets.build(spec), "cpu", "fp32")
    a1, k1 = inputs_for_seed(t.args, t.kwargs, 1)
    prof = profile.profile_model(t.model, [lambda: t.call(), lambda: t.call(a1, k1)], "cpu", "float32")
    chosen = [g for g in profile.select(prof, top, 0.0) if g.kind != "fused"]
    rec, _ = capture.record(t.model, lambda: t.call(), keep={g.sig.key() for g in chosen}, save_dir=tmp_path)
    done = {g.id: extract.write_problem(g, t.model, t.name, tmp_path / "p", rec.kept[g.sig.key()]) for g in chosen}
    return done, prof.groups


def test_qwen3_from_a_config(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    spec = "transformers:qwen3?layers=2&hidden=64&heads=4&kv_heads=2&seq=16&vocab=128&attn=eager"
    done, groups = _extract_all(spec, tmp_path, top=30)
    rms = [g for g in groups if g.kind == "module"]
    assert rms and rms[0].module_class == "Qwen3RMSNorm" and rms[0].count >= 5
    assert any(g.sig.op.endswith("softmax") for g in groups)  # eager attention's softmax
    assert all(p.verified for p in done.values()), {k: p.error for k, p in done.items() if not p.verified}
    assert any(k.startswith("Qwen3RMSNorm") and "F.rms_norm" in p.path.read_text() for k, p in done.items())


def test_diffusers_resnet_block(tmp_path: Path) -> None:
    pytest.importorskip("diffusers")
    done, groups = _extract_all("diffusers:resnet-block?ch=32&size=8&batch=2", tmp_path)
    assert any(g.sig.op == "F.group_norm" for g in groups)
    assert any(g.kind == "fused" and g.sig.op == "F.group_norm" and g.tail and g.tail.op == "F.silu" for g in groups)
    assert all(p.verified for p in done.values()), {k: p.error for k, p in done.items() if not p.verified}


def test_unknown_library_names() -> None:
    with pytest.raises(targets.TargetError, match="unknown transformers family"):
        targets.build("transformers:gpt9")
    with pytest.raises(targets.TargetError, match="unknown diffusers block"):
        targets.build("diffusers:vae")
