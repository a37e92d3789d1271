"""All prompt text of the LLM roles: Jinja templates rendered with StrictUndefined.

A variable a template uses but the caller did not pass fails loudly (jinja2.UndefinedError).
Few-shot examples are runnable candidate files under `examples/`, pasted in verbatim.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

PROMPTS_DIR = Path(__file__).parent
EXAMPLES_DIR = PROMPTS_DIR / "examples"

# few-shot examples per target language: (candidate file, problem file). None of them is a
# KernelBench problem or close to one (tests/agents/test_examples.py checks the op signatures):
# an example that nearly solves a benchmark problem inflates the scores measured on it.
EXAMPLES: dict[str, list[tuple[str, str]]] = {
    "triton": [("triton_row_clip.py", "row_clip.py"), ("triton_code_scores.py", "code_scores.py")],
    "cuda": [("cuda_fastpath_fake_quant.py", "fake_quant.py"), ("cuda_load_inline_scale_add.py", "scale_add.py")],
}


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(PROMPTS_DIR),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(template: str, **variables: Any) -> str:
    """Render `agents/prompts/<template>`; raises jinja2.UndefinedError on a missing variable."""
    return environment().get_template(template).render(**variables).strip() + "\n"


def problem_block(name: str, src: str, note: str = "") -> str:
    """The problem statement every role's request opens with, ending in a blank line: identical in
    every call of a run, so it belongs to the prefix that providers cache."""
    return render("problem.j2", problem_name=name, problem_src=src, note=note) + "\n"


def examples(lang: str) -> list[dict[str, str]]:
    """The few-shot examples for `lang`, each {name, problem, candidate} as file text."""
    out = []
    for cand, prob in EXAMPLES[lang]:
        out.append({
            "name": cand,
            "problem": (EXAMPLES_DIR / "problems" / prob).read_text(),
            "candidate": _strip_header((EXAMPLES_DIR / cand).read_text()),
        })
    return out


def _strip_header(text: str) -> str:
    """Drop the example's first-line header (which problem it solves): bookkeeping, not teaching."""
    first, _, rest = text.partition("\n")
    return rest if first.startswith("# kiln few-shot example") else text


def example_paths() -> list[tuple[str, Path, Path]]:
    """(lang, candidate path, problem path) for every example, for the tests."""
    return [
        (lang, EXAMPLES_DIR / cand, EXAMPLES_DIR / "problems" / prob)
        for lang, pairs in EXAMPLES.items()
        for cand, prob in pairs
    ]
