"""Write the op signature of every KernelBench level-1 and level-2 problem (problem name -> the calls
and operators its Model uses), for the test that keeps kiln's few-shot examples off the benchmark.

    python bench/kernelbench_ops.py --root third_party/KernelBench > tests/fixtures/kernelbench_ops.json

Only names are kept (facts about the benchmark), never its code.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kiln.agents.casecheck import problem_ops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, required=True, help="a KernelBench checkout")
    args = ap.parse_args()
    out = {}
    for level in ("level1", "level2"):
        for path in sorted((args.root / "KernelBench" / level).glob("*.py")):
            out[f"{level}/{path.stem}"] = problem_ops(path.read_text())
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
