"""The corpus on a real GPU, still without kiln's checker: correct kernels match, wrong ones
mismatch, crashing ones crash as described, cheats fool a naive check. Run on the H200 machine:

    pytest -m gpu tests/corpus                 # everything (load_inline builds: a few minutes)
    pytest -m "gpu and not slow" tests/corpus  # Triton and the fast CUDA path only
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from .corpus_lib import (
    HERE,
    KERNELS,
    entry_id,
    load_manifest,
    must_fail_hidden_trials,
    problem_path,
    run_candidates,
    run_parallel,
    run_script,
)

pytestmark = pytest.mark.gpu
MANIFEST = load_manifest()
RUNNABLE = [e for e in MANIFEST if e["kind"] in {"correct", "wrong"}
            or (e["kind"] == "adversarial" and e["policy"] == "partial"
                and (must_fail_hidden_trials(e) or e["expect_status"] == "ok"))]
# Side-stream cheats race with the comparison on a GPU, so a naive check may or may not pass them.
NAIVE = [e for e in MANIFEST if e["kind"] == "adversarial" and e.get("naive_passes")
         and e.get("expect_rule") != "static.stream"]
CRASHING = [e for e in MANIFEST if e["kind"] == "crashing"]


def is_slow(entry: dict) -> bool:
    return entry["form"] == "load_inline"


def params(entries: list[dict]) -> list:
    return [pytest.param(e, id=entry_id(e), marks=[pytest.mark.slow] if is_slow(e) else []) for e in entries]


def run_pairs(mode: str, entries: list[dict], out_dir: Path) -> dict[str, list[dict]]:
    """Quick forms in one worker; each load_inline candidate in its own worker, 8 building at once."""
    quick = [(problem_path(e), KERNELS / e["path"]) for e in entries if not is_slow(e)]
    slow = [[(problem_path(e), KERNELS / e["path"])] for e in entries if is_slow(e)]
    jobs = [j for j in [quick, *slow] if j]

    def run(job):
        out = out_dir / f"{mode}-{job[0][1].stem}-{len(job)}.json"
        return run_candidates(mode, list(dict.fromkeys(job)), out, device="cuda", timeout_s=600)

    merged: dict[str, list[dict]] = {}
    for found in run_parallel(jobs, run, workers=8):
        merged.update(found)
    return merged


def selected(request, test_name: str) -> list[dict]:
    """The entries of `test_name` that survived -m/-k selection, so deselected builds never run."""
    return [item.callspec.params["entry"] for item in request.session.items
            if getattr(item, "originalname", None) == test_name and hasattr(item, "callspec")]


@pytest.fixture(scope="module")
def hidden(tmp_path_factory, request):
    entries = selected(request, "test_on_gpu_correct_pass_and_wrong_fail")
    return run_pairs("hidden", entries, tmp_path_factory.mktemp("gpu-hidden"))


@pytest.fixture(scope="module")
def naive(tmp_path_factory, request):
    entries = selected(request, "test_on_gpu_cheat_fools_a_naive_check")
    return run_pairs("naive", entries, tmp_path_factory.mktemp("gpu-naive"))


@pytest.mark.xdist_group("corpus_hidden")  # one xdist worker builds the module fixture, not each
@pytest.mark.parametrize("entry", params(RUNNABLE))
def test_on_gpu_correct_pass_and_wrong_fail(hidden, entry):
    trials = hidden[str(KERNELS / entry["path"])]
    failed = [t for t in trials if not t["ok"] or t.get("mutated_inputs")]
    if entry["expect_status"] == "ok":
        assert len(trials) == 4 and not failed, trials
    else:
        assert failed and all("why" not in t or t["why"].startswith("shape") for t in trials), trials
        reason = entry.get("expect_reason")
        if reason and reason not in {"mismatch", "shape"}:
            assert any(reason in str(t.get("first_bad")) for t in trials), trials


@pytest.mark.xdist_group("corpus_naive")  # one xdist worker builds the module fixture, not each
@pytest.mark.parametrize("entry", params(NAIVE))
def test_on_gpu_cheat_fools_a_naive_check(naive, entry):
    trials = naive[str(KERNELS / entry["path"])]
    assert trials[0]["ok"], trials


@pytest.fixture(scope="module")
def crashes(tmp_path_factory, request):
    out_dir = tmp_path_factory.mktemp("gpu-crash")
    entries = selected(request, "test_on_gpu_crashing_fixture_fails_as_described")
    hogs = [e for e in entries if "fills GPU memory" in e["note"]]  # run alone: it starves the others

    def run(entry):
        done = out_dir / (entry_id(entry).replace("/", "_") + ".done")
        argv = [str(HERE / "run_forward.py"), str(problem_path(entry)), str(KERNELS / entry["path"]),
                str(done), "cuda"]
        # own extension build dir: under xdist, each worker builds this fixture, and two builds of
        # one extension name in ~/.cache/torch_extensions race each other
        proc = run_script(argv, timeout_s=600, heartbeat=done.with_name(done.name + ".calling"), hang_s=15,
                          env_extra={"TORCH_EXTENSIONS_DIR": str(out_dir / "torch_extensions")})
        return entry["path"], (proc, done.exists())

    others = [e for e in entries if e not in hogs]
    return dict(run_parallel(others, run, workers=4) + run_parallel(hogs, run, workers=1))


@pytest.mark.xdist_group("corpus_crashes")  # one xdist worker builds the module fixture, not each
@pytest.mark.parametrize("entry", params(CRASHING))
def test_on_gpu_crashing_fixture_fails_as_described(crashes, entry):
    proc, returned = crashes[entry["path"]]
    assert not returned, "forward returned normally"
    if entry["expect_status"] == "timeout":
        assert proc.timed_out
        return
    assert not proc.timed_out, proc.stderr[-1000:]
    if "os._exit" in entry["note"]:
        assert proc.returncode == 0
    elif "SIGSEGV" in entry["note"]:
        assert proc.returncode == -signal.SIGSEGV
    else:
        assert proc.returncode == 1 and "Traceback" in proc.stderr, proc.stderr[-1000:]
    if entry.get("expect_reason"):
        assert entry["expect_reason"].lower() in proc.stderr.lower(), proc.stderr[-1000:]
