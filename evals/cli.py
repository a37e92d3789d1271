"""The `kiln` command line. Each sub-command lives with the layer that does its work; this file only
wires them together and turns input errors into one clear line and a non-zero exit."""

from __future__ import annotations

import atexit
import importlib
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from kiln.evals.config import ENV_PREFIX
from kiln.tools.errors import KilnConfigError, KilnInputError

app = typer.Typer(
    name="kiln",
    help="Turn a PyTorch module into a verified, fast CUDA or Triton kernel.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# command name -> "module:function". Imported here, at start-up of the CLI only.
COMMANDS = {
    "check": "kiln.tools.check.cli:check",
    "doctor": "kiln.tools.cli_doctor:doctor",
    "profile": "kiln.tools.profile.cli:profile",
    "run": "kiln.graphs.cli:run",
    "eval": "kiln.evals.cli_eval:eval_",
    "report": "kiln.evals.cli_report:report",
    "ui": "kiln.evals.ui.cli:ui",
    "curriculum": "kiln.evals.curriculum.cli:curriculum",
    "model": "kiln.evals.model.cli:model",
}


def _register() -> None:
    for name, target in COMMANDS.items():
        module, func = target.split(":")
        app.command(name)(getattr(importlib.import_module(module), func))


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"kiln {version('kernelkiln')}")
        except PackageNotFoundError:
            typer.echo("kiln (not installed as a package)")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, show_envvar=False,
                                          help="print kiln's version and exit")] = False,
    config: Annotated[Path | None, typer.Option("--config", help="TOML config file, one table per command "
                                                "(before the command: kiln --config FILE run ...); default "
                                                "$KILN_CONFIG, ./kiln.toml, ~/.config/kiln/config.toml")] = None,
) -> None:
    """Turn a PyTorch module into a verified, fast CUDA or Triton kernel."""


_register()


def _flag_envvars(command: Any) -> None:
    """Each option's variable is KILN_<COMMAND>_<FLAG> after the flag the user types (`check --json`
    reads KILN_CHECK_JSON), not after the Python parameter's name (json_out)."""
    for name, sub in command.commands.items():
        for param in sub.params:
            longs = [o for o in getattr(param, "opts", []) if o.startswith("--")]
            if getattr(param, "param_type_name", "") == "option" and longs and param.envvar is None:
                param.envvar = f"{ENV_PREFIX}_{name}_{longs[0][2:]}".upper().replace("-", "_")
                param.show_envvar = True


def _split_config(argv: list[str]) -> tuple[str | None, list[str]]:
    """`kiln --config FILE COMMAND ...`: the one option that precedes the command."""
    if len(argv) >= 2 and argv[0] == "--config":
        return argv[1], argv[2:]
    if argv and argv[0].startswith("--config="):
        return argv[0].split("=", 1)[1], argv[1:]
    return None, argv


def _flag_keys(command: Any, default_map: dict) -> dict:
    """Config-file keys are named like the flags (`json = ...` in [check]); click wants parameter names."""
    out = {}
    for name, table in default_map.items():
        sub = command.commands.get(name)
        names = {o[2:].replace("-", "_"): p.name for p in (sub.params if sub else [])
                 for o in getattr(p, "opts", []) if o.startswith("--")}
        out[name] = {names.get(k, k): v for k, v in table.items()}
    return out


def _on_interrupt(signum: int, frame: object) -> None:
    """Say at once that Ctrl-C was heard: stopping the checks in flight takes seconds."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C interrupts the clean-up too
    print("kiln: Ctrl-C: stopping the work in flight (a second Ctrl-C skips the clean-up)", file=sys.stderr,
          flush=True)
    raise KeyboardInterrupt


def _exit_now(code: int) -> None:
    """Leave without the interpreter's slow teardown (seconds with torch loaded): every file kiln
    writes is already complete (written whole, or committed) by the time an error reaches here.
    The exit handlers still run (the scratch root's removal is one)."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main() -> None:
    from kiln.tools.sandbox import scratch
    from kiln.tools.sandbox.box import harden_self

    harden_self()  # before anything reads an API key: no process of ours may read this one's memory
    scratch.at_start()  # stale scratch roots of dead kiln processes go; this one's goes on SIGTERM
    from kiln.evals.config import config_path, load_default_map

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when a parent ignores it
        signal.signal(signal.SIGINT, _on_interrupt)
    try:
        explicit, args = _split_config(sys.argv[1:])
        default_map = load_default_map(config_path(explicit))
        command = typer.main.get_command(app)
        _flag_envvars(command)
        command(args=args, prog_name="kiln", default_map=_flag_keys(command, default_map),
                auto_envvar_prefix=ENV_PREFIX)
    except (KilnInputError, KilnConfigError) as err:
        print(f"kiln: error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("kiln: interrupted", file=sys.stderr)
        _exit_now(130)


if __name__ == "__main__":
    main()
