"""The real model's best kernels (tests/fixtures/llm-transcripts/kernels) through `kiln run` on the
GPU at KernelBench's real sizes: timed against eager and torch.compile, profiled with Nsight Compute,
and the Judge's request (a real LLM role on the scripted chat model) checked for the profile digest
and its roofline numbers.

    python bench/transcripts_gpu.py --root third_party/KernelBench --out runs/transcripts-gpu

Each run: the Coder's replies are the kernel (twice), the Judge answers `optimize` once, the target
is out of reach (100x, and no roofline stop), two iterations; so the Judge is asked exactly once, with a timed and
profiled kernel in front of it. Prints and writes `<out>/transcripts_gpu.json`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kiln.graphs.runner import run_problem

KERNELS = Path(__file__).parents[1] / "tests" / "fixtures" / "llm-transcripts" / "kernels"
PROBLEMS = {"76_Gemm_Add_ReLU": "level2", "99_Matmul_GELU_Softmax": "level2",
            "45_Gemm_Sigmoid_LogSumExp": "level2", "40_LayerNorm": "level1"}
VERDICT = {"mode": "optimization", "diagnosis": "replayed", "bottleneck": "memory bandwidth", "evidence": [],
           "plan": "keep the kernel", "next": "optimize", "stop_reason": None}


def script_for(kernel: Path, folder: Path) -> Path:
    reply = f"The kernel.\n```python\n{kernel.read_text()}```\n"
    path = folder / f"{kernel.stem}.script.json"
    path.write_text(json.dumps({"coder": [reply, reply], "judge": [{"structured": VERDICT}],
                                "proposer": [{"structured": {"cases": []}}] * 2}))
    return path


def judge_prompt(run: Path) -> str:
    calls = sorted((run / "llm").glob("*_judge.json"))
    return (json.loads(calls[0].read_text()).get("prompt") or "") if calls else ""


def one(root: Path, name: str, out: Path, trials: int, device: str = "cuda") -> dict:
    problem = root / "KernelBench" / PROBLEMS[name] / f"{name}.py"
    run = out / name
    summary = run_problem(problem, out=run, llm=f"scripted:{script_for(KERNELS / f'{name}.py', out)}",
                          device=device, max_iters=2, target_speedup=100.0, roofline_stop_pct=101.0, trials=trials)
    prompt = judge_prompt(run)
    digest = prompt.split("Profile digest:", 1)[1] if "Profile digest:" in prompt else ""
    return {"problem": name, "status": summary.status, "correct": summary.best.correct,
            "speedup_vs_eager": summary.best.speedup_vs_eager, "speedup_vs_compile": summary.best.speedup_vs_compile,
            "judge_calls": summary.usage_by_role.get("judge").calls if "judge" in summary.usage_by_role else 0,
            "digest_in_judge_prompt": bool(digest), "digest_from_ncu": "(ncu)" in digest,
            "digest_has_roofline": "of roofline" in digest, "digest_head": digest.strip()[:600]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, required=True, help="a KernelBench checkout")
    ap.add_argument("--out", type=Path, default=Path("runs/transcripts-gpu"))
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--device", default="cuda", help="cuda (the measurement); cpu only to try the plumbing")
    ap.add_argument("--only", nargs="*", default=list(PROBLEMS), help="a subset of the problems")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [one(args.root, name, args.out, args.trials, args.device) for name in args.only]
    (args.out / "transcripts_gpu.json").write_text(json.dumps(rows, indent=1))
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
