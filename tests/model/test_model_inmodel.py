"""The decision to patch is taken inside the model (inmodel.py), here on CPU with host clocks: a
kernel that was "faster alone" but loses in the forward is not kept, and what stays patched is never
slower than eager. Kernels are torch code in real bundle files (the runtime treats them like any)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn as nn

from kiln.evals.model import bundle, profile
from kiln.evals.model.inmodel import alone, kept_alone, never_slower
from kiln.evals.model.records import BundleEntry, BundleManifest
from kiln.evals.model.targets import Target

pytestmark = pytest.mark.serial

FAST = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
       "        return x * torch.sigmoid(x)\n"
SLOW = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass ModelNew(nn.Module):\n" \
       "    def forward(self, x):\n        for _ in range(30):\n            y = F.gelu(x)\n        return y\n"


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act, self.gelu = nn.SiLU(), nn.GELU()

    def forward(self, x):
        return self.gelu(self.act(x) * 2.0)


def _bundle(tmp_path: Path, t: Target) -> tuple[bundle.Bundle, dict[str, str]]:
    prof = profile.profile_model(t.model, [lambda: t.call()], "cpu", "float32")
    ids, entries, kernels = {}, [], {}
    for g in prof.groups:
        op = {"F.silu": "silu", "F.gelu": "gelu"}.get(g.sig.op)
        if op is None or g.kind != "function":
            continue
        ids[op] = g.id
        path = tmp_path / f"{op}.py"
        path.write_text(FAST if op == "silu" else SLOW)
        kernels[g.id] = path
        entries.append(BundleEntry(group=g.id, kind="function", sig=g.sig, kernel="", scopes=g.scopes,
                                   module_paths=g.module_paths))
    manifest = BundleManifest(model="net", guard=bundle.current_guard(t.model), entries=entries)
    return bundle.write(tmp_path / "bundle", manifest, kernels), ids


@pytest.fixture
def one_thread():
    """One intra-op thread: on a loaded 2-core machine, a preempted OpenMP worker stalls a whole op for
    milliseconds, which swamps what these timings compare."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_a_kernel_that_loses_in_the_model_is_not_kept(tmp_path: Path, one_thread: None) -> None:
    torch.manual_seed(0)
    t = Target(name="net", model=Net().eval(), args=(torch.randn(64, 2048),))
    b, ids = _bundle(tmp_path, t)
    groups = [ids["silu"], ids["gelu"]]
    in_model, samples = alone(t, b, groups, max_s=1.0)
    assert set(samples.gpu_us) == {"eager", *groups} and all(len(v) >= 15 for v in samples.gpu_us.values())
    assert in_model[ids["gelu"]].verdict == "slower"  # 30 GELUs where the model had one
    keep, dropped = kept_alone(groups, in_model, faster_alone=set(groups))  # both claimed "faster alone"
    assert ids["gelu"] not in keep and any(d.startswith(ids["gelu"] + ": loses in the model") for d in dropped)
    keep, final, _ = never_slower(t, b, keep, {g: 0.0 for g in keep}, max_s=1.0)
    if keep:  # whatever stays patched is not slower than eager (point estimate)
        from kiln.tools.timing.stats import speedup

        assert speedup(final.gpu_us["eager"], final.gpu_us["patched"], name="eager").value >= 1.0
    assert all("forward" not in m.__dict__ for m in t.model.modules())  # every variant's patch removed
