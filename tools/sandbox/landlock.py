"""Landlock (Linux >= 5.13) through ctypes: a process restricts its own file, TCP and IPC reach.

A ruleset names every access right it *handles*; a handled right is denied except beneath the paths
a rule grants it on. Rights by ABI version: 1 the file-system rights, 2 `REFER` (moving a file
between directories), 3 `TRUNCATE`, 4 TCP bind/connect, 5 ioctl on device files, 6 scopes (signals
and abstract unix sockets may not cross the domain's boundary), 7 audit logging flags (nothing to
restrict). `restrict()` handles every right the running kernel knows, so what it does not grant is
denied; it needs `no_new_privs` first. Python 3.11 has no binding: raw syscalls (444-446 on both
x86-64 and arm64) with the kernel's struct layouts.
"""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Iterable

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the rights a rule on a file may carry
READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (1 << 16) - 1  # everything beneath the path: create, remove, rename, truncate, ioctl
DEVICE = READ_FILE | WRITE_FILE | IOCTL_DEV


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is __attribute__((packed)): 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class LandlockError(OSError):
    """A Landlock call failed (errno and which step)."""


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(nr: int, *args: object) -> int:
    return int(_libc.syscall(ctypes.c_long(nr), *args))


def abi_version() -> int:
    """The kernel's Landlock ABI, 0 when Landlock is missing or disabled."""
    ret = _syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(ret, 0)


def handled_fs(abi: int) -> int:
    return FS_BY_ABI[max(k for k in FS_BY_ABI if k <= abi)] if abi >= 1 else 0


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise LandlockError(err, f"landlock {what}: {os.strerror(err)}")
    return ret


_OPENED: dict[str, tuple[int, bool]] = {}  # path -> (O_PATH fd, is a dir), opened ahead by `preopen`


def preopen(paths: Iterable[str]) -> None:
    """Open these paths now (a fork server, once), so each worker's rules cost no lookups."""
    for path in paths:
        if path not in _OPENED:
            opened = _open(path)
            if opened:
                _OPENED[path] = opened


def _open(path: str) -> tuple[int, bool] | None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return None
    return fd, stat.S_ISDIR(os.fstat(fd).st_mode)


def _add_path(ruleset: int, path: str, access: int, handled: int) -> bool:
    """Grant `access` beneath `path` (files get only the file rights); False when it does not exist."""
    cached = _OPENED.get(path)
    opened = cached or _open(path)
    if opened is None:
        return False
    fd, is_dir = opened
    try:
        allowed = access & handled & (~0 if is_dir else FILE_RIGHTS)
        if allowed:
            attr = _PathBeneath(allowed_access=allowed, parent_fd=fd)
            _check(_syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                            ctypes.byref(attr), ctypes.c_uint32(0)), f"rule on {path}")
    finally:
        if cached is None:
            os.close(fd)
    return True


def restrict(rules: Iterable[tuple[str, int]], *, abi: int | None = None, deny_tcp: bool = True,
             scope: bool = True) -> int:
    """Restrict this process (and all it starts) to `rules` (path, rights). Every right the kernel
    knows is handled; TCP bind/connect are denied outright (ABI >= 4) and signals and abstract unix
    sockets are scoped to this domain (ABI >= 6) unless asked not to. Returns the ABI applied."""
    abi = abi_version() if abi is None else abi
    if abi < 1:
        raise LandlockError(38, "landlock is not available in this kernel")
    fs = handled_fs(abi)
    attr = _RulesetAttr(handled_access_fs=fs,
                        handled_access_net=(NET_BIND_TCP | NET_CONNECT_TCP) if deny_tcp and abi >= 4 else 0,
                        scoped=(SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if scope and abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _check(_syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)),
                     "create_ruleset")
    try:
        for path, access in rules:
            _add_path(ruleset, path, access, fs)
        _check(_syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)), "restrict_self")
    finally:
        os.close(ruleset)
    return abi
