"""The reference worker: builds each case's `Model` after seeding, runs every trial's inputs, saves
the outputs (the candidate process is never told where), fingerprints inputs and weights, and runs
the reference-side integrity hooks (physics work count, degenerate-problem assessment)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from kiln.tools import numerics
from kiln.tools.check.worker import CaseSpec, JobSpec, Results, load_module, save_output
from kiln.tools.inputs import (
    DISTRIBUTIONS,
    DTYPES,
    InputsError,
    clone,
    derive_seed,
    fingerprint,
    make_inputs,
    prepare,
    same,
    seed_all,
    trial_count,
    validate,
)


def build_reference(case: CaseSpec, spec: JobSpec) -> tuple[Any, Any, torch.nn.Module]:
    """(case module, model module, Model instance) built exactly as the candidate worker builds it."""
    mod = load_module(case.path, "case")
    model_mod = mod if case.model_path == case.path else load_module(case.model_path, "problem")
    seed_all(derive_seed(spec.secret, case.name, "init"))
    init = prepare(validate(mod.get_init_inputs(), "get_init_inputs()"), dtype=spec.dtype, device="cpu")
    seed_all(derive_seed(spec.secret, case.name, "model"))
    model = model_mod.Model(*init).to(device=spec.device, dtype=DTYPES[spec.dtype])
    return mod, model_mod, model


def weights_fingerprint(model: torch.nn.Module) -> list[float]:
    return fingerprint([t for _, t in sorted(model.state_dict().items())])


def run_case(case: CaseSpec, spec: JobSpec, res: Results) -> tuple[Any, torch.nn.Module]:
    res.stage("reference", f"{case.name}: building Model")
    mod, _model_mod, model = build_reference(case, spec)
    res.data.setdefault("weights_fp", {})[case.name] = weights_fingerprint(model)
    num = numerics.build(model, spec.dtype) if spec.numerics else None  # tolerance (issue 16)
    for dist in spec.distributions:
        for trial in range(trial_count(dist, spec.trials)):
            res.stage("reference", f"{case.name}/{dist}/trial {trial}")
            inputs = make_inputs(mod.get_inputs, secret=spec.secret, case=case.name, dist=dist, trial=trial,
                                 dtype=spec.dtype, device=spec.device)
            pristine = clone(inputs)
            # tolerance (issue 16): the packed output plus its numerics (high-precision error and magnitude
            # per element); a wide distribution (x1000, ...) on which the reference is not finite is
            # dropped for this problem, and the record says so (the parent plans without it)
            packed, why = numerics.reference_trial(model, num, inputs, pristine, seed=spec.secret,
                                                   drop_nonfinite=DISTRIBUTIONS[dist].wide and trial == 0)
            if packed is None:
                res.data.setdefault("dropped", {}).setdefault(case.name, {})[dist] = why
                break
            save_output(spec.output_path(case.name, dist, trial), packed)
            res.data["trials"].append({"case": case.name, "distribution": dist, "trial": trial,
                                       "input_fp": fingerprint(pristine), "mutated": not same(inputs, pristine)})
            res.save()  # the parent compares each trial as soon as both sides have it
    return mod, model


def run_integrity(mod: Any, model: torch.nn.Module, case: CaseSpec, spec: JobSpec, res: Results) -> None:
    """Physics work count and degenerate-problem assessment: facts about the problem alone, cached
    per (problem and case sources, dtype, device) so later candidates for it don't pay again."""
    res.stage("integrity")
    cache = Path(spec.reference_cache) if spec.reference_cache else None
    if cache is not None and cache.exists():
        res.data.update(json.loads(cache.read_text()))
        res.data["reference_cache_hit"] = True
        return res.end_stage("integrity")
    _compute_integrity(mod, model, case, spec, res)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({k: res.data[k] for k in ("physics", "degenerate")}))
        os.replace(tmp, cache)
    res.end_stage("integrity")


def _compute_integrity(mod: Any, model: torch.nn.Module, case: CaseSpec, spec: JobSpec, res: Results) -> None:
    from kiln.tools.integrity import degenerate, physics

    def make(seed: int) -> tuple:
        return make_inputs(mod.get_inputs, secret=seed, case=case.name, dist="x1", trial=0,
                           dtype=spec.dtype, device=spec.device)

    def build(seed: int) -> torch.nn.Module:
        seed_all(seed)
        init = prepare(validate(mod.get_init_inputs(), "get_init_inputs()"), dtype=spec.dtype, device="cpu")
        seed_all(seed)
        return model.__class__(*init).to(device=spec.device, dtype=DTYPES[spec.dtype])

    inputs = make(spec.secret)
    nbytes, flops = physics.count_work(model, inputs)
    res.data["physics"] = {"bytes_moved": nbytes, "flops": flops}
    res.data["degenerate"] = degenerate.assess(build, make).model_dump()


def run(spec: JobSpec) -> None:
    res = Results(spec)
    first: tuple[Any, torch.nn.Module] | None = None
    for case in spec.cases:
        try:
            got = run_case(case, spec, res)
        except InputsError as exc:
            return res.fail("input", exc, f"case {case.name}")
        except Exception as exc:  # noqa: BLE001 - a broken problem is reported, not raised
            return res.fail("reference", exc, f"case {case.name}")
        first = first or got
    res.data["trials_done"] = True
    if spec.device == "cuda":  # give the cached blocks back: the candidate, still in its trials, needs room
        torch.cuda.empty_cache()
    res.end_stage("reference")
    if spec.integrity and first is not None:
        try:
            run_integrity(*first, spec.cases[0], spec, res)
        except Exception as exc:  # noqa: BLE001 - integrity hooks must not sink the reference
            res.data["integrity_error"] = f"{type(exc).__name__}: {exc}"
    if spec.device == "cuda" and spec.time:
        _cached_peaks(spec, res)
    res.data["done"] = True
    res.save()


def _cached_peaks(spec: JobSpec, res: Results) -> None:
    """The GPU's measured peaks for the physics floor, from this trusted process (never from the
    candidate's, whose result file it controls). Not measured here: the candidate's trials share the
    GPU now, so the parent has them measured later, on an idle GPU, when the cache lacks them."""
    from kiln.tools.integrity.peaks import cached_peaks

    try:
        peaks = cached_peaks(spec.dtype, gpu_index=0)
    except Exception as exc:  # noqa: BLE001 - no floor is reported as such by the verdict
        res.data["peaks_error"] = f"{type(exc).__name__}: {exc}"
        return
    res.data["peaks"] = peaks.model_dump() if peaks else None
    res.data["peaks_missing"] = peaks is None


def run_peaks(spec: JobSpec) -> None:
    """The `peaks` role: measure (or read) this GPU's peaks and cache them; run by the parent only
    when no other worker is on the GPU."""
    from kiln.tools.integrity.peaks import get_peaks

    res = Results(spec)
    res.stage("peaks")
    res.data["peaks"] = get_peaks(spec.device, spec.dtype, gpu_index=0).model_dump()
    res.end_stage("peaks")
    res.data["done"] = True
    res.save()
