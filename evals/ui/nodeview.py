"""One candidate as the node panel shows it: source and diff, check records, mismatches, integrity,
profile, the Judge's decisions, the Proposer's cases, the prompt and reply, a repro command."""

from __future__ import annotations

import difflib
import re
import shlex
from pathlib import Path
from typing import Any

from kiln.evals.ui import records
from kiln.evals.ui.roots import read_json, read_text
from kiln.graphs.rundir import RunDir

_SHAPE = re.compile(r"\(([\d,\s]*)\)")


def shape_of(desc: str | None) -> list[int] | None:
    """'(37, 129)' or 'float32 (37, 129) cpu' -> [37, 129]."""
    m = _SHAPE.search(desc or "")
    if not m:
        return None
    dims = [d.strip() for d in m.group(1).split(",") if d.strip()]
    return [int(d) for d in dims] if dims else []


def diff_lines(old: str | None, new: str | None) -> list[list[str]]:
    if not old or not new:
        return []
    out = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), "parent", "this", lineterm="", n=3):
        kind = "add" if line.startswith("+") else "del" if line.startswith("-") else \
            "hunk" if line.startswith("@@") else "ctx"
        out.append([kind, line])
    return out


def mismatches(rec: dict | None) -> list[dict]:
    """Failing trials with their mismatch positions (the check record keeps the first few per trial)."""
    out = []
    for t in ((rec or {}).get("correctness") or {}).get("trials") or []:
        if t.get("passed"):
            continue
        mm = t.get("mismatch") or {}
        out.append({"case": t.get("case"), "distribution": t.get("distribution"), "trial": t.get("trial"),
                    "phase": t.get("phase"), "error": t.get("error"), "output": mm.get("output"),
                    "reason": mm.get("reason"), "n_mismatch": mm.get("n_mismatch"), "n_total": mm.get("n_total"),
                    "max_abs_err": mm.get("max_abs_err"), "shape": shape_of(mm.get("expected_desc")),
                    "first": mm.get("first") or [], "message": mm.get("message")})
    return out


def _checks(run: Path, cid: str, evs: list[dict]) -> list[dict]:
    """Every check of this candidate, oldest first, with the stress cases it ran."""
    case_lists = [e.get("cases") or [] for e in evs if e.get("kind") in ("check", "check_cached") and e.get("id") == cid]
    out = []
    for i, path in enumerate(records.check_files(run, cid)):
        rec = read_json(path)
        if isinstance(rec, dict):
            out.append({"file": path.name, "cases": case_lists[i] if i < len(case_lists) else [], "record": rec,
                        "seed": None if rec.get("seed") is None else str(rec["seed"])})  # 64-bit: text for JS
    return out


def repro(run: Path, opts: dict, cid: str, check: dict | None) -> str | None:
    if not check:
        return None
    rec = check["record"]
    cmd = ["kiln", "check", str(opts.get("problem", "PROBLEM")), str(RunDir(run).kernel(cid))]
    if rec.get("seed") is not None:
        cmd += ["--seed", str(rec["seed"])]
    for case in check["cases"]:
        cmd += ["--case", str(run / "cases" / f"{case}.py")]
    cmd += ["--device", "cpu" if str(rec.get("device", "cpu")).startswith("cpu") else "cuda"]
    return " ".join(shlex.quote(c) for c in cmd)


def _judge(calls: list[dict], src: str | None, cid: str, evs: list[dict], state: dict) -> dict:
    asked = [{"file": c["file"], "decision": c.get("reply"), "check_status": ((c.get("request") or {}).get("check")
              or {}).get("status"), "prompt": c.get("prompt")}
             for c in calls if c.get("role") == "judge" and src and (c.get("request") or {}).get("candidate_src") == src]
    final = [{"key": k, **d.model_dump(mode="json")} for k, d in (state.get("decisions") or {}).items()
             if k.split("|")[0] == cid]
    routes = [e for e in evs if e.get("kind") == "route" and e.get("candidate") == cid]
    return {"asked": asked, "final": final, "routes": routes}


def _proposer(calls: list[dict], src: str | None, evs: list[dict]) -> list[dict]:
    verdict = {e.get("name"): e for e in evs if e.get("kind") == "case"}
    out = []
    for c in calls:
        if c.get("role") != "proposer" or not src or (c.get("request") or {}).get("candidate_src") != src:
            continue
        reply = c.get("reply") or {}
        for case in reply.get("cases") or []:
            v = verdict.get(case.get("name"), {})
            out.append({"name": case.get("name"), "rationale": case.get("rationale"), "source": case.get("source"),
                        "valid": v.get("valid"), "reason": v.get("reason")})
        out += [{"name": r, "valid": False, "reason": "refused by the Proposer's own checks"} for r in reply.get("rejected") or []]
    return out


def _coder(run: Path, call: dict) -> dict:
    reply = call.get("reply") or {}
    req = {k: v for k, v in (call.get("request") or {}).items() if k not in ("problem_src", "best_src", "last_src")}
    raw_file = RunDir(run).llm / call["file"].replace(".json", "_reply.md") if call.get("file") else None
    return {"file": call.get("file"), "prompt": call.get("prompt"), "request": req,
            "raw": read_text(raw_file) if raw_file else None, "notes": reply.get("notes"), "usage": reply.get("usage"),
            "error": reply.get("error")}


def load(run: Path, cid: str) -> dict[str, Any] | None:
    evs = records.events(run)
    made = [e for e in evs if e.get("kind") == "candidate"]
    ev = next((e for e in made if e.get("id") == cid), None)
    if ev is None:
        return None
    src = read_text(RunDir(run).kernel(cid))
    parent = ev.get("parent")
    parent_src = read_text(RunDir(run).kernel(parent)) if parent else None
    checks = _checks(run, cid, evs)
    latest = checks[-1]["record"] if checks else None
    calls = records.llm_calls(run)
    coder = records.coder_call_for(run, calls, [e["id"] for e in made]).get(cid, {})
    state = records.checkpoint_state(run)
    opts = read_json(RunDir(run).options) or {}
    profile_ev = next((e for e in reversed(evs) if e.get("kind") == "profile" and e.get("id") == cid), None)
    return {"id": cid, "parent": parent, "mode": ev.get("mode"), "error": ev.get("error"), "source": src,
            "diff": diff_lines(parent_src, src), "checks": checks, "mismatches": mismatches(latest),
            "profile": {"digest": read_text(RunDir(run).candidate(cid) / "profile.txt"),
                        "report": read_json(RunDir(run).candidate(cid) / "profile.json"),
                        "skipped": (profile_ev or {}).get("skipped")},
            "judge": _judge(calls, src, cid, evs, state), "proposer": _proposer(calls, src, evs),
            "coder": _coder(run, coder) if coder else None, "repro": repro(run, opts, cid, checks[-1] if checks else None)}
