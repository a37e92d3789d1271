"""Reference problems (KernelBench format) that the few-shot examples solve."""
