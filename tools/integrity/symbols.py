"""The undefined dynamic symbols of a built extension, judged against an allowlist before it is loaded.

The C++ source rules read what the candidate wrote; this reads what the linker made of it, so a
name built by a macro, an `asm` label, a weak alias or a header the scan never saw is still seen.
Split as collect / parse / judge:

- `collect(path)`: the file's bytes, read once (no link followed, regular files only, size cap);
- `elf.parse(data)`: the dynamic symbol table, as the dynamic loader reads it (pure Python);
- `judge(dyn, policy)`: `static.native-symbol` (reject) for each import outside the allowlist, and
  `static.cpp-torch-op` (warn, a rejection under `--policy strict`) for each ATen compute op or
  vendor compute library the host code calls.

What an extension may import: from the C library only `native_policy.LIBC_ALLOWED` and the math
library; the C++ runtime (libstdc++, libgcc) but for threads, files and `std::system`; CUDA's
runtime but for `native_policy.CUDA_DENIED`; torch, c10 and ATen; and the Python C API only in a
Python extension module (one that defines `PyInit_*`), only the names torch's pybind11 headers use,
and never `PyRun_*`, `PyImport_*`, `PySys_*`, `Py_CompileString`, `PyEval_EvalCode` and the like.
`DT_NEEDED` must name torch, CUDA or the C/C++ runtime, with no `RPATH`/`RUNPATH`.

Why ATen ops are warnings, not rejections: `--policy partial` (KernelBench's rule) lets a candidate
use PyTorch for part of the work next to its own kernel, and the run-time accounting sees every op
that goes through the dispatcher. The symbol names them anyway, so a strict check refuses a C++
`at::softmax` however its source spelled it, and `at::native::` (below the dispatcher, where the
accounting can't see it) is named as such.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from kiln.tools.integrity import native_policy as N
from kiln.tools.integrity.elf import DynamicSymbol, ElfDynamic, ElfError, object_imports, parse
from kiln.tools.integrity.ops import is_compute
from kiln.tools.records import Finding

MAX_SO_BYTES = 512 << 20
MAX_FINDINGS = 40
RULE = "static.native-symbol"
_LIBC_FAMILY = re.compile(r"^(?:libc|libdl|libpthread|librt|libutil|ld-linux[\w.-]*|ld64)\.so(?:\.\d+)*$")
_NEEDED_OK = re.compile(r"""^(?:
    libc10(?:_cuda)?\.so | libtorch(?:_cpu|_cuda|_python|_global_deps)?\.so | libcudart\.so(?:\.\d+)*
  | libcuda\.so\.1 | libc\.so\.6 | libm\.so\.6 | libstdc\+\+\.so\.6 | libgcc_s\.so\.1 | ld-linux[\w.-]*\.so\.\d
  | libpthread\.so\.0 | libdl\.so\.2 | librt\.so\.1 | lib(?:cublas|cublasLt|cudnn|cufft|cusparse|curand|cusolver)\.so(?:\.\d+)*
)$""", re.X)
_TOOLCHAIN = re.compile(r"^(?:__cxa_\w+|__gxx_personality_v0|_Unwind_\w+|_ITM_\w+|__gmon_start__|__dynamic_cast"
                        r"|__(?:u?(?:div|mod)|mul|neg|pop|clz|ctz|ffs|bswap|fix|float|extend|trunc)\w*"
                        r"|__cuda\w+|fatbinData)$")
_PY = re.compile(r"^_?Py(?:[A-Z]|_[A-Za-z])")
_ATEN_OP = re.compile(r"^_ZN2at4_ops(\d+)")


class NativeFileError(OSError):
    """The extension can't be read safely (a link, not a regular file, too large)."""


def collect(so_path: Path, *, cap: int = MAX_SO_BYTES) -> bytes:
    """The file's bytes, read once: opened without following a final symlink, non-blocking (a FIFO
    can't hang the read), refused unless it is a regular file of at most `cap` bytes."""
    fd = os.open(so_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NativeFileError(f"{so_path} is not a regular file")
        if st.st_size > cap:
            raise NativeFileError(f"{so_path} is {st.st_size} bytes, over the {cap}-byte cap")
        chunks, total = [], 0
        while chunk := os.read(fd, min(1 << 22, cap + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > cap:
                raise NativeFileError(f"{so_path} grew past the {cap}-byte cap while being read")
        return b"".join(chunks)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class NativePolicy:
    libc: frozenset[str]
    """Every name the machine's C library exports (what LIBC_ALLOWED is carved out of)."""
    python: frozenset[str]
    """Python C API names a pybind11 module may import."""
    torch_lib: str | None = None
    """torch's own lib directory (the only RPATH accepted)."""


@functools.lru_cache(maxsize=1)
def default_policy() -> NativePolicy:
    spec = importlib.util.find_spec("torch")
    lib = next((str(Path(r) / "lib") for r in (spec.submodule_search_locations or [])), None) if spec else None
    return NativePolicy(libc=N.libc_exports(), python=N.pybind11_python_names(), torch_lib=lib)


MAX_SO_FILES = 32


def native_findings(top: Path, policy: NativePolicy | None = None) -> list[Finding]:
    """`symbol_findings` for every shared object under `top` (a candidate's compile cache, which its
    worker may still be changing). The walk never leaves `top`: it goes from one open folder to the
    next (no link followed, `top` itself included), and each file is read through its folder's
    descriptor (`/proc/self/fd/N/name`), so a folder swapped for a link mid-walk leads nowhere. Past
    `MAX_SO_FILES` files, `MAX_WALK` entries or `MAX_DEPTH` folders, one rejection says so."""
    try:
        root = os.open(top, _DIR_FLAGS)
    except FileNotFoundError:
        return []
    except OSError as e:  # a link, a file, a FIFO where the folder should be
        return [_finding(f"its compile cache's {top.name}/ is not a folder kiln can walk ({e.strerror})", None)]
    held: list[int] = []
    try:
        hits, why = _walk(root, held)
        if why:
            return [_finding(why, None)]
        if len(hits) > MAX_SO_FILES:
            return [_finding(f"{len(hits)} shared objects in its compile cache (at most {MAX_SO_FILES})", None)]
        return [f for dfd, name in hits for f in symbol_findings(Path(f"/proc/self/fd/{dfd}/{name}"), policy)]
    finally:
        for fd in held:
            os.close(fd)


MAX_WALK = 50_000
MAX_DEPTH = 24
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _walk(root: int, held: list[int]) -> tuple[list[tuple[int, str]], str | None]:
    """(folder fd, name) of every `.so` beneath the open folder `root`, depth first; the fds of the
    folders holding one stay open (in `held`, which also holds `root`), the rest are closed as soon
    as they are read. Or why the walk stopped."""
    held.append(root)
    hits: list[tuple[int, str]] = []
    stack: list[tuple[int, list[str]]] = []
    seen, dfd = 0, root
    while True:
        subdirs: list[str] = []
        with os.scandir(dfd) as it:
            for e in it:
                seen += 1
                if e.is_dir(follow_symlinks=False):
                    subdirs.append(e.name)
                elif e.name.endswith(".so"):  # a link or FIFO too: `collect` refuses it, a rejection
                    hits.append((dfd, e.name))
        if seen > MAX_WALK or len(stack) > MAX_DEPTH:
            return hits, f"its compile cache holds more than {MAX_WALK} entries or {MAX_DEPTH} nested folders"
        if dfd not in held and any(h[0] == dfd for h in hits):
            held.append(dfd)
        stack.append((dfd, sorted(subdirs, reverse=True)))
        dfd = _next_dir(stack, held)
        if dfd < 0:
            return hits, None


def _next_dir(stack: list[tuple[int, list[str]]], held: list[int]) -> int:
    """Open the next folder to read (a subfolder of the deepest folder with any left), closing the
    folders it is done with; -1 when every folder was read."""
    while stack:
        parent, names = stack[-1]
        while names:
            try:
                return os.open(names.pop(), _DIR_FLAGS, dir_fd=parent)
            except OSError:  # gone, or swapped for a link meanwhile
                continue
        stack.pop()
        if parent not in held:
            os.close(parent)
    return -1


MAX_OBJECTS = 64


def own_imports(build_dir: Path) -> set[str] | None:
    """What the candidate's own compiled code imports: the undefined symbols of the `.o` files its
    build left beside the extension (torch's build dir keeps them), or None when there are none (a
    prebuilt `.so`: then every import of the `.so` counts as the candidate's). A library linked in
    statically (the CUDA runtime on some installs: its `getenv`, `syscall`, `dlopen`) adds imports to
    the `.so` that no line of the candidate calls; those are reported, not refused."""
    objs = sorted(p for p in build_dir.iterdir() if p.name.endswith(".o"))  # a link or FIFO fails `collect`: closed
    if not objs or len(objs) > MAX_OBJECTS:
        return None
    out: set[str] = set()
    for p in objs:
        out |= object_imports(collect(p))
    return out


def symbol_findings(so_path: Path, policy: NativePolicy | None = None) -> list[Finding]:
    """Every finding for one built extension; a file that can't be read or parsed (the extension or
    one of its objects) is itself a rejection (fail closed)."""
    try:
        dyn = parse(collect(so_path))
        own = own_imports(so_path.parent)
    except (OSError, ElfError) as e:
        return [_finding(f"the extension can't be checked: {e}", so_path.name)]
    return judge(dyn, policy or default_policy(), file=so_path.name, own=own)


def judge(dyn: ElfDynamic, policy: NativePolicy, *, file: str | None = None, own: set[str] | None = None) -> list[Finding]:
    """Findings for one parsed extension: its libraries, its run path, each import. With `own` (what
    the candidate's objects import), an import no object of the candidate's asks for came from a
    library linked in: a refusal becomes a warning that says so."""
    # a library or run path nobody listed is reported, not refused: it can only load more native code into
    # the candidate's own process, which is out of reach anyway (docs/integrity.md), and toolchains differ
    out = [Finding(rule=RULE, severity="warn", evidence=f"links {lib}, which kernel extensions do not usually need",
                   file=file) for lib in dyn.needed if not _NEEDED_OK.match(lib)]
    out += [Finding(rule=RULE, severity="warn", evidence=f"has the run path {p!r}: the loader looks for libraries there",
                    file=file) for p in dyn.runpath if p != policy.torch_lib]
    module = any(n.startswith("PyInit_") for n in dyn.defined())
    for sym in dyn.undefined():
        verdict = _judge_symbol(sym, module=module, policy=policy)
        if verdict:
            rule, sev, why = verdict
            if sev == "reject" and own is not None and sym.name not in own:
                sev, why = "warn", f"{why}; imported by a library linked in, not by the candidate's own compiled code"
            out.append(Finding(rule=rule, severity=sev, evidence=f"the extension imports {sym.name}: {why}", file=file))
    imported = {sym.name for sym in dyn.undefined()}
    for name in sorted((own or set()) - imported):  # resolved inside: a library linked in statically
        verdict = _judge_symbol(DynamicSymbol(name=name, undefined=True, binding="global", kind="notype"),
                                module=module, policy=policy)
        if verdict and verdict[1] == "reject":
            out.append(Finding(rule=verdict[0], severity="reject", file=file,
                               evidence=f"its compiled code calls {name}, linked into the extension itself: {verdict[2]}"))
    rejects = [f for f in out if f.severity == "reject"]
    warns = [f for f in out if f.severity != "reject"][:MAX_FINDINGS]  # a hostile file names thousands: readable
    if len(rejects) > MAX_FINDINGS:
        rejects = rejects[:MAX_FINDINGS] + [_finding(f"... and {len(rejects) - MAX_FINDINGS} more refused imports", file)]
    return rejects + warns


def _judge_symbol(sym: DynamicSymbol, *, module: bool, policy: NativePolicy) -> tuple[str, str, str] | None:
    name, lib = sym.name, sym.library or ""
    if _PY.match(name):
        return _python(name, module, policy)
    if name.startswith("_Z"):
        return _mangled(name)
    if lib.startswith("libm.so") or N.is_math(name):
        return None
    if N.LIBC_DENIED.match(name):
        return RULE, "reject", ("a C library call no kernel needs (files, processes, the network, the environment, "
                                "signals, dynamic loading)")
    if _LIBC_FAMILY.match(lib) or name in policy.libc:
        return None if name in N.LIBC_ALLOWED else (RULE, "warn", "a C library call outside kiln's list of what "
                                                                  "kernel extensions import")
    return _other(name)


def _python(name: str, module: bool, policy: NativePolicy) -> tuple[str, str, str] | None:
    if not module:
        return RULE, "reject", "the Python C API, from an object that is not a Python extension module"
    if N.PY_DENIED.match(name):
        return RULE, "reject", "a Python C API call that runs code, imports or reaches sys, frames or code objects"
    if name not in policy.python and not re.match(r"^Py\w+_Type$", name):
        return RULE, "warn", "a Python C API name outside those torch's pybind11 bindings use"
    return None


def _mangled(name: str) -> tuple[str, str, str] | None:
    hit = next((s for s in N.STD_DENIED_MANGLED if s in name), None)
    if hit:
        return RULE, "reject", f"C++ threads, files or processes ({hit} in the mangled name)"
    m = _ATEN_OP.match(name)
    if m:
        op = _aten_op(name[m.end():m.end() + int(m.group(1))])
        return ("static.cpp-torch-op", "warn", f"host code calls the PyTorch op {op}") if is_compute(op) else None
    if name.startswith(("_ZN2at6native", "_ZN2at4cuda4blas")):
        return "static.cpp-torch-op", "warn", "host code calls an ATen kernel directly, below the dispatcher"
    return None


_OVERLOAD_WORDS = frozenset({
    "Tensor", "Scalar", "int", "dim", "names", "out", "self", "other", "default", "dtype",
    "device", "layout", "SymInt", "symint", "start", "step", "Dimname", "generator", "correction", "str",
    "bool", "float", "list", "IntList", "using", "ints", "src", "value", "sizes", "tensor", "mode", "source",
    "storage", "offset", "like", "input", "index", "dimname", "format", "memory",
})


def _aten_op(struct: str) -> str:
    """The operator an `at::_ops::` struct is for: ATen names the struct `{op}_{overload}`
    (`empty_memory_format` is `empty.memory_format`), so an overload's words are dropped."""
    words = struct.split("_")
    for cut in range(1, len(words)):
        if all(w in _OVERLOAD_WORDS for w in words[cut:]) and "_".join(words[:cut]):
            return "_".join(words[:cut])
    return struct


def _other(name: str) -> tuple[str, str, str] | None:
    if N.VENDOR_COMPUTE.match(name):
        return "static.cpp-torch-op", "warn", "host code calls a vendor compute library"
    if N.CUDA_DENIED.match(name):
        return RULE, "reject", ("a CUDA entry point no kernel needs (loads unscanned device code, shares memory "
                                "across processes, captures graphs, host callbacks, streams, device-wide state)")
    cuda = name.startswith("cuda") or (name.startswith("cu") and name[2:3].isupper())  # runtime / driver API
    if cuda or _TOOLCHAIN.match(name):
        return None
    return RULE, "warn", "not on the list of what kernel extensions import"


def _finding(evidence: str, file: str | None) -> Finding:
    return Finding(rule=RULE, severity="reject", evidence=evidence, file=file)
