"""The manifest and the files agree, and the corpus covers what issues 2 and 3 ask for."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from .corpus_lib import KERNELS, PROBLEMS, REPO, entry_id, load_manifest, problem_path, string_constants

MANIFEST = load_manifest()
STATUSES = {"ok", "incorrect", "crashed", "timeout", "compile_error", "rejected"}
KINDS = {"correct", "wrong", "crashing", "adversarial"}
REQUIRED = {"path", "problem", "lang", "form", "kind", "expect_status", "policy", "gpu_only", "note"}
OPTIONAL = {"expect_reason", "expect_rule", "accept_status", "naive_passes"}


def architecture_rule_ids() -> set[str]:
    """Rule ids listed in docs/architecture.md; `static.*` names are written without their prefix."""
    text = (REPO / "docs" / "architecture.md").read_text().split("## Integrity rule ids", 1)[1]
    ids = set(re.findall(r"`([a-z]+\.[a-z-]+)`", text))
    static_part = text.split("Static", 1)[1].split("Runtime:", 1)[0]
    ids |= {f"static.{name}" for name in re.findall(r"`([a-z-]+)`", static_part)}
    return ids


def class_def(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def method_params(cls: ast.ClassDef, method: str) -> list[str] | None:
    fn = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == method), None)
    return None if fn is None else [a.arg for a in fn.args.args]


def test_every_file_is_in_the_manifest_and_every_entry_exists():
    files = {p.relative_to(KERNELS).as_posix() for p in KERNELS.rglob("*.py")}
    listed = {e["path"] for e in MANIFEST}
    assert files - listed == set(), "files missing from MANIFEST.json"
    assert listed - files == set(), "manifest entries without a file"
    pairs = [(e["path"], e["policy"]) for e in MANIFEST]
    assert len(pairs) == len(set(pairs)), "duplicate (path, policy) entries"


@pytest.mark.parametrize("entry", MANIFEST, ids=entry_id)
def test_entry_fields_are_valid(entry):
    assert entry.keys() >= REQUIRED and entry.keys() <= REQUIRED | OPTIONAL
    kind, lang, _ = entry["path"].split("/")
    assert (entry["kind"], entry["lang"]) == (kind, lang)
    assert entry["kind"] in KINDS and entry["expect_status"] in STATUSES
    assert set(entry.get("accept_status", [])) <= STATUSES
    assert entry["policy"] in {"partial", "strict"} and isinstance(entry["gpu_only"], bool)
    assert problem_path(entry).exists()
    assert entry["note"].strip()
    if entry.get("expect_rule"):
        assert entry["expect_rule"] in architecture_rule_ids()
    if entry["kind"] == "adversarial":
        assert entry.get("expect_rule") or entry["expect_status"] in {"incorrect", "ok"}


@pytest.mark.parametrize("entry", MANIFEST, ids=entry_id)
def test_form_matches_the_source(entry):
    source = (KERNELS / entry["path"]).read_text()
    if entry["form"] == "triton":
        assert entry["lang"] == "triton" and "@triton.jit" in source
    elif entry["form"] == "fast":
        assert "from kiln.tools.cuda import CudaKernel" in source and "load_inline" not in source
    else:
        assert entry["form"] == "load_inline" and "load_inline(" in source
    if entry["lang"] == "cuda":
        assert "CUDA_SRC" in string_constants(KERNELS / entry["path"])


@pytest.mark.parametrize("entry", MANIFEST, ids=entry_id)
def test_candidate_signature_matches_the_problem(entry):
    problem = class_def(ast.parse(problem_path(entry).read_text()), "Model")
    candidate = class_def(ast.parse((KERNELS / entry["path"]).read_text()), "ModelNew")
    assert problem is not None and candidate is not None
    for method in ("__init__", "forward"):
        mine = method_params(candidate, method)
        if mine is not None:  # reference_model_subclass inherits __init__ from the reference
            assert mine == method_params(problem, method), method


def test_coverage_of_issue_2_and_3():
    by_kind: dict[str, list[dict]] = {}
    for e in MANIFEST:
        by_kind.setdefault(e["kind"], []).append(e)
    problems = {p.stem for p in PROBLEMS.glob("*.py")}
    for form in ("triton", "fast", "load_inline"):
        covered = {e["problem"] for e in by_kind["correct"] if e["form"] == form}
        assert covered == problems, f"correct {form} candidates missing for {problems - covered}"
    assert {e["lang"] for e in by_kind["wrong"]} == {"triton", "cuda"}
    assert len({e["path"] for e in by_kind["adversarial"]}) >= 20
    assert {e["lang"] for e in by_kind["adversarial"]} == {"triton", "cuda"}
    rules = {e.get("expect_rule") for e in by_kind["adversarial"]}
    wanted = {"static.try-except", "static.threads", "static.stream", "static.monkey-patch",
              "static.introspection", "static.env-or-file", "static.tensor-subclass",
              "static.reference-model", "static.dynamic-torch-attr", "static.cpp-torch-op",
              "static.downcast", "runtime.no-own-kernel", "runtime.decoy", "runtime.torch-compute",
              "output.alias-input", "output.cached", "correctness.input-mutation", "timing.recheck-failed"}
    assert wanted <= rules, wanted - rules
    crash_notes = " ".join(e["note"].lower() for e in by_kind["crashing"])
    for word in ("sigsegv", "loop", "os._exit", "4 tib", "runtimeerror", "illegal"):
        assert word in crash_notes
    assert {"crashed", "timeout", "compile_error"} <= {e["expect_status"] for e in by_kind["crashing"]}


def test_readme_documents_every_field():
    readme = (KERNELS / "README.md").read_text()
    for field in REQUIRED | OPTIONAL:
        assert f"`{field}`" in readme, field
    assert Path(KERNELS / "MANIFEST.json").read_text().endswith("\n")
