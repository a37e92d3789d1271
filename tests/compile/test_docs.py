"""The examples in docs/cuda-fast-path.md are real candidates: their CUDA compiles with nvcc."""

import re
import shutil
from pathlib import Path

import pytest

from kiln.tools.compile import detect_lang, extract_cuda_sources, nvcc_compile_check

DOC = Path(__file__).parents[2] / "docs" / "cuda-fast-path.md"


def _examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_doc_has_a_fast_path_and_a_load_inline_example():
    ex = _examples()
    assert len(ex) == 2
    assert extract_cuda_sources(ex[0])["kernel"] and extract_cuda_sources(ex[1])["cuda"]
    assert all(detect_lang(e) == "cuda" for e in ex)
    # kiln's form: torch headers only in the C++ part, and none added to the .cu by load_inline
    li = extract_cuda_sources(ex[1])
    assert "torch/" not in li["cuda"][0] and "torch/types.h" in li["cpp"][0]
    assert "no_implicit_headers=True" in ex[1]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("i", [0, 1])
def test_doc_examples_compile(tmp_path, i):
    p = tmp_path / f"doc_example_{i}.py"
    p.write_text(_examples()[i])
    rec = nvcc_compile_check(p)
    assert rec.ok, rec.errors
