"""RED TEAM, class 5 on the GPU (the peaks cache): an honest Triton GEMM that, at import, rewrites
`~/.cache/kiln/peaks.json` so every GPU's measured bandwidth and matmul rate are 1000x too high
(adding an entry for its own GPU under kiln's cache key if there is none). The physics floor of
every later check (and its own: its reference worker reads the cache after its trials) is then
~1000x too low: timer escapes are no longer "faster than the hardware".
Today: `ok`, and the next check's floor uses the poisoned peaks. Stopped by the sandbox (no writes
outside its scratch; caches written only by trusted processes) and the allowlist (`torch.os`)."""
# ruff: noqa: F821 - poison_peaks comes from parts/peaks_poison.py (# <include>)

# <include peaks_poison>

poison_peaks(1000)

# <include matmul_kernel>
