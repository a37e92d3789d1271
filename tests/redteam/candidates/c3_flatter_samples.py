"""RED TEAM, class 3 (forged timing): an honest ReLU whose worker adds, to every reply it sends,
the timing fields an older kiln believed (per-call samples 5x faster, a near-zero worker time,
event times). kiln now times each of the worker's commands on its own clock and reads no time from
a reply: the forgery must move no figure. Runs on the CPU with `time_on_cpu` (host clocks) as on a
GPU. Stopped earlier by the allowlist (`torch.sys`)."""

# <include flatter_samples>
# <include relu_kernel>
