"""The conv template under `@triton.autotune` (knob `autotune`, CUDA only): BLOCK_N, BLOCK_K,
warps and stages are timed on the first call for each shape (the key), among the configurations
that fit it (wider channel tiles than the group's channels, or K tiles past its K, are pruned);
the patch (BLOCK_M, BD x BH x BW) stays the forward's choice, so the grid is a function of the
timed BLOCK_N. Off by default: the search turns it on (`knob: autotune up`)."""

from __future__ import annotations

TUNED = [(128, 32, 8, 3), (128, 64, 8, 3), (64, 32, 4, 4), (64, 64, 4, 3), (32, 32, 4, 4), (16, 32, 4, 4)]

DECORATOR = (
    "\n\n@triton.autotune(configs=[triton.Config({'BLOCK_N': n, 'BLOCK_K': k}, num_warps=w, num_stages=s) for n, k, w, s in "
    f"{TUNED!r}], key=['CIG', 'COG', 'OD', 'OH', 'OW'], prune_configs_by={{'early_config_prune': _kiln_conv_prune}})"
)

HELPER = '''

def _kiln_conv_prune(configs, named_args, **kwargs):
    """The autotune configurations that fit the shape: BLOCK_N within the group's output channels,
    BLOCK_K within its input channels (or channels x taps in flat mode); the smallest if none."""
    cog, cig = named_args["COG"], named_args["CIG"]
    taps = kwargs.get("KD", 1) * kwargs.get("KH", 1) * kwargs.get("KW", 1) if kwargs.get("FLAT") else 1
    bn, bk = max(16, triton.next_power_of_2(cog)), max(16, triton.next_power_of_2(cig * taps))
    fit = [c for c in configs if c.kwargs["BLOCK_N"] <= bn and c.kwargs["BLOCK_K"] <= bk]
    return fit or [min(configs, key=lambda c: (c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]))]
'''


def tuned_copy(kernel_src: str) -> str:
    """A second copy of the kernel, `<name>_at`, under the autotune decorator."""
    name = kernel_src.split("def ", 1)[1].split("(", 1)[0]
    return kernel_src.replace("\n\n@triton.jit\n", DECORATOR + "\n@triton.jit\n", 1).replace(f"def {name}(", f"def {name}_at(", 1)


def launch(cfg: dict, name: str, args: str, rest: str, groups: int) -> list[str]:
    """Forward lines launching the kernel: autotuned on a GPU when the knob is on (the interpreter
    cannot time configurations), the forward's own tiles otherwise."""
    plain = [f"grid = (triton.cdiv(COG, bn) * {rest}, {groups})",
             f"{name}[grid]{args}BLOCK_N=bn, BLOCK_K=bk, num_warps={cfg['num_warps']}, num_stages={cfg['num_stages']})",
             "return out"]  # fmt: skip
    if not cfg.get("autotune"):
        return plain
    return ["if x5.is_cuda:", f"    grid = lambda meta: (triton.cdiv(COG, meta['BLOCK_N']) * {rest}, {groups})",
            f"    {name}_at[grid]{args.rstrip(', ')})", "    return out", *plain]  # fmt: skip
