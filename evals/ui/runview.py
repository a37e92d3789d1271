"""One run as the run page draws it: the candidate tree, the plots' series, status and totals.

Built from events.jsonl and the candidates' files, so it follows a live run event by event; the
LangGraph checkpoint adds what only it holds (MCTS visits and values, decisions after the hard rules,
each candidate's iteration)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kiln.evals.ui import records
from kiln.evals.ui.roots import read_json
from kiln.graphs.rundir import RunDir

STALE_S = 15 * 60  # a run with no event for this long and no finish is shown as interrupted


def speedup(rec: dict | None, baseline: str) -> dict | None:
    timing = (rec or {}).get("timing") or {}
    sp = (timing.get("speedups") or {}).get(baseline) if timing.get("measured") else None
    if not isinstance(sp, dict) or sp.get("value") is None:
        return None
    return {k: sp.get(k) for k in ("value", "ci_low", "ci_high", "verdict")}


def _roofline_point(rec: dict | None) -> dict | None:
    phys = ((rec or {}).get("integrity") or {}).get("physics") or {}
    moved, flops, us = phys.get("bytes_moved"), phys.get("flops"), phys.get("measured_us")
    if not moved or not us:
        return None
    return {"ai": (flops or 0) / moved, "gflops": (flops or 0) / us / 1e3, "gbps": moved / us / 1e3,
            "pct": phys.get("pct_of_floor"), "bound": phys.get("bound"),
            "peak_gbps": phys.get("peak_gbps"), "peak_tflops": phys.get("peak_tflops")}


def _new_node(ev: dict) -> dict:
    ok = ev.get("ok", True)
    return {"id": ev["id"], "parent": ev.get("parent"), "mode": ev.get("mode"), "iteration": None,
            "status": "pending" if ok else "no_code", "error": ev.get("error"), "t": ev.get("t"),
            "checks": 0, "correct": False, "reward": None, "eager": None, "compile": None, "visits": None,
            "value": None, "roofline": None, "reasons": []}


def _fold_events(evs: list[dict]) -> tuple[dict[str, dict], list[str]]:
    """Nodes in creation order, with each one's latest check status; iteration from event rounds
    (a run of consecutive `candidate` events is one Coder round) until the checkpoint says."""
    nodes: dict[str, dict] = {}
    round_, prev = 0, None
    for ev in evs:
        kind = ev.get("kind")
        if kind == "candidate" and ev.get("id"):
            round_ += prev != "candidate"
            nodes[ev["id"]] = {**_new_node(ev), "iteration": round_}
        elif kind == "check" and ev.get("id") in nodes:
            node = nodes[ev["id"]]
            node["status"], node["checks"] = ev.get("status", node["status"]), node["checks"] + 1
        prev = kind
    return nodes, list(nodes)


def _fill_from_records(run: Path, nodes: dict[str, dict]) -> None:
    for cid, node in nodes.items():
        rec = records.last_check(run, cid)
        reward = read_json(RunDir(run).candidate(cid) / "reward.json")
        if rec:
            node.update(status=rec.get("status", node["status"]), correct=bool(rec.get("correct")),
                        eager=speedup(rec, "eager"), compile=speedup(rec, "compile"),
                        roofline=_roofline_point(rec), reasons=list(rec.get("reasons") or [])[:3])
        if isinstance(reward, dict):
            node["reward"] = reward.get("reward")


def _fill_from_state(state: dict, nodes: dict[str, dict]) -> dict | None:
    for cid, cand in (state.get("candidates") or {}).items():
        if cid in nodes:
            nodes[cid]["iteration"] = getattr(cand, "iteration", nodes[cid]["iteration"])
    tree = state.get("tree") or {}
    for cid, stats in tree.items():
        if cid in nodes and stats.visits:
            nodes[cid]["visits"], nodes[cid]["value"] = stats.visits, stats.value_sum / stats.visits
    root = tree.get("root")
    return {"visits": root.visits, "value": root.value_sum / root.visits} if root and root.visits else None


def _status(evs: list[dict], summary: dict | None) -> str:
    if isinstance(summary, dict) and summary.get("status"):
        return summary["status"]
    fin = next((e for e in reversed(evs) if e.get("kind") == "finish"), None)
    if fin:
        return fin.get("status") or "stopped"
    last_t = evs[-1].get("t", 0) if evs else 0
    return "running" if time.time() - (last_t or 0) < STALE_S else "interrupted"


def best_series(nodes: list[dict]) -> list[dict]:
    """Best correct speedup vs eager after each iteration (with its CI), carried forward."""
    out: list[dict] = []
    best = None
    for it in sorted({n["iteration"] for n in nodes if n["iteration"] is not None}):
        for n in nodes:
            if n["iteration"] == it and n["correct"] and n["eager"] and \
                    (best is None or n["eager"]["value"] > best["eager"]["value"]):
                best = n
        if best is not None:
            out.append({"iteration": it, "id": best["id"], **best["eager"]})
    return out


def usage_series(calls: list[dict], start_t: float | None, last_t: float | None) -> dict:
    """Cumulative tokens and cost, one point per LLM call: against seconds since the run started when
    the calls' times fall inside the run (a copied or checked-out run's file times do not), else
    against the call's number."""
    calls = sorted(calls, key=lambda c: (c["t"], c.get("file", "")))
    timed = start_t is not None and last_t is not None and bool(start_t and last_t) \
        and all(start_t - 5 <= c["t"] <= last_t + 30 for c in calls) \
        and len({round(c["t"], 3) for c in calls}) > len(calls) // 2  # a copy gives every file one time
    points, tokens, cost, priced = [], 0, 0.0, False
    for i, c in enumerate(calls if timed else sorted(calls, key=lambda c: c.get("file", ""))):
        u = (c.get("reply") or {}).get("usage") or {}
        tokens += int(u.get("input_tokens") or 0) + int(u.get("output_tokens") or 0)
        if u.get("cost_usd") is not None:
            cost, priced = cost + float(u["cost_usd"]), True
        points.append({"x": c["t"] - start_t if timed else i + 1, "role": c.get("role"), "tokens": tokens,
                       "cost_usd": cost if priced else None})
    return {"axis": "seconds since start" if timed else "LLM call (file times not usable)", "points": points}


def load(run: Path, *, with_state: bool = True) -> dict[str, Any]:
    evs = records.events(run)
    nodes, order = _fold_events(evs)
    _fill_from_records(run, nodes)
    state = records.checkpoint_state(run) if with_state else {}
    root = _fill_from_state(state, nodes)
    summary = read_json(RunDir(run).summary)
    opts = read_json(RunDir(run).options) or {}
    calls = records.llm_calls(run)
    start_t = evs[0].get("t") if evs else None
    node_list = [nodes[c] for c in order]
    return {"kind": "run", "name": run.name, "status": _status(evs, summary), "options": opts,
            "summary": summary if isinstance(summary, dict) else None, "nodes": node_list, "root": root,
            "best": _best_id(summary, node_list), "start_t": start_t, "last_t": evs[-1].get("t") if evs else None,
            "events": evs[-200:], "n_events": len(evs), "best_series": best_series(node_list),
            "usage": usage_series(calls, start_t, _last_t(evs)), "cases": [e for e in evs if e.get("kind") == "case"]}


def _last_t(evs: list[dict]) -> float | None:
    t = evs[-1].get("t") if evs else None
    running = not any(e.get("kind") == "finish" for e in evs[-3:])
    return max(t or 0.0, time.time()) if running and t else t


def _best_id(summary: Any, nodes: list[dict]) -> str | None:
    if isinstance(summary, dict) and (summary.get("best") or {}).get("candidate"):
        return summary["best"]["candidate"]
    scored = [(n["reward"], -i, n["id"]) for i, n in enumerate(nodes) if n["reward"] is not None]
    return max(scored)[2] if scored else None


def brief(run: Path) -> dict[str, Any]:
    """What the runs page shows for one run (no checkpoint, no node details)."""
    view = load(run, with_state=False)
    best = next((n for n in view["nodes"] if n["id"] == view["best"]), None)
    usage = view["usage"]["points"]
    tokens = usage[-1]["tokens"] if usage else 0
    cost = usage[-1]["cost_usd"] if usage else None
    opts = view["options"]
    return {"kind": "run", "name": view["name"], "status": view["status"], "problem": Path(str(opts.get("problem", ""))).name,
            "strategy": opts.get("strategy"), "device": opts.get("device"), "candidates": len(view["nodes"]),
            "correct": bool(best and best["correct"]), "eager": best and best["eager"],
            "compile": best and best["compile"], "tokens": tokens, "cost_usd": cost,
            "start_t": view["start_t"], "last_t": view["last_t"]}
