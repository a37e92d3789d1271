"""Every command that runs checks declares the check's flags once (kiln.tools.cli_options, re-exported
by kiln.graphs.cli_options): the same names, help and defaults in `kiln run`, `eval`, `model`,
`curriculum` and `check`. `--trials` defaulted to 5, 3 or 2 depending on the command, and `kiln model`
had no `--isolation`, so its confirmation checks always ran best-effort."""

from __future__ import annotations

import pytest

from kiln.evals.cli import load_command
from kiln.evals.model.optimise import OptimiseOptions, check_options
from kiln.evals.model.run import ModelRunOptions
from kiln.tools.records import CheckOptions

COMMANDS = ["run", "eval", "model", "curriculum", "check"]
CHECK_FLAGS = {"--trials": CheckOptions.model_fields["trials"].default, "--isolation": "best-effort",
               "--bwrap": None, "--device": "auto", "--dtype": "fp32", "--check-timeout": 300.0}


def _option(command, flag: str):
    return next(p for p in command.params if flag in getattr(p, "opts", []))


@pytest.mark.parametrize("flag", sorted(CHECK_FLAGS))
def test_each_check_flag_is_one_flag_in_every_command(flag: str) -> None:
    options = {name: _option(load_command(name), flag) for name in COMMANDS}
    assert {name: o.default for name, o in options.items()} == dict.fromkeys(COMMANDS, CHECK_FLAGS[flag])
    assert len({tuple(o.opts) for o in options.values()}) == 1  # the same names (--check-timeout, --timeout)
    assert all(o.help for o in options.values())


def test_a_renamed_flag_still_reads_its_old_variable() -> None:
    timeout = _option(load_command("check"), "--timeout")
    assert timeout.envvar == ["KILN_CHECK_CHECK_TIMEOUT", "KILN_CHECK_TIMEOUT"]


def test_kiln_model_confirmation_checks_take_the_check_flags() -> None:
    oo = OptimiseOptions(isolation="strict", bwrap="/opt/bwrap", trials=3, check_timeout_s=50.0, device="cpu")
    opts = check_options(oo)
    assert (opts.isolation, opts.bwrap, opts.trials, opts.timeout_s, opts.device) == \
        ("strict", "/opt/bwrap", 3, 50.0, "cpu")
    assert check_options(OptimiseOptions()).trials == CheckOptions().trials


def test_model_run_json_of_older_runs_still_loads() -> None:
    """model_run.json stored the optimise options flat before they embedded the loop's model."""
    old = {"target": "t.py:make", "device": "cpu", "dtype": "fp32", "optimise": {
        "llm": "replay:/x.json", "lang": "triton", "strategy": "beam", "device": "cpu", "dtype": "fp32",
        "max_iters": 2, "budget_usd": 1.5, "budget_tokens": None, "budget_minutes": 5.0, "trials": 1,
        "check_timeout_s": 240.0, "concurrency": 3, "cpu_slots": 2, "isolation": "strict", "bwrap": None,
        "patch": "correct"}}
    o = ModelRunOptions.model_validate(old).optimise
    assert (o.loop.roles.llm, o.loop.strategy, o.loop.budgets.max_iters, o.loop.budgets.usd) == \
        ("replay:/x.json", "beam", 2, 1.5)
    assert (o.budget_minutes, o.loop.check.trials, o.loop.check.timeout_s, o.loop.check.isolation) == \
        (5.0, 1, 240.0, "strict")
    assert (o.concurrency, o.cpu_slots, o.patch) == (3, 2, "correct")
    assert ModelRunOptions.model_validate_json(ModelRunOptions.model_validate(old).model_dump_json()).optimise == o
