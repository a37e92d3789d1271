"""On the GPU: the escaped-stream threshold against real measurements from the timer
(`kiln.tools.timing.wall_over_event`): honest tiny and large kernels are not flagged, work hidden on
a side stream is. Run on the H200: `pytest -m gpu tests/integrity/test_gpu_timing.py -s`."""

from __future__ import annotations

import pytest
import torch

from kiln.tools.integrity.verdict import judge_timing
from kiln.tools.records import TimingIntegrity

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _measure(fn, inputs: tuple) -> tuple[TimingIntegrity, list[str]]:  # noqa: ANN001
    from kiln.tools.timing import wall_over_event

    ti = TimingIntegrity(**wall_over_event(fn, inputs))
    rules = [f.rule for f in judge_timing(ti)]
    print(f"\nwall/event {ti.wall_over_event:.2f}, wall {ti.wall_us:.0f} us, event {ti.event_us:.0f} us "
          f"over {ti.n_calls} calls -> {rules or 'clean'}")
    return ti, rules


@pytest.mark.parametrize("n", [1024, 1 << 16, 1 << 26])
def test_honest_kernels_are_not_flagged(n: int) -> None:
    x = torch.randn(n, device="cuda")
    _, rules = _measure(lambda t: t + 1.0, (x,))
    assert rules == []


def test_honest_softmax_is_not_flagged() -> None:
    x = torch.randn(8192, 8192, device="cuda")
    assert _measure(lambda t: torch.softmax(t, 1), (x,))[1] == []


def test_work_on_a_side_stream_is_flagged() -> None:
    side = torch.cuda.Stream()
    x = torch.randn(1 << 26, device="cuda")
    out = torch.empty_like(x)

    def cheat(t: torch.Tensor) -> torch.Tensor:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(4):
                out.copy_(torch.softmax(t.view(8192, -1), 1).view(-1))
        return out

    assert _measure(cheat, (x,))[1] == ["timing.escaped-stream"]
