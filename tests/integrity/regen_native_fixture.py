"""Regenerate tests/fixtures/native/load_inline_cpu.json: the dynamic symbols of a real extension
built by torch's `load_inline` (a CPU-only one, so any machine can rebuild it; about 2.5 minutes on
two cores), reduced to what `symbols.judge` reads (imports, `PyInit_*`, `DT_NEEDED`).

Run: `.venv/bin/python tests/integrity/regen_native_fixture.py [path/to/built.so]` (without a path
it builds one in a temporary folder)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).parents[1] / "fixtures" / "native" / "load_inline_cpu.json"
SOURCE = r"""
#include <torch/extension.h>
#include <vector>
torch::Tensor twice(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expects contiguous float32");
    auto y = torch::empty_like(x);
    const float* p = x.data_ptr<float>();
    float* q = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) q[i] = 2 * p[i];
    return y;
}
"""


def build(folder: Path) -> Path:
    from torch.utils.cpp_extension import load_inline

    mod = load_inline(name="kiln_native_fixture", cpp_sources=SOURCE, functions=["twice"],
                      build_directory=str(folder), verbose=False)
    return Path(mod.__file__)


def main() -> None:
    from kiln.tools.integrity.elf import parse
    from kiln.tools.integrity.symbols import collect

    so = Path(sys.argv[1]) if len(sys.argv) > 1 else build(Path(tempfile.mkdtemp()))
    dyn = parse(collect(so))
    dyn.symbols = [s for s in dyn.symbols if s.undefined or s.name.startswith("PyInit_")]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(dyn.model_dump_json(indent=1) + "\n")
    print(f"wrote {OUT} ({len(dyn.symbols)} symbols)")


if __name__ == "__main__":
    main()
