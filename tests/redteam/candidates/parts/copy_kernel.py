# part: a Triton kernel that only copies, pasted by redteam_lib.render where a candidate says `# <include copy_kernel>`
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def copy_out(src: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A fresh tensor shaped like `like`, written by the copy kernel from `src`: an own kernel that ran
    and whose output is the result."""
    out = torch.empty_like(like)
    copy_kernel[(triton.cdiv(like.numel(), 1024),)](src.contiguous(), out, like.numel(), BLOCK=1024)
    return out
