"""Fenced-code extraction from Coder replies."""

from __future__ import annotations

from kiln.agents.extract import extract_code

KERNEL = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def test_one_python_block():
    out = extract_code(f"Plan: fuse.\n```python\n{KERNEL}```\nThat is all.")
    assert out.ok and out.code == KERNEL and out.notes == "Plan: fuse. That is all."


def test_untagged_block_and_tilde_fence():
    assert extract_code(f"```\n{KERNEL}```").code == KERNEL
    assert extract_code(f"~~~python\n{KERNEL}~~~").code == KERNEL


def test_other_language_blocks_are_not_candidates():
    out = extract_code(f"The kernel:\n```cuda\n__global__ void k() {{}}\n```\n```python\n{KERNEL}```")
    assert out.ok and out.code == KERNEL
    out = extract_code("```cpp\nint main() {}\n```")
    assert not out.ok and "only cpp blocks" in out.error


def test_no_block():
    out = extract_code("I think a Triton kernel would be faster here.")
    assert not out.ok and out.code is None and "no fenced python code block" in out.error


def test_several_blocks_need_exactly_one_modelnew():
    helper = "def helper():\n    return 1\n"
    out = extract_code(f"```python\n{helper}```\nthen\n```python\n{KERNEL}```")
    assert out.ok and out.code == KERNEL  # only one defines ModelNew: not ambiguous
    out = extract_code(f"```python\n{KERNEL}```\nor\n```python\n{KERNEL}```")
    assert not out.ok and "ambiguous" in out.error
    out = extract_code(f"```python\n{helper}```\n```python\n{helper}```")
    assert not out.ok and "0 define class ModelNew" in out.error


def test_truncated_reply_and_missing_modelnew():
    out = extract_code(f"```python\n{KERNEL}")
    assert not out.ok and "never closed" in out.error
    out = extract_code("```python\nimport torch\n```")
    assert not out.ok and "does not define class ModelNew" in out.error


def test_nested_longer_fence_keeps_inner_backticks():
    inner = 'DOC = """\n```\nexample\n```\n"""\n' + KERNEL
    out = extract_code(f"````python\n{inner}````")
    assert out.ok and out.code == inner
