"""One `kiln run` resolves its device once, at the CLI, and passes it down: the run, every check and
the GPU facts use that one answer. Before, `kiln run` asked in the CLI, again in `run_problem` and
again in every check (three resolvers)."""

from __future__ import annotations

import json

from click.testing import CliRunner
from graph_helpers import PROBLEM, judge, kernel

from kiln.evals.cli import load_command
from kiln.graphs import runner
from kiln.tools import device
from kiln.tools.check import api


def test_one_kiln_run_resolves_the_device_once(tmp_path, monkeypatch):
    calls: list[str] = []
    real = device.resolve_device

    def counted(name: str) -> str:
        calls.append(name)
        return real(name)

    for module in (device, runner, api):  # wherever the resolver is bound
        monkeypatch.setattr(module, "resolve_device", counted)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"coder": [f"```python\n{kernel('good')}```"], "judge": [judge("repair")],
                                  "proposer": [{"cases": []}]}))
    out = tmp_path / "run"
    done = CliRunner().invoke(load_command("run"), [str(PROBLEM), "--llm", f"replay:{script}", "--device", "auto",
                                                    "--trials", "1", "--out", str(out), "--quiet"])
    assert done.exit_code == 0, done.output
    assert calls == ["auto"]
    checks = list(out.rglob("checks/*.json")) or list(out.rglob("*check*.json"))
    assert json.loads((out / "run.json").read_text())["device"] == "cpu"
    assert checks and all(json.loads(p.read_text()).get("device", "cpu") == "cpu" for p in checks)


def test_the_python_api_resolves_where_it_starts(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(runner, "resolve_device", lambda name: calls.append(name) or "cpu")
    opts = runner.make_options(PROBLEM, {})
    assert opts.device == "cpu" and calls == ["auto"]
    again = runner.make_options(PROBLEM, {}, loop=opts)  # a loop from the CLI: already resolved
    assert again.device == "cpu" and calls == ["auto"]
