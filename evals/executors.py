"""Where evaluations run in a batch: GPU-bound work goes through one slot per GPU.

LLM-bound work (many problems in flight) runs in the batch's thread pool; every `check` it asks
for passes through one of these evaluators, which never let two timings share a GPU:
- `SlottedEvaluator`: this machine, one slot per GPU (or a few CPU slots with no GPU);
- `RayEvaluator`: the same check as a Ray task with `num_gpus=1`, on a local or remote cluster.
Both implement `kiln.tools.evaluator.Evaluator`.
"""

from __future__ import annotations

import os
import queue
import tempfile
import threading
from pathlib import Path
from typing import Any

from kiln.tools.evaluator import Evaluator
from kiln.tools.records import CheckOptions, CheckRecord


def visible_gpus() -> list[int]:
    try:
        import torch

        return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    except Exception:  # noqa: BLE001 - a broken torch only means "no GPU"
        return []


class SlottedEvaluator:
    """Runs checks on this machine, at most one per slot; a slot is a GPU index.

    `per_gpu` (default 1) lets that many checks share one GPU: their compiles and trials overlap, and
    only their timings take turns (the GPU's timing lock). With one, no other check's code is on the
    GPU while a check is timed; with more, a sibling's kernels may be (its trials, or hostile work of
    its own), which can slow that timing: each record then says how many other processes held the GPU
    (`timing.env.other_gpu_processes`). A reward loop trades that for throughput."""

    def __init__(self, inner: Evaluator, gpus: list[int], cpu_slots: int | None = None, per_gpu: int = 1) -> None:
        if per_gpu < 1:
            raise ValueError(f"per_gpu must be at least 1, not {per_gpu}")
        self.inner = inner
        self.on_gpu = bool(gpus)
        self._gpus = list(gpus)
        slots = [g for g in gpus for _ in range(per_gpu)] or list(range(cpu_slots or max(1, (os.cpu_count() or 2) // 2)))
        self._slots: queue.Queue[int] = queue.Queue()
        for slot in slots:
            self._slots.put(slot)
        self.n_slots = len(slots)
        self.profile_lock = threading.Lock()  # profiling runs one at a time per host

    def warm(self, options: CheckOptions) -> list[threading.Thread]:
        """Start the fork servers the checks will use (one per GPU, side by side; one for the CPU)
        in the background, so a batch's first checks do not each wait seconds for theirs."""
        if not options.fork_server:
            return []
        from kiln.tools.check.pipeline import cache_root
        from kiln.tools.check.servers import warm_fork_servers
        from kiln.tools.sandbox.box import sandbox_for

        device, indices = ("cuda", self._gpus) if self.on_gpu else ("cpu", [options.gpu_index])
        return warm_fork_servers(device, indices, cache_root(options), sandbox_for(options.isolation, options.bwrap))

    def check(self, problem: Path, candidate: Path, options: CheckOptions) -> CheckRecord:
        slot = self._slots.get()
        try:
            opts = options.model_copy(update={"gpu_index": slot}) if self.on_gpu else options
            return self.inner.check(problem, candidate, opts)
        finally:
            self._slots.put(slot)


def _remote_check(problem_src: str, candidate_src: str, cases: dict[str, str], options_json: str,
                  names: tuple[str, str]) -> str:
    """Body of the Ray task: rebuild the files on the worker node and run kiln's local check."""
    import ray

    from kiln.tools.check import LocalEvaluator

    opts = CheckOptions.model_validate_json(options_json)
    gpu_ids = ray.get_gpu_ids()
    if gpu_ids:
        opts = opts.model_copy(update={"gpu_index": int(gpu_ids[0])})
    with tempfile.TemporaryDirectory(prefix="kiln-ray-") as tmp:
        root = Path(tmp)
        problem = root / names[0]
        candidate = root / names[1]
        problem.write_text(problem_src)
        candidate.write_text(candidate_src)
        case_paths = []
        for name, src in cases.items():
            path = root / "cases" / name
            path.parent.mkdir(exist_ok=True)
            path.write_text(src)
            case_paths.append(str(path))
        opts = opts.model_copy(update={"cases": case_paths})
        record = LocalEvaluator().check(problem, candidate, opts)
    return record.model_dump_json()


class RayEvaluator:
    """Each check is a Ray task holding one GPU (`num_gpus=1`), or one CPU with no GPU."""

    def __init__(self, address: str | None = None, *, use_gpus: bool | None = None) -> None:
        import ray

        if not ray.is_initialized():
            local: dict[str, Any] = {} if address else {"num_cpus": os.cpu_count()}
            ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True, **local)
        gpus = ray.cluster_resources().get("GPU", 0) if use_gpus is None else use_gpus
        self.on_gpu = bool(gpus)
        self._task: Any = ray.remote(num_gpus=1 if self.on_gpu else 0, max_retries=0)(_remote_check)
        self.profile_lock = threading.Lock()
        self.n_slots = int(gpus) if gpus else int(ray.cluster_resources().get("CPU", 1))

    def check(self, problem: Path, candidate: Path, options: CheckOptions) -> CheckRecord:
        import ray

        cases = {Path(c).name: Path(c).read_text() for c in options.cases}
        ref = self._task.remote(problem.read_text(), candidate.read_text(), cases,
                                options.model_dump_json(), (problem.name, candidate.name))
        record = CheckRecord.model_validate_json(ray.get(ref))
        # report the caller's paths, not the worker's temporary copies
        return record.model_copy(update={"problem": str(problem), "candidate": str(candidate)})

    @staticmethod
    def shutdown() -> None:
        import ray

        if ray.is_initialized():
            ray.shutdown()
