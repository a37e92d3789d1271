"""One batch as the batch page draws it: progress, `metrics.json` figures, one row per problem,
failure modes. The store is opened read-only; per-problem speedups come out of the stored records
through SQLite's json_extract, so a 250-problem batch never parses thousands of records in Python."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from kiln.evals.batch.jobs import run_of, why_no_kernel
from kiln.evals.batch.metrics import SampleOutcome, summarize
from kiln.evals.batch.run import group
from kiln.evals.ui import records, runview
from kiln.evals.ui.discover import mtime
from kiln.evals.ui.roots import Roots, read_json

_FIELDS = {"eager": "$.timing.speedups.eager", "compile": "$.timing.speedups.compile"}
_CANDIDATES = (
    "SELECT problem, sample, candidate, status, correct, source_path, json_extract(record, '$.timing.measured'), "
    + ", ".join(f"json_extract(record, '{p}.{k}')" for p in _FIELDS.values() for k in ("value", "ci_low", "ci_high"))
    + ", json_extract(record, '$.reasons') FROM candidates"
)
_ORDER = {"ok": 0, "rejected": 1, "incorrect": 2, "timeout": 3, "crashed": 4, "compile_error": 5}


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)


def _read(db: Path) -> tuple[dict, list[tuple], list[tuple]]:
    conn = _connect(db)
    try:
        meta = {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM meta")}
        samples = conn.execute("SELECT problem, sample, outcome, best_path, created_at FROM samples").fetchall()
        cands = conn.execute(_CANDIDATES).fetchall()
    finally:
        conn.close()
    return meta, samples, cands


def _sp(value: Any, low: Any, high: Any) -> dict | None:
    return None if value is None else {"value": value, "ci_low": low, "ci_high": high}


def _best_candidates(cands: list[tuple]) -> dict[str, dict]:
    """Per problem, its best candidate: correct and fastest first, then the furthest along."""
    best: dict[str, tuple] = {}
    for row in cands:
        problem, _s, _c, status, correct, _src, measured, ev, el, eh, cv, cl, ch, reasons = row
        item = {"status": status, "correct": bool(correct), "eager": _sp(ev, el, eh) if measured else None,
                "compile": _sp(cv, cl, ch) if measured else None, "reasons": json.loads(reasons or "[]")[:2]}
        key = (not correct, -(ev or 0.0) if measured else 0.0, _ORDER.get(status, 9))
        if problem not in best or key < best[problem][0]:
            best[problem] = (key, item)
    return {p: v[1] for p, v in best.items()}


def settings(cfg: dict) -> dict[str, Any]:
    """What the batch was asked, flat, as its page shows it: from today's config (the loop's options
    nested under `loop`) or an older store's flat one. A setting not stored is None, never guessed."""
    loop: dict[str, Any] = cfg["loop"] if isinstance(cfg.get("loop"), dict) else cfg
    roles, budgets, check = (loop[k] if isinstance(loop.get(k), dict) else {} for k in ("roles", "budgets", "check"))
    per_role = {r: roles.get(f"{r}_llm") for r in ("coder", "judge", "proposer") if roles.get(f"{r}_llm")}
    llm = roles.get("llm") or loop.get("llm") or loop.get("coder_llm") or ("builtin" if not per_role else None)
    llms = ", ".join([*([llm] if llm else []), *(f"{r} {v}" for r, v in per_role.items())])
    return {"mode": cfg.get("mode"), "samples": cfg.get("samples"), "llm": llms, "strategy": loop.get("strategy"),
            "lang": loop.get("lang"), "device": loop.get("device"), "dtype": check.get("dtype") or loop.get("dtype"),
            "max_iters": budgets.get("max_iters") or loop.get("max_iters")}


def _job_dir(batch: Path, problem: str, sample: int) -> Path:
    return batch / "problems" / problem.replace("/", "__") / f"sample{sample}"


def _links(batch: str, batch_id: str, problem: str, samples: list[int]) -> dict:
    """Where a problem's work is on disk: its runs (agent mode) or its one-shot files. Plain strings:
    this runs once per problem on every refresh of a 250-problem page."""
    runs, files = [], {}
    for s in samples:
        rel = f"problems/{problem.replace('/', '__')}/sample{s}"
        if os.path.isfile(f"{batch}/{rel}/run/run.json"):
            runs.append(f"{batch_id}/{rel}/run")
        for name in ("candidate.py", "check.json", "reply.md", "error.txt"):
            if name not in files and os.path.isfile(f"{batch}/{rel}/{name}"):
                files[name] = f"{batch_id}/{rel}/{name}"
    return {"runs": runs, "files": files}


def _rows(roots: Roots, batch: Path, outcomes: list[SampleOutcome], cands: list[tuple]) -> list[dict]:
    best = _best_candidates(cands)
    batch_id = roots.id_of(batch).removesuffix("/.")
    rows = []
    for p in group(outcomes):
        b = best.get(p.problem, {})
        why = list(dict.fromkeys(w for s in p.samples if (w := why_no_kernel(batch, s))))
        rows.append({"problem": p.problem, "status": b.get("status") or p.samples[0].status,
                     "correct": p.n_correct > 0, "samples": p.n, "n_correct": p.n_correct,
                     "eager": b.get("eager"), "compile": b.get("compile"), "reasons": b.get("reasons") or why,
                     "tokens": sum(s.tokens for s in p.samples),
                     "cost_usd": sum(s.cost_usd for s in p.samples if s.cost_usd is not None)
                     if any(s.cost_usd is not None for s in p.samples) else None,
                     "wall_s": sum(s.wall_s for s in p.samples), "rejected": sorted({r for s in p.samples for r in s.rejected_rules}),
                     **_links(str(batch), batch_id, p.problem, [s.sample for s in p.samples])})
    return rows


def _running(roots: Roots, batch: Path, meta: dict, done: set[tuple[str, int]]) -> list[dict]:
    """Jobs started and not finished: a run folder (agent) or a job folder (one-shot) without a result."""
    samples = int((meta.get("config") or {}).get("samples") or 1)
    out = []
    for prob in meta.get("problems") or []:
        key = prob.get("key") if isinstance(prob, dict) else None
        for s in range(samples):
            if not key or (key, s) in done:
                continue
            job = _job_dir(batch, str(key), s)
            if not job.is_dir():
                continue
            out.append({"problem": key, "sample": s, **_live_job(roots, job)})
    return out


def _live_job(roots: Roots, job: Path) -> dict:
    run = run_of(job).root
    if not run_of(job).options.is_file():
        return {"run": None, "stage": "one-shot", "gpu": None, "last_t": mtime(job)}
    evs = records.events(run)
    gpu = None
    for ev in reversed(evs):
        if ev.get("kind") == "check" and ev.get("id"):
            rec = records.last_check(run, ev["id"]) or {}
            gpu = ((rec.get("timing") or {}).get("env") or rec.get("env") or {}).get("gpu_index")
            break
    last = evs[-1] if evs else {}
    return {"run": roots.id_of(run), "stage": last.get("kind"), "gpu": gpu, "last_t": last.get("t")}


def _progress(meta: dict, samples: list[tuple], running: list[dict], batch: Path) -> dict:
    n_expected = int(meta.get("n_expected") or 0)
    done = len(samples)
    starts = [created - (json.loads(outcome).get("wall_s") or 0) for _p, _s, outcome, _b, created in samples]
    first = min(starts) if starts else None
    last = max((s[4] for s in samples), default=None)
    now = time.time()
    active = any(now - (r.get("last_t") or 0) < runview.STALE_S for r in running) or \
        now - mtime(batch / "results.sqlite-wal") < runview.STALE_S and done < n_expected
    eta = None
    if active and first and done and n_expected > done:
        eta = (now - first) / done * (n_expected - done)
    by_gpu: dict[str, int] = {}
    for r in running:
        slot = "unknown" if r["gpu"] is None else str(r["gpu"])
        by_gpu[slot] = by_gpu.get(slot, 0) + 1
    status = "done" if n_expected and done >= n_expected else "running" if active else "stopped"
    return {"status": status, "n_expected": n_expected, "done": done, "running": len(running),
            "queued": max(0, n_expected - done - len(running)), "eta_s": eta, "by_gpu": by_gpu,
            "first_t": first, "last_t": last}


def load(roots: Roots, batch: Path) -> dict[str, Any]:
    meta, samples, cands = _read(batch / "results.sqlite")
    outcomes = [SampleOutcome.model_validate_json(s[2]) for s in samples]
    metrics = read_json(batch / "metrics.json")
    if not isinstance(metrics, dict):
        metrics = summarize(group(outcomes), timed=any(o.speedups for o in outcomes))
    running = _running(roots, batch, meta, {(s[0], s[1]) for s in samples})
    rows = _rows(roots, batch, outcomes, cands)
    return {"kind": "batch", "name": batch.name, "config": meta.get("config") or {},
            "settings": settings(meta.get("config") or {}), "metrics": metrics,
            "progress": _progress(meta, samples, running, batch), "running": running, "rows": rows}


def brief(roots: Roots, batch: Path) -> dict[str, Any]:
    meta, samples, _c = _read(batch / "results.sqlite")
    outcomes = [SampleOutcome.model_validate_json(s[2]) for s in samples]
    running = _running(roots, batch, meta, {(s[0], s[1]) for s in samples})
    prog = _progress(meta, samples, running, batch)
    problems = group(outcomes)
    cfg = settings(meta.get("config") or {})
    return {"kind": "batch", "name": batch.name, "status": prog["status"], "problem": f"{prog['done']}/{prog['n_expected']} samples",
            "strategy": " ".join(str(v) for v in (cfg["mode"], cfg["strategy"]) if v), "device": cfg["device"],
            "candidates": len(problems), "correct": sum(p.n_correct > 0 for p in problems),
            "eager": _geo(problems, "eager"), "compile": _geo(problems, "compile"),
            "tokens": sum(o.tokens for o in outcomes),
            "cost_usd": sum(o.cost_usd for o in outcomes if o.cost_usd is not None) if any(o.cost_usd is not None for o in outcomes) else None,
            "start_t": prog["first_t"], "last_t": prog["last_t"]}


def _geo(problems: list, baseline: str) -> dict | None:
    from kiln.evals.batch.metrics import geomean

    g = geomean(v for p in problems if (v := p.best_speedup(baseline)) is not None)
    return None if g is None else {"value": g, "ci_low": None, "ci_high": None, "geomean": True}
