"""The sampling loop of time_callable on CPU: torch.cuda's Event and synchronize are replaced by a
host-clock stand-in (the one boundary faked here), so the loop's own logic is what is tested:
warm-up, >= 30 samples, re-checks of timed outputs on the inputs they saw, the stopping rule."""

import time

import pytest
import torch

from kiln.tools.timing import time_callable


class _HostEvent:
    def __init__(self, enable_timing: bool = True):
        self.t = 0.0

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end: "_HostEvent") -> float:
        return (end.t - self.t) * 1e3


@pytest.fixture
def host_events(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", _HostEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)


def _spin(us: float):
    def fn(x):
        t_end = time.perf_counter() + us * 1e-6
        while time.perf_counter() < t_end:
            pass
        return x * 2

    return fn


def test_loop_takes_min_samples_and_rechecks_on_seen_inputs(host_events):
    checked = []

    def on_output(i, inputs, out):
        checked.append(i)
        assert torch.equal(out, inputs[0] * 2)  # the inputs are still the ones this call saw

    sets = [(torch.full((8,), float(i)),) for i in range(4)]
    stat, samples = time_callable(_spin(300), sets, max_time_s=2.0, on_output=on_output)
    assert len(samples) >= 30 and stat.n_samples == len(samples)
    assert 250 < stat.median_us < 3000
    assert checked[:4] == [0, 1, 3, 7]


def test_loop_stops_at_the_time_cap_when_noisy(host_events):
    import random

    rnd = random.Random(0)

    def noisy(x):
        return _spin(rnd.uniform(100, 600))(x)

    t0 = time.perf_counter()
    stat, samples = time_callable(noisy, [(torch.zeros(4),)], max_time_s=0.5)
    assert stat.half_width_pct > 1.0 and len(samples) > 100  # went on past 30, then hit the cap
    assert 0.5 <= time.perf_counter() - t0 < 3.0
