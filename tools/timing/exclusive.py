"""One timing at a time per GPU, across threads and processes.

Two checks timing on one GPU at once time-slice it, and each reads the other's kernels as its own:
on the H200 six concurrent checks read a 1.4x kernel as 0.02-0.09x eager, and in `kiln model` (two
checks at a time) a group norm 1.44x faster than eager alone read 0.32x while a convolution's check
timed beside it. So a check's timing stage takes this GPU's lock: an `flock` on a file in kiln's
cache folder. `flock` locks belong to an open file description, so two threads of one process
exclude each other as two processes do, and the kernel drops the lock when its holder dies.

Compiling and the correctness trials of other checks still run meanwhile (they are not serialised:
throughput); a check records how long it waited and how many other processes held the GPU while it
timed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

POLL_S = 0.005


@contextlib.contextmanager
def gpu_timing_lock(folder: Path, gpu_index: int, max_wait_s: float) -> Iterator[float | None]:
    """Hold GPU `gpu_index`'s timing lock; yields the seconds waited for it, or None when it was
    not free within `max_wait_s` (the caller times anyway and says so)."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"gpu{gpu_index}.timing.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                 0o600)
    t0 = time.monotonic()
    held = False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
                break
            except BlockingIOError:
                if time.monotonic() - t0 >= max_wait_s:
                    break
                time.sleep(POLL_S)
        yield round(time.monotonic() - t0, 3) if held else None
    finally:
        if held:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
