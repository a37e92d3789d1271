"""`kiln ui` over HTTP, from a real server process: path traversal, tokens, Host names, read-only by
default, keys never served, and the opt-in control endpoints."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from ui_helpers import FAKE_KEY, FIXTURE_RUN, free_port, get, serve, synth_batch, wait_up

pytestmark = pytest.mark.xdist_group("ui")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """Two served folders (runs, a small batch) and a secret file beside them."""
    base = tmp_path_factory.mktemp("ui")
    runs = base / "served"
    shutil.copytree(FIXTURE_RUN, runs / "relu-mcts")
    synth_batch(runs / "batch", 6)
    (base / "secret.txt").write_text("outside the served folders\n")
    (runs / "relu-mcts" / "link-out").symlink_to(base / "secret.txt")
    with serve([runs]) as url:
        yield url, runs


TRAVERSALS = [
    "/file/0/../secret.txt", "/file/0/%2e%2e/secret.txt", "/file/0/..%2fsecret.txt", "/file/0/relu-mcts/link-out",
    "/file/1/relu-mcts/run.json", "/file/0//etc/passwd", "/file/0/relu-mcts/..%5c..%5csecret.txt",
    "/run/0/..", "/api/run/0/%2e%2e", "/batch/0/relu-mcts", "/api/node/0/../served/relu-mcts?id=c0001",
    "/api/node/0/relu-mcts?id=../../secret", "/static/../server.py", "/static/%2e%2e/server.py", "/file/x/secret.txt",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_paths_outside_the_served_folders_are_refused(served, path: str) -> None:
    url, _ = served
    status, body, _ = get(url + path)
    assert status == 404, (path, status, body[:200])
    assert "outside the served folders" not in body and "def build_app" not in body


def test_files_inside_are_served_escaped(served) -> None:
    url, runs = served
    kernel = runs / "relu-mcts" / "candidates" / "c0001" / "kernel.py"
    kernel.write_text(kernel.read_text() + "\n# </pre><script>alert(1)</script>\n")
    status, body, headers = get(url + "/file/0/relu-mcts/candidates/c0001/kernel.py")
    assert status == 200
    assert "&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert(1)" not in body
    assert "script-src 'self'" in headers["content-security-policy"]


def test_api_keys_never_appear(served) -> None:
    """The recorded run had FAKE_KEY in its environment and in a Coder reply; a key-shaped string
    planted after the run (bypassing the on-disk scrub) is masked by the UI itself."""
    url, runs = served
    planted = "sk-plantedAfterTheRun0123456789abcdef"
    with (runs / "relu-mcts" / "events.jsonl").open("a") as fh:
        fh.write(json.dumps({"t": time.time(), "kind": "note", "text": f"key {planted}"}) + "\n")
    pages = ["/", "/api/runs", "/run/0/relu-mcts", "/api/run/0/relu-mcts", "/batch/0/batch", "/api/batch/0/batch",
             "/file/0/relu-mcts/llm/0001_coder_reply.md", "/file/0/relu-mcts/events.jsonl"]
    pages += [f"/api/node/0/relu-mcts?id=c{i:04d}" for i in range(1, 9)]
    bodies = [get(url + p) for p in pages]
    assert all(status == 200 for status, _, _ in bodies), [(p, b[0]) for p, b in zip(pages, bodies, strict=True)]
    text = "".join(body for _, body, _ in bodies)
    assert FAKE_KEY not in text and planted not in text
    assert "[REDACTED]" in get(url + "/api/node/0/relu-mcts?id=c0001")[1]  # the masked reply is shown
    assert "[REDACTED]" in get(url + "/api/run/0/relu-mcts")[1]  # the planted event, masked by the UI


def test_read_only_by_default(served) -> None:
    url, _ = served
    req = urllib.request.Request(url + "/api/control/start", data=b'{"problem": "0/x.py"}', method="POST",
                                 headers={"content-type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req)
    assert err.value.code == 403


def test_loopback_server_refuses_foreign_host_names(served) -> None:
    url, _ = served
    assert get(url + "/", {"Host": "attacker.example:80"})[0] == 403  # DNS rebinding
    assert get(url + "/", {"Host": "localhost"})[0] == 200


def _token_from(proc: subprocess.Popen) -> str:
    for line in proc.stdout:  # "kiln ui: open http://0.0.0.0:PORT/?token=..."
        if "?token=" in line:
            return line.strip().split("?token=")[1]
    raise AssertionError("kiln ui printed no URL with a token")


def test_a_token_is_required_off_loopback(tmp_path: Path) -> None:
    """Listening on 0.0.0.0 with no --token: a random token is made and printed; nothing answers without it."""
    shutil.copytree(FIXTURE_RUN, tmp_path / "relu-mcts")
    port = free_port()
    proc = subprocess.Popen([str(Path(sys.executable).parent / "kiln"), "ui", str(tmp_path), "--host", "0.0.0.0",
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        token = _token_from(proc)
        url = f"http://127.0.0.1:{port}"
        wait_up(url + "/")
        assert len(token) >= 16
        assert get(url + "/")[0] == 401
        assert get(url + "/api/run/0/relu-mcts")[0] == 401
        assert get(url + "/static/kiln.css")[0] == 401
        assert get(url + "/api/run/0/relu-mcts", {"Authorization": "Bearer wrong-token-0123456789"})[0] == 401
        status, _, headers = get(url + "/run/0/relu-mcts?token=" + token)
        assert status == 303 and headers["location"] == "/run/0/relu-mcts"  # the token leaves the address bar
        assert "HttpOnly" in headers["set-cookie"]
        cookie = headers["set-cookie"].split(";")[0]
        assert get(url + "/api/run/0/relu-mcts", {"Cookie": cookie})[0] == 200
        assert get(url + "/api/run/0/relu-mcts", {"Authorization": f"Bearer {token}"})[0] == 200
    finally:
        proc.terminate()
        proc.wait(10)


def test_bad_folder_is_one_line_and_exit_2(tmp_path: Path) -> None:
    res = subprocess.run([str(Path(sys.executable).parent / "kiln"), "ui", str(tmp_path / "missing")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "not a folder" in res.stderr and "Traceback" not in res.stderr


def _post(url: str, path: str, body: dict, csrf: str | None) -> tuple[int, dict]:
    headers = {"content-type": "application/json", **({"x-kiln-csrf": csrf} if csrf else {})}
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as res:
            return res.status, json.loads(res.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_control_starts_and_stops_a_run(tmp_path: Path) -> None:
    problem = tmp_path / "relu_small.py"
    shutil.copy(Path(__file__).parents[1] / "graphs" / "data" / "relu_small.py", problem)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    with serve([tmp_path], "--allow-control", env=env) as url:
        page = get(url + "/")[1]
        csrf = page.split('name="kiln-csrf" content="')[1].split('"')[0]
        assert _post(url, "/api/control/start", {"problem": "0/relu_small.py"}, None)[0] == 403  # no CSRF header
        assert _post(url, "/api/control/start", {"problem": "0/../x.py"}, csrf)[0] == 404
        status, out = _post(url, "/api/control/start", {"problem": "0/relu_small.py", "strategy": "linear",
                                                        "max_iters": 1, "device": "cpu"}, csrf)
        assert status == 200 and out["run"].startswith("0/ui-runs/relu_small-")
        assert (tmp_path / "ui-runs" / (out["run"].split("/")[-1] + ".log")).exists()
        status, out = _post(url, "/api/control/stop", {"run": out["run"]}, csrf)
        # Ctrl-C: 130 once kiln's main runs, 1 or -2 while Python is still importing it
        assert status == 200 and out["stopped"] and out["exit_code"] in (130, 1, -2)
        assert _post(url, "/api/control/stop", {"run": "0/relu_small.py"}, csrf)[0] == 404  # not ours to stop
