"""A timing lap's inputs (`kiln.tools.timing.laps.draw_lap`): one stream from one seeding, which the
reference draws again up to the slots it audits. The prefix has to be the lap's own inputs, slot for
slot, or the audit would judge honest kernels against other inputs."""

from __future__ import annotations

import random

import torch

from kiln.tools.timing.laps import Ring, RingSpec, draw_lap


def _inputs():
    return [torch.rand(3, 5), torch.randn(7), 4]


def _mixed():  # a problem that draws from Python's and numpy's generators too
    import numpy as np

    return [torch.tensor(np.random.rand(4)), torch.tensor([random.random()])]


def _same(a, b) -> bool:
    return all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(a, b, strict=True))


def test_a_laps_stream_is_fixed_by_its_key_and_every_slot_differs() -> None:
    spec = RingSpec(key=1, slots=6, device="cpu")
    first, again = list(draw_lap(_inputs, spec, 123)), list(draw_lap(_inputs, spec, 123))
    assert len(first) == 6 and all(_same(a, b) for a, b in zip(first, again, strict=True))
    assert len({x[0].sum().item() for x in first}) == 6  # six different draws
    other = list(draw_lap(_inputs, spec, 124))
    assert not any(_same(a, b) for a, b in zip(first, other, strict=True))


def test_the_audits_prefix_is_the_laps_own_inputs() -> None:
    for get in (_inputs, _mixed):
        spec = RingSpec(key=1, slots=9, device="cpu")
        whole = list(draw_lap(get, spec, 77))
        for upto in (0, 3, 8, 20):
            part = list(draw_lap(get, spec, 77, upto))
            assert len(part) == min(upto, 8) + 1
            assert all(_same(a, b) for a, b in zip(part, whole, strict=False))


def test_a_refreshed_ring_holds_the_stream_at_fixed_addresses() -> None:
    spec = RingSpec(key=5, slots=4, device="cpu")
    ring = Ring(_inputs, spec)
    ptrs = [s[0].data_ptr() for s in ring.slots]
    torch.rand(100)  # whatever ran between laps: the refresh seeds again
    ring.refresh(99)
    assert [s[0].data_ptr() for s in ring.slots] == ptrs
    assert all(_same(a, b) for a, b in zip(ring.slots, draw_lap(_inputs, spec, 99), strict=True))
