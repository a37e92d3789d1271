"""Start or resume one run: the run directory, the roles, the evaluator, the checkpointer, and the
streamed loop with its live display. `run_problem` is the Python entry point (batch runs call it);
`kiln run` is a thin layer over it."""

from __future__ import annotations

import contextlib
import contextvars
import queue
import sys
import threading
from pathlib import Path
from typing import Any

from langgraph.errors import GraphRecursionError

from kiln.graphs import rundir, stop
from kiln.graphs.cli_options import default_run_dir
from kiln.graphs.context import LoopOptions, ProfileFn, RunContext, RunOptions
from kiln.graphs.finish import write_outputs
from kiln.graphs.graph import build_graph, recursion_limit
from kiln.graphs.persist import open_checkpointer, run_config
from kiln.graphs.profile import make_profiler
from kiln.graphs.progress import Progress
from kiln.graphs.roles import Roles, resolve
from kiln.graphs.rules import best
from kiln.graphs.rundir import RunDir
from kiln.graphs.summary import RunSummary, build_summary, load_summary
from kiln.tools.device import resolve_device
from kiln.tools.errors import KilnInputError
from kiln.tools.evaluator import Evaluator

RUN_FILE = RunDir.OPTIONS


def _gpu_facts(device: str) -> Any:
    from kiln.agents.gpufacts import read_gpu_facts

    return read_gpu_facts(device)


def _evaluator() -> Evaluator:
    from kiln.tools.check import LocalEvaluator

    return LocalEvaluator()


def make_context(opts: RunOptions, run_dir: Path, roles: Roles | None, evaluator: Evaluator | None,
                 gpu: Any = None, profiler: ProfileFn | None = None) -> RunContext:
    roles = roles or resolve(opts, run_dir)
    profiler, skipped = (profiler, None) if profiler else make_profiler(opts.device, opts.check.isolation, opts.check.bwrap)
    return RunContext(options=opts, run_dir=run_dir, coder=roles.coder, judge=roles.judge, proposer=roles.proposer,
                      evaluator=evaluator or _evaluator(), gpu=gpu or _gpu_facts(opts.device), profiler=profiler,
                      extra={"profile_skipped": skipped})


def _interrupted(err: BaseException) -> bool:
    """Ctrl-C, or an error raised while unwinding from it (LangGraph's `cannot schedule new futures
    after shutdown`): either way the run was stopped, not broken."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__context__
    return stop.requested()


def mark_stopped(run_dir: Path, opts: RunOptions | None = None) -> None:
    """summary.json of a run stopped by Ctrl-C, from its last checkpoint (`kiln ui` shows `stopped`,
    not `running`); `--resume` continues it and writes the final one. Never raises."""
    try:
        opts = opts or load_options(run_dir)
        graph = build_graph().compile(checkpointer=open_checkpointer(run_dir))
        snapshot = graph.get_state(run_config(recursion_limit(opts)))
        state, finished = dict(snapshot.values or {}), bool(snapshot.values) and not snapshot.next
    except Exception:  # noqa: BLE001 - an unreadable checkpoint: the summary of an empty state
        state, finished = {}, False
    if opts is None or (finished and RunDir(run_dir).summary.exists()):
        return  # Ctrl-C after the finish node: its summary stands
    reason = f"stopped by Ctrl-C; continue with: kiln run --resume {run_dir}"
    stopped = {**state, "status": "stopped", "stop_reason": reason}
    with contextlib.suppress(Exception):
        rundir.write_json(run_dir, RunDir.SUMMARY, build_summary(stopped, opts, run_dir))
        rundir.event(run_dir, "stopped", reason="Ctrl-C")


def _stream(graph: Any, inp: dict | None, config: dict, ctx: RunContext) -> queue.Queue:
    """The graph runs in its own thread; its parts come through the queue, then ("end", error or None).
    A Ctrl-C reaches the main thread at once, which need not wait for a node in flight (a check
    blocked on a worker that was just killed, an LLM call): the process then leaves without it."""
    parts: queue.Queue = queue.Queue()

    def pump() -> None:
        try:
            for part in graph.stream(inp, config, context=ctx, stream_mode=["updates", "custom"],
                                     durability="sync", version="v2"):
                parts.put(("part", part))
            parts.put(("end", None))
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
            parts.put(("end", err))

    threading.Thread(target=contextvars.copy_context().run, args=(pump,), name="kiln-graph", daemon=True).start()
    return parts


def _drive(ctx: RunContext, inp: dict | None, progress: Progress) -> RunSummary:
    graph = build_graph().compile(checkpointer=open_checkpointer(ctx.run_dir))
    config = run_config(recursion_limit(ctx.options))
    try:
        with progress:
            parts = _stream(graph, inp, config, ctx)
            while (item := parts.get())[0] == "part":
                progress.feed(item[1])
            if item[1] is not None:
                raise item[1]
    except GraphRecursionError:  # the backstop: the loop's own counters should have stopped it first
        state = graph.get_state(config).values
        b = best(state)
        status = "stopped" if b is None or b.correct else "failed"
        reason = f"recursion limit ({config['recursion_limit']} steps) reached: a loop the budgets did not stop"
        write_outputs(ctx, {**state, "status": status, "stop_reason": reason})
    except BaseException as err:
        if not _interrupted(err):
            raise
        mark_stopped(ctx.run_dir, ctx.options)
        raise stop.RunStopped(str(err) or "stopped by Ctrl-C") from None
    return load_summary(ctx.run_dir)


def make_options(problem: Path, options: dict[str, Any], loop: LoopOptions | None = None) -> RunOptions:
    """RunOptions for `problem`: `loop`'s settings (when given), then keyword options, flat
    (`trials=3`, `max_iters=4`, `llm=...`) or nested (`budgets={...}`). Raises ValidationError.
    `loop`'s device is already resolved (the CLI did it, once); the Python API's `device=` (default
    auto) is resolved here."""
    data = {**(loop.model_dump() if loop else {}), **options}
    if loop is None or "device" in options:
        data["device"] = resolve_device(data.get("device", "auto"))
    return RunOptions(**{**data, "problem": str(problem)})


def run_problem(problem: Path, *, out: Path | None = None, roles: Roles | None = None,
                evaluator: Evaluator | None = None, progress: Progress | None = None, gpu: Any = None,
                profiler: ProfileFn | None = None, loop: LoopOptions | None = None, **options: Any) -> RunSummary:
    """Run the loop on one problem file; returns the summary also written to `<run dir>/summary.json`.
    `loop` carries the options as one model (what `kiln run` and `kiln eval` build); keyword options
    add to it or stand alone (the Python API: `run_problem(path, llm=..., max_iters=4)`)."""
    problem = Path(problem).resolve()
    if not problem.is_file():
        raise KilnInputError(f"problem file not found: {problem}")
    from kiln.graphs.preflight import check_problem_file, check_reference
    from kiln.tools.problem import load_problem

    check_problem_file(problem)  # issue 25: a huge file is refused before it is read
    load_problem(problem)  # a broken problem fails here, in one line, before any LLM call
    opts = make_options(problem, options, loop)
    numel = check_reference(problem, opts)  # issue 25: a reference with no finite output, likewise
    run_dir = Path(out or default_run_dir(problem)).resolve()
    if (run_dir / RUN_FILE).exists():
        raise KilnInputError(f"{run_dir} already holds a run; use --resume {run_dir} or another --out")
    shrunk = _cpu_fit(problem, opts)  # too large for the interpreter: one line, or --shrink's copy
    run_dir.mkdir(parents=True, exist_ok=True)
    if shrunk is not None:
        copy = rundir.write(run_dir, f"problem_shrunk/{problem.name}", shrunk[0])
        opts = opts.model_copy(update={"problem": str(copy), "shrunk": shrunk[1]})
        say(f"kiln: {shrunk[1].line()}")
    rundir.write_json(run_dir, RUN_FILE, opts)
    rundir.write(run_dir, "README.md", (Path(__file__).parent / "rundir_readme.md").read_text())
    ctx = make_context(opts, run_dir, roles, evaluator, gpu, profiler)
    rundir.event(run_dir, "start", problem=str(problem), device=opts.device, strategy=opts.strategy)
    return _drive(ctx, {"status": "running", "iteration": 0, "problem_numel": numel}, progress or Progress(live=False))


def _cpu_fit(problem: Path, opts: RunOptions) -> tuple[str, Any] | None:
    """Triton candidates on a CPU run under the interpreter: will a check of this problem fit?"""
    if opts.device != "cpu" or opts.lang != "triton":
        return None
    from kiln.graphs.interp import fit_cpu

    return fit_cpu(problem, opts.check, opts.shrink)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def load_options(run_dir: Path) -> RunOptions:
    path = Path(run_dir) / RUN_FILE
    if not path.exists():
        raise KilnInputError(f"not a kiln run directory (no {RUN_FILE}): {run_dir}")
    return RunOptions.model_validate_json(path.read_text())


def resume_run(run_dir: Path, *, roles: Roles | None = None, evaluator: Evaluator | None = None,
               progress: Progress | None = None, gpu: Any = None, profiler: ProfileFn | None = None) -> RunSummary:
    """Continue an interrupted run from its last checkpoint; finished checks come from the cache."""
    run_dir = Path(run_dir).resolve()
    opts = load_options(run_dir)
    ctx = make_context(opts, run_dir, roles, evaluator, gpu, profiler)
    graph = build_graph().compile(checkpointer=open_checkpointer(run_dir))
    snapshot = graph.get_state(run_config(recursion_limit(opts)))
    if snapshot.values and not snapshot.next and RunDir(run_dir).summary.exists():
        return load_summary(run_dir)
    rundir.event(run_dir, "resume", next=list(snapshot.next))
    inp = None if snapshot.values else {"status": "running", "iteration": 0}
    return _drive(ctx, inp, progress or Progress(live=False))
