"""Build a curriculum run from its config and run it: roles, catalogue, executors, export, report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kiln.agents.curriculum import problem_writer
from kiln.agents.curriculum.catalogue import load_catalogue
from kiln.evals.curriculum.config import CurriculumConfig
from kiln.evals.curriculum.executors import Prober, build_executors
from kiln.evals.curriculum.export import export
from kiln.evals.curriculum.report import write_report
from kiln.evals.curriculum.rounds import Curriculum, Event
from kiln.evals.curriculum.store import ModuleRow
from kiln.tools.evaluator import Evaluator


def _coder_for(roles: Any, device: str, box: Any = None):  # noqa: ANN202 - returns a Coder picker
    """The Coder for a module: the built-in Coder traces a problem by running it, so for a module an
    LLM wrote it runs confined (`ConfinedCoder`); an LLM Coder only reads the source."""
    from kiln.agents.curriculum.confined_coder import ConfinedCoder

    confined = ConfinedCoder(device=device, box=box)

    def pick(module: ModuleRow) -> Any:
        builtin = roles.specs.get("coder") == "builtin"
        return confined if builtin and module.author != "template" else roles.coder

    return pick


def build(cfg: CurriculumConfig, out: Path, *, executor: str = "local", ray_address: str | None = None,
          cpu_slots: int | None = None, concurrency: int | None = None, on_event: Event | None = None,
          evaluator: Evaluator | None = None, prober: Prober | None = None, checks_per_gpu: int = 1) -> Curriculum:
    from kiln.agents.curriculum.validate import Sandboxing
    from kiln.agents.registry import resolve_roles
    from kiln.evals.batch.jobs import gpu_facts
    from kiln.tools.sandbox.box import sandbox_for

    sandbox_for(cfg.check.isolation, cfg.check.bwrap)  # --isolation strict without the full sandbox: refused at start
    catalogue = load_catalogue([Path(p) for p in cfg.catalogues]).restrict(cfg.families)
    roles = resolve_roles(cfg.roles.llm, coder=cfg.roles.coder_llm, proposer=cfg.roles.proposer_llm,
                          base_url=cfg.roles.base_url, lang=cfg.lang, device=cfg.device)
    if evaluator is None or prober is None:
        evaluator, prober = build_executors(executor, cfg.device, ray_address=ray_address, cpu_slots=cpu_slots,
                                            checks_per_gpu=checks_per_gpu)
    slots = getattr(evaluator, "n_slots", 1)
    from kiln.agents.curriculum.validate import Budget

    writer = problem_writer(roles, lang=cfg.lang, stress=cfg.stress, time_ms=Budget.for_device(cfg.device).time_ms)
    return Curriculum(out, cfg, catalogue=catalogue, writer=writer, coder_for=_coder_for(roles, cfg.device, Sandboxing(isolation=cfg.check.isolation, bwrap=cfg.check.bwrap)),
                      evaluator=evaluator, prober=prober, gpu=gpu_facts(cfg.device),
                      concurrency=concurrency or max(2, 2 * slots), on_event=on_event)


def finish(cur: Curriculum) -> tuple[dict[str, int], Path]:
    """Export and report from what the store holds (also after a partial run)."""
    counts = export(cur.store, cur.run_dir / "export")
    return counts, write_report(cur.store, cur.run_dir)
