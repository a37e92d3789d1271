# part: finding the reference worker's files from inside the candidate worker, pasted by
# redteam_lib.render where a candidate says `# <include reference_spy>`. Only `torch.os`, never `open`.
# The check's layout: kiln hands the candidate each trial's inputs as `in/<tag>.pt` in its own
# folder, and the reference worker (the folder next door) has already saved that trial's expected
# output as `../reference/out/ref-<tag>.pt` when the candidate is called.
import time

import torch


def trial_tag():
    """The running trial's tag ('problem.x1.0'), from the inputs file kiln put in our folder; None
    outside the correctness trials (warm-up, integrity and timing calls)."""
    names = [n[:-3] for n in torch.os.listdir("in") if n.endswith(".pt") and not n.startswith("weights-")] \
        if torch.os.path.isdir("in") else []
    return names[0] if len(names) == 1 else None


def reference_output_path(tag, wait_s=10.0):
    """The reference worker's saved output for this trial (None if it never shows up)."""
    path = f"../reference/out/ref-{tag}.pt"
    deadline = time.time() + wait_s
    while not torch.os.path.exists(path) and time.time() < deadline:
        time.sleep(0.01)
    return path if torch.os.path.exists(path) else None
