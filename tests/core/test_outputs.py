"""The files a candidate's outputs travel in (`kiln.tools.check.outputs`): kiln makes each one, the
judge reads only that very regular file, at exactly the size the reference's output implies, and
never follows, blocks on or allocates by anything a worker put in its place."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
import torch

from kiln.tools.check.messages import Leaf
from kiln.tools.check.outputs import describe, read_raw, write_raw
from kiln.tools.check.slots import OutputFileError, make_slot
from kiln.tools.sketch import SKETCH_MIN_NUMEL

LEAF = [Leaf(name="out", kind="tensor", cls="Tensor", device="cpu", dtype="float32", shape=[3, 5])]


def _filled(tmp_path: Path) -> tuple:
    slot, fd = make_slot(str(tmp_path / "t.first"))
    out = torch.arange(15, dtype=torch.float32).reshape(3, 5)
    leaves, data = describe(out)
    write_raw(slot.path, data)
    return slot, fd, out, leaves


def test_a_filled_slot_reads_back_exactly(tmp_path: Path) -> None:
    slot, fd, out, leaves = _filled(tmp_path)
    assert leaves == LEAF
    (back,) = read_raw(slot, leaves, "cpu")
    assert torch.equal(back, out)
    os.close(fd)


def test_a_slot_cannot_be_made_twice_or_through_a_link(tmp_path: Path) -> None:
    make_slot(str(tmp_path / "a"))
    with pytest.raises(FileExistsError):
        make_slot(str(tmp_path / "a"))
    (tmp_path / "b").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):
        make_slot(str(tmp_path / "b"))
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("swap", ["symlink", "fifo", "dir", "other_file", "hardlink"])
def test_whatever_replaces_the_slot_is_refused_without_blocking(tmp_path: Path, swap: str) -> None:
    slot, fd, _, leaves = _filled(tmp_path)
    good = tmp_path / "answers.bin"
    good.write_bytes(b"\0" * 60)  # a file of exactly the right size
    os.unlink(slot.path)
    if swap == "symlink":
        os.symlink(good, slot.path)
    elif swap == "fifo":
        os.mkfifo(slot.path)
    elif swap == "dir":
        os.mkdir(slot.path)
    elif swap == "other_file":
        Path(slot.path).write_bytes(b"\0" * 60)
    else:
        os.link(good, slot.path)
    done: dict[str, object] = {}

    def read() -> None:
        try:
            read_raw(slot, leaves, "cpu")
        except OutputFileError as exc:
            done["err"] = str(exc)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "the judge blocked on what the worker put there"
    assert "err" in done, "the judge read a file kiln did not make"
    os.close(fd)


@pytest.mark.parametrize("size", [0, 59, 61, 1 << 20])
def test_a_file_of_any_other_size_is_refused_unread(tmp_path: Path, size: int) -> None:
    slot, fd = make_slot(str(tmp_path / "t"))
    os.ftruncate(fd, size)
    with pytest.raises(OutputFileError, match="needs 60"):
        read_raw(slot, LEAF, "cpu")
    os.close(fd)


def test_huge_outputs_travel_as_their_sample(tmp_path: Path) -> None:
    big = torch.zeros(SKETCH_MIN_NUMEL, dtype=torch.float16).expand(1, -1)
    leaves, data = describe(big, key=7)
    assert leaves[0].kind == "sketch" and data[0].numel() < big.numel() // 10


def test_write_raw_never_creates_a_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_raw(str(tmp_path / "missing"), [torch.ones(3)])
    assert not (tmp_path / "missing").exists()


def test_reading_is_bounded_by_the_reference_not_the_file(tmp_path: Path) -> None:
    """A worker that grows its file to gigabytes costs the judge one fstat, not a read."""
    slot, fd = make_slot(str(tmp_path / "t"))
    os.ftruncate(fd, 8 << 30)  # sparse: no disk used
    t0 = time.monotonic()
    with pytest.raises(OutputFileError):
        read_raw(slot, LEAF, "cpu")
    assert time.monotonic() - t0 < 1.0
    os.close(fd)
