"""The sampling loop of time_callable on CPU, with the host-clock events kiln uses there
(`kiln.tools.timing.bench.HostEvent`): warm-up, >= 30 samples, every timed output sketched under
the key, the stopping rule."""

import time

import torch

from kiln.tools.timing import TimedInputs, time_callable, timing_sketch


def _spin(us: float):
    def fn(x):
        t_end = time.perf_counter() + us * 1e-6
        while time.perf_counter() < t_end:
            pass
        return x * 2

    return fn


def test_loop_takes_min_samples_and_sketches_every_timed_output():
    feed = TimedInputs([(torch.rand(8),) for _ in range(4)], key=11)
    run = time_callable(_spin(300), feed, max_time_s=2.0, sketch_key=5)
    stat = run.stat
    assert len(run.samples) >= 30 and stat.n_samples == len(run.samples)
    assert 250 < stat.median_us < 3000
    calls = sorted(run.sketches)
    assert calls == list(range(run.first_call, run.first_call + len(run.samples)))  # warm-up calls not sketched
    k = calls[7]
    again = timing_sketch(feed.for_call(k)[0] * 2, 5)  # the same call, recomputed elsewhere from the key
    assert torch.equal(again["outputs"][0]["values"], run.sketches[k]["outputs"][0]["values"])


def test_loop_stops_at_the_time_cap_when_noisy():
    import random

    rnd = random.Random(0)

    def noisy(x):
        return _spin(rnd.uniform(100, 600))(x)

    t0 = time.perf_counter()
    run = time_callable(noisy, [(torch.zeros(4),)], max_time_s=0.5)
    assert run.stat.half_width_pct > 1.0 and len(run.samples) > 100  # went on past 30, then hit the cap
    assert 0.5 <= time.perf_counter() - t0 < 3.0
