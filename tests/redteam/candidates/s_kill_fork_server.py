"""RED TEAM, security (signals): at import the candidate kills its parent process, which is kiln's
fork server. The reference worker's exit status goes with it, so kiln reports that the reference
died and blames the *problem*: `kiln check` exits 2 with no JSON record, and `kiln run` stops the
same way (and again on every `--resume`, which re-checks the same candidate). Then it is an honest
ReLU.
Today: exit 2, no record. Stopped by the sandbox (own PID namespace: its parent is no kiln
process), and by kiln surviving the loss of its fork server: the candidate is `crashed` (or
rejected) and the next check runs."""

import torch

torch.os.kill(torch.os.getppid(), 9)


# <include relu_kernel>
