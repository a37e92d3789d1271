"""The candidate worker: compile (import + first call), correctness trials, then, once the parent has
compared the outputs with the reference worker's and said go: runtime integrity checks and (GPU)
timing. Each trial: identical fresh inputs; the candidate runs on its own clone before and after an
in-process reference call on another clone; fresh allocations are poisoned with NaN; mutated inputs
are noted. Outputs are saved for the parent to compare; this process never sees the reference's."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import torch

from kiln.tools.check.isolation import pid_alive
from kiln.tools.check.poison import poisoned_allocations, prime_cuda_cache, tensor_sizes
from kiln.tools.check.worker import CaseSpec, JobSpec, Results, load_module, save_output, sync
from kiln.tools.correctness import compare, pack
from kiln.tools.inputs import (
    DTYPES,
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


class Built:
    """One case's modules and models in this process."""

    def __init__(self, case: CaseSpec, spec: JobSpec, candidate: Any) -> None:
        self.case, self.mod = case, load_module(case.path, "case")
        model_mod = self.mod if case.model_path == case.path else load_module(case.model_path, "problem")
        seed_all(derive_seed(spec.secret, case.name, "init"))
        init = prepare(validate(self.mod.get_init_inputs(), "get_init_inputs()"), dtype=spec.dtype, device="cpu")
        seed_all(derive_seed(spec.secret, case.name, "model"))
        ref = model_mod.Model(*init)
        seed_all(derive_seed(spec.secret, case.name, "model"))
        new = candidate.ModelNew(*init)
        self.n_copied = copy_matching(ref, new)
        self.ref = ref.to(device=spec.device, dtype=DTYPES[spec.dtype])
        self.new = new.to(device=spec.device, dtype=DTYPES[spec.dtype])
        self.out_sizes: list[int] = []

    def inputs(self, spec: JobSpec, dist: str, trial: int, tag: str | None = None) -> tuple:
        return make_inputs(self.mod.get_inputs, secret=spec.secret, case=tag or self.case.name, dist=dist,
                           trial=trial, dtype=spec.dtype, device=spec.device)


def copy_matching(ref: torch.nn.Module, new: torch.nn.Module) -> int:
    """Copy every reference parameter/buffer whose name and shape match into ModelNew."""
    src = ref.state_dict()
    n = 0
    with torch.no_grad():
        for name, t in itertools.chain(new.named_parameters(), new.named_buffers()):
            if name in src and src[name].shape == t.shape:
                t.copy_(src[name])
                n += 1
    return n


def call_candidate(b: Built, inputs: tuple, spec: JobSpec) -> tuple[Any, bool]:
    """One candidate call on its own clone, with poisoned fresh memory; (output, mutated its inputs)."""
    mine = clone(inputs)
    prime_cuda_cache(tensor_sizes(inputs) + b.out_sizes, spec.device)
    with torch.no_grad(), poisoned_allocations():
        out = b.new(*mine)
    sync(spec.device)
    return out, not same(mine, inputs)


def _storages(o: Any) -> set[int]:
    if isinstance(o, torch.Tensor):
        return {o.untyped_storage().data_ptr()} if o.numel() else set()
    if isinstance(o, (tuple, list)):
        return set().union(*(_storages(x) for x in o)) if o else set()
    return set()


def same_output(o1: Any, o2: Any) -> bool:
    """Bitwise-identical forward() results (NaN equals NaN), compared where they live (on the GPU,
    no copy); anything but tensors, sequences and numbers is never called the same."""
    if isinstance(o1, torch.Tensor) or isinstance(o2, torch.Tensor):
        return isinstance(o1, torch.Tensor) and isinstance(o2, torch.Tensor) and same((o1,), (o2,))
    if isinstance(o1, (tuple, list)) or isinstance(o2, (tuple, list)):
        return (type(o1) is type(o2) and len(o1) == len(o2)
                and all(same_output(x, y) for x, y in zip(o1, o2, strict=True)))
    if isinstance(o1, (int, float, bool, type(None))) and type(o1) is type(o2):
        return o1 == o2 or (o1 != o1 and o2 != o2)
    return False


def run_trial(b: Built, spec: JobSpec, res: Results, dist: str, trial: int) -> None:
    where = f"{b.case.name}/{dist}/trial {trial}"
    res.stage("correctness", where)
    pristine = b.inputs(spec, dist, trial)
    out1, mut1 = call_candidate(b, pristine, spec)
    p1 = pack(out1, spec.secret)
    save_output(spec.output_path(b.case.name, dist, trial, "before"), p1)
    res.stage("correctness", where + " (after the reference)")
    ref_in = clone(pristine)
    with torch.no_grad():
        ref_out = b.ref(*ref_in)
    sync(spec.device)
    b.out_sizes = tensor_sizes(ref_out)
    out2, mut2 = call_candidate(b, pristine, spec)
    if _storages(out1) & _storages(out2):  # the same buffer returned twice: out1 now holds call 2's values
        p2 = pack(out2, spec.secret)
        after_same = compare(p1, p2, atol=0.0, rtol=0.0) is None
    else:
        after_same = same_output(out1, out2)
        p2 = None if after_same else pack(out2, spec.secret)
    if p2 is not None and not after_same:
        save_output(spec.output_path(b.case.name, dist, trial, "after"), p2)
    res.data["trials"].append({"case": b.case.name, "distribution": dist, "trial": trial,
                               "input_fp": fingerprint(pristine), "mutated": mut1 or mut2,
                               "ref_mutated": not same(ref_in, pristine), "after_same": after_same})
    res.save()


def compile_stage(spec: JobSpec, res: Results) -> list[Built] | None:
    from kiln.tools.compile import classify_first_call_error, import_candidate

    res.stage("compile")
    module, crec = import_candidate(Path(spec.candidate or ""), device=spec.device, cache_root=Path(spec.cache_root))
    res.data["compile"] = crec.model_dump()
    res.save()
    if module is None or not crec.ok:
        return None
    res.stage("compile", "building Model and ModelNew")
    try:
        built = [Built(case, spec, module) for case in spec.cases]
        res.data["weights_fp"] = {b.case.name: fingerprint([t for _, t in sorted(b.ref.state_dict().items())])
                                  for b in built}
        res.data["n_weights_copied"] = built[0].n_copied
    except Exception as exc:  # noqa: BLE001 - the candidate's constructor failing is a result
        res.fail("candidate", exc, "building ModelNew")
        return None
    t0 = time.time()
    res.stage("compile", "first call of ModelNew.forward")
    try:
        call_candidate(built[0], built[0].inputs(spec, "x1", 0, tag="warmup"), spec)
    except Exception as exc:  # noqa: BLE001
        rec = classify_first_call_error(exc)
        if rec is None:
            res.fail("candidate", exc, "the first call")
            return None
        res.data["compile"] = rec.model_dump()
        res.save()
        return None
    res.data["compile"]["first_call_s"] = time.time() - t0
    res.end_stage("compile")
    return built


def stopped_by_parent(spec: JobSpec) -> bool:
    """The parent found a failing trial already and said no go: the remaining trials are moot."""
    if not spec.decision_path.exists():
        return False
    try:
        return not json.loads(spec.decision_path.read_text()).get("go")
    except (OSError, ValueError):
        return False


def correctness_stage(built: list[Built], spec: JobSpec, res: Results) -> bool:
    for b in built:
        for dist in spec.distributions:
            for trial in range(trial_count(dist, spec.trials)):  # tolerance (issue 16): fewer for wide ones
                if stopped_by_parent(spec):
                    res.data["stopped_by_parent"] = True
                    res.save()
                    return False
                try:
                    run_trial(b, spec, res, dist, trial)
                except Exception as exc:  # noqa: BLE001
                    res.fail("candidate", exc, f"{b.case.name}/{dist}/trial {trial}")
                    return False
    res.data["correctness_done"] = True
    res.end_stage("correctness")
    return True


def await_decision(spec: JobSpec, res: Results) -> bool:
    """The parent compares outputs with the reference worker's, then writes go / stop."""
    res.stage("await")
    while not spec.decision_path.exists():
        if spec.parent_pid and not pid_alive(spec.parent_pid):
            return False  # the parent died: nobody will read what we would measure
        time.sleep(0.005)
    return bool(json.loads(spec.decision_path.read_text()).get("go"))


def run(spec: JobSpec) -> None:
    from kiln.tools.check.after import after_correctness

    res = Results(spec)
    built = compile_stage(spec, res)
    if built is None or not correctness_stage(built, spec, res):
        return
    if await_decision(spec, res):
        after_correctness(built[0], spec, res)
    res.data["done"] = True
    res.save()
