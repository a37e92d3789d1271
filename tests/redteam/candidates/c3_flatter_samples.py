"""RED TEAM, class 3 (forged timing that passes kiln's own clock): an honest ReLU whose worker's
`time_loop` reply is rewritten (through `torch.sys.modules`): the samples keep their sum, so the
parent's bracket around the loop (`timing.parent-bound`) sees nothing wrong, but 80% of them claim
a 5x faster call, so the median and every speedup are 5x too good. Timed outputs are real, so
the re-checks pass. Runs on the CPU with `time_on_cpu` (host clocks) as on a GPU.
Today: `ok`, 5x. Stopped by samples kiln measures itself or cross-checks per call (a trace, or
per-call timestamps outside the candidate's process), and the allowlist (`torch.sys`)."""

# <include flatter_samples>
# <include relu_kernel>
