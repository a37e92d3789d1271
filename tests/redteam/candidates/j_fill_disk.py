"""RED TEAM, bounded resources (Python past the allowlist, executed with `run_rejected`): at import
the candidate tries to fill the disk as __MODE__ says: 25,000 files in its persistent compile cache
(Triton's cache dir), or one file of 6 GiB in its scratch dir. kiln must stop it (the cache's bound,
RLIMIT_FSIZE or the scratch tmpfs), record why, and leave no more than the bounded cache behind."""

import os

MODE = "__MODE__"
if MODE == "many":
    top = os.path.join(os.environ["TRITON_CACHE_DIR"], "flood")
    os.makedirs(top, exist_ok=True)
    for i in range(25_000):
        with open(os.path.join(top, f"{i}.bin"), "wb") as f:
            f.write(b"x")
    import time

    time.sleep(5)  # give kiln's watch the time to see it
else:
    with open(os.path.join(os.environ["TMPDIR"], "big.bin"), "wb") as f:
        f.truncate(6 << 30)

# <include relu_kernel>
