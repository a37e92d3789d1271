"""Parse: SASS listings, `cuobjdump -res-usage` and `ptxas -v` output into summaries (pure)."""

from __future__ import annotations

import re
from collections import Counter

from kiln.tools.profile.records import SassSummary

_FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)")
_INST = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
_BRA_TARGET = re.compile(r"0x([0-9a-f]+)")
_RES = re.compile(r"Function\s+(\S+):\s*\n?\s*REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")
_PTXAS_FUNC = re.compile(r"(?:Compiling entry function|Function properties for)\s+'?([\w$.]+)'?")
_PTXAS_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")

Instr = tuple[int, str, str]  # (address, opcode with modifiers, operands)


def split_functions(sass: str) -> dict[str, list[Instr]]:
    """`cuobjdump -sass` text -> {kernel name: [(address, opcode, operands)]}."""
    funcs: dict[str, list[Instr]] = {}
    current: list[Instr] | None = None
    for line in sass.splitlines():
        fm = _FUNC.match(line)
        if fm:
            current = funcs.setdefault(fm.group(1), [])
            continue
        im = _INST.search(line)
        if im and current is not None:
            current.append((int(im.group(1), 16), im.group(2), im.group(3)))
    return funcs


def _width_bits(opcode: str) -> str:
    for mod, bits in ((".128", "128"), (".64", "64"), (".U16", "16"), (".S16", "16"), (".U8", "8"), (".S8", "8")):
        if mod in opcode:
            return bits
    return "32"


def classify(opcode: str) -> str:
    """Coarse instruction class for the loop mix."""
    op = opcode.split(".")[0]
    table = {
        "HGMMA": "tensor", "HMMA": "tensor", "IMMA": "tensor", "QGMMA": "tensor", "IGMMA": "tensor",
        "LDG": "global_ld", "STG": "global_st", "LDGSTS": "async_copy", "UTMALDG": "async_copy",
        "UBLKCP": "async_copy", "LDS": "shared_ld", "STS": "shared_st", "LDSM": "shared_ld",
        "LDL": "local", "STL": "local", "FFMA": "fp32", "FADD": "fp32", "FMUL": "fp32", "FMNMX": "fp32",
        "MUFU": "sfu", "BAR": "sync", "SHFL": "shuffle", "BRA": "control", "ATOMG": "atomic", "RED": "atomic",
    }
    if op in table:
        return table[op]
    if op.startswith(("I", "LOP", "SHF", "LEA", "SEL", "P", "MOV", "S2", "CS2")):
        return "int"
    if op.startswith("H"):
        return "fp16"
    return "other"


def innermost_loop(instrs: list[Instr]) -> list[Instr]:
    """The shortest span closed by a backward branch (the main loop of most kernels)."""
    best: tuple[int, int] | None = None
    for addr, opcode, operands in instrs:
        if not opcode.startswith("BRA"):
            continue
        tm = _BRA_TARGET.search(operands)
        if tm and int(tm.group(1), 16) < addr:
            span = (int(tm.group(1), 16), addr)
            if best is None or span[1] - span[0] < best[1] - best[0]:
                best = span
    if best is None:
        return []
    return [i for i in instrs if best[0] <= i[0] <= best[1]]


def summarize_function(name: str, instrs: list[Instr]) -> SassSummary:
    ops = [op for _, op, _ in instrs]
    loads = Counter(_width_bits(op) for op in ops if op.startswith("LDG"))
    stores = Counter(_width_bits(op) for op in ops if op.startswith("STG"))
    gmma = sum(op.startswith(("HGMMA", "QGMMA", "IGMMA")) for op in ops)
    hmma = sum(op.startswith(("HMMA", "IMMA")) for op in ops)
    loop = innermost_loop(instrs)
    return SassSummary(
        kernel=name,
        instructions=len(ops),
        global_load_widths_bits=dict(loads),
        global_store_widths_bits=dict(stores),
        tensor_core="wgmma" if gmma else ("hmma" if hmma else "none"),
        tensor_instructions=gmma + hmma,
        local_loads=sum(op.startswith("LDL") for op in ops),
        local_stores=sum(op.startswith("STL") for op in ops),
        shared_loads=sum(op.startswith(("LDS", "LDSM")) for op in ops),
        shared_stores=sum(op.startswith("STS") for op in ops),
        async_copies=sum(op.startswith(("LDGSTS", "UTMALDG", "UBLKCP")) for op in ops),
        loop_mix=dict(Counter(classify(op) for _, op, _ in loop).most_common()),
    )


def summarize_sass(sass: str) -> list[SassSummary]:
    return [summarize_function(n, i) for n, i in split_functions(sass).items() if i]


def parse_res_usage(text: str) -> dict[str, dict[str, int]]:
    """`cuobjdump -res-usage` -> {kernel: {registers, stack_bytes, shared_bytes, local_bytes}}."""
    out: dict[str, dict[str, int]] = {}
    for m in _RES.finditer(text):
        out[m.group(1)] = {
            "registers": int(m.group(2)), "stack_bytes": int(m.group(3)),
            "shared_bytes": int(m.group(4)), "local_bytes": int(m.group(5)),
        }
    return out


def parse_ptxas(text: str) -> dict[str, dict[str, int]]:
    """`ptxas -v` -> {kernel: {registers, shared_bytes, stack_bytes, spill_store_bytes, spill_load_bytes}}."""
    out: dict[str, dict[str, int]] = {}
    name: str | None = None
    for line in text.splitlines():
        fm = _PTXAS_FUNC.search(line)
        if fm:
            name = fm.group(1)
            out.setdefault(name, {})
        if name is None:
            continue
        sm = _PTXAS_SPILL.search(line)
        if sm:
            out[name].update(stack_bytes=int(sm.group(1)), spill_store_bytes=int(sm.group(2)),
                             spill_load_bytes=int(sm.group(3)))
        um = _PTXAS_USED.search(line)
        if um:
            out[name]["registers"] = int(um.group(1))
            out[name]["shared_bytes"] = int(um.group(2) or 0)
    return out


def with_resources(summary: SassSummary, res: dict[str, int] | None) -> SassSummary:
    if not res:
        return summary
    return summary.model_copy(update={
        "registers": res.get("registers"), "stack_bytes": res.get("stack_bytes"),
        "shared_bytes": res.get("shared_bytes"),
    })
