"""The Proposer's "candidate facts" come from the syntax tree: the three kernels the regexes misread
(a tuple assignment of block sizes, a mask with nested parentheses, thresholds not named BLOCK*)
and the facts the real model was shown in the transcripts."""

from __future__ import annotations

from pathlib import Path

from kiln.agents.facts import candidate_facts

TRANSCRIPT_KERNELS = Path("/work/shared/llm-transcripts/kernels")

TUPLE_BLOCKS = '''
import triton
import triton.language as tl

def forward(x, w):
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    kernel[grid](x, w, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
'''

NESTED_MASK = '''
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    a = tl.load(x_ptr + rm[:, None] * N + rn[None, :],
                mask=((rm[:, None] < M) & ((rn[None, :] < N) & (rn[None, :] >= 0))), other=0.0)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], a, ((rm[:, None] < M) & (rn[None, :] < N)))
'''

THRESHOLDS = '''
import triton
import triton.language as tl

FUSED_MAX_N = 8192
CHUNK = 1024

def forward(x):
    n = x.shape[-1]
    if n <= FUSED_MAX_N:
        return fused(x)
    return chunked(x, CHUNK)
'''


def joined(src: str) -> str:
    return "\n".join(candidate_facts(src))


def test_tuple_assignment_reads_each_block_size():
    facts = joined(TUPLE_BLOCKS)
    assert "BLOCK_K = 32:" in facts and "BLOCK_K = 64" not in facts
    assert "BLOCK_M = 64:" in facts and "BLOCK_N = 64:" in facts


def test_masks_with_nested_parentheses_are_seen():
    facts = joined(NESTED_MASK)
    assert "no mask" not in facts  # both the keyword mask and the positional store mask count


def test_an_unmasked_load_is_named_with_its_line():
    src = NESTED_MASK.replace("mask=((rm[:, None] < M) & ((rn[None, :] < N) & (rn[None, :] >= 0))), ", "")
    assert "1 of 2 tl.load/tl.store calls have no mask (line 9)" in joined(src)


def test_thresholds_not_named_block_are_found():
    facts = joined(THRESHOLDS)
    assert "FUSED_MAX_N = 8192: try sizes 8192, 8193" in facts
    assert "CHUNK = 1024:" in facts
    assert "a branch on `n <= FUSED_MAX_N`: try sizes 8192 and 8193" in facts


def test_transcript_kernels_give_true_facts():
    """The kernels a real model wrote: 76's launch `BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32`."""
    gemm = (TRANSCRIPT_KERNELS / "76_Gemm_Add_ReLU.py").read_text()
    facts = joined(gemm)
    assert "BLOCK_K = 32:" in facts and "BLOCK_K = 64" not in facts and "no mask" not in facts
    layernorm = joined((TRANSCRIPT_KERNELS / "40_LayerNorm.py").read_text())
    assert "no mask" not in layernorm  # its two unmasked stores write one value per program
    for kernel in TRANSCRIPT_KERNELS.glob("*.py"):
        assert candidate_facts(kernel.read_text()), kernel.name


def test_unparseable_source_says_so():
    assert "does not parse" in joined("def broken(:\n")


HINT_UNITS = '''
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, y_ptr, M, BLOCK_M: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    if pid == 0:
        tl.store(y_ptr, 0.0)

def forward(x, inner):
    if x.dim() == 2:
        x = x[None]
    if inner == 1:
        return one_kernel(x)
    k[(4,)](x, x, 1, BLOCK_M=64, GROUP_M=8, num_warps=4, NUM_STAGES=3)
'''


def test_hints_are_in_the_units_of_what_they_test():
    """Issue 25 item 7: GROUP_M counts tiles (its boundary is 8 x BLOCK_M + 1 rows, not 9); a rank is
    not a size; a split on a dimension of 1 and a path for program 0 get hints too."""
    facts = joined(HINT_UNITS)
    assert "GROUP_M = 8 groups 8 tiles of BLOCK_M rows: try 513 rows" in facts
    assert "try sizes 8, 9, 15" not in facts and "NUM_STAGES" not in facts
    assert "a branch on `x.dim() == 2` (a rank, not a size): try inputs with 2 and with 3 dimensions" in facts
    assert "try sizes 2 and 3" not in facts
    assert "a branch on `inner == 1`: try that dimension at 1 and at 2" in facts
    assert "a path for some programs only (`pid == 0`): try sizes that launch one program and several" in facts
