"""The dynamic symbol table of an ELF64 shared object, read in pure Python (no binutils, no tool
spawned on a hostile file).

`parse` reads what the dynamic loader reads: the program headers' `PT_DYNAMIC` segment, and from
it the symbol and string tables, the symbol versions (`DT_VERSYM`, `DT_VERNEED`: which library and
version each undefined symbol is bound to, `GLIBC_2.2.5` from `libc.so.6`), `DT_NEEDED`,
`DT_RPATH`/`DT_RUNPATH` and the symbol count (from `DT_HASH`, else `DT_GNU_HASH`). Section headers
are ignored: a loader never reads them, so stripping or forging them hides nothing here. Every read
is bounds-checked; a malformed file raises `ElfError`.
"""

from __future__ import annotations

import struct
from typing import Literal

from pydantic import Field

from kiln.tools.records import Record

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT, DT_SONAME, DT_RPATH = 1, 4, 5, 6, 10, 11, 14, 15
DT_RUNPATH, DT_GNU_HASH, DT_VERSYM, DT_VERNEED, DT_VERNEEDNUM = 29, 0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFE, 0x6FFFFFFF
MAX_SYMBOLS = 1 << 20
_BINDING = {0: "local", 1: "global", 2: "weak", 10: "unique"}
_KIND = {0: "notype", 1: "object", 2: "func", 3: "section", 4: "file", 5: "common", 6: "tls", 10: "ifunc"}


class ElfError(ValueError):
    """Not a readable ELF64 little-endian shared object."""


class DynamicSymbol(Record):
    name: str
    undefined: bool = Field(description="imported (st_shndx == SHN_UNDEF), not defined by this object")
    binding: str = Field(description="local / global / weak / unique")
    kind: str = Field(description="func / object / notype / tls / ifunc / ...")
    version: str | None = Field(None, description="required version (GLIBC_2.2.5), for undefined symbols")
    library: str | None = Field(None, description="the library that version comes from (libc.so.6)")


class ElfDynamic(Record):
    machine: int = Field(description="e_machine (62: x86-64, 183: AArch64)")
    elf_type: Literal["shared", "executable", "other"]
    needed: list[str] = Field(default_factory=list, description="DT_NEEDED libraries")
    runpath: list[str] = Field(default_factory=list, description="DT_RPATH and DT_RUNPATH entries")
    soname: str | None = None
    symbols: list[DynamicSymbol] = Field(default_factory=list)

    def undefined(self) -> list[DynamicSymbol]:
        return [s for s in self.symbols if s.undefined and s.name]

    def defined(self) -> set[str]:
        return {s.name for s in self.symbols if not s.undefined and s.name}


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def unpack(self, fmt: str, off: int) -> tuple:
        size = struct.calcsize(fmt)
        if off < 0 or off + size > len(self.data):
            raise ElfError(f"truncated ELF file (read of {size} bytes at offset {off})")
        return struct.unpack_from(fmt, self.data, off)

    def cstr(self, off: int, limit: int) -> str:
        if off < 0 or off >= limit or limit > len(self.data):
            raise ElfError(f"string offset {off} outside the string table")
        end = self.data.find(b"\0", off, limit)
        if end < 0:
            raise ElfError("unterminated string in the string table")
        return self.data[off:end].decode("utf-8", "replace")


def parse(data: bytes) -> ElfDynamic:
    """The dynamic section and dynamic symbols of one ELF64 little-endian object."""
    r = _Reader(data)
    if data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if data[4:6] != b"\x02\x01":
        raise ElfError("not a 64-bit little-endian ELF file")
    e_type, machine = r.unpack("<HH", 16)
    (phoff,) = r.unpack("<Q", 32)
    phentsize, phnum = r.unpack("<HH", 54)
    loads, dyn = _segments(r, phoff, phentsize, phnum)
    if dyn is None:
        raise ElfError("no PT_DYNAMIC segment: not a dynamically linked object")
    tags = _dynamic(r, *dyn)
    kind = {3: "shared", 2: "executable"}.get(e_type, "other")
    return _assemble(r, tags, loads, machine=machine, elf_type=kind)


def _segments(r: _Reader, phoff: int, phentsize: int, phnum: int) -> tuple[list[tuple[int, int, int]], tuple | None]:
    if phentsize < 56 or phnum > 4096:
        raise ElfError("bad program header table")
    loads, dyn = [], None
    for i in range(phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = r.unpack("<IIQQQQ", phoff + i * phentsize)
        if p_type == PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC:
            dyn = (p_offset, p_filesz)
    return loads, dyn


def _dynamic(r: _Reader, off: int, size: int) -> list[tuple[int, int]]:
    tags = []
    for i in range(min(size // 16, 1 << 16)):
        tag, val = r.unpack("<qQ", off + 16 * i)
        if tag == 0:
            break
        tags.append((tag, val))
    return tags


def _offset(loads: list[tuple[int, int, int]], vaddr: int) -> int:
    for start, off, size in loads:
        if start <= vaddr < start + size:
            return vaddr - start + off
    raise ElfError(f"address {vaddr:#x} is in no loaded segment")


def _assemble(r: _Reader, tags: list[tuple[int, int]], loads: list, *, machine: int, elf_type: str) -> ElfDynamic:
    one = {t: v for t, v in tags}
    if DT_STRTAB not in one or DT_SYMTAB not in one:
        raise ElfError("no dynamic symbol or string table")
    strtab = _offset(loads, one[DT_STRTAB])
    strend = strtab + one.get(DT_STRSZ, 0)
    name = lambda off: r.cstr(strtab + off, strend)  # noqa: E731 - a local reader of the string table
    versions = _verneed(r, loads, one, name) if DT_VERNEED in one else {}
    symtab, count = _offset(loads, one[DT_SYMTAB]), _symbol_count(r, loads, one)
    versym = _offset(loads, one[DT_VERSYM]) if DT_VERSYM in one else None
    syms = [_symbol(r, symtab + 24 * i, name, versions, versym, i) for i in range(count)]
    return ElfDynamic(machine=machine, elf_type=elf_type, symbols=syms,
                      needed=[name(v) for t, v in tags if t == DT_NEEDED],
                      runpath=[p for t, v in tags if t in (DT_RPATH, DT_RUNPATH) for p in name(v).split(":")],
                      soname=name(one[DT_SONAME]) if DT_SONAME in one else None)


def _symbol(r: _Reader, off: int, name, versions: dict, versym: int | None, i: int) -> DynamicSymbol:  # noqa: ANN001
    st_name, st_info, _other, st_shndx = r.unpack("<IBBH", off)
    ver = versions.get(r.unpack("<H", versym + 2 * i)[0] & 0x7FFF) if versym is not None else None
    return DynamicSymbol(name=name(st_name) if st_name else "", undefined=st_shndx == 0,
                         binding=_BINDING.get(st_info >> 4, str(st_info >> 4)),
                         kind=_KIND.get(st_info & 0xF, str(st_info & 0xF)),
                         version=ver[1] if ver and st_shndx == 0 else None,
                         library=ver[0] if ver and st_shndx == 0 else None)


def _verneed(r: _Reader, loads: list, one: dict, name) -> dict[int, tuple[str, str]]:  # noqa: ANN001
    """Version index -> (library file, version name), from DT_VERNEED."""
    out: dict[int, tuple[str, str]] = {}
    off = _offset(loads, one[DT_VERNEED])
    for _ in range(min(one.get(DT_VERNEEDNUM, 0), 4096)):
        _ver, cnt, vn_file, vn_aux, vn_next = r.unpack("<HHIII", off)
        aux = off + vn_aux
        for _ in range(min(cnt, 4096)):
            _hash, _flags, other, vna_name, vna_next = r.unpack("<IHHII", aux)
            out[other] = (name(vn_file), name(vna_name))
            if not vna_next:
                break
            aux += vna_next
        if not vn_next:
            break
        off += vn_next
    return out


def _symbol_count(r: _Reader, loads: list, one: dict) -> int:
    if DT_HASH in one:
        (_nbucket, nchain) = r.unpack("<II", _offset(loads, one[DT_HASH]))
        count = nchain
    elif DT_GNU_HASH in one:
        count = _gnu_hash_count(r, _offset(loads, one[DT_GNU_HASH]))
    else:
        raise ElfError("no DT_HASH or DT_GNU_HASH: the symbol count is unknown")
    if count > MAX_SYMBOLS:
        raise ElfError(f"{count} dynamic symbols: more than an extension has")
    return count


def _gnu_hash_count(r: _Reader, off: int) -> int:
    """Symbols in a DT_GNU_HASH table: past the last bucket's chain (bit 0 set ends a chain)."""
    nbuckets, symoffset, bloom_size, _shift = r.unpack("<IIII", off)
    if nbuckets > MAX_SYMBOLS or bloom_size > MAX_SYMBOLS:
        raise ElfError("bad DT_GNU_HASH table")
    buckets = off + 16 + 8 * bloom_size
    last = max((r.unpack("<I", buckets + 4 * i)[0] for i in range(nbuckets)), default=0)
    if last < symoffset:
        return symoffset
    chains = buckets + 4 * nbuckets
    while last - symoffset < MAX_SYMBOLS:
        (h,) = r.unpack("<I", chains + 4 * (last - symoffset))
        if h & 1:
            return last + 1
        last += 1
    raise ElfError("unterminated DT_GNU_HASH chain")


SHT_SYMTAB = 2
ET_REL = 1


def object_imports(data: bytes) -> set[str]:
    """The undefined symbols of an ELF64 relocatable object (a compiler's `.o`): what the code compiled
    into it calls or reads from elsewhere, from its `.symtab` (a `.o` has no dynamic table; its section
    headers are what the linker reads)."""
    r = _Reader(data)
    if data[:4] != b"\x7fELF" or data[4:6] != b"\x02\x01":
        raise ElfError("not a 64-bit little-endian ELF file")
    (e_type,) = r.unpack("<H", 16)
    if e_type != ET_REL:
        raise ElfError("not a relocatable object")
    (shoff,) = r.unpack("<Q", 40)
    shentsize, shnum = r.unpack("<HH", 58)
    if shentsize < 64 or shnum > 1 << 16:
        raise ElfError("bad section header table")
    sections = [r.unpack("<IIQQQQIIQQ", shoff + i * shentsize) for i in range(shnum)]
    out: set[str] = set()
    for _name, sh_type, _flags, _addr, off, size, link, _info, _align, entsize in sections:
        if sh_type != SHT_SYMTAB:
            continue
        if entsize != 24 or link >= len(sections) or size // 24 > MAX_SYMBOLS:
            raise ElfError("bad symbol table")
        str_off, str_size = sections[link][4], sections[link][5]
        for i in range(size // 24):
            st_name, _info, _other, st_shndx = r.unpack("<IBBH", off + 24 * i)
            if st_shndx == 0 and st_name:
                out.add(r.cstr(str_off + st_name, str_off + str_size))
    return out
