"""Issue 22, part 5: routes past the allowlist that an attacker who read kiln's source found, each a
whole candidate run through the real `check()`. Every one passed main's scan (a Triton kernel
object's attributes, a forged `self`, a `match` class pattern, an asm label, a pybind11
using-directive, unlisted C library calls); each must now come back `rejected` by the new rule,
before any of its code runs (the static scan runs in the parent, first)."""

from __future__ import annotations

import pytest
from redteam_lib import assert_rejected, candidate, check

from kiln.tools.records import CheckRecord

ROUTES = {
    "c9_kernel_capture_scope": ("static.kernel-object", "get_capture_scope"),
    "c9_forged_self": ("static.dynamic-access", "unbound"),
    "c9_match_globals": ("static.dynamic-access", "__globals__"),
    "c9_cpp_asm_label": ("static.cpp-asm", "__asm__ in host code"),
    "c9_cpp_using_pybind": ("static.introspection", "using namespace pybind11"),
    "c9_cpp_symlink_swap": ("static.env-or-file", "symlink"),
}


def _evidence(rec: CheckRecord, rule: str) -> str:
    return " ".join(f.evidence for f in (rec.integrity.findings if rec.integrity else [])
                    if f.rule == rule and f.severity == "reject")


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_route_is_rejected_by_its_rule_before_it_runs(user, name):
    rule, words = ROUTES[name]
    rec = check(candidate(name, user / "project"))
    assert_rejected(rec, rule)
    assert words in _evidence(rec, rule), (rule, _evidence(rec, rule))
    assert rec.compile is None and rec.correctness is None  # refused before it was built or run
