"""Run the built-in Coder in a confined subprocess, for modules an LLM wrote.

The built-in Coder traces the problem by executing its source; that is fine for the user's own
problem or kiln's template modules, not for an LLM's. `ConfinedCoder` wraps it: the task goes in
as JSON, the reply comes back as JSON, the work happens in a scrubbed, contained process
(`python -m kiln.agents.curriculum.confined_coder TASK REPLY`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kiln.agents.base import CoderReply, CoderTask

REPLY_CAP_BYTES = 2 << 20


class ConfinedCoder:
    def __init__(self, device: str = "cpu", timeout_s: float = 120.0, box: Any = None) -> None:
        self.device, self.timeout_s, self.box = device, timeout_s, box

    def write(self, task: CoderTask) -> CoderReply:
        from kiln.agents.curriculum.validate import confined_run, scratch_dir

        with scratch_dir("coder-") as tmp_name:
            tmp = Path(tmp_name)
            (tmp / "task.json").write_text(task.model_dump_json())
            died = confined_run([str(tmp / "task.json"), str(tmp / "reply.json")], tmp=tmp, device="cpu",
                                 gpu_index=0, timeout_s=self.timeout_s, module="kiln.agents.curriculum.confined_coder",
                                box=self.box)
            out = tmp / "reply.json"
            if died or not out.is_file() or out.stat().st_size > REPLY_CAP_BYTES:
                return CoderReply(ok=False, error=f"the built-in coder failed on this module: {died or 'no reply'}")
            try:
                return CoderReply.model_validate_json(out.read_text())
            except ValueError:
                return CoderReply(ok=False, error="the built-in coder's reply is unreadable")


def main(argv: list[str]) -> int:
    from kiln.agents.builtin import BuiltinCoder

    task = CoderTask.model_validate_json(Path(argv[0]).read_text())
    Path(argv[1]).write_text(BuiltinCoder(device=task.gpu.device).write(task).model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
