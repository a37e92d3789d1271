"""The curriculum's rounds: plan at the frontier, write and validate modules, sample and check groups.

Round r: (1) the frontier built from rounds < r scores a pool of composable API sets and picks the
attempts for this round (stored before anything runs); (2) modules are written and validated, in
parallel over the probe slots, until `per_round` are accepted or the attempts run out (refused and
duplicate modules are stored with the reason); (3) every accepted module gets k Coder samples, each
checked through the evaluator's slots; (4) each group is rewarded. Everything is committed as it
finishes; a rerun skips what is stored.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kiln.agents.curriculum.base import ApiSet, ProblemTask, ProblemWriter
from kiln.agents.curriculum.catalogue import Catalogue
from kiln.agents.curriculum.sets import candidate_pool
from kiln.agents.curriculum.shapes import PROFILES
from kiln.agents.curriculum.validate import Budget, Sandboxing
from kiln.evals.curriculum.config import CurriculumConfig
from kiln.evals.curriculum.executors import Prober
from kiln.evals.curriculum.frontier import Frontier, Snapshot
from kiln.evals.curriculum.groups import reward_group, sample_one
from kiln.evals.curriculum.rewards import verified
from kiln.evals.curriculum.store import CurriculumStore, ModuleRow, SampleRow
from kiln.tools.errors import KilnInputError
from kiln.tools.evaluator import Evaluator
from kiln.tools.inputs import derive_seed
from kiln.tools.records import CheckRecord

Event = Callable[[str, Any], None]


class Curriculum:
    def __init__(self, run_dir: Path, cfg: CurriculumConfig, *, catalogue: Catalogue, writer: ProblemWriter,
                 coder_for: Callable[[ModuleRow], Any], evaluator: Evaluator, prober: Prober, gpu: Any = None,
                 concurrency: int = 4, on_event: Event | None = None) -> None:
        self.run_dir, self.cfg, self.cat = run_dir, cfg, catalogue
        self.writer, self.coder_for, self.evaluator, self.prober = writer, coder_for, evaluator, prober
        self.gpu, self.concurrency = gpu, max(1, concurrency)
        self.notify = on_event or (lambda kind, payload: None)
        self.budget = Budget.for_device(cfg.device)
        self.box = Sandboxing(isolation=cfg.check.isolation, bwrap=cfg.check.bwrap)
        run_dir.mkdir(parents=True, exist_ok=True)
        self.store = CurriculumStore(run_dir / "curriculum.sqlite")
        old = self.store.get_meta("config")
        if old is None:
            self.store.set_meta("config", cfg.model_dump())
        elif CurriculumConfig.model_validate(old).model_dump() != cfg.model_dump():  # older runs stored it flat
            raise KilnInputError(f"{run_dir} holds a curriculum with other settings; use another --out to start fresh")

    def run(self) -> None:
        for r in range(self.cfg.rounds):
            snap, done = self.plan(r)
            if done:
                continue
            self.notify("round_start", snap)
            self.make_modules(r, snap)
            self.sample_round(r)
            self.store.finish_round(r)
            self.notify("round_done", r)

    # -- (1) plan
    def frontier(self, upto: int) -> Frontier:
        fr = Frontier()
        for m in self.store.modules():
            if m.accepted and m.round < upto:
                rows = self.store.samples(m.id)
                fr.record(m.api_set, sum(verified(s.record) for s in rows), len(rows))
        return fr

    def plan(self, r: int) -> tuple[Snapshot, bool]:
        if (stored := self.store.snapshot(r)) is not None:
            return stored
        fr = self.frontier(r)
        rng = random.Random(derive_seed(self.cfg.seed, "plan", r))
        pool = candidate_pool(self.cat, rng, device=self.cfg.device, size=self.cfg.pool_factor * self.cfg.per_round,
                              max_ops=self.cfg.max_ops)
        chosen, weights = fr.choose(pool, math.ceil(self.cfg.attempts_factor * self.cfg.per_round), rng)
        snap = fr.snapshot(r, list(self.cat.families), chosen, weights)
        self.store.start_round(snap)
        return snap, False

    # -- (2) modules
    def make_modules(self, r: int, snap: Snapshot) -> None:
        stored = {m.attempt: m for m in self.store.modules(r)}
        accepted = sum(m.accepted for m in stored.values())
        hashes = {m.verdict.graph_hash: m.id for m in self.store.modules() if m.accepted and m.verdict}
        todo = [a for a in range(len(snap.chosen)) if a not in stored]
        with ThreadPoolExecutor(max_workers=self.prober.n_slots) as pool:
            while accepted < self.cfg.per_round and todo:
                batch, todo = todo[: self.cfg.per_round - accepted], todo[self.cfg.per_round - accepted:]
                for row in pool.map(lambda a: self.make_module(r, a, snap.chosen[a]), batch):
                    accepted += self._keep(row, hashes)

    def _keep(self, row: ModuleRow, hashes: dict[str, str]) -> int:
        h = row.verdict.graph_hash if row.verdict else None
        if row.accepted and h in hashes:
            row.accepted, row.reason = False, f"duplicate of {hashes[h]} (the same normalised graph)"
        elif row.accepted and h:
            hashes[h] = row.id
        self.store.add_module(row)
        self.notify("module", row)
        return int(row.accepted)

    def make_module(self, r: int, attempt: int, api_set: ApiSet) -> ModuleRow:
        t0 = time.monotonic()
        mid = f"r{r:02d}_m{attempt:03d}"
        task = ProblemTask(name=mid, api_set=api_set, ops=[self.cat.op(o) for o in api_set.ops],
                           device=self.cfg.device, seed=derive_seed(self.cfg.seed, "module", r, attempt),
                           max_numel=PROFILES[self.cfg.device].max_numel)
        row = ModuleRow(id=mid, round=r, attempt=attempt, api_set=api_set, writer_prompt=self._prompt(task))
        reply = self.writer.write_problem(task)
        row.author, row.source = reply.author, reply.source
        if not reply.ok or not reply.source:
            row.reason = f"the writer failed: {reply.error}"
        else:
            v = self.prober.validate(reply.source, reply.stress, device=self.cfg.device, budget=self.budget,
                                     box=self.box)
            row.verdict, row.accepted, row.reason = v, v.accepted, v.reason
            row.stress_sources = {c.name: c.source for c in reply.stress if c.name in v.stress}
        row.gen_s = round(time.monotonic() - t0, 3)
        return row

    def _prompt(self, task: ProblemTask) -> str | None:
        messages = getattr(self.writer, "messages", None)
        return "\n\n".join(str(m.content) for m in messages(task)) if callable(messages) else None

    # -- (3) samples, (4) rewards
    def sample_round(self, r: int) -> None:
        modules = [m for m in self.store.modules(r) if m.accepted]
        done = {(s.module, s.sample) for m in modules for s in self.store.samples(m.id)}
        jobs = [(m, j) for m in modules for j in range(self.cfg.samples) if (m.id, j) not in done]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            for row in pool.map(lambda job: self._sample(*job), jobs):
                self.notify("sample", row)
        for m in modules:
            reward_group(self.store, m, self.cfg)

    def _sample(self, module: ModuleRow, j: int) -> SampleRow:
        try:
            row = sample_one(module, j, coder=self.coder_for(module), evaluator=self.evaluator, cfg=self.cfg,
                             run_dir=self.run_dir, gpu=self.gpu)
        except Exception as err:  # noqa: BLE001 - one broken sample never stops the round; it scores as a failure
            rec = CheckRecord(problem=module.id, candidate=f"sample{j}", status="error", reasons=[repr(err)[:500]])
            row = SampleRow(module=module.id, sample=j, candidate="", coder_error=repr(err)[:500], record=rec)
        self.store.add_sample(row)
        return row
