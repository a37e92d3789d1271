"""`kiln ui` in a real headless Chromium (Debian's package, driven by Playwright): the pages load,
the tree shows the recorded run, a click shows a candidate, the heat map marks the planted
mismatches, appended events update the page without a reload, recorded text is never HTML.
Screenshots of each page go to tests/ui/artifacts/ (git-ignored)."""

from __future__ import annotations

import json
import shutil
import time

import pytest
from ui_helpers import ARTIFACTS, FIXTURE_RUN, fixture_statuses, serve, synth_batch

pytestmark = pytest.mark.xdist_group("ui")
HOSTILE = '</script><img src=x onerror="window.__pwned=1"><b id="injected">bold</b>'


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("headless Chromium is required for the UI tests: apt-get install chromium (make test does)")
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("site")
    for name in ("relu-mcts", "live-run", "follow-run", "hostile"):
        shutil.copytree(FIXTURE_RUN, base / name)
    kernel = base / "hostile" / "candidates" / "c0001" / "kernel.py"
    kernel.write_text(kernel.read_text() + f"\n# {HOSTILE}\n")
    with (base / "hostile" / "events.jsonl").open("a") as fh:
        fh.write(json.dumps({"t": time.time(), "kind": HOSTILE, "id": HOSTILE}) + "\n")
    synth_batch(base / "batch-12", 12)
    with serve([base]) as url:
        yield url, base


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    pg.errors = []
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
    yield pg
    pg.close()


def _open(page, url: str, ready: str = "body[data-rendered]") -> None:
    page.goto(url)
    page.wait_for_selector(ready)


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _node(page, cid: str, tab: str) -> None:
    page.click(f'svg.tree g.node[data-id="{cid}"]')
    page.wait_for_selector(f'#node[data-node="{cid}"]')
    page.click(f'#node button.tab[data-tab="{tab}"]')


def test_pages_load_with_screenshots(site, page) -> None:
    url, _ = site
    _open(page, url + "/")
    assert page.get_attribute("#runs", "data-rows") == "5"  # four runs and one batch
    _shot(page, "runs")
    _open(page, url + "/run/0/relu-mcts")
    _shot(page, "run")
    _node(page, "c0003", "mismatch")
    _shot(page, "run-node-mismatch")
    _open(page, url + "/batch/0/batch-12")
    assert page.get_attribute("#problems", "data-rows") == "12"
    assert page.locator("svg.plot").count() >= 2
    _shot(page, "batch")
    _open(page, url + "/file/0/relu-mcts/candidates/c0002/kernel.py", "pre.code")
    _shot(page, "file")
    assert page.errors == []


def _descendants(made: list[dict], cid: str) -> int:
    return sum(1 + _descendants(made, e["id"]) for e in made if e["parent"] == cid)


def test_tree_shows_the_recorded_candidates(site, page) -> None:
    url, _ = site
    _open(page, url + "/run/0/relu-mcts")
    expected = fixture_statuses()
    assert page.get_attribute("svg.tree", "data-nodes") == str(len(expected))
    shown = {g.get_attribute("data-id"): g.get_attribute("data-status") for g in page.locator("svg.tree g.node").all()}
    assert shown == expected
    assert set(expected.values()) >= {"ok", "incorrect", "compile_error", "crashed", "rejected"}
    made = [e for e in map(json.loads, (FIXTURE_RUN / "events.jsonl").read_text().splitlines()) if e["kind"] == "candidate"]
    assert page.locator("svg.tree text.edge-label.mode-repair").count() == sum(e["mode"] == "repair" for e in made)
    # MCTS visits, from the checkpoint: each new child backs one visit up to every ancestor
    assert f"n={1 + _descendants(made, 'c0001')} " in page.text_content('svg.tree g.node[data-id="c0001"]')
    assert "1.74x [1.65" in page.text_content('svg.tree g.node[data-id="c0008"]')  # speedup with its CI
    assert page.locator('svg[data-plot="best"] circle').count() == 5  # iterations 4-8 have a correct best


def test_clicking_a_node_shows_its_source_and_record(site, page) -> None:
    url, base = site
    _open(page, url + "/run/0/relu-mcts")
    _node(page, "c0005", "source")
    source = (base / "relu-mcts" / "candidates" / "c0005" / "kernel.py").read_text()
    assert "x.shape[2]" in page.inner_text("#src-lines") and source.splitlines()[0] in page.inner_text("#src-lines")
    page.click('#node button.tab[data-tab="check"]')
    check = page.inner_text('#node .pane[data-tab="check"]')
    assert "crashed" in check and "IndexError" in check and "Per-stage times" in check
    page.click('#node .pane[data-tab="check"] a.line-link[data-line="23"]')  # the stderr's kernel.py line
    assert page.get_attribute("#src-lines .hl", "data-line") == "23"
    assert "kiln check" in page.inner_text("#repro") and "--seed" in page.inner_text("#repro")
    _node(page, "c0001", "judge")
    assert "ReLU is missing" in page.inner_text('#node .pane[data-tab="judge"]')
    _node(page, "c0008", "proposer")
    proposer = page.inner_text('#node .pane[data-tab="proposer"]')
    assert "rows_100" in proposer and "wrong_model" in proposer and "Model differs" in proposer
    assert page.errors == []


def test_heat_map_marks_the_planted_mismatches(site, page) -> None:
    """c0003 never computes column 128 of the 37 x 129 output (its BLOCK is 128)."""
    url, _ = site
    _open(page, url + "/run/0/relu-mcts")
    _node(page, "c0003", "mismatch")
    heat = page.locator("#heatmap svg.heatmap")
    assert heat.get_attribute("data-rows") == "37" and heat.get_attribute("data-cols") == "129"
    hits = [(c.get_attribute("data-rows"), c.get_attribute("data-cols")) for c in heat.locator("rect.hit").all()]
    assert hits
    for _rows, cols in hits:
        lo, hi = map(int, cols.split("-"))
        assert lo <= 128 <= hi, cols  # only the last column's cells are marked
    rows_hit = {r for rows, _ in hits for r in range(int(rows.split("-")[0]), int(rows.split("-")[1]) + 1)}
    assert {0, 1, 2, 3, 4} <= rows_hit
    assert "37 of 4773" in page.inner_text("#heatmap")


def test_appended_events_update_the_page_without_reload(site, page) -> None:
    url, base = site
    run = base / "live-run"
    _open(page, url + "/run/0/live-run")
    page.evaluate("window.__sameDocument = true")
    assert page.get_attribute("svg.tree", "data-nodes") == "8"
    child = run / "candidates" / "c0009"
    child.mkdir()
    shutil.copy(run / "candidates" / "c0008" / "kernel.py", child / "kernel.py")
    shutil.copy(run / "candidates" / "c0008" / "check.json", child / "check.json")
    t0 = time.monotonic()
    with (run / "events.jsonl").open("a") as fh:
        fh.write(json.dumps({"t": time.time(), "kind": "candidate", "id": "c0009", "mode": "optimize",
                             "parent": "c0008", "ok": True, "error": None}) + "\n")
        fh.write(json.dumps({"t": time.time(), "kind": "check", "id": "c0009", "key": "k", "status": "ok"}) + "\n")
    page.wait_for_selector('svg.tree[data-nodes="9"]', timeout=10_000)
    latency = time.monotonic() - t0
    assert page.evaluate("window.__sameDocument") is True  # no reload
    assert page.get_attribute('svg.tree g.node[data-id="c0009"]', "data-status") == "ok"
    assert latency < 5.0, latency  # the figure (<= 1 s) is measured by bench/ui_bench.py on an idle machine


def test_recorded_text_is_never_html(site, page) -> None:
    url, _ = site
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    _open(page, url + "/run/0/hostile")
    _node(page, "c0001", "source")
    assert HOSTILE in page.inner_text("#src-lines")
    assert HOSTILE in page.inner_text("#events")
    assert page.locator("#injected").count() == 0 and page.locator('img[src="x"]').count() == 0
    assert page.evaluate("window.__pwned") is None and dialogs == []


def test_heat_map_of_a_4d_output_has_a_strip_per_leading_dim(site, page) -> None:
    """A 4-D output (N, C, H, W): the grid is H x W, dims 0 and 1 get strips marking their indices."""
    url, base = site
    path = base / "hostile" / "candidates" / "c0003" / "check.json"
    rec = json.loads(path.read_text())
    for trial in rec["correctness"]["trials"]:
        if trial["mismatch"]:
            trial["mismatch"]["expected_desc"] = "(2, 3, 37, 129)"
            trial["mismatch"]["first"] = [{"index": [1, 2, r, 128], "expected": 1.0, "actual": 0.0} for r in range(5)]
    path.write_text(json.dumps(rec))
    _open(page, url + "/run/0/hostile")
    _node(page, "c0003", "mismatch")
    strips = page.locator("#heatmap svg.strip")
    assert strips.count() == 2
    assert [strips.nth(d).locator("rect.hit title").text_content() for d in range(2)] == ["dim 0: 1-1", "dim 1: 2-2"]
    assert page.get_attribute("#heatmap svg.heatmap:not(.strip)", "data-rows") == "37"


def test_runs_page_follows_a_run(site, page) -> None:
    url, base = site
    _open(page, url + "/")
    row = page.locator("#runs tbody tr", has=page.locator('a[href="/run/0/follow-run"]'))
    before = row.inner_text()
    with (base / "follow-run" / "events.jsonl").open("a") as fh:
        fh.write(json.dumps({"t": time.time(), "kind": "resume", "next": ["code"]}) + "\n")
    row.locator("td", has_text=" s ago").wait_for(timeout=10_000)  # its age was minutes, now seconds
    assert row.inner_text() != before and page.evaluate("performance.getEntriesByType('navigation').length") == 1
