"""Search strategies: which candidates the next Coder round starts from, and how many children
each gets. All rank by the correctness-gated reward (`graphs.reward`).

- linear: refine one kernel: the last child is the next parent;
- beam: k children per kept candidate, keep the best b of parents and children;
- mcts: UCT over the candidate tree: descend from the root while a node is fully expanded, expand
  the first node that is not, back up each child's reward to its ancestors.
"""

from __future__ import annotations

import math

from kiln.graphs.context import RunOptions
from kiln.graphs.state import Candidate, RunState, TreeStats

ROOT = "root"


def parents_for_round(state: RunState, opts: RunOptions) -> list[str | None]:
    """One entry per child to write: the parent's id, or None to generate from the problem."""
    frontier = [p for p in state.get("frontier", []) if p != ROOT]
    if opts.strategy == "beam":
        if not frontier:
            return [None] * opts.beam_children
        return [p for p in frontier for _ in range(opts.beam_children)]
    return [frontier[0] if frontier else None]


def rank(cands: list[Candidate]) -> list[Candidate]:
    """Best first; ties go to the earlier candidate."""
    return sorted(cands, key=lambda c: (-c.reward, c.id))


def next_frontier(state: RunState, new_ids: list[str], opts: RunOptions) -> tuple[list[str], dict[str, TreeStats]]:
    """After a round is evaluated: the next parents, and the MCTS statistics to update."""
    cands = state.get("candidates", {})
    if opts.strategy == "linear":
        return (new_ids[-1:] or state.get("frontier", [])), {}
    if opts.strategy == "beam":
        pool = {*state.get("frontier", []), *new_ids} - {ROOT}
        kept = rank([cands[c] for c in pool if cands[c].source_path])[: opts.beam_width]
        return ([c.id for c in kept] or new_ids[-1:]), {}
    tree = _backup(state.get("tree", {}), cands, new_ids)
    return [_uct_select({**state.get("tree", {}), **tree}, cands, opts)], tree


def _backup(tree: dict[str, TreeStats], cands: dict[str, Candidate], new_ids: list[str]) -> dict[str, TreeStats]:
    out: dict[str, TreeStats] = {}
    for cid in new_ids:
        node: str | None = cid
        while node is not None:
            cur = out.get(node) or tree.get(node) or TreeStats()
            out[node] = TreeStats(visits=cur.visits + 1, value_sum=cur.value_sum + cands[cid].reward)
            node = (cands[node].parent or ROOT) if node != ROOT else None
    return out


def _children(cands: dict[str, Candidate], node: str) -> list[Candidate]:
    return [c for c in cands.values() if (c.parent or ROOT) == node]


def _uct_select(tree: dict[str, TreeStats], cands: dict[str, Candidate], opts: RunOptions) -> str:
    node = ROOT
    while True:
        kids = _children(cands, node)
        if len(kids) < opts.mcts_children:
            return node
        parent_n = max(tree.get(node, TreeStats()).visits, 1)
        expandable = [k for k in kids if k.source_path]  # a reply with no code is a dead leaf
        if not expandable:
            return node
        node = max(expandable, key=lambda k: _uct(tree.get(k.id, TreeStats()), parent_n, opts.mcts_c)).id


def _uct(stats: TreeStats, parent_n: int, c: float) -> float:
    if stats.visits == 0:
        return math.inf
    return stats.value_sum / stats.visits + c * math.sqrt(math.log(parent_n) / stats.visits)
