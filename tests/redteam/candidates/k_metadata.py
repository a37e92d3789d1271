"""RED TEAM, reach past Landlock (Python past the allowlist, executed with `run_rejected`): Landlock
decides which files a worker may open, not what it may do to their metadata, and the kernel lets a
process whose uid is root's outside every namespace write the machine's sysctls on mode bits alone.
At import the candidate tries, as __MODE__ says:
- `chmod`: chmod and touch what the fork server shares with every worker: the candidates' cache root
  (mode 000 and an old mtime: the next check could make no cache), kiln's control dir, the scratch
  root, this check's inputs and shared dirs, the sandbox's /tmp and /dev/shm, the host's /dev/null
  (a no-op change there: the same mode, only whether the kernel allows it);
- `sysctl`: open global sysctls and the SysRq trigger for writing (never writes a byte).
Whatever it could change it names in an exception (the check then fails to load); contained, it is
an honest ReLU. Before the fix: with kiln run as root every one of them worked."""

import os

MODE = "__MODE__"
_cache = os.path.dirname(os.environ["TRITON_CACHE_DIR"])
_check = os.path.dirname(os.getcwd())
_escaped = []


def _try(what, fn, *args):
    try:
        fn(*args)
        _escaped.append(what)
    except OSError:
        pass


if MODE == "chmod":
    _root = os.path.dirname(_cache)  # $KILN_CACHE_DIR/cand: every candidate's cache lives in it
    _try("chmod cand/", os.chmod, _root, 0)
    _try("utime cand/", os.utime, _root, (0, 0))
    _shared = {"zygote/": os.path.join(os.path.dirname(_root), "zygote"), "scratch root": os.path.dirname(_check),
               "ctl/": os.path.dirname(os.readlink("/proc/self/fd/2")), "feed/": os.path.join(_check, "feed"),
               "shared/": os.path.join(_check, "shared"), "/tmp": "/tmp", "/dev/shm": "/dev/shm",
               "/dev/null": "/dev/null"}
    for _name, _path in _shared.items():
        _try(f"chmod {_name}", os.chmod, _path, os.stat(_path).st_mode & 0o7777)
else:
    for _path in ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches", "/proc/sys/kernel/pid_max",
                  "/proc/sysrq-trigger"):
        _try(f"write {_path}", lambda p: os.close(os.open(p, os.O_WRONLY)), _path)
if _escaped:
    raise RuntimeError(f"ESCAPED: {', '.join(_escaped)}")

# <include relu_kernel>
