"""The configuration search: knobs per template family, their ordered values, and the walk.

A configuration is a dict of knob values. The search is a coordinate walk: from the best
configuration, try one knob one step up or down (the Judge may name which); when every
neighbour has been tried, take the next untried configuration in a fixed order; stop after
MAX_VISITED configurations or when the space is exhausted.
"""

from __future__ import annotations

import itertools
import json

MAX_VISITED = 16

MM_TILES = [  # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages), small to large
    (32, 32, 32, 4, 2),
    (64, 64, 32, 4, 3),
    (64, 128, 32, 4, 3),
    (128, 64, 32, 4, 3),
    (128, 128, 16, 8, 4),  # the fp32 default: tf32x3 without register spills on sm_90 (see DEFAULTS)
    (128, 128, 32, 8, 3),
    (128, 128, 64, 8, 3),
    (128, 256, 32, 8, 3),
]

KNOBS: dict[str, dict[str, list]] = {
    "elementwise": {"block": [1024, 2048, 4096, 8192], "num_warps": [4, 8, 16], "persistent": [0, 1]},
    "row": {"tile": [2048, 4096, 8192, 16384], "num_warps": [4, 8, 16], "persistent": [0, 1], "num_stages": [1, 2, 3]},
    "matmul": {"tile": list(range(len(MM_TILES))), "prec": ["auto", "tf32x3", "bf16x3", "ieee"]},
    "gnorm": {"block": [1024, 2048, 4096, 8192], "num_warps": [2, 4, 8, 16]},
}

# First configurations, measured on an H200 (bench/builtin_speed.py): rows-layout reductions
# like 8192-element tiles, cols-layout (middle-dim) ones 4096. fp32 GEMMs: 128x128x16, 8 warps, 4
# stages, chosen from the compiled kernel, not yet timed: the earlier 128x128x64 (3 stages) holds
# 255 registers and spills ~880 bytes a thread in tf32x3 (cuobjdump of Triton's sm_90 cubin,
# 2026-12-03), where it ran square fp32 GEMMs at 0.75x eager (39 TFLOP/s); 128x128x16 and
# 128x64x32 (8 warps) are the spill-free ones of that size.
DEFAULTS: dict[str, dict] = {
    "elementwise": {"block": 2048, "num_warps": 8, "persistent": 0},
    "row": {"tile": 8192, "num_warps": 8, "persistent": 0, "num_stages": 1},
    "row_cols": {"tile": 4096, "num_warps": 8, "persistent": 0, "num_stages": 1},
    "matmul": {"tile": 4, "prec": "auto"},
    "gnorm": {"block": 2048, "num_warps": 4},
}

# Under the Triton interpreter (CPU) the cost is per program, so the first configuration there
# uses the largest tiles (speed is not measured on CPU; this only keeps runs short).
CPU_DEFAULTS: dict[str, dict] = {
    "elementwise": {"block": 8192, "num_warps": 8, "persistent": 0},
    "row": {"tile": 16384, "num_warps": 8, "persistent": 0, "num_stages": 1},
    "row_cols": {"tile": 16384, "num_warps": 8, "persistent": 0, "num_stages": 1},
    "matmul": {"tile": 7, "prec": "auto"},
    "gnorm": {"block": 8192, "num_warps": 8},
}


def default(family: str, variant: str, device: str) -> dict:
    """The first configuration for a family (variant: "row_cols" for middle-dim reductions)."""
    table = CPU_DEFAULTS if device == "cpu" else DEFAULTS
    return dict(table.get(variant, table[family]))


# knobs that a search step never changes (kept in the config so kernels are self-describing)
FIXED: dict[str, dict] = {
    "elementwise": {"waves": 4, "num_stages": 1},
    "row": {"waves": 4, "onepass_max": 16384, "chunk": 2048, "block_n": 128, "evict": 1},
    "matmul": {"group_m": 8},
    "gnorm": {"onepass_max": 8192},
}


def key(knobs: dict) -> str:
    return json.dumps(knobs, sort_keys=True)


def expand(family: str, knobs: dict) -> dict:
    """The full configuration a template reads: knob values plus the fixed ones."""
    cfg = dict(FIXED[family]) | dict(knobs)
    if family == "matmul":
        bm, bn, bk, nw, ns = MM_TILES[int(knobs["tile"])]
        cfg |= {"block_m": bm, "block_n": bn, "block_k": bk, "num_warps": nw, "num_stages": ns}
    return cfg


def valid(family: str, knobs: dict) -> bool:
    space = KNOBS[family]
    return set(knobs) == set(space) and all(knobs[k] in space[k] for k in space)


def neighbours(family: str, base: dict, prefer: tuple[str, str] | None = None) -> list[dict]:
    """Configs one knob step from `base`; the preferred (knob, "up"|"down") step comes first."""
    out: list[tuple[int, dict]] = []
    for knob, values in KNOBS[family].items():
        i = values.index(base[knob])
        for step, direction in ((1, "up"), (-1, "down")):
            if 0 <= i + step < len(values):
                rank = 0 if prefer == (knob, direction) else (1 if prefer and prefer[0] == knob else 2)
                out.append((rank, base | {knob: values[i + step]}))
    return [c for _, c in sorted(out, key=lambda rc: rc[0])]


def all_configs(family: str) -> list[dict]:
    names = list(KNOBS[family])
    return [dict(zip(names, vals, strict=True)) for vals in itertools.product(*KNOBS[family].values())]


def next_config(family: str, base: dict, visited: set[str], prefer: tuple[str, str] | None = None) -> dict | None:
    """The next untried configuration, or None when the search is over."""
    if len(visited) >= MAX_VISITED:
        return None
    for cand in neighbours(family, base, prefer) + all_configs(family):
        if key(cand) not in visited:
            return cand
    return None


def exhausted(family: str, visited: set[str]) -> bool:
    return len(visited) >= min(MAX_VISITED, len(all_configs(family)))


# The spatial / attention families and the pipeline (extra_plans.py, pipeline.py). Conv tiles
# are upper bounds: the forward clips BLOCK_N to the group's output channels and BLOCK_K to its
# input channels (or channels x taps), so one configuration serves any shape. fp32 convs use bf16x3
# (three bf16 products; tf32x3 where the GPU's Triton lacks it or a dot sums fewer than 64 products):
# on the H200 it passed kiln's rule on all 31 level-1 convs and 6 GEMMs (worst 0.56 of the allowance,
# most near 0.01) at 1.0-1.6x tf32x3's speed (2026-12-04). Attention uses tf32x3. One TF32 product
# ("tf32") is left to the search and the tolerance: as the default it failed kiln's rule on 29 of 30
# KernelBench level-1 convs on the H200 (1.0-36x the allowance, 2026-12-03), so cuDNN's fp32 convs
# there err far less than one TF32 product although torch.backends.cudnn.allow_tf32 is on.
KNOBS |= {
    "conv": {"block_m": [32, 64, 128, 256], "block_n": [16, 32, 64, 128], "block_k": [16, 32, 64],
             "num_warps": [4, 8], "num_stages": [2, 3, 4], "prec": ["bf16x3", "tf32x3", "tf32", "ieee"],
             "autotune": [0, 1]},
    "dwconv": {"block": [256, 512, 1024, 2048], "num_warps": [2, 4, 8]},
    "pool": {"block": [256, 512, 1024, 2048], "num_warps": [2, 4, 8]},
    "attn": {"block_m": [32, 64, 128], "block_n": [32, 64, 128], "num_warps": [4, 8], "num_stages": [1, 2, 3],
             "prec": ["tf32x3", "tf32", "ieee"]},
    "chanstats": {"block": [1024, 2048, 4096], "num_warps": [4, 8]},
    "pipeline": {"preset": [0, 1, 2, 3], "dev": ["cuda", "cpu"]},
    "scan": {"block": [1024, 2048, 4096, 8192, 16384], "num_warps": [2, 4, 8, 16]},
    "argreduce": {"block": [1024, 2048, 4096, 8192, 16384], "num_warps": [2, 4, 8, 16]},
    "crossent": {"block": [1024, 2048, 4096, 8192, 16384], "chunk": [128, 512, 1024, 2048, 4096],
                 "num_warps": [2, 4, 8, 16]},
}  # fmt: skip
DEFAULTS |= {
    "conv": {"block_m": 128, "block_n": 128, "block_k": 32, "num_warps": 8, "num_stages": 3, "prec": "bf16x3",
             "autotune": 0},
    "dwconv": {"block": 1024, "num_warps": 4},
    "pool": {"block": 1024, "num_warps": 4},
    "attn": {"block_m": 64, "block_n": 64, "num_warps": 4, "num_stages": 2, "prec": "tf32x3"},
    "chanstats": {"block": 2048, "num_warps": 8},
    "pipeline": {"preset": 0, "dev": "cuda"},
    "scan": {"block": 4096, "num_warps": 8},
    "argreduce": {"block": 4096, "num_warps": 8},
    "crossent": {"block": 4096, "chunk": 4096, "num_warps": 8},  # not yet measured: one row of 4096 per program
}
CPU_DEFAULTS |= {
    "conv": {"block_m": 256, "block_n": 128, "block_k": 64, "num_warps": 4, "num_stages": 2, "prec": "bf16x3",
             "autotune": 0},
    "dwconv": {"block": 2048, "num_warps": 4},
    "pool": {"block": 2048, "num_warps": 4},
    "attn": {"block_m": 128, "block_n": 128, "num_warps": 4, "num_stages": 1, "prec": "tf32x3"},
    "chanstats": {"block": 4096, "num_warps": 8},
    "pipeline": {"preset": 0, "dev": "cpu"},
    "scan": {"block": 16384, "num_warps": 4},
    "argreduce": {"block": 16384, "num_warps": 4},
    "crossent": {"block": 16384, "chunk": 4096, "num_warps": 4},
}
FIXED |= {"conv": {"flat_below": 16}, "dwconv": {}, "pool": {}, "attn": {"flash_max_d": 128, "softmax_block": 1024},
          "chanstats": {}, "pipeline": {}, "scan": {"lanes": 64},
          "argreduce": {"lanes": 64}, "crossent": {"reduce_block": 1024}}  # fmt: skip


def fp32_dot(prec: str) -> str:
    """The tl.dot input precision of an fp32 matmul: `prec` itself, or for "auto" PyTorch's own in
    this process: TF32 while `torch.backends.cuda.matmul.allow_tf32` is on (off by default), else
    bf16x3, which the forward takes only on a GPU whose Triton has it and for K >= 64, tf32x3
    otherwise (`_kiln_f32_dot`); NVIDIA_TF32_OVERRIDE=0 keeps cuBLAS off TF32, so it keeps the kernel
    off it too."""
    if prec != "auto":
        return prec
    import os

    import torch

    allowed = torch.backends.cuda.matmul.allow_tf32 and os.environ.get("NVIDIA_TF32_OVERRIDE") != "0"
    return "tf32" if allowed else "bf16x3"
