"""The reference worker: the problem's (and each case's) `Model`, built from seeds the parent sends.

It never imports the candidate. For each trial it draws the inputs from that trial's seed, runs the
reference, packs the output with the key the parent sends and saves it where only it and the parent
can read; inputs small enough to pass as a file are saved too, for the parent to hand to the
candidate (larger ones the candidate draws from the same per-trial seed: see docs/integrity.md). It
also counts the problem's work for the physics floor and recomputes the outputs of timed calls the
parent picks, so timed outputs are re-checked outside the candidate's process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from kiln.tools import numerics
from kiln.tools.check.worker import JobSpec, Worker, WorkerError, load_module, save_output
from kiln.tools.inputs import (
    DTYPES,
    InputsError,
    clone,
    fingerprint,
    inputs_from_seed,
    prepare,
    seed_all,
    validate,
)

INPUT_FILE_MAX_BYTES = 64 << 20
"""Trial inputs up to this size (all tensors together) are made here and handed to the candidate as
a file; above it, the candidate draws them itself from the trial's seed when the trial starts."""


def input_bytes(inputs: tuple) -> int:
    return sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))


class Case:
    """One case's modules and Model in this process."""

    def __init__(self, path: str, model_path: str, *, init_seed: int, model_seed: int, dtype: str,
                 device: str) -> None:
        self.mod = load_module(path, "case")
        self.model_mod = self.mod if model_path == path else load_module(model_path, "problem")
        seed_all(init_seed)
        self.init = prepare(validate(self.mod.get_init_inputs(), "get_init_inputs()"), dtype=dtype, device="cpu")
        seed_all(model_seed)
        self.model = self.model_mod.Model(*self.init).to(device=device, dtype=DTYPES[dtype])
        self.numerics: numerics.Numerics | str | None = None  # tolerance (issue 16): set up by op_setup

    def inputs(self, seed: int, dist: str, dtype: str, device: str) -> tuple:
        return inputs_from_seed(self.mod.get_inputs, seed=seed, dist=dist, dtype=dtype, device=device)


class ReferenceWorker(Worker):
    blame = "reference"

    def __init__(self, spec: JobSpec) -> None:
        super().__init__(spec)
        self.cases: dict[str, Case] = {}
        self.dropped: dict[tuple[str, str], str] = {}  # tolerance (issue 16): (case, dist) -> why

    def op_setup(self, seeds: dict[str, dict[str, int]], numerics_rule: bool = False) -> dict[str, Any]:
        """Build every case's Model (and, for the numerics rule, its high-precision and |.| copies:
        `kiln.tools.numerics`); save its weights for the candidate to copy."""
        out: dict[str, Any] = {}
        for c in self.spec.cases:
            try:
                case = Case(c.path, c.model_path, init_seed=seeds[c.name]["init"], model_seed=seeds[c.name]["model"],
                            dtype=self.spec.dtype, device=self.spec.device)
            except InputsError as exc:
                raise WorkerError("input", f"case {c.name}: {exc}") from exc
            self.cases[c.name] = case
            case.numerics = numerics.build(case.model, self.spec.dtype) if numerics_rule else None
            weights = self.spec.output_path(f"weights-{c.name}")
            torch.save({k: v.detach().cpu() for k, v in case.model.state_dict().items()}, weights)
            out[c.name] = {"weights": str(weights), "weights_fp": fingerprint(
                [t for _, t in sorted(case.model.state_dict().items())])}
        return {"cases": out}

    def op_trial(self, case: str, dist: str, trial: int, seed: int, key: int, tag: str,
                 file_max_bytes: int = INPUT_FILE_MAX_BYTES, drop_nonfinite: bool = False) -> dict[str, Any]:
        """One trial's reference output, packed with `key` (and its numerics). `drop_nonfinite`
        (a wide distribution, issue 16): when the first trial's output is not finite, the
        distribution is dropped for this case, and every trial of it answers {'dropped': why}."""
        if (case, dist) in self.dropped:
            return {"dropped": self.dropped[(case, dist)]}
        c = self.cases[case]
        try:
            inputs = c.inputs(seed, dist, self.spec.dtype, self.spec.device)
        except InputsError as exc:
            raise WorkerError("input", f"case {case}: {exc}") from exc
        pristine = clone(inputs)
        inputs_file = None
        if input_bytes(inputs) <= file_max_bytes:
            inputs_file = str(self.spec.output_path(f"in-{tag}"))
            torch.save([v.detach().cpu() if isinstance(v, torch.Tensor) else v for v in pristine], inputs_file)
        # tolerance (issue 16): the packed output plus its numerics (numerics.reference_trial)
        packed, why = numerics.reference_trial(c.model, c.numerics, inputs, pristine, seed=key,
                                               drop_nonfinite=drop_nonfinite and trial == 0)
        if packed is None:
            self.dropped[(case, dist)] = why or "not finite"
            if inputs_file:
                Path(inputs_file).unlink(missing_ok=True)
            return {"dropped": self.dropped[(case, dist)]}
        save_output(self.spec.output_path(f"ref-{tag}"), packed)
        return {"input_fp": fingerprint(pristine), "mutated": not _same(inputs, pristine),
                "inputs_file": inputs_file, "input_bytes": input_bytes(pristine), "output": str(self.spec.output_path(f"ref-{tag}")),
                "finite": _finite(packed)}

    def op_work(self, seed: int) -> dict[str, Any]:
        """Bytes and FLOPs of one forward of the problem (the physics floor's numerator)."""
        from kiln.tools.integrity import physics

        c = self.cases[self.spec.cases[0].name]
        nbytes, flops = physics.count_work(c.model, c.inputs(seed, "x1", self.spec.dtype, self.spec.device))
        return {"bytes_moved": nbytes, "flops": flops}

    def op_degenerate(self, seed_a: int, seed_b: int) -> dict[str, Any]:
        """Is the problem's output independent of its weights? (Constant, near-zero and input-independent
        outputs are judged in the parent across the trials' draws: compare.TrialComparer, issue 16.)"""
        from kiln.tools.integrity import degenerate

        first = self.spec.cases[0]
        c = self.cases[first.name]
        dtype, device = self.spec.dtype, self.spec.device

        seeds = (seed_a, seed_b)  # assess() asks for draws 0 and 1

        def make(i: int) -> tuple:
            return c.inputs(seeds[i], "x1", dtype, device)

        def build(i: int) -> torch.nn.Module:
            seed_all(seeds[i])
            init = prepare(validate(c.mod.get_init_inputs(), "get_init_inputs()"), dtype=dtype, device="cpu")
            seed_all(seeds[i])
            return c.model.__class__(*init).to(device=device, dtype=DTYPES[dtype])

        return {"degenerate": degenerate.assess(build, make).model_dump()}

    def op_timed_refs(self, timing: dict[str, Any], calls: list[int], key: int) -> dict[str, Any]:
        """Reference sketches of the timed calls the parent picked (their inputs drawn again)."""
        from kiln.tools.timing.bench import TimedInputs, timing_sketch

        c = self.cases[self.spec.cases[0].name]
        feed = TimedInputs.from_spec(timing, c.mod.get_inputs, dtype=self.spec.dtype, device=self.spec.device)
        out: dict[str, Any] = {}
        for i in calls:
            with torch.no_grad():
                y = c.model(*feed.for_call(i))
            out[str(i)] = timing_sketch(y, key)
        path = self.spec.output_path("timed-refs")
        torch.save(out, path)
        return {"file": str(path)}

    def op_release(self) -> dict[str, Any]:
        """Give cached GPU blocks back (the candidate is about to be timed on this GPU)."""
        if self.spec.device == "cuda":
            torch.cuda.empty_cache()
        return {}


def _same(a: tuple, b: tuple) -> bool:
    from kiln.tools.inputs import same

    return same(a, b)


def _finite(packed: dict[str, Any]) -> bool:
    """Every packed tensor (or sketch) holds only finite values."""
    from kiln.tools import sketch

    for t in packed["tensors"].values():
        if sketch.is_sketch(t):
            if t["nan"] or t["posinf"] or t["neginf"]:
                return False
        elif t.is_floating_point() and not bool(torch.isfinite(t).all()):
            return False
    return True
