"""The Linux calls the sandbox needs and Python 3.11 lacks (`unshare`, `setns`, `mount`, `prctl`,
`capset`), through ctypes. Each raises `SandboxError` naming the step that failed."""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
MS_NOSYMFOLLOW, MS_NOATIME, MS_NODIRATIME, MS_REC = 256, 1024, 2048, 0x4000
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
PER_MOUNT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                   "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "nosymfollow": MS_NOSYMFOLLOW}
PR_SET_PDEATHSIG, PR_GET_DUMPABLE, PR_SET_DUMPABLE = 1, 3, 4
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
CAP_VERSION_3 = 0x20080522
CAP_SYS_ADMIN = 21

_libc = ctypes.CDLL(None, use_errno=True)


class SandboxError(OSError):
    """A containment step failed; the message says which and why."""


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise SandboxError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)), "setns")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [s.encode() if s is not None else None for s in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {fstype or ''} on {target}")


def mounts() -> list[tuple[str, set[str]]]:
    """(mount point, its per-mount options) of every mount this process's mount namespace holds,
    from /proc/self/mountinfo (octal escapes in paths decoded)."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" ")
        if len(fields) > 5:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            out.append((point, set(fields[5].split(","))))
    return out


def remount_read_only(point: str, options: set[str]) -> None:
    """Make the mount at `point` read-only in this mount namespace, keeping its other per-mount
    flags (a user namespace may not clear flags a more privileged one set, and must keep its
    atime mode)."""
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY
    for name, flag in PER_MOUNT_FLAGS.items():
        flags |= flag if name in options else 0
    if not options & {"noatime", "relatime"}:
        flags |= MS_STRICTATIME
    mount(None, point, None, flags)


def prctl(option: int, arg: int = 0, arg3: int = 0) -> int:
    ret = _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(arg3), ctypes.c_ulong(0),
                      ctypes.c_ulong(0))
    if ret < 0:
        err = ctypes.get_errno()
        raise SandboxError(err, f"prctl({option}): {os.strerror(err)}")
    return int(ret)


def map_ids(uid_inside: int, uid_outside: int, gid_inside: int, gid_outside: int) -> None:
    """After unshare(CLONE_NEWUSER): map one uid and one gid (what an unprivileged process may)."""
    try:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid_inside} {uid_outside} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid_inside} {gid_outside} 1")
    except OSError as exc:
        raise SandboxError(exc.errno or 1, f"user namespace id maps: {exc.strerror}") from None


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def last_cap() -> int:
    try:
        return int(open("/proc/sys/kernel/cap_last_cap").read())
    except (OSError, ValueError):
        return 40


def drop_capabilities() -> None:
    """Empty the ambient, effective, permitted and inheritable sets, and the bounding set where
    this process may (CAP_SETPCAP; always in a fresh user namespace). With no_new_privs, which
    the sandbox sets next, nothing this process executes regains any."""
    for cap in range(last_cap() + 1):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except SandboxError as exc:
            if exc.errno == 1:  # EPERM: no CAP_SETPCAP (bubblewrap left only CAP_SYS_ADMIN)
                break
            if exc.errno != 22:  # EINVAL: a capability this kernel does not know
                raise
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(_CapHeader(CAP_VERSION_3, 0)), data), "capset")


def effective_caps() -> int:
    """This process's effective capability mask (from /proc/self/status)."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
        return next((int(ln.split()[1], 16) for ln in lines if ln.startswith("CapEff:")), 0)
    except (OSError, ValueError):
        return 0


def dumpable() -> bool:
    return prctl(PR_GET_DUMPABLE) != 0
