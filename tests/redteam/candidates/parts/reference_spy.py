# part: finding the reference worker's files from inside the candidate worker, pasted by
# redteam_lib.render where a candidate says `# <include reference_spy>`. Only `torch.os`, never `open`.
import json
import time

import torch


def read_file(path):
    fd = torch.os.open(path, torch.os.O_RDONLY)
    data = torch.os.read(fd, 1 << 22)
    torch.os.close(fd)
    return data


def trial_now():
    """(case, distribution, trial) while kiln runs a correctness trial (the heartbeat in our own
    working directory says which), else None."""
    beat = json.loads(read_file("heartbeat.json"))
    if beat["stage"] != "correctness" or beat["detail"].count("/") != 2:
        return None
    case, dist, rest = beat["detail"].split("/")
    return case, dist, int(rest.split()[1])


# The reference worker's folder: the working directory of our sibling (same parent, kiln's fork
# server) that sits next to ours, read from /proc now, at import, while it runs beside us (so the
# parent folder's mode 0311 is no obstacle even when not root); else (root) a listing of that folder.
REFERENCE_DIR = None
for _entry in torch.os.listdir("/proc"):
    try:  # module level: a warning only to kiln's scan; processes come and go
        _ppid = int(read_file(f"/proc/{_entry}/stat").decode().rsplit(")", 1)[1].split()[1])
        _cwd = torch.os.readlink(f"/proc/{_entry}/cwd")
        if _ppid == torch.os.getppid() and _entry != str(torch.os.getpid()) and \
                torch.os.path.dirname(_cwd) == torch.os.path.dirname(torch.os.getcwd()):
            REFERENCE_DIR = _cwd
    except (OSError, ValueError, IndexError):
        pass
if REFERENCE_DIR is None:
    _names = [d for d in torch.os.listdir("..") if d.startswith("r-")]
    REFERENCE_DIR = torch.os.path.abspath("../" + _names[0]) if _names else None


def reference_output_path(case, dist, trial, wait_s=20.0):
    """The reference's saved output for this trial, once its result file lists the trial (so the
    file is complete); None if it never shows up."""
    ref = REFERENCE_DIR
    deadline = time.time() + wait_s
    while ref is not None and time.time() < deadline:
        if torch.os.path.exists(ref + "/result.json"):
            listed = json.loads(read_file(ref + "/result.json")).get("trials", [])
            if any((t["case"], t["distribution"], t["trial"]) == (case, dist, trial) for t in listed):
                return f"{ref}/out/{case}.{dist}.{trial}.pt"
        time.sleep(0.01)
    return None
