"""Convs whose K loop runs over input channels (the per-tap path) read both operands with the
channels innermost: the forward copies the input and the weight to that layout (a no-op for a
channels-last input), which makes both MMA operands K-major and a tile's rows 16-byte loads on the
H200. The results must not change: groups, stride, padding, dilation, channel counts that are not a
multiple of the K tile, 1-D and 3-D, a permuted input and a grouped transposed conv, all under the
interpreter against PyTorch."""

from __future__ import annotations

from pathlib import Path

from kiln.agents.builtin.source import analyze

HERE = Path(__file__).parent / "conv_layout"


def test_per_tap_convs_read_channels_innermost_and_match(tmp_path: Path, gen, run_selfcheck) -> None:
    files = sorted(HERE.glob("*.py"))
    assert len(files) == 4
    pairs = [(p, gen(p, tmp_path)) for p in files]
    for p, cand in pairs:
        src = cand.read_text()
        fwd = src[src.index("    def forward("):]
        assert "x5 = _kiln_cl5(x5)" in fwd and "def _kiln_chan_inner(" in src, p.name
        assert "flat = CIG < 16" in fwd or "flat = False" in fwd, p.name
        assert analyze(p.read_text()).family in ("conv", "pipeline"), p.name
    results = run_selfcheck(pairs)
    assert [r["ok"] for r in results] == [True] * len(files), [r for r in results if not r["ok"]]


RELAYOUT = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("cand", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
base = torch.randn(2, 150, 3, 5, 9)
cases = {"dense": base[:, :70], "sliced channels": base[:, 10:80], "one sample": base[:1, :3],
         "channels-last": base.permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3),
         "strided spatial": base[:, :70, :, :, ::2]}
for name, x in cases.items():
    y = mod._kiln_cl5(x)
    assert y.shape == x.shape and y.stride(1) == 1 or x.shape[1] == 1, name
    assert torch.equal(y, x), name
print("ok")
"""


def test_the_relayout_kernel_is_exact_for_any_layout(tmp_path: Path, gen) -> None:
    """The tiled transpose (tails past its 64 x 64 tiles, a channel slice whose channel stride is not
    the plane's size), the channels-last no-op and the strided fallback: same values, channels
    innermost."""
    import os
    import subprocess
    import sys

    cand = gen(HERE / "c3d_cl.py", tmp_path)
    proc = subprocess.run([sys.executable, "-c", RELAYOUT, str(cand)], env=dict(os.environ, TRITON_INTERPRET="1"),
                          capture_output=True, text=True, timeout=300)
    assert proc.stdout.strip() == "ok", proc.stderr[-2000:]
