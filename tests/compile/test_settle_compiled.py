"""The torch.compile baseline is timed only after its compile workers are gone (a cold compile's
worker pool, still importing torch beside the timed calls, made the baseline look slower)."""

from __future__ import annotations

import torch

from kiln.tools.timing.stage import settle_compiled


def test_compile_workers_are_stopped_before_timing(monkeypatch, tmp_path) -> None:
    from torch._inductor import async_compile, config

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setattr(config, "compile_threads", 2)
    # the worker pool a cold compile of a real model starts (on this 2-core machine inductor would
    # not start one for a single small kernel, so start it as compile_fx does)
    async_compile.AsyncCompile.warm_pool()
    assert len(async_compile._pool_set) == 1
    model = torch.nn.Softmax(dim=-1)
    fn = torch.compile(model)
    x = torch.randn(8, 33)
    before = x.clone()
    settle_compiled(fn, (x,))
    assert len(async_compile._pool_set) == 0  # no pool left to compete with the timed calls
    assert torch.equal(x, before)  # compiled on copies: the input set is untouched
    assert torch.allclose(fn(x), model(x))  # and the compiled function still works
    torch._dynamo.reset()
