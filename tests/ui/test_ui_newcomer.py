"""What a newcomer's batch looked like (issue 26, items 5, 8-10, 12), in the real headless Chromium:
a CPU batch under real KernelBench names, written by the real Batch and store, shown by a real
`kiln ui` and by `kiln report`'s HTML. Screenshots go to tests/ui/artifacts/ (git-ignored)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ui_helpers import ARTIFACTS, FIXTURE_RUN, KERNELBENCH_ROWS, get, kernelbench_batch, serve

pytestmark = pytest.mark.xdist_group("ui")
UNSUPPORTED = {key: why for key, cid, why in KERNELBENCH_ROWS if why}
WIDTH = 1280


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("newcomer")
    kernelbench_batch(base / "kb-cpu")
    stopped = base / "stopped-run"
    shutil.copytree(FIXTURE_RUN, stopped)
    (stopped / "summary.json").unlink()  # as a run cut by Ctrl-C left it before: no summary at all
    from kiln.graphs.runner import mark_stopped

    mark_stopped(stopped)  # what the Ctrl-C path writes now (tests/graphs/test_ctrl_c.py drives it for real)
    (base / "secret.txt").write_text("not a record\n")
    (base / "kb-cpu" / "secret.txt").write_text("not a record\n")
    (stopped / "secret.txt").write_text("not a record\n")
    (stopped / "candidates" / "c0001" / "notes.txt").write_text("not a record\n")
    with serve([base]) as url:
        yield url, base


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("headless Chromium is required for the UI tests: apt-get install chromium (make test does)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=path, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    pg = browser.new_page(viewport={"width": WIDTH, "height": 900})
    pg.errors = []
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    yield pg
    pg.close()


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _layout(page, rows: str, reasons: str) -> dict:
    """Row heights, how far the page and the table reach sideways, where the reason lines end."""
    return page.evaluate("""([rows, reasons]) => ({
        heights: [...document.querySelectorAll(rows)].map((r) => r.getBoundingClientRect().height),
        page: document.documentElement.scrollWidth,
        wraps: [...document.querySelectorAll(".table-wrap")].map((w) => w.scrollWidth - w.clientWidth),
        right: Math.max(0, ...[...document.querySelectorAll(reasons)].map((r) => r.getBoundingClientRect().right)),
        reasons: [...document.querySelectorAll(reasons)].map((r) => r.innerText),
    })""", [rows, reasons])


def test_batch_page_settings_reasons_and_layout(site, page) -> None:
    url, _ = site
    page.goto(url + "/batch/0/kb-cpu")
    page.wait_for_selector("body[data-rendered]")
    _shot(page, "newcomer-batch")
    settings = page.inner_text("#settings")
    assert "undefined" not in page.inner_text("#head") and "null" not in settings
    assert settings == "agent mode · 1 sample(s) per problem · builtin · linear · triton · cpu · fp32 · up to 3 iterations"
    box = _layout(page, "#problems tbody tr.row", "#problems tr.detail td")
    assert len(box["heights"]) == len(KERNELBENCH_ROWS)
    assert max(box["heights"]) < 60, box["heights"]  # no row grows into a tall blank block
    assert box["page"] <= WIDTH and max(box["wraps"]) <= 0 and box["right"] <= WIDTH, box
    text = " ".join(box["reasons"])
    assert all(why in text for why in UNSUPPORTED.values())  # the unsupported reasons are shown
    assert "timed out in stage compile" in text and not page.errors


def test_stopped_run_shows_stopped(site, page) -> None:
    url, _ = site
    page.goto(url + "/")
    page.wait_for_selector("body[data-rendered]")
    row = page.locator("#runs tbody tr", has=page.locator('a[href="/run/0/stopped-run"]'))
    assert "stopped" in row.inner_text() and "running" not in row.inner_text()
    page.goto(url + "/run/0/stopped-run")
    page.wait_for_selector("body[data-rendered]")
    _shot(page, "newcomer-stopped-run")
    assert "stopped" in page.inner_text("body")


def test_report_html_in_chromium(site, page) -> None:
    _, base = site
    done = subprocess.run([str(Path(sys.executable).parent / "kiln"), "report", str(base / "kb-cpu")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    page.goto((base / "kb-cpu" / "report" / "index.html").as_uri())
    page.wait_for_selector("body[data-rendered]")
    _shot(page, "newcomer-report")
    assert page.get_attribute("body", "data-rows") == str(len(KERNELBENCH_ROWS))
    box = _layout(page, "#problems tbody tr.problem", "#problems tr.why td")
    assert max(box["heights"]) < 60 and box["page"] <= WIDTH and box["right"] <= WIDTH, box
    assert all(why in " ".join(box["reasons"]) for why in UNSUPPORTED.values())
    env = page.inner_text("#env")  # recorded when the batch started: a CPU check records none itself
    assert "cpu" in env and "torch" in env and "No environment recorded" not in page.inner_text("body")
    labels = page.evaluate("() => [...document.querySelectorAll('svg[data-plot=failures] text')]"
                           ".filter((t) => t.getBBox().x < 0).map((t) => t.textContent)")
    assert not labels, labels  # every failure-mode label is drawn whole


def test_report_text_outputs_say_why(site) -> None:
    _, base = site
    summary = (base / "kb-cpu" / "report" / "summary.md").read_text()
    csv_text = (base / "kb-cpu" / "report" / "problems.csv").read_text()
    for key, why in UNSUPPORTED.items():
        assert f"| {key} | unsupported |" in summary and why in summary
        assert any(line.startswith(f"{key},unsupported") and why in line for line in csv_text.splitlines())


def test_only_recorded_files_are_served(site) -> None:
    url, _ = site
    for path in ("/file/0/secret.txt", "/file/0/kb-cpu/secret.txt", "/file/0/stopped-run/secret.txt",
                 "/file/0/stopped-run/candidates/c0001/notes.txt", "/file/0/kb-cpu/results.sqlite",
                 "/file/0/stopped-run/checkpoints.sqlite", "/file/0/stopped-run/candidates/c9999/kernel.py"):
        status, body, _ = get(url + path)
        assert status in (403, 404) and "not a record" not in body, (path, status)
    for path in ("/file/0/stopped-run/candidates/c0001/kernel.py", "/file/0/stopped-run/summary.json",
                 "/file/0/stopped-run/candidates/c0004/check.json", "/file/0/stopped-run/events.jsonl"):
        assert get(url + path)[0] == 200, path
