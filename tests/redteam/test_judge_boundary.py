"""The judge's boundary (issue 22): assume arbitrary Python runs inside the candidate's worker (these
candidates reach kiln's modules through `torch.sys.modules`, which the allowlist refuses: each runs
with `run_rejected`, so its code really executes inside the sandbox). Whatever the worker does, the
parent trusts no path, size or claim from it, ends with a record, and changes nothing outside the
check's own dir. The parent-side file checks are tested directly in tests/core/test_outputs.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from redteam_lib import ATTACK, candidate, check, honest, ran_as, reject_rules, tree_digest


def _sentinels(user: Path) -> list[Path]:
    """Files a hostile reply names: in /tmp-like space, in $HOME, in the project tree."""
    paths = [user / "outside.txt", user / "home" / ".config" / "secret.txt", user / "project" / "keep.py", user / "x.pt"]
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"sentinel {p.name}\n")
    return paths


def test_a_reply_naming_files_is_ignored_and_nothing_outside_is_touched(user: Path) -> None:
    named = _sentinels(user)
    cand = candidate("j_forge_reply", user / "project", sentinels_json=json.dumps([str(p) for p in named]),
                     sentinels=", ".join(p.name for p in named))
    before = tree_digest(user, skip=("cache",))
    rec = check(cand, **ATTACK)
    assert ran_as(rec) == "incorrect" and not rec.correct, (rec.status, rec.reasons)  # it wrote zeros: judged as such
    assert rec.correctness and rec.correctness.trials[0].mismatch is not None
    assert all(p.exists() for p in named) and tree_digest(user, skip=("cache",)) == before


@pytest.mark.parametrize("mode", ["symlink", "fifo", "dir", "hardlink"])
def test_a_swapped_output_file_is_never_followed_read_or_waited_on(user: Path, mode: str) -> None:
    secret = user / "home" / "answers.bin"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_bytes(b"\0" * 4 * 37 * 129)
    cand = candidate("j_swap_slot", user / "project", mode=mode, target=secret)
    before = tree_digest(user, skip=("cache",))
    t0 = time.monotonic()
    rec = check(cand, timeout_s=60, **ATTACK)
    assert time.monotonic() - t0 < 60 + 10
    assert ran_as(rec) in ("incorrect", "crashed") and not rec.correct, (rec.status, rec.reasons)
    assert tree_digest(user, skip=("cache",)) == before


@pytest.mark.parametrize("mode, status", [("hang", "timeout"), ("half", "crashed"), ("huge", "crashed"),
                                          ("killpg", "crashed"), ("stop", "timeout")])
def test_a_misbehaving_worker_ends_in_a_named_record_in_time(user: Path, mode: str, status: str) -> None:
    t0 = time.monotonic()
    rec = check(candidate("j_protocol", user / "project", mode=mode), timeout_s=40, **ATTACK)
    assert time.monotonic() - t0 < 40 + 10
    assert ran_as(rec) == status and rec.reasons, (rec.status, rec.reasons)


@pytest.mark.private_cache
@pytest.mark.parametrize("mode, status, words", [("many", "crashed", "compile cache holds more than"),
                                                 ("big", "compile_error", "File too large")])
def test_a_candidate_cannot_fill_the_disk(user: Path, mode: str, status: str, words: str) -> None:
    rec = check(candidate("j_fill_disk", user / "project", mode=mode), timeout_s=90, **ATTACK)
    assert ran_as(rec) == status and any(words in r for r in rec.reasons), (rec.status, rec.reasons)
    from kiln.tools.check import caches

    cand_root = caches.root() / "cand"
    size, files = caches.tree_usage(cand_root)
    assert files < caches.CANDIDATE_CACHE_MAX_FILES and size < caches.CANDIDATE_CACHE_MAX_BYTES  # trimmed after


def test_swapping_kilns_evidence_module_does_not_change_the_verdict(user: Path) -> None:
    rec = check(candidate("j_module_swap", user / "project"), policy="strict", **ATTACK)
    assert rec.status == "rejected" and any(r.startswith("runtime.") for r in reject_rules(rec)), rec.reasons
    control = check(honest(user / "project"), policy="strict")
    assert control.status == "ok", control.reasons


def test_a_failure_of_kilns_own_code_is_an_error_record(user: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in kiln (here: the pipeline raising) ends as an `error` record saying so, never as a
    traceback in place of a verdict."""
    from kiln.tools.check import pipeline

    def broken(*args, **kwargs):
        raise RuntimeError("simulated bug in kiln's comparison")

    monkeypatch.setattr(pipeline, "run_check", broken)
    rec = check(honest(user / "project"))
    assert rec.status == "error" and "kiln failed" in rec.reasons[0] and "simulated bug" in rec.reasons[0]
    assert "RuntimeError" in rec.stderr_tail


@pytest.mark.parametrize("mode, status, words", [
    ("deep", "crashed", "broke the worker protocol"), ("compile", "crashed", "its reply to 'build' is not valid"),
    ("names", "incorrect", "named 'not-an-output'"), ("bigerror", "crashed", "the candidate raised RuntimeError"),
    ("badstr", "crashed", "the candidate worker was exit code 1")])
def test_a_hostile_but_parsable_reply_is_the_workers_failure(user: Path, mode: str, status: str, words: str) -> None:
    """A reply kiln can read but should not believe ends as the candidate's named failure, never as
    `error` ("kiln's bug"), and no reply puts more than a few KiB of the worker's text in the record."""
    rec = check(candidate("k_replies", user / "project", mode=mode), timeout_s=40, **ATTACK)
    text = " ".join([*rec.reasons, rec.correctness.first_failure or "" if rec.correctness else ""])
    assert ran_as(rec) == status and words in text, (rec.status, rec.reasons)
    assert len(rec.model_dump_json()) < 200_000


@pytest.mark.private_cache
@pytest.mark.parametrize("mode", ["top", "inner"])
def test_kiln_never_follows_a_link_out_of_the_compile_cache(user: Path, mode: str) -> None:
    outside = user / "home" / "libs"
    outside.mkdir(parents=True)
    (outside / "secret_name.so").write_bytes(b"\x7fELF-not-really")
    rec = check(candidate("k_cache_link", user / "project", mode=mode, target=outside), **ATTACK)
    native = [f for f in (rec.integrity.findings if rec.integrity else []) if f.rule == "static.native-symbol"]
    assert not any("secret_name" in f"{f.evidence} {f.file}" for f in native), native
    if mode == "top":  # fail closed: the cache's ext/ is no folder kiln can walk
        assert any("not a folder kiln can walk" in f.evidence and f.severity == "reject" for f in native), native
    else:
        assert not native and ran_as(rec) == "ok", (native, rec.reasons)


def test_the_extension_walk_reads_every_shared_object_inside_and_none_outside(tmp_path: Path) -> None:
    from kiln.tools.integrity.symbols import native_findings

    ext = tmp_path / "ext"
    (ext / "a" / "b").mkdir(parents=True)
    (ext / "a" / "b" / "inside.so").write_bytes(b"not an ELF")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "outside.so").write_bytes(b"not an ELF")
    (ext / "a" / "link").symlink_to(tmp_path / "out", target_is_directory=True)
    (ext / "a" / "file.so").symlink_to(tmp_path / "out" / "outside.so")
    found = {f.file: f.evidence for f in native_findings(ext)}  # the link named .so is refused, never followed
    assert sorted(found) == ["file.so", "inside.so"] and "not an ELF" in found["inside.so"], found
    assert "symbolic link" in found["file.so"], found


def test_a_flood_of_stderr_is_stopped_and_does_not_outlive_the_check(user: Path) -> None:
    from kiln.tools.sandbox import scratch

    rec = check(candidate("k_stderr_flood", user / "project"), **ATTACK)
    assert ran_as(rec) == "crashed" and any("stderr grew past" in r for r in rec.reasons), (rec.status, rec.reasons)
    left = {p.name: p.stat().st_size for p in scratch.ctl_dir().iterdir() if p.is_file()}
    assert all(size < (1 << 20) for size in left.values()), left


def test_output_files_filled_past_their_size_stop_the_worker(user: Path) -> None:
    rec = check(candidate("k_slot_fill", user / "project"), **ATTACK)
    assert ran_as(rec) == "crashed" and any("its output files hold" in r for r in rec.reasons), (rec.status, rec.reasons)
