"""Verdicts before and after issue 16's numerics tolerance, from one check per candidate.

One `kiln check` per (problem, candidate), with the numerics rule and every input distribution.
Each trial record also carries the fixed rule's verdict (|a - e| <= atol + rtol |e| against the
native-dtype reference), and the comparison runs every trial of a candidate that fails only one
of the two rules, so one check gives three verdicts:
- after: the check's own (numerics rule, all seven distributions);
- before: the fixed rule over the four distributions kiln drew before (x1, x3, x0.01, neg), with
  its hidden-error rejection (relative L2 error >= 5 %): the pre-issue-16 verdict;
- fixed-all: the fixed rule over all seven distributions (what the wide inputs alone would do).
Candidates come from the built-in Coder (problem files given as arguments: honest kernels), from
a batch run's folder (`--batch RUN`: its candidates, honest when the batch used `--llm builtin`),
or from the kernel corpus (`--manifest`: correct ones honest, wrong ones wrong). It prints a
markdown table and the counts the issue asks for (honest kernels falsely rejected, wrong kernels
caught, before and after), and writes every record under --out.

    python bench/tolerance_verdicts.py --device cuda --out /tmp/tol \\
        third_party/KernelBench/KernelBench/level1/{1,2,19..32,36,40,47,48,49,53,88}_*.py examples/large/*.py \\
        --manifest tests/fixtures/kernels/MANIFEST.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from kiln.tools.records import CheckOptions, CheckRecord

BASIC = ("x1", "x3", "x0.01", "neg")
GROSS_REL_L2 = 0.05  # kiln.tools.check.compare.GROSS_REL_L2: the fixed rule's hidden-error rejection


def generate(problem: Path, out: Path, device: str) -> Path | None:
    """A candidate from the built-in Coder (one shot, as `kiln eval --mode oneshot --llm builtin`)."""
    from kiln.agents.base import CoderTask
    from kiln.agents.registry import resolve_roles
    from kiln.evals.batch.jobs import gpu_facts

    roles = resolve_roles("builtin", device=device)
    task = CoderTask(mode="generate", lang="triton", problem_name=problem.stem, problem_src=problem.read_text(),
                     gpu=gpu_facts(device))
    reply = roles.coder.write(task)
    if not reply.ok or not reply.source:
        return None
    path = out / "candidates" / f"{problem.stem}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(reply.source)
    return path


def batch_pairs(run: Path) -> list[tuple[Path, Path, str]]:
    pairs = []
    for cand in sorted(run.glob("problems/*/sample*/candidate.py")):
        check = cand.parent / "check.json"
        if check.exists():
            pairs.append((Path(json.loads(check.read_text())["problem"]), cand, "honest"))
    return pairs


def manifest_pairs(path: Path, device: str) -> list[tuple[Path, Path, str]]:
    """The corpus's correct (honest) and wrong kernels; GPU-only ones only on a GPU."""
    problems = path.parent.parent / "problems"
    out = [(problems / f"{e['problem']}.py", path.parent / e["path"], "honest" if e["kind"] == "correct" else "wrong")
           for e in json.loads(path.read_text())
           if e["kind"] in ("correct", "wrong") and (device == "cuda" or not e["gpu_only"])]
    return list(dict.fromkeys(out))


def verdicts(rec: CheckRecord) -> dict[str, object]:
    """after / before / fixed-all for one record (None: the check ended before its trials settled)."""
    c = rec.correctness
    trials = c.trials if c else []
    basic = [t for t in trials if t.distribution in BASIC]
    gross = any((t.rel_l2_err or 0.0) >= GROSS_REL_L2 for t in basic)
    complete = bool(c) and len(trials) == c.n_planned  # type: ignore[union-attr]
    before = (False if any(not t.legacy_atol_rtol_passed for t in basic) else
              (not gross if complete else None))
    worst = max((v.max_err_over_tol or 0.0 for t in trials if t.passed for v in t.outputs), default=None)
    after = None if rec.status == "timeout" else rec.status == "ok"  # a timeout is no verdict on the numbers
    return {"after": after, "status": rec.status, "before": before,
            "fixed_all": c.legacy_atol_rtol_passed if c else None, "worst_err_over_tol": worst,
            "dropped": sorted(c.dropped_distributions) if c else [],
            "first_failure": (c.first_failure or "")[:160] if c else "; ".join(rec.reasons)[:160]}


def count(rows: list[dict], expect: str, key: str, value: bool) -> str:
    rs = [r for r in rows if r["expect"] == expect]
    return f"{sum(r[key] is value for r in rs)} of {len(rs)}" + (
        f" ({sum(r[key] is None for r in rs)} unknown)" if any(r[key] is None for r in rs) else "")


def one(i: int, problem: Path, cand: Path, expect: str, device: str, trials: int, out: Path) -> dict:
    """One check (in a pool process), its record written under `out`, its row returned."""
    from kiln.tools.check import check

    t0 = time.monotonic()
    try:
        rec = check(problem, cand, CheckOptions(device=device, trials=trials, time=False))
    except Exception as exc:  # noqa: BLE001 - a problem kiln refuses (too large here, broken) is a row, not the end
        return {"problem": problem.stem, "candidate": cand.name, "expect": expect, "after": None,
                "before": None, "fixed_all": None, "status": "error", "dropped": [],
                "first_failure": f"{type(exc).__name__}: {str(exc).splitlines()[0][-200:]}"}
    (out / f"{i:03d}-{problem.stem}-{cand.stem}.json").write_text(rec.model_dump_json(indent=1))
    return {"problem": problem.stem, "candidate": cand.name, "expect": expect,
            "wall_s": round(time.monotonic() - t0, 1), **verdicts(rec)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problems", nargs="*", type=Path, help="problem files: the built-in Coder writes a candidate")
    ap.add_argument("--batch", type=Path, action="append", default=[], help="a `kiln eval` run folder")
    ap.add_argument("--manifest", type=Path, help="tests/fixtures/kernels/MANIFEST.json")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", action="append", default=[], metavar="FILE",
                    help="of the manifest's kernels, only these file names (repeatable)")
    ap.add_argument("--expect", choices=("honest", "wrong"), help="of the manifest's kernels, only these")
    ap.add_argument("--report", action="store_true", help="print the table of the rows already under --out, run nothing")
    ap.add_argument("--jobs", type=int, default=1, help="checks at once (each in its own process)")
    args = ap.parse_args(argv)
    if args.report:
        print(report(json.loads((args.out / "verdicts.json").read_text())))
        return 0

    args.out.mkdir(parents=True, exist_ok=True)
    pairs: list[tuple[Path, Path, str]] = []
    rows = []
    for problem in args.problems:
        cand = generate(problem, args.out, args.device)
        if cand is None:
            rows.append({"problem": problem.stem, "candidate": "-", "expect": "honest", "after": None, "before": None,
                         "fixed_all": None, "status": "no_code", "dropped": [], "first_failure": "builtin: no code"})
        else:
            pairs.append((problem, cand, "honest"))
    pairs += [p for run in args.batch for p in batch_pairs(run)]  # the problems first: the figure the issue names
    pairs += [p for p in (manifest_pairs(args.manifest, args.device) if args.manifest else [])
              if (not args.only or p[1].name in args.only) and args.expect in (None, p[2])]
    todo = list(enumerate(pairs))
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futs = [pool.submit(one, i, problem, cand, expect, args.device, args.trials, args.out)
                for i, (problem, cand, expect) in todo]
        for fut in as_completed(futs):
            rows.append(fut.result())
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            (args.out / "verdicts.json").write_text(json.dumps(rows, indent=1))  # a cut-off run keeps its rows
    order = {(p.stem, c.name): i for i, (p, c, _) in todo}
    rows.sort(key=lambda r: order.get((r["problem"], r["candidate"]), -1))
    print(report(rows))
    return 0


def report(rows: list[dict]) -> str:
    head = ["| problem | candidate | expect | before (fixed, 4 dists) | after (numerics, 7) | fixed, 7 dists | "
            "worst err/tol | dropped | first failure |", "|" + "---|" * 9]
    body = [f"| {r['problem']} | {r['candidate']} | {r['expect']} | {r['before']} | {r['after']} | {r['fixed_all']} | "
            f"{r.get('worst_err_over_tol') or 0:.3g} | {' '.join(r['dropped'])} | "
            f"{r['first_failure'].replace('|', '/')} |" for r in rows]
    counts = [f"- honest kernels falsely rejected: before {count(rows, 'honest', 'before', False)}, after "
              f"{count(rows, 'honest', 'after', False)}, fixed rule on 7 dists {count(rows, 'honest', 'fixed_all', False)}",
              f"- wrong kernels caught: before {count(rows, 'wrong', 'before', False)}, after "
              f"{count(rows, 'wrong', 'after', False)}"]
    return "\n".join(head + body + [""] + counts)


if __name__ == "__main__":
    raise SystemExit(main())
