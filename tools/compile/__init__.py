"""kiln.tools.compile: import candidates (Triton from a real file, CUDA via load_inline or kiln's fast
path), classify build failures and trim compiler errors for a Coder. See docs/cuda-fast-path.md."""

from kiln.tools.compile.detect import detect_lang, extract_cuda_sources
from kiln.tools.compile.errors import trim_errors
from kiln.tools.compile.importer import (
    classify_first_call_error,
    gpu_arch_list,
    import_candidate,
    source_hash,
)
from kiln.tools.compile.nvcc_check import nvcc_compile_check
from kiln.tools.compile.paths import default_cache_root

__all__ = [
    "classify_first_call_error",
    "default_cache_root",
    "detect_lang",
    "extract_cuda_sources",
    "gpu_arch_list",
    "import_candidate",
    "nvcc_compile_check",
    "source_hash",
    "trim_errors",
]
