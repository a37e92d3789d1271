"""`kiln curriculum`: run the co-evolving curriculum; resumable (rerun the same command)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kiln.graphs import cli_options as o
from kiln.tools.errors import KilnInputError

console = Console(stderr=True)


def _config(**kw: Any):  # noqa: ANN202 - CurriculumConfig, imported lazily
    from pydantic import ValidationError

    from kiln.evals.curriculum.config import CurriculumConfig
    from kiln.tools.flags import flag_error

    try:
        return CurriculumConfig(**kw)
    except ValidationError as err:
        raise KilnInputError(flag_error(err)) from None


@o.described(proposer_llm="PROVIDER:MODEL for the Proposer only, which writes the problems (overrides --llm)",
             isolation="strict (refuse without the full OS sandbox) | best-effort: the sandbox of every check and "
                       "probe")
def curriculum(
    out: Annotated[Path, typer.Option(help="run directory (rerun the same command to resume)")] = Path("runs/curriculum"),
    rounds: Annotated[int, typer.Option(help="rounds of problem writing and sampling")] = 3,
    per_round: Annotated[int, typer.Option(help="accepted modules per round")] = 8,
    samples: Annotated[int, typer.Option("--samples", "-k", help="Coder samples per module (GRPO group size)")] = 4,
    families: Annotated[str | None, typer.Option(help="comma-separated families (default: all)")] = None,
    catalogue: Annotated[list[Path], typer.Option(help="extra family file, TOML or JSON (repeatable)")] = [],  # noqa: B006
    max_ops: Annotated[int, typer.Option(help="ops per API set, 1-4")] = 3,
    llm: o.Llm = None,
    coder_llm: o.CoderLlm = None,
    proposer_llm: o.ProposerLlm = None,
    base_url: o.BaseUrl = None,
    seed: Annotated[int, typer.Option(help="drives every choice: the same seed plans the same rounds")] = 0,
    lang: o.Lang = o.LANG,
    device: o.Device = o.DEVICE,
    dtype: o.Dtype = o.DTYPE,
    stress: Annotated[int, typer.Option(help="stress variants per module (0 or 1)")] = 1,
    trials: o.Trials = o.TRIALS,
    timeout: o.CheckTimeout = o.CHECK_TIMEOUT,
    isolation: o.Isolation = o.ISOLATION,
    bwrap: o.Bwrap = None,
    speed_gate: Annotated[float, typer.Option(help="verified share a group needs before speed counts")] = 0.5,
    executor: o.Executor = "local",
    ray_address: o.RayAddress = None,
    cpu_slots: o.CpuSlots = None,
    concurrency: Annotated[int | None, typer.Option(help="samples in flight (default 2 per slot)")] = None,
    checks_per_gpu: Annotated[int, typer.Option(help="checks sharing one GPU (local executor): >1 overlaps their "
                                                     "compiles and trials, timings take turns; a timing may then "
                                                     "share the GPU with a sibling's kernels, and says so")] = 1,
) -> None:
    """Write problems at the Coder's frontier, check k samples each, export rewards and training data."""
    from kiln.evals.curriculum.rewards import RewardParams
    from kiln.evals.curriculum.runner import build, finish
    from kiln.tools.device import resolve_device

    cfg = _config(rounds=rounds, per_round=per_round, samples=samples, max_ops=max_ops, llm=llm,
                  families=[f.strip() for f in families.split(",") if f.strip()] if families else None,
                  catalogues=[str(c) for c in catalogue], coder_llm=coder_llm, proposer_llm=proposer_llm,
                  base_url=base_url, lang=lang, device=resolve_device(device), dtype=dtype, trials=trials,
                  check_timeout_s=timeout, seed=seed, stress=stress, reward=RewardParams(speed_gate=speed_gate),
                  isolation=isolation, bwrap=bwrap)
    cur = build(cfg, out, executor=executor, ray_address=ray_address, cpu_slots=cpu_slots, concurrency=concurrency,
                checks_per_gpu=checks_per_gpu)
    with _progress(cfg) as on_event:
        cur.notify = on_event
        cur.run()
    counts, report = finish(cur)
    if executor == "ray":
        from kiln.evals.executors import RayEvaluator

        RayEvaluator.shutdown()
    Console().print(f"export: {out / 'export'} (sft {counts['sft']}, grpo {counts['grpo']}, "
                    f"proposer {counts['proposer']})\nreport: {report}")


class _progress:
    """Two bars: modules accepted of those wanted, samples checked of those planned."""

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console)

    def __enter__(self):  # noqa: ANN204
        self.progress.start()
        total = self.cfg.rounds * self.cfg.per_round
        self.mods = self.progress.add_task("modules", total=total, info="")
        self.samp = self.progress.add_task("samples", total=total * self.cfg.samples, info="")
        self.refused = self.verified = 0
        return self.on_event

    def on_event(self, kind: str, payload: Any) -> None:
        from kiln.evals.curriculum.rewards import verified

        if kind == "module":
            self.refused += not payload.accepted
            self.progress.update(self.mods, advance=int(payload.accepted), info=f"refused {self.refused}")
        elif kind == "sample":
            self.verified += verified(payload.record)
            self.progress.update(self.samp, advance=1, info=f"verified {self.verified}")
        elif kind == "round_start":
            self.progress.console.print(f"round {payload.round}: {len(payload.chosen)} API sets planned")

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()
