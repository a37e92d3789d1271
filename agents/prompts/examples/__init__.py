"""Few-shot examples for the Coder: runnable candidate files, each checked by the tests against the
problem in `problems/` that its header names."""
