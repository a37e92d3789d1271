"""RED TEAM, security (files, network, daemons) with the plain APIs: at import, the candidate
creates a file in the user's home and in the project (kiln's working directory), deletes a file
from each, connects to a TCP server on 127.0.0.1 (the test's), and leaves a double-forked daemon
(`sleep __TOKEN__`) in a session of its own. Then it is an honest ReLU.
Before main's check session: `rejected` (static.env-or-file, static.threads), yet every side effect
happened. Now: a statically rejected candidate is never executed (and the OS sandbox would stop
each side effect: no writes outside its scratch, no network, everything it starts dies with it)."""

import os
import socket

with open(f"/proc/{os.getppid()}/stat") as stat:  # our parent is kiln's fork server, whose parent is kiln
    KILN = int(stat.read().rsplit(")", 1)[1].split()[1])
for folder in (os.path.expanduser("~"), os.readlink(f"/proc/{KILN}/cwd")):
    with open(os.path.join(folder, "redteam-created.txt"), "w") as f:
        f.write("written by a candidate kernel")
    if os.path.exists(os.path.join(folder, "redteam-victim.txt")):
        os.remove(os.path.join(folder, "redteam-victim.txt"))

with socket.create_connection(("127.0.0.1", int("__PORT__")), timeout=5) as conn:
    conn.sendall(b"redteam: a candidate kernel phoning home")

child = os.fork()
if child == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["/bin/sleep", "__TOKEN__"])
    os._exit(0)
os.waitpid(child, 0)


# <include relu_kernel>
