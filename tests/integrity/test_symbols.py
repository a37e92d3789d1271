"""The built extension's symbol check (issue 22, part 5): `collect` reads safely, `elf.parse` reads
what the loader reads (checked against binutils' `nm -D` where it is installed), `judge` refuses
imports outside the allowlist. The shared objects are real, built here with gcc (and nvcc) from a
few lines of C; the load_inline extension is a recorded fixture (regen_native_fixture.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kiln.tools.integrity.elf import ElfDynamic, ElfError, parse
from kiln.tools.integrity.symbols import RULE, collect, default_policy, judge, symbol_findings

FIXTURE = Path(__file__).parents[1] / "fixtures" / "native" / "load_inline_cpu.json"
CC = shutil.which("gcc") or shutil.which("cc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler on this machine")

SOURCES = {
    "clean": '#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <math.h>\n'
             'float f(float* x, int n) { float* t = malloc(n * sizeof *t); memcpy(t, x, n * sizeof *t);\n'
             '  float s = 0; for (int i = 0; i < n; i++) s += sqrtf(t[i]); free(t);\n'
             '  fprintf(stderr, "%f\\n", s); return s; }\n',
    "symlink": '#include <unistd.h>\nint f(void) { return symlink("/etc/passwd", "out.pt"); }\n',
    "renameat2": 'int renameat2(int, const char*, int, const char*, unsigned);\n'
                 'int f(void) { return renameat2(-100, "a", -100, "b", 2); }\n',
    "environ": 'extern char** environ;\nconst char* f(void) { return environ[0]; }\n',
    "fs_calls": '#include <fcntl.h>\n#include <stdlib.h>\n#include <sys/stat.h>\n#include <sys/uio.h>\n'
                'int f(char* t) { mkfifo("x", 0600); mkstemp(t); posix_fallocate(3, 0, 1);\n'
                '  return (int)process_vm_writev(1, 0, 0, 0, 0, 0); }\n',
    "asm_label": 'int run_python(const char*) __asm__("PyRun_SimpleString");\n'
                 'int f(void) { return run_python("import os"); }\n',
    "module_pyrun": 'int PyRun_SimpleString(const char*);\nvoid* PyTuple_New(long);\n'
                    'void* PyInit_evil(void) { PyRun_SimpleString("x"); return PyTuple_New(1); }\n',
    "module_ok": 'void* PyTuple_New(long);\nvoid* PyInit_fine(void) { return PyTuple_New(1); }\n',
    "threads": '#include <pthread.h>\nstatic void* g(void* a) { return a; }\n'
               'int f(void) { pthread_t t; return pthread_create(&t, 0, g, 0); }\n',
    "aten_op": 'void softmax_call(void) __asm__("_ZN2at4_ops7softmax4callERKNS_6TensorElb");\n'
               'void native_call(void) __asm__("_ZN2at6native12softmax_cudaERKNS_6TensorElb");\n'
               'void f(void) { softmax_call(); native_call(); }\n',
    "cuda_calls": 'int cudaGetLastError(void); int cudaIpcOpenMemHandle(void**, void*, unsigned);\n'
                  'int cuModuleLoadData(void*, const void*);\n'
                  'int f(void* h) { cudaIpcOpenMemHandle(0, h, 1); cuModuleLoadData(0, 0); return cudaGetLastError(); }\n',
}
CXX_SOURCES = {
    "std_thread": '#include <thread>\nvoid f() { std::thread t([] {}); t.join(); }\n',
    "std_ofstream": '#include <fstream>\nvoid f() { std::ofstream o("x"); o << 1; }\n',
}


def _build(folder: Path, name: str, src: str, *, cxx: bool = False, flags: tuple[str, ...] = ()) -> Path:
    ext = "cpp" if cxx else "c"
    (folder / f"{name}.{ext}").write_text(src)
    out = folder / f"{name}.so"
    cmd = [shutil.which("g++") or "g++" if cxx else CC, "-shared", "-fPIC", "-O1", "-o", str(out),
           str(folder / f"{name}.{ext}"), *flags]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if CC is None:
        pytest.skip("no C compiler on this machine")
    folder = tmp_path_factory.mktemp("so")
    out = {name: _build(folder, name, src) for name, src in SOURCES.items()}
    out.update({name: _build(folder, name, src, cxx=True) for name, src in CXX_SOURCES.items()})
    out["dep"] = _build(folder, "libdep", "int dep(void) { return 1; }\n")
    out["needs_dep"] = _build(folder, "needs_dep", "int dep(void);\nint f(void) { return dep(); }\n",
                              flags=(str(out["dep"]),))
    out["rpath"] = _build(folder, "rpath", "int f(void) { return 1; }\n", flags=("-Wl,-rpath,/tmp/evil",))
    return out


def _rejected(findings: list) -> str:
    return " | ".join(f.evidence for f in findings if f.severity == "reject" and f.rule == RULE)


@needs_cc
def test_parse_reads_what_nm_reads(built: dict[str, Path]) -> None:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("binutils' nm is not installed (the parser needs it only for this cross-check)")
    for path in [built["clean"], built["std_thread"], built["aten_op"]]:
        dyn = parse(collect(path))
        lines = subprocess.run([nm, "-D", "--undefined-only", str(path)], capture_output=True, text=True).stdout
        assert {s.name for s in dyn.undefined()} == {ln.split()[-1].split("@")[0] for ln in lines.splitlines()}
        assert all(s.version and s.library for s in dyn.undefined() if s.name in ("malloc", "free"))


@needs_cc
def test_a_clean_object_has_no_findings(built: dict[str, Path]) -> None:
    assert symbol_findings(built["clean"]) == []
    assert symbol_findings(built["module_ok"]) == []  # a Python module importing what pybind11 uses


@needs_cc
@pytest.mark.parametrize(("name", "named"), [
    ("symlink", ["symlink"]), ("renameat2", ["renameat2"]), ("environ", ["environ"]),
    ("fs_calls", ["mkfifo", "mkstemp", "posix_fallocate", "process_vm_writev"]),
    ("asm_label", ["PyRun_SimpleString", "not a Python extension module"]),
    ("module_pyrun", ["PyRun_SimpleString", "runs code"]), ("threads", ["pthread_create"]),
    ("std_thread", ["St6thread"]), ("std_ofstream", ["fstream"]),
    ("cuda_calls", ["cudaIpcOpenMemHandle", "cuModuleLoadData"]),
])
def test_refused_imports_are_named(built: dict[str, Path], name: str, named: list[str]) -> None:
    text = _rejected(symbol_findings(built[name]))
    for word in named:
        assert word in text, (word, text)


@needs_cc
@pytest.mark.parametrize(("name", "named"), [("needs_dep", "libdep.so"), ("rpath", "/tmp/evil")])
def test_unlisted_libraries_and_run_paths_are_reported_not_refused(built: dict[str, Path], name: str,
                                                                 named: str) -> None:
    """They only load more native code into the candidate's own process (out of reach anyway), and
    toolchains differ: a warning, so an honest extension built elsewhere is never refused for it."""
    findings = symbol_findings(built[name])
    assert any(named in f.evidence and f.severity == "warn" for f in findings), findings
    assert not _rejected(findings)


@needs_cc
def test_aten_compute_is_a_warning_the_strict_policy_escalates(built: dict[str, Path]) -> None:
    findings = symbol_findings(built["aten_op"])
    ops = [f for f in findings if f.rule == "static.cpp-torch-op"]
    assert {f.severity for f in ops} == {"warn"} and len(ops) == 2
    assert "softmax" in ops[0].evidence + ops[1].evidence and "below the dispatcher" in ops[0].evidence + ops[1].evidence


def test_a_real_load_inline_extension_passes() -> None:
    dyn = ElfDynamic.model_validate_json(FIXTURE.read_text())
    assert len(dyn.undefined()) > 100 and any(s.name.startswith("PyInit_") for s in dyn.symbols)
    assert ElfDynamic.model_validate_json(dyn.model_dump_json()) == dyn  # the record round-trips
    findings = judge(dyn, default_policy(), file="fixture.so")
    assert [f for f in findings if f.severity == "reject"] == [], findings
    hostile = dyn.model_copy(deep=True)
    hostile.symbols[0] = hostile.symbols[0].model_copy(update={"name": "PyImport_ImportModule", "undefined": True})
    assert "PyImport_ImportModule" in _rejected(judge(hostile, default_policy()))


@pytest.mark.slow
def test_an_nvcc_built_cuda_extension_passes(tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    (tmp_path / "k.cu").write_text(
        "__global__ void twice(float* y, const float* x, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.f * x[i]; }\n"
        'extern "C" int launch(float* y, const float* x, int n) {\n'
        "  twice<<<(n + 255) / 256, 256>>>(y, x, n); return (int)cudaGetLastError(); }\n")
    so = tmp_path / "k.so"
    subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "-o", str(so), str(tmp_path / "k.cu")],
                   check=True, capture_output=True, timeout=300)
    assert symbol_findings(so) == []


# ----------------------------------------------------------------------------- collect, safely


def test_a_symlink_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "real.so").write_bytes(Path("/bin/true").read_bytes() if Path("/bin/true").exists() else b"x")
    (tmp_path / "link.so").symlink_to(tmp_path / "real.so")
    with pytest.raises(OSError):
        collect(tmp_path / "link.so")
    assert "can't be checked" in _rejected(symbol_findings(tmp_path / "link.so"))


def test_a_fifo_a_directory_and_an_oversized_file_are_refused_without_hanging(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.so")
    (tmp_path / "dir.so").mkdir()
    (tmp_path / "big.so").write_bytes(b"\0" * 4096)
    for name in ("fifo.so", "dir.so"):
        assert "can't be checked" in _rejected(symbol_findings(tmp_path / name)), name
    with pytest.raises(OSError, match="cap"):
        collect(tmp_path / "big.so", cap=1024)


def test_garbage_and_truncated_files_fail_closed(tmp_path: Path) -> None:
    (tmp_path / "junk.so").write_bytes(b"not an elf file at all")
    assert "not an ELF file" in _rejected(symbol_findings(tmp_path / "junk.so"))
    real = Path("/bin/true").read_bytes()[:200] if Path("/bin/true").exists() else b"\x7fELF\x02\x01" + b"\0" * 100
    with pytest.raises(ElfError):
        parse(real)
    with pytest.raises(ElfError, match="64-bit"):
        parse(b"\x7fELF\x01\x01" + b"\0" * 64)


# ----------------------------------------------------------------------------- on the H200

CORPUS = Path(__file__).parents[1] / "fixtures" / "kernels"
LOAD_INLINE = sorted(p for kind in ("correct", "wrong") for p in (CORPUS / kind / "cuda").glob("*load_inline*.py")) + \
    sorted((Path(__file__).parents[2] / "agents" / "prompts" / "examples").glob("cuda_load_inline_*.py"))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", LOAD_INLINE, ids=lambda p: p.stem)
def test_honest_cuda_extensions_import_only_allowed_symbols(kernel: Path, tmp_path: Path) -> None:
    """Build the corpus's load_inline kernels (in a child, its own TORCH_EXTENSIONS_DIR) and judge
    every .so they leave: no rejection, on the real torch CUDA build."""
    import sys

    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path)}
    code = (f"import importlib.util as u; s = u.spec_from_file_location('k', {str(kernel)!r}); m = u.module_from_spec(s); "
            "s.loader.exec_module(m); getattr(m, '_extension', lambda: None)()")  # a lazy build (kiln's examples)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, timeout=600)
    built = sorted(tmp_path.rglob("*.so"))
    assert built, "the kernel built no extension"
    for so in built:
        findings = symbol_findings(so)
        assert [f for f in findings if f.severity == "reject"] == [], (so.name, findings)


# ----------------------------------------------------------------------------- the candidate's own objects


def _objects_and_so(folder: Path, name: str, src: str, *link: str) -> Path:
    """`name.c` compiled to `name.o` and linked into `name.so` beside it, as torch's build dir leaves them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.c").write_text(src)
    subprocess.run([CC, "-c", "-fPIC", "-O1", "-o", str(folder / f"{name}.o"), str(folder / f"{name}.c")],
                   check=True, capture_output=True, timeout=120)
    so = folder / f"{name}.so"
    subprocess.run([CC, "-shared", "-o", str(so), str(folder / f"{name}.o"), *link], check=True, capture_output=True,
                   timeout=120)
    return so


def _static_lib(folder: Path) -> Path:
    """A static library whose own code calls getenv and syscall, as the static CUDA runtime does."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rt.c").write_text('#include <stdlib.h>\n#include <unistd.h>\n'
                                 'long rt_init(void) { return getenv("X") ? syscall(39) : 0; }\n')
    subprocess.run([CC, "-c", "-fPIC", "-o", str(folder / "rt.o"), str(folder / "rt.c")], check=True, timeout=120)
    subprocess.run(["ar", "rcs", str(folder / "librt_static.a"), str(folder / "rt.o")], check=True, timeout=60)
    return folder / "librt_static.a"


@needs_cc
@pytest.mark.skipif(shutil.which("ar") is None, reason="no ar")
def test_imports_of_a_statically_linked_library_are_reported_not_refused(tmp_path: Path) -> None:
    """The H200's torch links CUDA's runtime statically into load_inline extensions: getenv, syscall
    and secure_getenv appear in the .so though no line of the candidate calls them. With the build's
    objects beside it, those are warnings; the candidate's own refused calls still refuse."""
    lib = _static_lib(tmp_path / "lib")
    so = _objects_and_so(tmp_path / "ext", "honest", "long rt_init(void);\nlong f(void) { return rt_init(); }\n", str(lib))
    dyn = parse(collect(so))
    assert {"getenv", "syscall"} <= {s.name for s in dyn.undefined()}
    findings = symbol_findings(so)
    assert _rejected(findings) == "", findings
    assert any("linked in, not by the candidate's own" in f.evidence for f in findings), findings
    hostile = _objects_and_so(tmp_path / "ext2", "hostile", '#include <stdlib.h>\nlong rt_init(void);\n'
                              'long f(void) { return rt_init() + (getenv("HOME") != 0); }\n', str(lib))
    assert "getenv" in _rejected(symbol_findings(hostile))


@needs_cc
@pytest.mark.skipif(shutil.which("ar") is None, reason="no ar")
def test_without_its_objects_every_import_counts_as_the_candidates(tmp_path: Path) -> None:
    lib = _static_lib(tmp_path / "lib")
    so = _objects_and_so(tmp_path / "ext", "honest", "long rt_init(void);\nlong f(void) { return rt_init(); }\n", str(lib))
    (tmp_path / "ext" / "honest.o").unlink()
    assert "getenv" in _rejected(symbol_findings(so))


@needs_cc
@pytest.mark.skipif(shutil.which("ar") is None, reason="no ar")
def test_a_refused_call_resolved_inside_the_extension_is_still_refused(tmp_path: Path) -> None:
    """A library linked in statically that defines the refused function: the .so imports nothing
    refused, but the candidate's object calls it."""
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    (lib_dir / "mine.c").write_text("int symlink(const char* a, const char* b) { return a == b; }\n")
    subprocess.run([CC, "-c", "-fPIC", "-o", str(lib_dir / "mine.o"), str(lib_dir / "mine.c")], check=True, timeout=120)
    subprocess.run(["ar", "rcs", str(lib_dir / "libmine.a"), str(lib_dir / "mine.o")], check=True, timeout=60)
    so = _objects_and_so(tmp_path / "ext", "inside", '#include <unistd.h>\nint f(void) { return symlink("a", "b"); }\n',
                         str(lib_dir / "libmine.a"))
    assert "symlink" not in {s.name for s in parse(collect(so)).undefined()}
    assert "symlink" in _rejected(symbol_findings(so))


def test_an_object_file_that_is_not_one_fails_closed(tmp_path: Path) -> None:
    from kiln.tools.integrity.elf import object_imports

    with pytest.raises(ElfError):
        object_imports(b"\x7fELF\x02\x01" + b"\0" * 10)
    with pytest.raises(ElfError, match="relocatable"):
        object_imports(Path("/bin/true").read_bytes())


def test_an_allocation_overload_is_not_a_compute_op() -> None:
    """ATen names a struct `{op}_{overload}`: `torch::empty(..., memory_format)` is
    `at::_ops::empty_memory_format`, an allocation (the H200's honest load_inline kernels call it);
    `at::_ops::sum_dim_IntList` is still the sum."""
    from kiln.tools.integrity.elf import DynamicSymbol

    def findings(sym: str) -> list:
        dyn = ElfDynamic(machine=62, elf_type="shared", symbols=[
            DynamicSymbol(name=sym, undefined=True, binding="global", kind="func")])
        return [f for f in judge(dyn, default_policy()) if f.rule == "static.cpp-torch-op"]

    assert findings("_ZN2at4_ops19empty_memory_format4callEN3c108ArrayRefIlEE") == []
    assert findings("_ZN2at4_ops13empty_strided4callEv") == []
    assert "sum" in findings("_ZN2at4_ops15sum_dim_IntList4callERKNS_6TensorE")[0].evidence
    assert "log_softmax" in findings("_ZN2at4_ops15log_softmax_int4callEv")[0].evidence


@needs_cc
@pytest.mark.skipif(shutil.which("ar") is None, reason="no ar")
def test_an_object_swapped_for_a_link_fails_closed(tmp_path: Path) -> None:
    """A `.o` beside the extension that is a symlink is never followed nor skipped (skipping it
    would leave only the other objects, and their imports would excuse the hidden one's)."""
    lib = _static_lib(tmp_path / "lib")
    so = _objects_and_so(tmp_path / "ext", "honest", "long rt_init(void);\nlong f(void) { return rt_init(); }\n", str(lib))
    obj = tmp_path / "ext" / "honest.o"
    obj.rename(tmp_path / "elsewhere.o")
    obj.symlink_to(tmp_path / "elsewhere.o")
    assert "can't be checked" in _rejected(symbol_findings(so))
