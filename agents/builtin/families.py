"""One template family's parts for a plan and a configuration: the dispatch to the generators
(gen_*.py). source.py renders a single family with it, pipeline.py each stage of a pipeline."""

from __future__ import annotations

from kiln.agents.builtin.emit import F32_DOT_HELPER, HELPERS
from kiln.agents.builtin.extra_plans import FAMILIES as EXTRA_FAMILIES
from kiln.agents.builtin.extra_plans import family_parts as extra_parts
from kiln.agents.builtin.gen_elementwise import COLLAPSE_HELPER, ew_forward, ew_kernel
from kiln.agents.builtin.gen_groupnorm import gn_forward, gn_kernels
from kiln.agents.builtin.gen_matmul import TILE_HELPER, mm_forward, mm_kernel
from kiln.agents.builtin.gen_row import PROD_HELPER
from kiln.agents.builtin.gen_row_forward import row_forward, row_kernels
from kiln.agents.builtin.plan import Plan


def family_parts(plan: Plan, cfg: dict) -> tuple[str, str, str]:
    """(kernels, forward body, helpers) of one family's kernel for a plan and configuration."""
    fam = plan.family
    if fam in EXTRA_FAMILIES:
        return extra_parts(plan, cfg)
    if fam == "argreduce":
        from kiln.agents.builtin.gen_argreduce import argreduce_parts

        return argreduce_parts(plan, cfg)
    if fam == "crossent":
        from kiln.agents.builtin.gen_crossent import crossent_parts

        return crossent_parts(plan, cfg)
    if fam == "scan":
        from kiln.agents.builtin.gen_scan import scan_parts

        return scan_parts(plan, cfg)
    if fam == "elementwise":
        kernels, fwd, helpers = ew_kernel(plan), ew_forward(plan, cfg), HELPERS + COLLAPSE_HELPER
    elif fam == "row":
        kernels, fwd, helpers = row_kernels(plan, cfg), row_forward(plan, cfg), HELPERS + PROD_HELPER
    elif fam == "gnorm":
        kernels, fwd, helpers = gn_kernels(plan), gn_forward(plan, cfg), HELPERS + PROD_HELPER
    else:
        kernels, fwd, helpers = mm_kernel(plan), mm_forward(plan, cfg), TILE_HELPER + F32_DOT_HELPER
    return kernels, fwd, helpers
