"""Timing by laps, the clock outside the worker: the harness both the candidate's worker and the
baseline worker run, each step one command whose duration kiln's own process measures.

A ring holds `slots` input sets at fixed addresses. Each lap: `refresh(key)` writes a new draw of the
problem's own `get_inputs()` into every slot: the generators are seeded once from the lap's input key,
then each slot is the next call of `get_inputs()` in that stream (seeding per slot cost ~46 us a slot on
the H200's host, half of a small problem's refresh). The parent draws that key in secret and sends it
only with the lap's refresh, so no worker can know a lap's inputs before the lap is about to run (a
harness that foresaw them computed every lap's outputs in its untimed warm-up); the reference worker,
told the keys of the laps it audits, draws the same stream again up to the slots it checks. `lap()` calls the function
once per slot, back to back, keeps every output and synchronises, and `commit(key)` reduces every
kept output to keyed projections (`kiln.tools.timing.audit`) under a key sent only now. The parent
times all three: the lap is the measurement, and whatever a worker spends in refresh or commit
beyond what the baseline worker's identical steps cost is added to its lap (work moved out of the
lap is still counted). Inputs differ in every slot of every lap (a cache keyed by address or by
content answers nothing), the ring's inputs and outputs together span at least twice the L2 cache
where memory allows (every call reads its inputs from DRAM, as a flushed call would), and outputs
are all kept until committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

L2_SPAN_BYTES = 128 << 20  # twice the H200's 50 MiB L2, rounded up
RING_BUDGET_BYTES = 8 << 30  # at most this much GPU memory for a ring (an eighth of the GPU's, if smaller)
MAX_SLOTS = 512
LAP_TARGET_S = 2e-3
"""A lap should take at least this long, so the command's round trip (~0.1-0.3 ms) stays small
beside it: slots are added (within the memory budget) for fast calls on big inputs."""
EST_BANDWIDTH = 3e12  # bytes/s, to guess a call's time from its inputs and outputs (sizing only)


class RingSpec(BaseModel):
    """What the parent tells both workers (and the reference, for the audit) about a ring."""

    model_config = ConfigDict(extra="forbid")
    key: int = Field(description="seeds the ring's first fill only (untimed); every lap's inputs come from "
                                 "that lap's own key, sent with its refresh")
    slots: int = Field(ge=1, le=MAX_SLOTS)
    dtype: str = "fp32"
    device: str = "cuda"


def ring_slots(input_bytes: int, output_bytes: int, budget: int = RING_BUDGET_BYTES) -> int:
    """Enough slots that a lap's inputs and outputs span `L2_SPAN_BYTES` and a lap takes about
    `LAP_TARGET_S` (a call guessed memory-bound, plus 10 us), within the memory budget."""
    per = max(1, input_bytes + output_bytes)
    span = -(-L2_SPAN_BYTES // per)
    est_s = per / EST_BANDWIDTH + 1e-5
    long_enough = int(-(-LAP_TARGET_S // est_s))
    return max(1, min(MAX_SLOTS, max(span, long_enough), budget // per))


def draw_lap(get_inputs: Callable[[], Any], spec: RingSpec, key: int, upto: int | None = None) -> Iterator[tuple]:
    """The inputs of the slots of the lap whose input key is `key`, in slot order (slots 0..`upto`;
    all of them by default): the generators seeded once from the key, then one call of the problem's
    own `get_inputs()` a slot. Each slot is consumed before the next is drawn (nothing else may draw
    from the generators in between: the stream is the lap's inputs)."""
    from kiln.tools.inputs import derive_seed, draw_stream

    last = spec.slots - 1 if upto is None else min(upto, spec.slots - 1)
    return draw_stream(get_inputs, seed=derive_seed(key, "lap"), n=last + 1, dtype=spec.dtype, device=spec.device)


class Ring:
    """The slots, and the outputs of the last lap (kept until the next lap starts)."""

    def __init__(self, get_inputs: Callable[[], Any], spec: RingSpec) -> None:
        self.get_inputs, self.spec = get_inputs, spec
        self.slots = list(draw_lap(get_inputs, spec, spec.key))
        self.outputs: list[Any] = []

    def refresh(self, key: int) -> None:
        """A new draw into every slot, from the lap's input key."""
        import torch

        with torch.no_grad():
            for i, fresh in enumerate(draw_lap(self.get_inputs, self.spec, key)):
                self.slots[i] = tuple(_into(old, new) for old, new in zip(self.slots[i], fresh, strict=True))
        _sync(self.spec.device)


def _into(old: Any, new: Any) -> Any:
    """`new`'s values in `old`'s storage when shapes allow (addresses stay), else `new` itself."""
    import torch

    if isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor) and old.shape == new.shape \
            and old.dtype == new.dtype and old.device == new.device:
        old.copy_(new)
        return old
    return new


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def run_lap(fn: Callable[..., Any], ring: Ring) -> int:
    """One call per slot, back to back; every output kept (an output that reuses the storage of an
    earlier one in the lap is copied, so each slot keeps its own answer). Returns the call count."""
    import torch

    ring.outputs = []
    seen: set[int] = set()
    with torch.no_grad():
        for slot in ring.slots:
            out = fn(*slot)
            ring.outputs.append(_own(out, seen))
    _sync(ring.spec.device)
    return len(ring.slots)


def _own(out: Any, seen: set[int]) -> Any:
    import torch

    if isinstance(out, torch.Tensor):
        ptr = out.untyped_storage().data_ptr() if out.numel() else 0
        if ptr and ptr in seen:
            return out.clone()
        seen.add(ptr)
        return out
    if isinstance(out, (tuple, list)):
        return type(out)(_own(o, seen) for o in out)
    return out


def commit(ring: Ring, key: int, sigma: list[float]) -> list[list[dict[str, Any]]]:
    """Every kept output's keyed projections (`audit.project`), in slot order."""
    import torch

    from kiln.tools.timing.audit import project_many

    with torch.no_grad():
        out = project_many(ring.outputs, key, sigma)
    _sync(ring.spec.device)
    return out


def warm_up(fn: Callable[..., Any], ring: Ring, laps: int = 2) -> None:
    """JIT, autotuning, allocator growth: before the parent's clock runs."""
    for _ in range(laps):
        run_lap(fn, ring)
    ring.outputs = []
