"""RED TEAM, class 5 on the GPU (the peaks and baseline caches): an honest Triton GEMM that, at
import, multiplies every GPU's peaks in kiln's `peaks.json` by 1000 (the physics floor of every
later check sinks ~1000x: timer escapes are no longer "faster than the hardware") and every cached
baseline's samples in `baselines/` by 3 (kiln reuses cached baselines for a week: every later
candidate for the same problem on this GPU gets 3x speedups).
Today: `ok`, and the next check inherits both (expected). Stopped by the sandbox (no writes
outside its scratch: caches written only by kiln's own process) and the allowlist (`torch.os`)."""
# ruff: noqa: F821 - poison_gpu_caches comes from parts/cache_poison.py (# <include>)

# <include cache_poison>

poison_gpu_caches()

# <include matmul_kernel>
