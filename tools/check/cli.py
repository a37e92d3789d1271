"""`kiln check PROBLEM CANDIDATE`: the verdict for people, and optionally the JSON record.

Exit codes: 0 only for status `ok`; 1 for any other verdict; 2 for bad input (one line on stderr).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kiln.tools import cli_options as o
from kiln.tools.errors import KilnInputError
from kiln.tools.records import CheckOptions

DTYPES = ("fp32", "bf16", "fp16")
POLICIES = ("strict", "partial")
STATIC = ("allowlist", "denylist")
ISOLATION = ("strict", "best-effort")


def _choice(value: str, allowed: tuple[str, ...], flag: str) -> str:
    if value not in allowed:
        raise KilnInputError(f"{flag} must be one of {', '.join(allowed)} (got {value!r})")
    return value


def check(
    problem: Annotated[Path, typer.Argument(help="KernelBench-format problem file (Model, get_inputs, ...)")],
    candidate: Annotated[Path, typer.Argument(help="candidate file defining ModelNew")],
    device: o.Device = o.DEVICE,
    dtype: o.Dtype = o.DTYPE,
    trials: o.Trials = o.TRIALS,
    case: Annotated[list[Path] | None, typer.Option("--case", help="extra case file (problem format); repeatable")] = None,
    timeout: o.CheckTimeout = o.CHECK_TIMEOUT,
    policy: Annotated[str, typer.Option(help="strict (no PyTorch compute) | partial")] = "partial",
    static: Annotated[str, typer.Option(help="allowlist (LLM-written code) | denylist (trusted hand-written)")] = "allowlist",
    atol: Annotated[float | None, typer.Option(help="absolute tolerance (default per dtype)")] = None,
    rtol: Annotated[float | None, typer.Option(help="relative tolerance (default per dtype)")] = None,
    no_time: Annotated[bool, typer.Option("--no-time", help="skip timing even on a GPU")] = False,
    seed: o.Seed = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the full CheckRecord here")] = None,
    isolation: o.Isolation = o.ISOLATION,
    bwrap: o.Bwrap = None,
) -> None:
    """Compile, verify and (on a GPU) time one candidate against a problem."""
    from kiln.tools.check import check as run_check
    from kiln.tools.device import check_device_name, resolve_device
    from kiln.tools.render import print_verdict

    if trials < 1 or timeout <= 0:
        raise KilnInputError("--trials must be >= 1 and --timeout > 0")
    from kiln.tools.flags import writable

    writable(json_out, "--json")  # before the check: a verdict is never lost to an unwritable path
    check_device_name(device)
    options = CheckOptions(
        device=device, dtype=_choice(dtype, DTYPES, "--dtype"),
        trials=trials, cases=[str(c) for c in case or []], timeout_s=timeout,
        policy=_choice(policy, POLICIES, "--policy"), static=_choice(static, STATIC, "--static"), atol=atol,
        rtol=rtol, time=not no_time, seed=seed, isolation=_choice(isolation, ISOLATION, "--isolation"), bwrap=bwrap,
    )
    options = options.model_copy(update={"device": resolve_device(device)})  # once, after every other flag
    from kiln.tools.check.servers import warm_for

    warm_for(options.device, options, preimport=False)
    record = _within(lambda: run_check(problem, candidate, options), options.timeout_s + WATCHDOG_SLACK_S,
                     problem, candidate, options)
    print_verdict(record)  # first: if writing the record still fails, the verdict was shown
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(record.model_dump_json(indent=2))
    raise typer.Exit(0 if record.status == "ok" else 1)


WATCHDOG_SLACK_S = 8.0
"""`kiln check` has a record within --timeout + this, whatever its workers (or kiln) do."""


def _within(fn: Any, limit_s: float, problem: Path, candidate: Path, options: Any) -> Any:
    """Run the check in a thread; past `limit_s` its workers are killed and an `error` record stands
    in for the verdict (kiln itself hung: a bug, but never a hang without a record)."""
    import threading

    box: dict[str, Any] = {}

    def body() -> None:
        try:
            box["rec"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["exc"] = exc

    t = threading.Thread(target=body, name="kiln-check", daemon=True)
    t.start()
    t.join(limit_s)
    if "exc" in box:
        raise box["exc"]
    if "rec" in box:
        return box["rec"]
    from kiln.tools.records import CheckRecord
    from kiln.tools.sandbox import zygote

    zygote.shutdown()  # every worker it forked dies with its server
    return CheckRecord(problem=str(problem), candidate=str(candidate), device=options.device, dtype=options.dtype,
                       status="error", reasons=[f"kiln did not finish the check within {limit_s:.0f} s (--timeout "
                                                f"{options.timeout_s:.0f} s plus {WATCHDOG_SLACK_S:.0f}): its workers were "
                                                "stopped; this is kiln's failure, not a verdict on the candidate"])
