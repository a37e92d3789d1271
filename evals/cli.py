"""The `kiln` command line. Each sub-command lives with the layer that does its work; this file only
wires them together and turns input errors into one clear line and a non-zero exit."""

from __future__ import annotations

import atexit
import contextlib
import difflib
import importlib
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from kiln.evals.config import ENV_PREFIX
from kiln.tools.errors import KilnConfigError, KilnInputError

# command name -> ("module:function", the one-line help `kiln --help` lists). A command's module is
# imported only when that command runs or shows its own help: `kiln --version`, `kiln --help` and a
# typo import none of them (tests/evals/test_startup.py checks the lines match the docstrings).
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("kiln.tools.check.cli:check", "Compile, verify and (on a GPU) time one candidate against a problem."),
    "doctor": ("kiln.tools.cli_doctor:doctor", "Check GPUs, driver, CUDA, nvcc, torch, Triton, Nsight Compute, "
               "the compile cache, the sandbox and the resident fork servers."),
    "profile": ("kiln.tools.profile.cli:profile", "Profile a candidate (ncu counters where allowed, else the "
                "torch profiler) and print the Judge's digest."),
    "run": ("kiln.graphs.cli:run", "Run the Coder / Judge / Proposer loop on PROBLEM until the kernel is verified "
            "and fast enough."),
    "eval": ("kiln.evals.batch.cli:eval_", "Run kiln over many problems; resumable (rerun the same command to "
             "continue)."),
    "report": ("kiln.evals.batch.cli_report:report", "Write the report of a batch run (RUN_DIR/report/), or compare "
               "two runs."),
    "ui": ("kiln.evals.ui.cli:ui", "Serve a live web dashboard over run directories and batches (read-only "
           "unless --allow-control)."),
    "curriculum": ("kiln.evals.curriculum.cli:curriculum", "Write problems at the Coder's frontier, check k "
                   "samples each, export rewards and training data."),
    "model": ("kiln.evals.model.cli:model", "Find a model's hot ops, make them faster in place, and prove it end "
              "to end."),
}
HELP_WIDTH = 100  # click wraps help at the terminal's width, up to this; never into 20-character columns


def load_command(name: str) -> Any:
    """The click command of one sub-command, built from its function (imported now) as typer builds it;
    its options read KILN_<COMMAND>_<FLAG>."""
    module, func = COMMANDS[name][0].split(":")
    sub = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
    function = getattr(importlib.import_module(module), func)
    sub.command(name)(function)
    command = typer.main.get_command(sub)
    command.name = name
    _flag_envvars(name, command)
    from kiln.tools.cli_options import apply_help

    apply_help(function, command.params)
    return command


class LazyGroup(TyperGroup):
    """`kiln`'s group: lists its commands from the table above, loads one only when it is used."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMANDS:
            return None
        if cmd_name not in self.commands:
            self.commands[cmd_name] = load_command(cmd_name)
            _config_keys(ctx, cmd_name, self.commands[cmd_name])
        return self.commands[cmd_name]

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return self._click_resolve_command(ctx, args)
        except typer.core._click.exceptions.UsageError as err:  # typer's own suggestion lists loaded commands only
            near = difflib.get_close_matches(args[0], list(COMMANDS)) if args else []
            if near:
                err.message = f"{err.message.rstrip('.')}. Did you mean {', '.join(map(repr, near))}?"
            raise

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, short) for name, (_target, short) in COMMANDS.items()])


app = typer.Typer(
    name="kiln",
    help="Turn a PyTorch module into a verified, fast CUDA or Triton kernel.",
    cls=LazyGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"max_content_width": HELP_WIDTH},
)


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


def _flag_envvars(name: str, sub: Any) -> None:
    """Each option's variable is KILN_<COMMAND>_<FLAG> after the flag the user types (`check --json`
    reads KILN_CHECK_JSON), not after the Python parameter's name (json_out); a flag with two names
    (`--check-timeout`, `--timeout`) reads either variable."""
    for param in sub.params:
        longs = [o for o in getattr(param, "opts", []) if o.startswith("--")]
        if getattr(param, "param_type_name", "") == "option" and longs and param.envvar is None:
            names = [f"{ENV_PREFIX}_{name}_{flag[2:]}".upper().replace("-", "_") for flag in longs]
            param.envvar = names[0] if len(names) == 1 else names
            param.show_envvar = True


def _config_keys(ctx: Any, name: str, sub: Any) -> None:
    """Config-file keys are named like the flags (`json = ...` in [check]); click wants parameter
    names. Translated in the group's default_map when the command is loaded, before its context is made."""
    table = (ctx.default_map or {}).get(name) if ctx is not None else None
    if not table:
        return
    names = {o[2:].replace("-", "_"): p.name for p in sub.params for o in getattr(p, "opts", []) if o.startswith("--")}
    ctx.default_map[name] = {names.get(k, k): v for k, v in table.items()}


def _split_config(argv: list[str]) -> tuple[str | None, list[str]]:
    """`kiln --config FILE COMMAND ...`: the one option that precedes the command."""
    if len(argv) >= 2 and argv[0] == "--config":
        return argv[1], argv[2:]
    if argv and argv[0].startswith("--config="):
        return argv[0].split("=", 1)[1], argv[1:]
    return None, argv


def _on_interrupt(signum: int, frame: object) -> None:
    """Say at once that Ctrl-C was heard, end the checks in flight (their process groups), then
    unwind: a node cut short is redone on resume, a finished one never (kiln.graphs.stop)."""
    from kiln.graphs import stop

    signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C interrupts the clean-up too
    print("kiln: Ctrl-C: stopping the work in flight (a second Ctrl-C skips the clean-up)", file=sys.stderr,
          flush=True)
    stop.request()
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
    from kiln.tools.sandbox import nsutil, scratch

    # harden_self() of kiln.tools.sandbox.box, without importing the sandbox (pydantic: half a second
    # of `kiln --version`): before anything reads an API key, no process of ours may read this one's memory
    with contextlib.suppress(OSError):
        nsutil.prctl(nsutil.PR_SET_DUMPABLE, 0)
    scratch.at_start()  # stale scratch roots of dead kiln processes go; this one's goes on SIGTERM
    from kiln.evals.config import config_path, load_default_map

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when a parent ignores it
        signal.signal(signal.SIGINT, _on_interrupt)
    try:
        explicit, args = _split_config(sys.argv[1:])
        default_map = load_default_map(config_path(explicit))
        command = typer.main.get_command(app)
        command(args=args, prog_name="kiln", default_map=default_map, auto_envvar_prefix=ENV_PREFIX)
    except (KilnInputError, KilnConfigError) as err:
        print(f"kiln: error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("kiln: interrupted", file=sys.stderr)
        _exit_now(130)
    except SystemExit:
        # typer turns Ctrl-C into exit 130; the interpreter's teardown would then wait for every
        # thread still in flight (LangGraph's, a batch's jobs) and print their errors
        from kiln.graphs import stop

        if stop.requested():
            _exit_now(130)
        raise


if __name__ == "__main__":
    main()
