"""Output hygiene: aliasing, subclasses, lazy and deferred outputs, cached answers."""

from __future__ import annotations

import weakref

import pytest
import torch
from torch import nn

from kiln.tools import chunked
from kiln.tools.integrity import hygiene
from kiln.tools.integrity.hygiene import check_outputs


@pytest.fixture(autouse=True, params=["copies", "compact"])
def snapshot_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every rule holds both ways outputs are remembered: whole copies (small outputs) and, as for
    KernelBench's multi-GB ones, a sample and a checksum computed in slices."""
    if request.param == "compact":
        monkeypatch.setattr(hygiene, "COMPACT_MIN_NUMEL", 1)
        monkeypatch.setattr(hygiene, "SAMPLE", (64, 16))
        monkeypatch.setattr(chunked, "CHUNK", 5)
    return request.param


class Ref(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * self.w


class Honest(Ref):
    pass


SETS = [(torch.randn(4, 8),) for _ in range(3)]


def rules(cand: nn.Module, ref: nn.Module | None = None) -> set[str]:
    return {f.rule for f in check_outputs(cand, ref or Ref(), SETS)}


def test_honest_outputs_are_clean() -> None:
    assert rules(Honest()) == set()


def test_output_aliasing_the_input() -> None:
    class InPlace(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.relu_()

    assert rules(InPlace()) == {"output.alias-input"}


def test_aliasing_allowed_when_the_reference_aliases_too() -> None:
    class View(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.view(-1)

    assert "output.alias-input" not in rules(View(), View())


def test_output_aliasing_a_reference_tensor() -> None:
    ref = Ref()

    class Steal(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return ref.w.data

    assert "output.alias-reference" in rules(Steal(), ref)


def test_tensor_subclass_output() -> None:
    class Sub(torch.Tensor):
        pass

    class Cand(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x).as_subclass(Sub)

    assert "output.subclass" in rules(Cand())


def test_meta_output_is_lazy() -> None:
    class Cand(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.empty(x.shape, device="meta")

    assert "output.lazy" in rules(Cand())


def test_output_written_after_return_is_lazy() -> None:
    class Deferred(nn.Module):
        """Returns a buffer and fills it during the next call (cross-call batching)."""

        def __init__(self) -> None:
            super().__init__()
            self.pending: list = []

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for out, inp in self.pending:
                out.copy_(torch.relu(inp))
            out = torch.zeros_like(x)
            self.pending = [(out, x)]
            return out

    assert "output.lazy" in rules(Deferred())


def test_cached_output_is_caught() -> None:
    class Cache(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.memo = None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if self.memo is None:
                self.memo = torch.relu(x)
            return self.memo.clone()

    assert "output.cached" in rules(Cache(), nn.ReLU())


def test_one_call_late_output_is_caught() -> None:
    class Late(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.prev = None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = torch.relu(x) if self.prev is None else self.prev
            self.prev = torch.relu(x)
            return out.clone()

    assert "output.cached" in rules(Late(), nn.ReLU())


def test_input_sets_are_made_one_at_a_time_and_let_go() -> None:
    """Sets come from an iterable and none is kept once both models ran on it: at KernelBench's
    sizes three sets held at once (plus clones) ran an H200 out of memory."""
    made: list[weakref.ref] = []

    def make() -> tuple[torch.Tensor]:
        assert all(r() is None for r in made), "an earlier input set is still alive"
        x = torch.randn(4, 8)
        made.append(weakref.ref(x))
        return (x,)

    sets = (make() for _ in range(3))

    assert {f.rule for f in check_outputs(Honest(), Ref(), sets)} == set()
    assert len(made) == 3


def test_output_aliasing_an_earlier_reference_output(snapshot_mode: str) -> None:
    """A candidate that hands back the reference's previous output: its memory is a reference
    output's. Earlier reference outputs are kept alive (and so recognised) only below the compact
    size; above it the one-call-late answer is still caught as cached."""
    ref = Ref()
    grabbed: list[torch.Tensor] = []
    plain = ref.forward

    def spy(x: torch.Tensor) -> torch.Tensor:
        grabbed.append(plain(x))
        return grabbed[-1]

    ref.forward = spy  # type: ignore[method-assign]

    class Late(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return grabbed[-1] if grabbed else torch.relu(x) * ref.w

    found = rules(Late(), ref)
    assert ("output.alias-reference" in found) == (snapshot_mode == "copies")
    assert "output.cached" in found
