"""Reports of a batch run: self-contained HTML, Markdown, CSV and JSON; and a two-run comparison.

Collect (read the run's store) -> rows (pure) -> render (pure). The HTML needs no network: CSS and
SVG plots are inline.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape
from pydantic import BaseModel, ConfigDict
from rich.table import Table

from kiln.evals import plots
from kiln.evals.batch.jobs import why_no_kernel
from kiln.evals.batch.metrics import BASELINES, FAST_P, summarize
from kiln.evals.batch.run import group
from kiln.evals.batch.store import ResultStore
from kiln.tools.errors import KilnInputError
from kiln.tools.records import JSON_SAFE, CheckRecord, EnvRecord

TEMPLATES = Path(__file__).parent / "templates"


class ProblemRow(BaseModel):
    model_config = JSON_SAFE

    problem: str
    status: str
    correct: bool
    samples: int
    speedup_eager: float | None = None
    ci_eager: tuple[float, float] | None = None
    speedup_compile: float | None = None
    verdict: str | None = None
    reasons: str = ""
    best_path: str | None = None
    record_path: str | None = None


class RunData(BaseModel):
    model_config = ConfigDict(**JSON_SAFE, arbitrary_types_allowed=True)

    run_dir: Path
    config: dict
    metrics: dict
    rows: list[ProblemRow]
    env: EnvRecord | None = None


def _best_record(records: list[CheckRecord]) -> CheckRecord | None:
    """The sample's best: correct and fastest first, then the furthest along."""
    order = {"ok": 0, "rejected": 1, "incorrect": 2, "timeout": 3, "crashed": 4, "compile_error": 5}

    def key(r: CheckRecord) -> tuple:
        return (not r.correct, -(r.speedup_vs_eager or 0.0), order.get(r.status, 9))

    return min(records, key=key) if records else None


def _row(problem: str, status: str, samples: int, rec: CheckRecord | None, best_path: str | None,
         record_path: str | None, why: str = "") -> ProblemRow:
    sp = rec.timing.speedups.get("eager") if rec and rec.timing and rec.timing.measured else None
    return ProblemRow(problem=problem, status=rec.status if rec else status, correct=bool(rec and rec.correct),
                      samples=samples, speedup_eager=sp.value if sp else None,
                      ci_eager=(sp.ci_low, sp.ci_high) if sp else None,
                      speedup_compile=rec.speedup_vs_compile if rec else None,
                      verdict=sp.verdict if sp else None, reasons="; ".join(rec.reasons[:2]) if rec else why,
                      best_path=best_path, record_path=record_path)


def load_run(run_dir: Path) -> RunData:
    db = run_dir / "results.sqlite"
    if not db.exists():
        raise KilnInputError(f"{run_dir} is not a kiln eval run (no results.sqlite)")
    store = ResultStore(db)
    try:
        cfg = store.get_meta("config") or {}  # as stored: older batches hold older shapes of it
        outcomes = store.outcomes()
        timed = any(o.speedups for o in outcomes)
        metrics_path = run_dir / "metrics.json"
        metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else \
            summarize(group(outcomes), timed=timed)
        metrics.setdefault("stopped", None)
        rows, env = _rows(run_dir, store, outcomes)
        stored = store.get_meta("env")
        env = env or (EnvRecord.model_validate(stored) if isinstance(stored, dict) else None)
    finally:
        store.close()
    return RunData(run_dir=run_dir, config=cfg if isinstance(cfg, dict) else {}, metrics=metrics, rows=rows, env=env)


def _rows(run_dir: Path, store: ResultStore, outcomes: list) -> tuple[list[ProblemRow], EnvRecord | None]:
    best_paths = store.best_paths()
    records_dir = run_dir / "report" / "records"
    records_dir.mkdir(parents=True, exist_ok=True)
    by_problem: dict[str, list[CheckRecord]] = {}
    env = None
    for prob, _sample, _cand, rec, _src in store.candidates():
        by_problem.setdefault(prob, []).append(rec)
        env = env or (rec.timing.env if rec.timing and rec.timing.env else rec.env)
    rows = []
    for p in group(outcomes):
        best = _best_record(by_problem.get(p.problem, []))
        rec_path = None
        if best is not None:
            rec_file = records_dir / (p.problem.replace("/", "__") + ".json")
            rec_file.write_text(best.model_dump_json(indent=2))
            rec_path = str(rec_file)
        path = next((best_paths.get((p.problem, s.sample)) for s in p.samples
                     if best_paths.get((p.problem, s.sample))), None)
        why = "; ".join(dict.fromkeys(w for s in p.samples if (w := why_no_kernel(run_dir, s))))
        rows.append(_row(p.problem, p.samples[0].status, p.n, best, path, rec_path, why))
    return rows, env


def _fmt(v: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "—" if v is None else f"{v:{spec}}{suffix}"


def metrics_table(metrics: dict) -> Table:
    table = Table(title="kiln eval", show_lines=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("problems", str(metrics["n_problems"]))
    table.add_row("compile rate", _fmt(metrics["compile_rate"], ".1%"))
    table.add_row("correct rate", _fmt(metrics["correct_rate"], ".1%"))
    for k, v in metrics["pass_at_k"].items():
        table.add_row(f"pass@{k}", _fmt(v, ".3f"))
    for b in BASELINES:
        fp = metrics["fast_p"][b]
        table.add_row(f"fast_1 / fast_0 vs {b}", f"{_fmt(fp['1.0'], '.2f')} / {_fmt(fp['0.0'], '.2f')}")
        table.add_row(f"geomean speedup vs {b}", _fmt(metrics["geomean_speedup"][b], ".3f", "x"))
    table.add_row("degenerate problems", str(metrics["degenerate_problems"]))
    cost = metrics["cost"]
    table.add_row("tokens / cost", f"{cost['tokens']} / {_fmt(cost['cost_usd'], '.2f', ' $')}")
    return table


def breakable(name: str) -> Markup:
    """A problem name that may wrap after its underscores (`50_conv_standard_2D__square_input...`)."""
    return Markup(str(escape(name)).replace("_", "_<wbr>"))


def _rel(path: str | None, base: Path) -> str | None:
    return None if path is None else os.path.relpath(path, base)


def render_html(run: RunData) -> str:
    m = run.metrics
    speeds = [r.speedup_eager for r in run.rows if r.correct and r.speedup_eager]
    curves = {b: [(p, m["fast_p"][b][str(p)]) for p in FAST_P] for b in BASELINES
              if m["fast_p"][b][str(FAST_P[0])] is not None}
    failures = {k: v for k, v in m["status_counts"].items() if k != "ok"}
    failures.update({f"rejected: {k}": round(v * m["n_samples"]) for k, v in m["rejection_rate"].items()})
    env = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined, autoescape=True)
    base = run.run_dir / "report"
    rows = [r.model_copy(update={"best_path": _rel(r.best_path, base), "record_path": _rel(r.record_path, base)})
            for r in run.rows]
    return env.get_template("report.html.j2").render(
        run=run, m=m, rows=rows, env=run.env, env_note=env_note(run), fmt=_fmt, breakable=breakable, baselines=BASELINES,
        hist=plots.speedup_histogram(speeds, "speedup vs eager"), curves=plots.fast_p_curves(curves),
        failures=plots.bar_chart(failures, "failures"))


def env_note(run: RunData) -> str:
    """What the Environment section says when no record holds one."""
    if not any(r.record_path for r in run.rows):
        return "No environment recorded (no candidate was checked)."
    return ("No environment recorded: these checks ran on a CPU, whose check records hold none, and this batch "
            "predates batches recording it at start.")


def render_markdown(run: RunData) -> str:
    m = run.metrics
    lines = [f"# kiln eval: {run.run_dir.name}", "", f"- mode: {run.config.get('mode')}, problems: {m['n_problems']}",
             f"- correct rate: {_fmt(m['correct_rate'], '.1%')}, compile rate: {_fmt(m['compile_rate'], '.1%')}"]
    for b in BASELINES:
        fp = m["fast_p"][b]
        lines.append(f"- vs {b}: fast_0 {_fmt(fp['0.0'])}, fast_1 {_fmt(fp['1.0'])}, "
                     f"geomean {_fmt(m['geomean_speedup'][b], '.3f', 'x')}")
    lines += ["", "| problem | status | speedup vs eager | 95% CI | verdict | reasons |", "|---|---|---|---|---|---|"]
    for r in run.rows:
        ci = f"{r.ci_eager[0]:.2f}–{r.ci_eager[1]:.2f}" if r.ci_eager else "—"
        why = " ".join(r.reasons.split()).replace("|", "\\|") or "—"
        lines.append(f"| {r.problem} | {r.status} | {_fmt(r.speedup_eager, '.2f', 'x')} | {ci} | {r.verdict or '—'} "
                     f"| {why} |")
    return "\n".join(lines) + "\n"


def render_csv(run: RunData) -> str:
    buf = io.StringIO()
    fields = ["problem", "status", "correct", "samples", "speedup_eager", "speedup_compile", "verdict", "reasons"]
    writer = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore")
    writer.writeheader()
    for r in run.rows:
        writer.writerow(r.model_dump())
    return buf.getvalue()


def write_report(run_dir: Path) -> Path:
    run = load_run(run_dir)
    out = run_dir / "report"
    out.mkdir(exist_ok=True)
    (out / "index.html").write_text(render_html(run))
    (out / "summary.md").write_text(render_markdown(run))
    (out / "problems.csv").write_text(render_csv(run))
    (out / "metrics.json").write_text(json.dumps(run.metrics, indent=2))
    return out / "index.html"
