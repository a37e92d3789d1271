"""What one timing-audit projection costs on the GPU (`kiln.tools.timing.audit`), whole and by part:
a commit projects every output of a lap, so this is most of a lap's commit time.

    . bench/device_env.sh && python bench/projection_speed.py [--shape 16384 4096]
"""

from __future__ import annotations

import argparse
import math

import torch

from kiln.tools.timing import audit


def timed_ms(fn, reps: int = 20) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", type=int, nargs="+", default=[16384, 4096])
    a = ap.parse_args()
    x = torch.randn(*a.shape, device="cuda")
    n = x.numel()
    width = audit.WIDTH
    rows = n // width
    chunk = x.reshape(-1)[:min(rows, audit.ROWS_PER_CHUNK) * width].view(-1, width)
    cols, row_signs, _ = audit.sign_table(1, 0, width, rows, 0, "cuda")
    y = audit._sines(chunk, 1.3, 0.4)
    parts = {
        "project (whole output)": lambda: audit._project_tensor(x, 7, 0, 1.0),
        "sign_table": lambda: audit.sign_table(7, 0, width, rows, 0, "cuda"),
        "sines (one block of rows)": lambda: audit._sines(chunk, 1.3, 0.4),
        "Y @ cols (one block)": lambda: y @ cols,
        "exact g (one block)": lambda: audit._g(chunk, 1.3, 0.4),
        "copy of the output (x.clone)": lambda: x.clone(),
    }
    gb = x.numel() * x.element_size() / 1e9
    print(f"output {list(x.shape)} fp32, {gb:.2f} GB; blocks of {chunk.shape[0]} rows x {width}")
    print("| part | ms |\n|---|---|")
    for name, fn in parts.items():
        print(f"| {name} | {timed_ms(fn):.3f} |")
    blocks = math.ceil(rows / audit.ROWS_PER_CHUNK)
    print(f"\n{blocks} blocks per output; a clone reads and writes it once")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
