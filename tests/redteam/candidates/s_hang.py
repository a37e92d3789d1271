"""RED TEAM, security (stale state after a signal): not an attack on its own, a candidate that
hangs while kiln imports it (a busy loop of a few minutes: only allowed names, so the allowlist lets
it run). The test sends SIGTERM to the `kiln check`
process group while this candidate hangs, as a user's Ctrl-C in a shell or a batch scheduler would,
and looks for what kiln left behind: its `/dev/shm/kiln-check-*` work folder and the orphaned
worker still sleeping in its own session.
Today: both are left behind. Stopped by kiln cleaning up on SIGTERM (or at its next start) and by
workers that die with their parent (the sandbox's PID namespace, --die-with-parent)."""

import itertools

MARK = "__TOKEN__"  # lets the test find this check's work folder
for _ in itertools.repeat(None, 10**10):
    pass

# <include relu_kernel>
