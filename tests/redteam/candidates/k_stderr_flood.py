"""RED TEAM, RAM through the worker's stderr (Python past the allowlist, executed with
`run_rejected`): at import the candidate writes 256 MiB to its stderr, a file in kiln's control dir,
in RAM (/dev/shm), then waits a few seconds and behaves. Before the fix that file stayed until the
kiln process ended: every such candidate of a long `kiln run` or batch kept up to RLIMIT_FSIZE
(4 GiB) of the machine's memory."""

import os
import time

_chunk = b"x" * (1 << 20)
for _ in range(256):
    os.write(2, _chunk)
time.sleep(3)  # kiln watches its workers once a second while it waits for a reply

# <include relu_kernel>
