"""RED TEAM, security (signals): at import the candidate kills every sibling process (same parent:
kiln's fork server), which includes the reference worker of its own check. kiln then reports that
the reference died and blames the *problem* (`check()` raises KilnInputError, `kiln check` exits 2).
Then it is an honest ReLU.
Today: KilnInputError. Stopped by the sandbox (own PID namespace: it sees no kiln process) or by
kiln telling a reference killed from outside from a broken problem; never by blaming the problem."""

import torch

ME, PARENT = torch.os.getpid(), torch.os.getppid()
for entry in torch.os.listdir("/proc"):
    if not entry.isdigit() or int(entry) == ME:
        continue
    try:  # module level: a warning only; processes come and go while we look
        fd = torch.os.open(f"/proc/{entry}/stat", torch.os.O_RDONLY)
        ppid = int(torch.os.read(fd, 4096).decode().rsplit(")", 1)[1].split()[1])
        torch.os.close(fd)
        if ppid == PARENT:
            torch.os.kill(int(entry), 9)
    except OSError:
        pass


# <include relu_kernel>
