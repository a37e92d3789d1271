"""The allowlist (the default static policy) rejects no honest kernel: every correct and wrong corpus
kernel (wrong ones are honest code with bugs), the Coder's few-shot examples, the built-in Coder's
candidates for the KernelBench problems in tests/fixtures/kernelbench and the other problems it is
tested on, and every kernel a real LLM wrote in ../shared/llm-transcripts (its best kernels and
every code block of its replies; skipped where that folder is absent)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kiln.agents.base import CoderTask
from kiln.agents.builtin import BuiltinCoder
from kiln.tools.integrity.static import scan_candidate

REPO = Path(__file__).parents[2]
CORPUS = REPO / "tests" / "fixtures" / "kernels"
KERNELBENCH = REPO / "tests" / "fixtures" / "kernelbench" / "KernelBench" / "level1"
TRANSCRIPTS = next((p for p in (REPO.parent / "shared" / "llm-transcripts", REPO.parents[1] / "shared" / "llm-transcripts")
                    if p.is_dir()), None)

HONEST_FILES = sorted(
    [p for kind in ("correct", "wrong") for p in CORPUS.glob(f"{kind}/*/*.py")]
    + sorted((REPO / "agents" / "prompts" / "examples").glob("*_*.py"))
    + [REPO / "tests" / "integrity" / "data" / "kb_style_relu_load_inline.py.txt"]
)
BUILTIN_PROBLEMS = sorted(KERNELBENCH.glob("*.py")) + sorted((REPO / "tests" / "builtin" / "problems").glob("*.py")) \
    + sorted((REPO / "examples").glob("*.py"))


def rejections(source: str) -> list[str]:
    return [f"{f.rule} (line {f.line}): {f.evidence}" for f in scan_candidate(source, filename="cand.py", dtype="fp32")
            if f.severity == "reject"]


def transcript_kernels() -> dict[str, str]:
    """Every kernel the LLM wrote: its best kernels and each fenced code block of its replies."""
    if TRANSCRIPTS is None:
        return {}
    found = {f"kernels/{p.name}": p.read_text() for p in sorted((TRANSCRIPTS / "kernels").glob("*.py"))}
    for reply in sorted(TRANSCRIPTS.glob("*/resp-*.txt")):
        for i, m in enumerate(re.finditer(r"```(?:python)?\n(.*?)```", reply.read_text(), re.S)):
            if "class ModelNew" in m.group(1):
                found[f"{reply.parent.name}/{reply.name}#{i}"] = m.group(1)
    return found


@pytest.mark.parametrize("path", HONEST_FILES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_honest_repository_kernels_pass_the_allowlist(path: Path) -> None:
    assert rejections(path.read_text()) == []


@pytest.mark.parametrize("problem", BUILTIN_PROBLEMS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_builtin_coder_candidates_pass_the_allowlist(problem: Path) -> None:
    devices = ("cpu", "cuda") if problem.parent == KERNELBENCH else ("cpu",)
    for device in devices:
        reply = BuiltinCoder(device=device).write(
            CoderTask(mode="generate", problem_name=problem.stem, problem_src=problem.read_text()))
        if not reply.ok:
            pytest.skip(f"outside the built-in Coder's library: {reply.error}")
        assert reply.source is not None and rejections(reply.source) == [], device


def test_builtin_coder_covers_the_kernelbench_fixtures() -> None:
    """Most fixture problems are the built-in Coder's (so the test above is not all skips)."""
    ok = [p for p in KERNELBENCH.glob("*.py")
          if BuiltinCoder().write(CoderTask(mode="generate", problem_name=p.stem, problem_src=p.read_text())).ok]
    assert len(ok) >= 9


def test_llm_transcript_kernels_pass_the_allowlist() -> None:
    kernels = transcript_kernels()
    if not kernels:
        pytest.skip("../shared/llm-transcripts is not here")
    assert len(kernels) >= 10
    bad = {name: r for name, src in kernels.items() if (r := rejections(src))}
    assert bad == {}
