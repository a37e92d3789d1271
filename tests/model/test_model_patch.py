"""Patching: the patch applies and matches, a non-matching call falls back, remove() restores the
model, torch.compile sees custom ops, a bundle reloads in a fresh process, guards refuse."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from kiln.evals.model import load
from kiln.evals.model.bundle import BundleError, current_guard, mismatches
from tests.model.conftest import CNN, scenario

pytestmark = pytest.mark.xdist_group("model_cnn_bundle")


def test_bundle_has_the_covered_ops(cnn_bundle: tuple[Path, dict]) -> None:
    _, info = cnn_bundle
    ops = set(info["groups"])
    assert any(g.startswith("group_norm_") for g in ops) and any(g.startswith("fused_group_norm_") for g in ops)
    assert any(g.startswith("adaptive_avg_pool2d_") for g in ops)
    assert all("conv2d" in why for why in info["unsupported"].values())


def test_patch_matches_falls_back_and_compiles(cnn_bundle: tuple[Path, dict]) -> None:
    folder, _ = cnn_bundle
    res = scenario("patch", CNN, str(folder))
    assert res["err"] < 1e-5
    fused = [g for g in res["calls"] if g.startswith("fused_group_norm_")]
    assert fused and res["calls"][fused[0]] == 2  # both blocks' group_norm -> silu ran as one kernel
    assert any(g.startswith("adaptive_avg_pool2d_") for g in res["calls"])
    assert res["fallback_calls"] == {} and res["fallback_err"] == 0.0  # batch x2: no signature matches
    assert res["removed_err"] == 0.0 and res["forwards_restored"]
    assert res["compile_err"] < 1e-5
    assert any("group_norm" in op for op in res["compile_custom_ops"])


def test_bundle_reloads_in_a_fresh_process(cnn_bundle: tuple[Path, dict], tmp_path: Path) -> None:
    folder, _ = cnn_bundle
    moved = tmp_path / "moved_bundle"
    shutil.copytree(folder, moved)  # a bundle is self-contained: it works from anywhere
    res = scenario("reload", CNN, str(moved))
    assert res["err"] < 1e-5 and res["missing"] == [] and sum(res["calls"].values()) >= 3


def test_guards_refuse_another_environment(cnn_bundle: tuple[Path, dict], tmp_path: Path) -> None:
    folder, _ = cnn_bundle
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    manifest = json.loads((bad / "manifest.json").read_text())
    manifest["guard"] |= {"device": "cuda", "gpu_name": "NVIDIA H200", "dtype": "bfloat16", "torch": "2.11.0+cu130"}
    (bad / "manifest.json").write_text(json.dumps(manifest))
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    with pytest.raises(BundleError) as err:
        load(bad).apply(model)
    msg = str(err.value)
    assert "built for NVIDIA H200, this model is on cpu" in msg and "bfloat16" in msg and "torch 2.11.0" in msg
    assert "forward" not in model[0].__dict__  # nothing was patched
    assert mismatches(current_guard(model), current_guard(model)) == []


def test_not_a_bundle(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="not a kiln bundle"):
        load(tmp_path)
