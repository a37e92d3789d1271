"""Batch evaluation (`kiln eval`, `kiln report`): problems found (`problems`), one job per (problem,
sample) (`jobs`), many in flight with a resumable store (`run`, `store`), metrics (`metrics`), the
report and the comparison of two batches (`report`, `compare`), progress lines (`progress`)."""
