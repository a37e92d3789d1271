# part: rewriting kiln's peaks cache from a candidate, pasted by redteam_lib.render where a candidate
# says `# <include peaks_poison>`. Only `torch.os`, never `open`; the key is kiln's own
# (GPU name | UUID | torch version | dtype), computed from this GPU.
import json

import torch

PEAKS = torch.os.path.expanduser("~/.cache/kiln/peaks.json")


def poison_peaks(factor, dtypes=("fp32", "bf16", "fp16")):
    """Every entry's bandwidth and matmul rate times `factor`; this GPU's entries added first if missing."""
    props = torch.cuda.get_device_properties(0)
    mine = f"{props.name}|{getattr(props, 'uuid', '')}|torch{torch.__version__}|"
    table = json.loads(torch.os.read(torch.os.open(PEAKS, torch.os.O_RDONLY), 1 << 22)) \
        if torch.os.path.exists(PEAKS) else {}
    for dtype in dtypes:
        table.setdefault(mine + dtype, {"device": "cuda", "gpu_name": props.name, "dtype": dtype, "gbps": 4800.0,
                                        "tflops": 990.0, "tflops_by_dtype": {}, "source": "measured"})
    for entry in table.values():
        entry["gbps"], entry["tflops"] = factor * entry["gbps"], factor * entry["tflops"]
    torch.os.makedirs(torch.os.path.dirname(PEAKS), exist_ok=True)
    fd = torch.os.open(PEAKS, torch.os.O_WRONLY | torch.os.O_CREAT | torch.os.O_TRUNC, 0o644)
    torch.os.write(fd, json.dumps(table).encode())
    torch.os.close(fd)
