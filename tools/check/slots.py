"""The files a candidate's outputs travel in, from the side that makes and opens them: kiln's own
process creates each one (`make_slot`), the judge opens it only as that very regular file
(`open_slot`). No torch here: the parent makes slots while a fresh `kiln check` still has no reason to
import it (`kiln.tools.check.outputs` turns the bytes into tensors, in the workers)."""

from __future__ import annotations

import os
import stat

from kiln.tools.check.messages import Slot

OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


class OutputFileError(Exception):
    """A candidate's output file is not the one kiln made, or not the size its output implies."""


def open_slot(slot: Slot) -> int:
    """An fd on the file the parent made for this slot, or OutputFileError: the path must still be
    that regular file (same device and inode), reached without following a link; opening never
    blocks (a FIFO put in its place is refused, not waited on)."""
    try:
        fd = os.open(slot.path, os.O_RDONLY | os.O_NONBLOCK | OPEN_FLAGS)
    except OSError as exc:
        raise OutputFileError(f"its output file could not be opened ({exc.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (slot.ino and (st.st_dev, st.st_ino) != (slot.dev, slot.ino)):
        os.close(fd)
        raise OutputFileError("its output file was replaced (not the regular file kiln created for it)")
    return fd


def make_slot(path: str) -> tuple[Slot, int]:
    """Parent side: create the empty file a worker will fill (it must not exist yet) and keep an fd
    on it; the Slot names the path and the inode."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | OPEN_FLAGS, 0o600)
    st = os.fstat(fd)
    return Slot(path=path, dev=st.st_dev, ino=st.st_ino), fd
