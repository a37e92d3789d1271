"""Run the honest Triton reductions of kernels.py on the jobs in JOBS.json and save inputs and
outputs to OUT.pt: `TRITON_INTERPRET=1 python run.py JOBS.json OUT.pt` (a real subprocess: the
interpreter is chosen when triton is imported). A job: {"op", "rows", "n", "dist", "seed"}."""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import kernels  # noqa: E402 - after the path is set


def draw(dist: str, rows: int, n: int, gen: torch.Generator) -> torch.Tensor:
    """x1000 / x0.001: KernelBench's torch.rand scaled; zero-mean: randn, cancelling sums;
    cancel: 1000 randn minus its row mean (taken in float64), so every row sums to about 0 while
    its terms are ~1000 (the issue's row sum: expected 10.07 from 300 terms of ~1000)."""
    if dist in ("x1000", "x0.001"):
        return torch.rand(rows, n, generator=gen) * float(dist[1:])
    x = torch.randn(rows, n, generator=gen)
    if dist == "cancel":
        x = (1000 * x.double() - 1000 * x.double().mean(1, keepdim=True)).float()
    return x


def run(job: dict) -> dict:
    gen = torch.Generator().manual_seed(job["seed"])
    x = draw(job["dist"], job["rows"], job["n"], gen)
    if job["op"] == "layer_norm":
        w, b = torch.randn(job["n"], generator=gen), torch.randn(job["n"], generator=gen)
        return {"inputs": (x, w, b), "output": kernels.layer_norm(x, w, b)}
    return {"inputs": (x,), "output": getattr(kernels, job["op"])(x)}


if __name__ == "__main__":
    jobs = json.loads(Path(sys.argv[1]).read_text())
    torch.save([run(j) for j in jobs], sys.argv[2])
