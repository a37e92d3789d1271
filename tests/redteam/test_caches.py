"""Class 5: caches shared across checks are written by the candidate. One honest check fills the
reference cache, a poisoner rewrites it (and the peaks cache, and other candidates' compile
caches), and the next honest check of the same problem inherits the lie."""

from __future__ import annotations

import hashlib
import json

import pytest
from redteam_lib import assert_contained, candidate, check, honest, tree_digest

PEAKS = {"NVIDIA H200|GPU-redteam|torch2.13.0": {"gpu_name": "NVIDIA H200", "source": "measured", "copy_gbps": 4300.0,
                                                  "matmul_tflops": {"fp32": 51.0, "tf32": 495.0, "bf16": 790.0}}}


@pytest.mark.private_cache
def test_a_candidate_cannot_poison_later_checks(user):
    assert check(honest(user / "project")).status == "ok"  # fills <cache>/reference for this problem
    peaks = user / "cache" / "peaks.json"  # kiln's cache root (KILN_CACHE_DIR), where main keeps the peaks
    peaks.write_text(json.dumps(PEAKS))
    evil = candidate("c5_poison_caches", user / "project")
    own_key = hashlib.sha256(evil.read_bytes()).hexdigest()[:16]  # its own compile-cache folder
    before = tree_digest(user / "cache", skip=(own_key,)), peaks.read_text()
    rec = check(evil, run_rejected=True)  # executed anyway: the sandbox is under test
    after = tree_digest(user / "cache", skip=(own_key,)), peaks.read_text()
    later = check(honest(user / "project"))
    changed = sorted(k for k in before[0].keys() | after[0].keys() if before[0].get(k) != after[0].get(k))
    degenerate = later.integrity is not None and later.integrity.degenerate is not None and \
        later.integrity.degenerate.degenerate
    problems = [f"the candidate changed kiln's cache: {changed}"] if changed else []
    problems += ["the candidate rewrote the peaks cache"] if before[1] != after[1] else []
    problems += [f"the next honest check inherited the lie: {later.reasons}"] if degenerate else []
    assert not problems, problems
    assert later.status == "ok", later.reasons
    assert_contained(rec)
