"""`kiln ui` figures: time to first paint of a 250-problem batch page, and live-update latency from an
event written to `events.jsonl` to the run page showing it.

    .venv/bin/python bench/ui_bench.py [--problems 250] [--repeats 10] [--out /tmp/ui-bench]

The batch is synthesised from the recorded run's real check records (tests/fixtures/ui) through the
real ResultStore, one copy of the run per problem (tests/ui/ui_helpers.py: synth_batch), and served by a
real `kiln ui` process; Debian's Chromium, driven by Playwright, loads the page. Paint, in a fresh browser
context each time (nothing cached): Chromium's first contentful paint, and navigation start to the
frame after the page has drawn all of its rows (`data-painted`).
Latency: a `candidate` event appended to a run's events.jsonl (Python's clock) to the page's
MutationObserver seeing the new tree node (the page's clock; same machine).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "ui"))  # the test helpers

from ui_helpers import FIXTURE_RUN, serve, synth_batch  # noqa: E402

WATCH = """() => { window.__seen = {}; new MutationObserver(() => {
  const n = document.querySelector('svg.tree'); if (n && !window.__seen[n.dataset.nodes]) window.__seen[n.dataset.nodes] = Date.now();
}).observe(document.getElementById('tree'), {childList: true, subtree: true, attributes: true}); }"""


def paint(page, url: str) -> tuple[float, float]:
    page.goto(url)
    page.wait_for_selector("body[data-painted]")
    done = float(page.get_attribute("body", "data-painted"))
    fcp = page.evaluate("performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null")
    return done / 1000, (fcp or 0) / 1000


def latency(page, url: str, run: Path, repeats: int) -> list[float]:
    page.goto(url)
    page.wait_for_selector("body[data-rendered]")
    page.evaluate(WATCH)
    out = []
    n = int(page.get_attribute("svg.tree", "data-nodes"))
    for i in range(repeats):
        cid = f"c{100 + i:04d}"
        time.sleep(0.7)  # events of a real run are seconds apart
        t = time.time()
        with (run / "events.jsonl").open("a") as fh:
            fh.write(json.dumps({"t": t, "kind": "candidate", "id": cid, "mode": "optimize", "parent": "c0008",
                                 "ok": True, "error": None}) + "\n")
        n += 1
        seen = None
        deadline = time.monotonic() + 10
        while seen is None and time.monotonic() < deadline:  # the page's CSP forbids wait_for_function's eval
            seen = page.evaluate("(n) => window.__seen[n] ?? null", str(n))
            time.sleep(0.01)
        out.append(seen / 1000 - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", type=int, default=250)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", type=Path, default=Path("/tmp/ui-bench"))
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    synth_batch(args.out / "batch", args.problems)
    shutil.copytree(FIXTURE_RUN, args.out / "live-run")
    from playwright.sync_api import sync_playwright

    with serve([args.out]) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        paint(page, url + "/batch/0/batch")  # the server's first request imports and caches once
        cold = []
        for _ in range(args.repeats):  # a fresh browser context each time: nothing cached
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
            cold.append(paint(ctx.new_page(), url + "/batch/0/batch"))
            ctx.close()
        lat = latency(page, url + "/run/0/live-run", args.out / "live-run", args.repeats)
        browser.close()
    def stats(values: list[float]) -> dict:
        return {"median": round(statistics.median(values), 3), "max": round(max(values), 3)}

    print(json.dumps({"problems": args.problems,
                      "cold": {"first_contentful_paint_s": stats([p[1] for p in cold]),
                               "all_rows_painted_s": stats([p[0] for p in cold])},
                      "live_latency_s": stats(lat)}, indent=2))


if __name__ == "__main__":
    main()
