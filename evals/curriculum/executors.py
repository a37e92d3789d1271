"""Where a curriculum's work runs: module probes and sample checks share one slot per GPU.

Checks go through the batch runner's evaluators (`SlottedEvaluator`: one slot per local GPU, a few
CPU slots without one; `RayEvaluator`: a Ray task holding one GPU). Module validation (which times
the module on the device) goes through the same kind of slot: `LocalProber` (a queue of GPU
indices) or `RayProber` (a Ray task with `num_gpus=1`). A round validates its modules before any of
its samples is checked, so a probe never shares a GPU with a timed check.
"""

from __future__ import annotations

import os
import queue
from typing import Any, Protocol

from kiln.agents.base import StressCase
from kiln.agents.curriculum.validate import Budget, ModuleVerdict, Sandboxing, validate_module
from kiln.evals.executors import RayEvaluator, SlottedEvaluator, visible_gpus
from kiln.tools.errors import KilnInputError
from kiln.tools.evaluator import Evaluator


class Prober(Protocol):
    n_slots: int

    def validate(self, source: str, stress: list[StressCase], *, device: str, budget: Budget,
                 box: Sandboxing | None = None) -> ModuleVerdict: ...


class LocalProber:
    """One probe per slot at a time; a slot is a GPU index (or one of a few CPU slots)."""

    def __init__(self, gpus: list[int], cpu_slots: int | None = None, validate: Any = validate_module) -> None:
        self._validate = validate
        slots = gpus or list(range(cpu_slots or max(1, (os.cpu_count() or 2) // 2)))
        self._slots: queue.Queue[int] = queue.Queue()
        for s in slots:
            self._slots.put(s)
        self.n_slots = len(slots)
        self.on_gpu = bool(gpus)

    def validate(self, source: str, stress: list[StressCase], *, device: str, budget: Budget,
                 box: Sandboxing | None = None) -> ModuleVerdict:
        slot = self._slots.get()
        try:
            return self._validate(source, stress, device=device, budget=budget, gpu_index=slot if self.on_gpu else 0,
                                  box=box)
        finally:
            self._slots.put(slot)


def _remote_validate(source: str, stress_json: list[str], device: str, budget_json: str, box_json: str) -> str:
    import ray

    gpu_ids = ray.get_gpu_ids()
    stress = [StressCase.model_validate_json(s) for s in stress_json]
    verdict = validate_module(source, stress, device=device, budget=Budget.model_validate_json(budget_json),
                              gpu_index=int(gpu_ids[0]) if gpu_ids else 0,
                              box=Sandboxing.model_validate_json(box_json))
    return verdict.model_dump_json()


class RayProber:
    def __init__(self, evaluator: RayEvaluator) -> None:
        import ray

        self._task: Any = ray.remote(num_gpus=1 if evaluator.on_gpu else 0, max_retries=0)(_remote_validate)
        self.n_slots = evaluator.n_slots

    def validate(self, source: str, stress: list[StressCase], *, device: str, budget: Budget,
                 box: Sandboxing | None = None) -> ModuleVerdict:
        import ray

        ref = self._task.remote(source, [s.model_dump_json() for s in stress], device, budget.model_dump_json(),
                                (box or Sandboxing()).model_dump_json())
        return ModuleVerdict.model_validate_json(ray.get(ref))


def build_executors(executor: str, device: str, *, ray_address: str | None = None,
                    cpu_slots: int | None = None, checks_per_gpu: int = 1) -> tuple[Evaluator, Prober]:
    """The check evaluator and the module prober of one run, over the same devices (`checks_per_gpu`:
    `SlottedEvaluator`'s `per_gpu`, local only)."""
    from kiln.tools.check import LocalEvaluator

    if executor == "ray":
        if checks_per_gpu != 1:
            raise KilnInputError("--checks-per-gpu is for the local executor: Ray gives each check a GPU of its own")
        ev = RayEvaluator(ray_address, use_gpus=None if device != "cpu" else False)
        return ev, RayProber(ev)
    if executor != "local":
        raise KilnInputError(f"unknown --executor {executor!r}: use local or ray")
    gpus = visible_gpus() if device == "cuda" else []
    if device == "cuda" and not gpus:
        raise KilnInputError("--device cuda but no CUDA GPU is visible")
    if checks_per_gpu < 1:
        raise KilnInputError(f"--checks-per-gpu must be at least 1, not {checks_per_gpu}")
    return SlottedEvaluator(LocalEvaluator(), gpus, cpu_slots, per_gpu=checks_per_gpu), LocalProber(gpus, cpu_slots)
