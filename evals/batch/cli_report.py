"""`kiln report RUN_DIR [RUN_B]`: HTML, Markdown, CSV and JSON for a run, or a two-run comparison."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from kiln.tools.errors import KilnInputError
from kiln.tools.flags import writable


def report(
    run_dir: Annotated[Path, typer.Argument(help="a `kiln eval` run directory")],
    other: Annotated[Path | None, typer.Argument(help="a second run to compare against")] = None,
    out: Annotated[Path | None, typer.Option(help="comparison output folder (default: RUN_B/compare)")] = None,
) -> None:
    """Write the report of a batch run (RUN_DIR/report/), or compare two runs."""
    for run in (run_dir, other):
        if run is not None and not (run / "results.sqlite").is_file():
            raise KilnInputError(f"{run} is not a kiln eval run (no results.sqlite)")
    folder = run_dir / "report" if other is None else out or other / "compare"
    writable(folder, "--out" if out and other is not None else "report folder", folder=True)
    from rich.console import Console

    from kiln.evals.batch.compare import compare, nothing_in_common, render_markdown
    from kiln.evals.batch.report import load_run, metrics_table, write_report

    console = Console()
    if other is None:
        console.print(metrics_table(load_run(run_dir).metrics))  # shown even if writing then fails
        console.print(f"report: {write_report(run_dir)}")
        return
    a, b = load_run(run_dir), load_run(other)
    rows, summary = compare(a, b)
    if not summary["common_problems"]:
        raise KilnInputError(nothing_in_common(a, b, summary))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "compare.md").write_text(render_markdown(a, b, rows, summary))
    (folder / "compare.json").write_text(json.dumps({"summary": summary, "rows": [r.model_dump() for r in rows]},
                                                    indent=2))
    console.print(render_markdown(a, b, rows, summary))
    console.print(f"comparison: {folder}")
