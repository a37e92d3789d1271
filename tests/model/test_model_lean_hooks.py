"""The lean launcher takes Triton's own path whenever a launch hook is set, and only then: newer
Triton holds its hooks in a `HookChain` that is never None, so "set" means "has calls" (on the
H200's Triton 3.6 every lean call had gone through Triton's path)."""

from __future__ import annotations

import pytest

from kiln.evals.model.launch import _hooked


def test_an_empty_hook_chain_is_no_hook() -> None:
    knobs = pytest.importorskip("triton.knobs")
    chain = knobs.HookChain()
    assert not _hooked(chain) and not _hooked(None)
    chain.add(lambda *a: None)
    assert _hooked(chain)
    assert _hooked(lambda *a: None)  # older Triton: the hook itself
