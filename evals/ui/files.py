"""Which files `kiln ui`'s file viewer may show: only those a run's or a batch's own records name,
never whatever else lies in the served folders (a `secret.txt`, an `.env`, a dataset).

- In a run directory (`run.json`): its own records (run.json, summary.json, events.jsonl,
  rewards.jsonl, best_kernel.py, README.md); `candidates/<id>/` kernels, check records and rewards
  of a candidate its events name; `checks/<key>.json` of a check its events name; `cases/<name>.py`
  of a case its events name; the LLM call logs `llm/NNNN_<role>.json` and their `_reply.md`.
- In a batch (`results.sqlite`): `metrics.json`, `errors.log`, the report's text files, and each
  stored problem's one-shot files (`problems/<key>/sample<n>/candidate.py`, check.json, reply.md,
  error.txt); an agent sample's run is a run directory, judged as above.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path, PurePosixPath

from kiln.evals.ui import records
from kiln.evals.ui.roots import Roots

RUN_FILES = {"run.json", "summary.json", "events.jsonl", "rewards.jsonl", "best_kernel.py", "README.md"}
CANDIDATE_FILE = re.compile(r"^(kernel\.py|check(_\d+)?\.json|reward\.json)$")
LLM_FILE = re.compile(r"^\d{4}_(coder|judge|proposer)(\.json|_reply\.md)$")
BATCH_FILES = {"metrics.json", "errors.log", "report/summary.md", "report/problems.csv", "report/metrics.json"}
JOB_FILE = re.compile(r"^problems/([^/]+)/sample\d+/(candidate\.py|check\.json|reply\.md|error\.txt)$")


def _owner(roots: Roots, path: Path) -> tuple[str, Path] | None:
    """The nearest run or batch folder holding `path`, inside the served roots."""
    for folder in path.parents:
        if not any(folder == r or r in folder.parents for r in roots.folders):
            return None
        if (folder / "run.json").is_file():
            return "run", folder
        if (folder / "results.sqlite").is_file():
            return "batch", folder
    return None


def _named_in_run(run: Path, parts: tuple[str, ...]) -> bool:
    if len(parts) == 1:
        return parts[0] in RUN_FILES
    if len(parts) == 2 and parts[0] == "llm":
        return bool(LLM_FILE.match(parts[1]))
    evs = records.events(run)
    if len(parts) == 3 and parts[0] == "candidates" and CANDIDATE_FILE.match(parts[2]):
        return any(e.get("kind") == "candidate" and e.get("id") == parts[1] for e in evs)
    if len(parts) == 2 and parts[0] == "checks" and parts[1].endswith(".json"):
        return any(e.get("kind") in ("check", "check_cached") and e.get("key") == parts[1][:-5] for e in evs)
    if len(parts) == 2 and parts[0] == "cases" and parts[1].endswith(".py"):
        return any(e.get("kind") == "case" and e.get("name") == parts[1][:-3] for e in evs)
    return False


def _batch_keys(batch: Path) -> set[str]:
    conn = sqlite3.connect(f"{(batch / 'results.sqlite').resolve().as_uri()}?mode=ro", uri=True, timeout=5)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'problems'").fetchone()
        stored = {r[0] for r in conn.execute("SELECT DISTINCT problem FROM samples")}
    finally:
        conn.close()
    listed = {p.get("key") for p in json.loads(row[0])} if row else set()
    return {str(k).replace("/", "__") for k in (listed | stored) if k}


def _named_in_batch(batch: Path, rel: str) -> bool:
    if rel in BATCH_FILES:
        return True
    match = JOB_FILE.match(rel)
    return match is not None and match[1] in _batch_keys(batch)


def is_recorded(roots: Roots, path: Path) -> bool:
    """True only for a file some run's or batch's records name (see the module docstring)."""
    owner = _owner(roots, path)
    if owner is None or not path.is_file():
        return False
    kind, folder = owner
    rel = PurePosixPath(path.relative_to(folder).as_posix())
    return _named_in_run(folder, rel.parts) if kind == "run" else _named_in_batch(folder, str(rel))
