"""The candidate worker: the only process that runs the candidate's code. It holds no secret and no
reference: it compiles ModelNew, builds it with the reference's weights, runs each trial on the
inputs the parent hands it, packs its outputs with a key it learns only after producing them,
collects runtime evidence (operator and kernel accounting, output hygiene) and times itself on a
GPU. Everything it reports is evidence for the parent, never a verdict.

Each trial: fresh clones of the inputs, fresh allocations poisoned with NaN, the candidate called
twice (a call-order or state trick shows as a difference between the calls), mutated inputs noted.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import torch

from kiln.tools.check.poison import poisoned_allocations, prime_cuda_cache, tensor_sizes
from kiln.tools.check.worker import (
    JobSpec,
    Worker,
    WorkerError,
    error_message,
    load_module,
    save_output,
    sync,
)
from kiln.tools.correctness import compare, pack
from kiln.tools.inputs import DTYPES, clone, fingerprint, inputs_from_seed, prepare, same, seed_all, validate


class Built:
    """One case's module and ModelNew in this process."""

    def __init__(self, path: str, candidate: Any, spec: JobSpec, seeds: dict[str, int], weights: str) -> None:
        self.mod = load_module(path, "case")
        seed_all(seeds["init"])
        init = prepare(validate(self.mod.get_init_inputs(), "get_init_inputs()"), dtype=spec.dtype, device="cpu")
        seed_all(seeds["model"])
        new = candidate.ModelNew(*init)
        self.n_copied = copy_matching(torch.load(weights, map_location="cpu", weights_only=True), new)
        self.new = new.to(device=spec.device, dtype=DTYPES[spec.dtype])
        self.out_sizes: list[int] = []

    def inputs(self, seed: int, dist: str, spec: JobSpec) -> tuple:
        return inputs_from_seed(self.mod.get_inputs, seed=seed, dist=dist, dtype=spec.dtype, device=spec.device)


def copy_matching(src: dict[str, torch.Tensor], new: torch.nn.Module) -> int:
    """Copy every reference parameter/buffer whose name and shape match into ModelNew."""
    n = 0
    with torch.no_grad():
        for name, t in itertools.chain(new.named_parameters(), new.named_buffers()):
            if name in src and src[name].shape == t.shape:
                t.copy_(src[name])
                n += 1
    return n


def call_candidate(b: Built, inputs: tuple, spec: JobSpec) -> tuple[Any, bool, float]:
    """One call on its own clone, with poisoned fresh memory: (output, mutated its inputs, seconds)."""
    mine = clone(inputs)
    prime_cuda_cache(tensor_sizes(inputs) + b.out_sizes, spec.device)
    t0 = time.perf_counter()
    with torch.no_grad(), poisoned_allocations():
        out = b.new(*mine)
    sync(spec.device)
    return out, not same(mine, inputs), time.perf_counter() - t0


class CandidateWorker(Worker):
    blame = "candidate"

    def __init__(self, spec: JobSpec) -> None:
        super().__init__(spec)
        self.module: Any = None
        self.built: dict[str, Built] = {}
        self.held: dict[str, Any] | None = None  # the last trial's outputs, until the parent's key comes
        self.timing: Any = None

    def op_compile(self) -> dict[str, Any]:
        from kiln.tools.compile import import_candidate

        module, rec = import_candidate(Path(self.spec.candidate or ""), device=self.spec.device,
                                       cache_root=Path(self.spec.cache_root))
        self.module = module if rec.ok else None
        return {"compile": rec.model_dump()}

    def op_build(self, cases: dict[str, dict[str, Any]], warmup_seed: int) -> dict[str, Any]:
        """ModelNew per case (weights from the reference's files), then one first call (Triton JIT)."""
        if self.module is None:
            raise WorkerError("protocol", "build before a successful compile")
        try:
            for c in self.spec.cases:
                info = cases[c.name]
                self.built[c.name] = Built(c.path, self.module, self.spec, info["seeds"], info["weights"])
        except Exception as exc:  # noqa: BLE001 - the candidate's constructor failing is a result
            raise WorkerError("candidate", f"building ModelNew: {error_message(exc)}") from exc
        first = self.built[self.spec.cases[0].name]
        try:
            _, _, first_s = call_candidate(first, first.inputs(warmup_seed, "x1", self.spec), self.spec)
        except Exception as exc:  # noqa: BLE001
            return self._first_call_failed(exc)
        return {"n_weights_copied": first.n_copied, "first_call_s": first_s}

    def _first_call_failed(self, exc: BaseException) -> dict[str, Any]:
        from kiln.tools.compile import classify_first_call_error

        rec = classify_first_call_error(exc)
        if rec is None:
            raise exc
        return {"compile": rec.model_dump()}

    def op_trial(self, case: str, seed: int | None = None, dist: str = "x1", inputs_file: str | None = None
                 ) -> dict[str, Any]:
        """The trial's first call; its output is held until `pack` brings the key."""
        b = self.built[case]
        pristine = self._trial_inputs(b, seed, dist, inputs_file)
        out, mutated, t = call_candidate(b, pristine, self.spec)
        self.held = {"case": case, "inputs": pristine, "first": out}
        b.out_sizes = tensor_sizes(out)
        return {"input_fp": fingerprint(pristine), "mutated": mutated, "call_s": round(t, 6)}

    def _trial_inputs(self, b: Built, seed: int | None, dist: str, inputs_file: str | None) -> tuple:
        if inputs_file is not None:
            values = torch.load(inputs_file, map_location="cpu", weights_only=True)
            return prepare(list(values), dtype=self.spec.dtype, device=self.spec.device)
        if seed is None:
            raise WorkerError("protocol", "a trial needs a seed or an inputs file")
        return b.inputs(seed, dist, self.spec)

    def op_pack(self, key: int, tag: str) -> dict[str, Any]:
        """Pack the first call's output with the key the parent sent now (after it was produced),
        then call again on the same inputs and pack that too (saved only when it differs)."""
        if self.held is None:
            raise WorkerError("protocol", "pack without a trial")
        held, self.held = self.held, None
        first = pack(held["first"], key)
        files = {"first": str(self.spec.output_path(f"{tag}.first"))}
        save_output(Path(files["first"]), first)
        b = self.built[held["case"]]
        out, mutated, t = call_candidate(b, held["inputs"], self.spec)
        second = pack(out, key)
        after_same = compare(first, second, atol=0.0, rtol=0.0) is None
        if not after_same:
            files["second"] = str(self.spec.output_path(f"{tag}.second"))
            save_output(Path(files["second"]), second)
        return {"files": files, "after_same": after_same, "mutated": mutated, "call_s": round(t, 6)}

    def op_integrity(self, policy: str, seeds: list[int]) -> dict[str, Any]:
        """Runtime evidence: operator and kernel accounting, decoys, output hygiene."""
        try:
            from kiln.tools.integrity import runtime
        except ImportError as exc:  # kiln's own checks missing: the parent fails closed, never `ok`
            raise WorkerError("kiln", f"kiln's runtime integrity checks failed to import: {exc}") from exc

        b = self.built[self.spec.cases[0].name]
        accounting, findings = runtime.inspect_forward(b.new, b.inputs(seeds[0], "x1", self.spec), policy=policy,
                                                       device=self.spec.device)
        sets = (b.inputs(s, "x1", self.spec) for s in seeds[1:])  # one at a time: GBs each at KernelBench sizes
        findings = [*findings, *runtime.check_outputs(b.new, None, sets)]
        return {"accounting": accounting.model_dump(), "findings": [f.model_dump() for f in findings]}

    def op_time_setup(self, timing: dict[str, Any]) -> dict[str, Any]:
        from kiln.tools.timing.bench import TimedInputs
        from kiln.tools.timing.stage import Prepared

        b = self.built[self.spec.cases[0].name]
        feed = TimedInputs.from_spec(timing, b.mod.get_inputs, dtype=self.spec.dtype, device=self.spec.device)
        self.timing = (Prepared(b.new, feed, self.spec.device), timing)
        return {}

    def op_time_loop(self, max_time_s: float) -> dict[str, Any]:
        """The timed loop, every output sketched; the parent's clock brackets this command."""
        from kiln.tools.timing.stage import run_loop

        prepared, timing = self.timing
        run, facts = run_loop(prepared, max_time_s=max_time_s, sketch_key=int(timing["key"]))
        path = self.spec.output_path("timed-sketches")
        torch.save(run.sketches, path)
        return {"samples_us": run.samples, "sketches": str(path), **facts}

    def op_time_after(self) -> dict[str, Any]:
        """After the loop: the in-process wall-vs-event probe and this module's peak memory."""
        from kiln.tools.timing.stage import peak_bytes, wall_over_event

        prepared, _ = self.timing
        inputs = prepared.feed.for_call(0)
        return {"wall": wall_over_event(prepared.fn, inputs), "peak_bytes": peak_bytes(prepared.fn, inputs)}
