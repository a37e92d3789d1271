"""kiln.evals: batch runs, metrics, reports, and the command line."""
