"""A run on shrunk sizes shows the Coder the real sizes and the target GPU's floors for them (issue 25
item 10). The run names the unshrunk problem in `RunOptions.original_problem` (what `kiln run
--shrink` sets); its work is counted on the meta device, sandboxed, so any size costs nothing."""

from __future__ import annotations

from pathlib import Path

from graph_helpers import PROBLEM, judge, reply, roles, run

from kiln.agents.coder import LLMCoder
from kiln.agents.targetwork import measure_target

GEMM = Path(__file__).parents[1] / "fixtures" / "llm-transcripts" / "76" / "76_Gemm_Add_ReLU.py"


def kernelbench_sizes(src: str) -> str:
    return (src.replace("batch_size = 128", "batch_size = 1024").replace("in_features = 256", "in_features = 8192")
            .replace("out_features = 256", "out_features = 8192"))


def test_the_real_sizes_work_is_counted_on_the_meta_device():
    work = measure_target(kernelbench_sizes(GEMM.read_text()), gpu_name=None)
    assert work.error is None, work.error
    assert work.flops == 2 * 1024 * 8192 * 8192  # 137 GFLOP: minutes on this CPU, nothing on meta
    assert work.io_bytes == 4 * (1024 * 8192 + 8192 * 8192 + 8192 + 1024 * 8192)  # x, W (no bias), the bias, out
    assert work.gpu == "NVIDIA H200" and work.peak_source == "recorded" and "in_features = 8192" in work.sizes
    lines = "\n".join(work.floor_lines())
    assert "moving the 335.6 MB of inputs, weights and outputs once: at least 65.0 us" in lines
    assert "137.4 GFLOP on fp32 FMA units: at least 2177" in lines and "TF32 tensor cores" in lines


def test_a_shrunk_run_shows_the_coder_the_real_sizes_and_their_floors(tmp_path):
    original = tmp_path / "relu_real.py"
    original.write_text(PROBLEM.read_text().replace("rows = 37", "rows = 4096").replace("cols = 129", "cols = 8192"))
    r = roles([reply("good")], [judge("stop")], [{"cases": []}])
    summary = run(tmp_path, r, max_iters=1, original_problem=str(original))
    assert summary.best.correct
    task = r.coder.tasks[0]
    assert task.target is not None and task.target.sizes == "rows = 4096, cols = 8192"
    system = LLMCoder(None).messages(task)[0].content
    assert "The real problem: this run checks the problem at shrunk sizes" in system
    assert "rows = 4096, cols = 8192" in system and "On NVIDIA H200 (recorded peaks)" in system
    assert "moving the 268.4 MB of inputs, weights and outputs once" in system  # 4096 x 8192 fp32, in and out
    plain = LLMCoder(None).messages(r.coder.tasks[0].model_copy(update={"target": None}))[0].content
    assert "The real problem" not in plain
