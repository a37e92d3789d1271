"""RED TEAM, class 3 on the GPU (forged timing that passes kiln's own clock): an honest Triton GEMM
whose worker's `time_loop` reply keeps the samples' sum (what the parent's clock around the loop
checks) while 80% of them claim a 5x faster call: median and speedups x5. A GEMM's physics
floor assumes bf16 tensor cores, far below an fp32 kernel's time, so no floor catches it.
Today: `ok` at 5x (expected). Stopped by samples kiln measures or cross-checks per call outside
the candidate's process (a trace), and the allowlist (`torch.sys`)."""

# <include flatter_samples>
# <include matmul_kernel>
