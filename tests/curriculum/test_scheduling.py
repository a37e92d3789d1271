"""Multi-GPU scheduling on CPU with simulated slots (as bench/batch_replay.py does): a round's
checks spread over N GPU slots through the batch runner's SlottedEvaluator, never two on one GPU;
module probes through LocalProber's slots the same way."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kiln.agents.base import CoderReply, CoderTask
from kiln.agents.curriculum.base import ApiSet
from kiln.agents.curriculum.validate import Budget, ModuleVerdict
from kiln.evals.curriculum.config import CurriculumConfig
from kiln.evals.curriculum.executors import LocalProber
from kiln.evals.curriculum.rounds import Curriculum
from kiln.evals.curriculum.store import ModuleRow
from kiln.evals.executors import SlottedEvaluator
from kiln.tools.records import CheckOptions, CheckRecord, CorrectnessRecord

HOLD_S = 0.3


class Replay:
    """Holds its GPU for HOLD_S, records (gpu, start, end), returns a verified record."""

    def __init__(self) -> None:
        self.busy: list[tuple[int, float, float]] = []
        self.lock = threading.Lock()

    def check(self, problem: Path, candidate: Path, options: CheckOptions) -> CheckRecord:
        start = time.monotonic()
        time.sleep(HOLD_S)
        with self.lock:
            self.busy.append((options.gpu_index, start, time.monotonic()))
        return CheckRecord(problem=str(problem), candidate=str(candidate), status="ok", correct=True,
                           correctness=CorrectnessRecord(passed=True, atol=1e-4, rtol=1e-4, n_trials=2, n_passed=2))


class FixedCoder:
    def write(self, task: CoderTask) -> CoderReply:
        return CoderReply(ok=True, source=f"# sample {task.sibling}\n")


def _overlaps(busy: list[tuple[int, float, float]]) -> bool:
    for gpu in {b[0] for b in busy}:
        spans = sorted((s, e) for g, s, e in busy if g == gpu)
        if any(spans[i + 1][0] < spans[i][1] for i in range(len(spans) - 1)):
            return True
    return False


@pytest.mark.parametrize("gpus", [1, 2, 4])
def test_a_rounds_checks_spread_over_every_gpu_slot_never_two_per_gpu(tmp_path: Path, gpus: int) -> None:
    replay = Replay()
    ev = SlottedEvaluator(replay, list(range(gpus)))
    cfg = CurriculumConfig(rounds=1, per_round=4, samples=2, device="cpu")
    cur = Curriculum(tmp_path, cfg, catalogue=None, writer=None, coder_for=lambda m: FixedCoder(),  # type: ignore[arg-type]
                     evaluator=ev, prober=LocalProber([0]), concurrency=2 * gpus)
    for i in range(4):
        cur.store.add_module(ModuleRow(id=f"r00_m{i:03d}", round=0, attempt=i, api_set=ApiSet(ops=["relu"],
                                       families=["elementwise"]), source="# module\n", accepted=True))
    start = time.monotonic()
    cur.sample_round(0)
    wall = time.monotonic() - start
    assert len(replay.busy) == 8 and {b[0] for b in replay.busy} == set(range(gpus))
    assert not _overlaps(replay.busy)
    assert wall < 8 * HOLD_S / gpus + 1.5  # the slots work side by side
    assert len(cur.store.samples()) == 8


def test_checks_per_gpu_lets_that_many_share_a_gpu_and_no_more() -> None:
    """`per_gpu` (the reward loop's `checks_per_gpu`): k checks at once on each GPU, never k + 1."""
    replay = Replay()
    ev = SlottedEvaluator(replay, [0, 1], per_gpu=3)
    assert ev.n_slots == 6
    threads = [threading.Thread(target=ev.check, args=(Path(f"p{i}"), Path("c"), CheckOptions())) for i in range(12)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    assert len(replay.busy) == 12 and {b[0] for b in replay.busy} == {0, 1}
    for gpu in (0, 1):
        events = sorted([(s, 1) for g, s, _ in replay.busy if g == gpu] + [(e, -1) for g, _, e in replay.busy if g == gpu],
                        key=lambda x: (x[0], x[1]))
        depth = peak = 0
        for _, d in events:
            depth += d
            peak = max(peak, depth)
        assert peak == 3, (gpu, peak)
    assert wall < 12 * HOLD_S / 6 + 1.0
    with pytest.raises(ValueError, match="per_gpu"):
        SlottedEvaluator(replay, [0], per_gpu=0)


def test_module_probes_take_a_gpu_slot_each() -> None:
    seen: list[tuple[int, float, float]] = []
    lock = threading.Lock()

    def fake_validate(source, stress, *, device, budget, gpu_index, box):  # noqa: ANN001, ANN202
        start = time.monotonic()
        time.sleep(HOLD_S)
        with lock:
            seen.append((gpu_index, start, time.monotonic()))
        return ModuleVerdict(accepted=True, graph_hash=source)

    prober = LocalProber([0, 1, 2], validate=fake_validate)  # a stand-in probe that holds its GPU
    threads = [threading.Thread(target=prober.validate, args=(f"m{i}", []),
                                kwargs={"device": "cuda", "budget": Budget.for_device("cuda")}) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {s[0] for s in seen} == {0, 1, 2} and not _overlaps(seen)


def test_the_config_embeds_the_check_and_roles_and_older_runs_resume(tmp_path: Path) -> None:
    """A curriculum's config is the shared check and role models plus its own fields; the flat
    config older runs stored still matches the same settings on a rerun."""
    from kiln.evals.curriculum.store import CurriculumStore
    from kiln.tools.errors import KilnInputError

    cfg = CurriculumConfig(rounds=1, per_round=4, samples=2, device="cpu", trials=3, llm="builtin", seed=7,
                           check_timeout_s=120.0, isolation="best-effort")
    assert (cfg.check.trials, cfg.check.timeout_s, cfg.check.device, cfg.check.seed) == (3, 120.0, "cpu", None)
    assert cfg.roles.llm == "builtin" and cfg.seed == 7 and cfg.device == "cpu"
    old = {"rounds": 1, "per_round": 4, "samples": 2, "families": None, "catalogues": [], "max_ops": 3,
           "attempts_factor": 3.0, "pool_factor": 6, "stress": 1, "llm": "builtin", "coder_llm": None,
           "proposer_llm": None, "base_url": None, "lang": "triton", "device": "cpu", "dtype": "fp32", "trials": 3,
           "check_timeout_s": 120.0, "seed": 7, "isolation": "best-effort", "bwrap": None,
           "reward": cfg.reward.model_dump()}
    CurriculumStore(tmp_path / "curriculum.sqlite").set_meta("config", old)
    Curriculum(tmp_path, cfg, catalogue=None, writer=None, coder_for=lambda m: FixedCoder(),  # type: ignore[arg-type]
               evaluator=SlottedEvaluator(Replay(), [0]), prober=LocalProber([0]))
    changed = cfg.model_copy(update={"check": cfg.check.model_copy(update={"trials": 4})})
    with pytest.raises(KilnInputError, match="other settings"):
        Curriculum(tmp_path, changed, catalogue=None, writer=None, coder_for=lambda m: FixedCoder(),  # type: ignore[arg-type]
                   evaluator=SlottedEvaluator(Replay(), [0]), prober=LocalProber([0]))


def test_checks_per_gpu_is_refused_where_it_cannot_hold() -> None:
    from kiln.evals.curriculum.executors import build_executors
    from kiln.tools.errors import KilnInputError

    with pytest.raises(KilnInputError, match="local executor"):
        build_executors("ray", "cpu", checks_per_gpu=2)
    with pytest.raises(KilnInputError, match="at least 1"):
        build_executors("local", "cpu", checks_per_gpu=0)
    ev, _ = build_executors("local", "cpu", cpu_slots=2, checks_per_gpu=4)  # no GPU: the CPU slots, as before
    assert ev.n_slots == 2
