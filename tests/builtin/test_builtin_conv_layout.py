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
        assert "x5 = x5.permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3)" in src, p.name
        assert "flat = CIG < 16" in fwd or "flat = False" in fwd, p.name
        assert analyze(p.read_text()).family in ("conv", "pipeline"), p.name
    results = run_selfcheck(pairs)
    assert [r["ok"] for r in results] == [True] * len(files), [r for r in results if not r["ok"]]
