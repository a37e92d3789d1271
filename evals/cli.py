"""The `kiln` command line. Each sub-command lives with the layer that does its work; this file only
wires them together and turns input errors into one clear line and a non-zero exit."""

from __future__ import annotations

import importlib
import sys

import typer

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


_register()


def _split_config(argv: list[str]) -> tuple[str | None, list[str]]:
    """`kiln --config FILE COMMAND ...`: the one option that precedes the command."""
    if len(argv) >= 2 and argv[0] == "--config":
        return argv[1], argv[2:]
    if argv and argv[0].startswith("--config="):
        return argv[0].split("=", 1)[1], argv[1:]
    return None, argv


def main() -> None:
    from kiln.tools.check import scratch
    from kiln.tools.check.sandbox import harden_self

    harden_self()  # before anything reads an API key: no process of ours may read this one's memory
    scratch.at_start()  # stale scratch roots of dead kiln processes go; this one's goes on SIGTERM
    from kiln.evals.config import ENV_PREFIX, config_path, load_default_map

    try:
        explicit, args = _split_config(sys.argv[1:])
        default_map = load_default_map(config_path(explicit))
        app(args=args, prog_name="kiln", default_map=default_map, auto_envvar_prefix=ENV_PREFIX)
    except (KilnInputError, KilnConfigError) as err:
        print(f"kiln: error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("kiln: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
