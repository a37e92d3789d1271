"""The candidate worker: the only process that runs the candidate's code. It holds no secret and no
reference: it compiles ModelNew, builds it with the reference's weights, runs each trial on the
inputs it is handed, writes its outputs into the files kiln made for them (sampled with a key it
learns only after producing them), collects runtime evidence (operator and kernel accounting,
output hygiene) and, on a GPU, runs the timing laps kiln's own clock measures. Everything it reports
is evidence for the parent, never a verdict; assume any of it may be forged (docs/integrity.md).

Each trial: fresh clones of the inputs, fresh allocations poisoned with NaN, the candidate called
twice (a call-order or state trick shows as a difference between the calls), mutated inputs noted.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import torch

from kiln.tools.check import messages as m
from kiln.tools.check.outputs import describe, write_raw
from kiln.tools.check.poison import poisoned_allocations, prime_cuda_cache, tensor_sizes
from kiln.tools.check.worker import JobSpec, LapSteps, Worker, WorkerError, error_message, load_module, sync
from kiln.tools.inputs import DTYPES, clone, fingerprint, inputs_from_seed, prepare, same, seed_all, validate


class Built:
    """One case's module and ModelNew in this process."""

    def __init__(self, path: str, candidate: Any, spec: JobSpec, seeds: m.CaseSeeds, weights: str) -> None:
        self.mod = load_module(path, "case")
        seed_all(seeds.init)
        init = prepare(validate(self.mod.get_init_inputs(), "get_init_inputs()"), dtype=spec.dtype, device="cpu")
        seed_all(seeds.model)
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


def _evidence_functions() -> tuple[Any, Any] | str:
    """kiln's runtime evidence functions, or why they could not be imported; and every kiln module
    this worker uses later, imported now (the worker then makes them read-only, before the candidate
    is imported: `worker.freeze_kiln_modules`)."""
    import kiln.tools.compile
    import kiln.tools.timing.audit
    import kiln.tools.timing.laps
    import kiln.tools.timing.stage  # noqa: F401 - imported for the freeze

    try:
        from kiln.tools.integrity import runtime
    except ImportError as exc:
        return str(exc)
    return runtime.inspect_forward, runtime.check_outputs


class CandidateWorker(LapSteps, Worker):
    blame = "candidate"

    def __init__(self, spec: JobSpec) -> None:
        super().__init__(spec)
        self.module: Any = None
        self.built: dict[str, Built] = {}
        self.held: dict[str, Any] | None = None  # the last trial's output, until the parent's key comes
        self.ring: Any = None
        self.evidence = _evidence_functions()  # bound before the candidate is imported (docs/integrity.md)

    def op_compile(self, cmd: m.CandCompile) -> m.CompileReply:
        from kiln.tools.compile import import_candidate

        module, rec = import_candidate(Path(self.spec.candidate or ""), device=self.spec.device,
                                       cache_root=Path(self.spec.cache_root))
        self.module = module if rec.ok else None
        return m.CompileReply(compile=rec.model_dump(mode="json"))

    def op_build(self, cmd: m.CandBuild) -> m.CandBuildReply:
        """ModelNew per case (weights from the reference's files), then one first call (Triton JIT)."""
        if self.module is None:
            raise WorkerError("protocol", "build before a successful compile")
        try:
            for c in self.spec.cases:
                info = cmd.cases[c.name]
                self.built[c.name] = Built(c.path, self.module, self.spec, info.seeds, info.weights)
        except Exception as exc:  # noqa: BLE001 - the candidate's constructor failing is a result
            raise WorkerError("candidate", f"building ModelNew: {error_message(exc)}") from exc
        first = self.built[self.spec.cases[0].name]
        try:
            _, _, first_s = call_candidate(first, first.inputs(cmd.warmup_seed, "x1", self.spec), self.spec)
        except Exception as exc:  # noqa: BLE001
            return self._first_call_failed(exc)
        return m.CandBuildReply(n_weights_copied=first.n_copied, first_call_s=first_s)

    def _first_call_failed(self, exc: BaseException) -> m.CandBuildReply:
        from kiln.tools.compile import classify_first_call_error

        rec = classify_first_call_error(exc)
        if rec is None:
            raise exc
        return m.CandBuildReply(compile=rec.model_dump(mode="json"))

    def op_trial(self, cmd: m.CandTrial) -> m.CandTrialReply:
        """The trial's first call; its output is held until `pack` brings the key."""
        b = self.built[cmd.case]
        pristine = self._trial_inputs(b, cmd)
        out, mutated, t = call_candidate(b, pristine, self.spec)
        self.held = {"case": cmd.case, "inputs": pristine, "first": out}
        b.out_sizes = tensor_sizes(out)
        return m.CandTrialReply(input_fp=fingerprint(pristine), mutated=mutated, call_s=round(t, 6))

    def _trial_inputs(self, b: Built, cmd: m.CandTrial) -> tuple:
        if cmd.inputs_file is not None:
            values = torch.load(cmd.inputs_file, map_location="cpu", weights_only=True)
            return prepare(list(values), dtype=self.spec.dtype, device=self.spec.device)
        if cmd.seed is None:
            raise WorkerError("protocol", "a trial needs a seed or an inputs file")
        return b.inputs(cmd.seed, cmd.dist, self.spec)

    def op_pack(self, cmd: m.CandPack) -> m.CandPackReply:
        """Write the first call's output (sampled with the key sent now, after it was produced) into
        the file kiln made for it, then call again on the same inputs and write that too."""
        if self.held is None:
            raise WorkerError("protocol", "pack without a trial")
        held, self.held = self.held, None
        first, data = describe(held["first"], cmd.key)
        write_raw(cmd.first, data)
        del held["first"], data
        b = self.built[held["case"]]
        out, mutated, t = call_candidate(b, held["inputs"], self.spec)
        second, data = describe(out, cmd.key)
        write_raw(cmd.second, data)
        return m.CandPackReply(first=first, second=second, mutated=mutated, call_s=round(t, 6))

    def op_integrity(self, cmd: m.CandIntegrity) -> m.CandIntegrityReply:
        """Runtime evidence: operator and kernel accounting, decoys, output hygiene."""
        if isinstance(self.evidence, str):  # kiln's own checks missing: the parent fails closed, never `ok`
            raise WorkerError("kiln", f"kiln's runtime integrity checks failed to import: {self.evidence}")
        inspect_forward, check_outputs = self.evidence
        b = self.built[self.spec.cases[0].name]
        accounting, findings = inspect_forward(b.new, b.inputs(cmd.seeds[0], "x1", self.spec), policy=cmd.policy,
                                               device=self.spec.device)
        sets = (b.inputs(s, "x1", self.spec) for s in cmd.seeds[1:])  # one at a time: GBs each at KernelBench sizes
        findings = [*findings, *check_outputs(b.new, None, sets)]
        return m.CandIntegrityReply(accounting=accounting.model_dump(mode="json"),
                                    findings=[f.model_dump(mode="json") for f in findings])

    # ------------------------------------------------------------------ timing (kiln.tools.timing.laps)
    def op_time_setup(self, cmd: m.TimeSetup) -> None:
        from kiln.tools.timing.laps import Ring, RingSpec, warm_up

        b = self.built[self.spec.cases[0].name]
        self.ring = (b.new, Ring(b.mod.get_inputs, RingSpec.model_validate(cmd.ring)))
        warm_up(*self.ring)

    def op_peak_memory(self, cmd: m.PeakMemory) -> m.PeakMemoryReply:
        from kiln.tools.timing.stage import peak_bytes

        fn, ring = self.ring
        ring.outputs = []
        return m.PeakMemoryReply(peak_bytes=peak_bytes(fn, ring.slots[0]))
