"""Compiler output trimmed for a Coder: real nvcc output, real Triton CompilationError, Python errors."""

import shutil
import subprocess
import textwrap

import pytest

from kiln.tools.compile import classify_first_call_error, trim_errors
from kiln.tools.compile.errors import python_error

GCC_LOG = """\
In file included from /tmp/x/main.cpp:1:
/root/.cache/kiln/ext/abcd/kiln_ext/main.cpp:12:5: error: 'foo' was not declared in this scope
   12 |     foo(x);
      |     ^~~
/root/.cache/kiln/ext/abcd/kiln_ext/main.cpp:20:1: error: expected ';' before '}' token
ninja: build stopped: subcommand failed.
"""


def test_gcc_errors_normalized_with_context():
    errs = trim_errors(GCC_LOG)
    assert errs[0].startswith("main.cpp:12: error: 'foo' was not declared")
    assert "foo(x);" in errs[0]
    assert errs[1].startswith("main.cpp:20: error: expected ';'")
    assert errs[2] == "ninja: build stopped: subcommand failed."


def test_trim_caps_the_count():
    log = "\n".join(f"k.cu({i}): error: bad thing {i}" for i in range(1, 40))
    errs = trim_errors(log, max_errors=3)
    assert errs == ["k.cu:1: error: bad thing 1", "k.cu:2: error: bad thing 2", "k.cu:3: error: bad thing 3"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_real_nvcc_error_has_file_and_line(tmp_path):
    src = tmp_path / "kernel.cu"
    src.write_text(textwrap.dedent("""\
        extern "C" __global__ void k(float* x, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) x[i] = undefined_name * 2.0f;
        }
    """))
    p = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-o", str(tmp_path / "k.cubin"), str(src)],
                       capture_output=True, text=True)
    assert p.returncode != 0
    errs = trim_errors(p.stdout + p.stderr)
    assert errs and errs[0].startswith("kernel.cu:3: error:")
    assert "undefined_name" in errs[0]


def test_triton_compilation_error_maps_to_file_line(tmp_path):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kiln.tools.compile.importer import _exec_module

    src = textwrap.dedent("""\
        import triton
        import triton.language as tl


        @triton.jit
        def bad(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            y = tl.load(x_ptr + offs, mask=offs < n)
            tl.store(x_ptr + offs, y + not_defined_here, mask=offs < n)
    """)
    path = tmp_path / "cand_bad.py"
    path.write_text(src)
    mod, _ = _exec_module(path, "kiln_test_cand_bad")
    with pytest.raises(Exception) as info:
        triton.compile(ASTSource(mod.bad, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                                 constexprs={"BLOCK": 128}), target=GPUTarget("cuda", 90, 32))
    rec = classify_first_call_error(info.value, source=src, filename="cand_bad.py")
    assert rec is not None and not rec.ok and rec.lang == "triton"
    assert rec.errors[0].startswith("cand_bad.py:9: error:")
    assert "not_defined_here" in rec.errors[0]


def test_non_compile_errors_are_not_classified():
    assert classify_first_call_error(ValueError("shape mismatch")) is None
    assert classify_first_call_error(RuntimeError("CUDA error: an illegal memory access")) is None


def test_load_inline_build_error_is_classified():
    exc = RuntimeError("Error building extension 'x':\n/b/x/cuda.cu(7): error: expected a \";\"\n")
    rec = classify_first_call_error(exc)
    assert rec is not None and rec.backend == "load_inline"
    assert rec.errors == ['cuda.cu:7: error: expected a ";"']


def test_python_error_points_at_candidate_line():
    code = compile("x = 1\nraise KeyError('boom')\n", "/some/dir/cand.py", "exec")
    try:
        exec(code, {})
    except KeyError as exc:
        assert python_error(exc, "cand.py") == "cand.py:2: KeyError: 'boom'"


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_real_gcc_error_has_file_and_line(tmp_path):
    src = tmp_path / "main.cpp"
    src.write_text("int f(int x) {\n    return x +;\n}\n")
    p = subprocess.run(["g++", "-c", str(src), "-o", str(tmp_path / "m.o")], capture_output=True, text=True)
    errs = trim_errors(p.stdout + p.stderr)
    assert errs and errs[0].startswith("main.cpp:2: error:"), errs


def test_locate_in_source_maps_nvcc_and_gcc_lines_to_the_candidate():
    from kiln.tools.compile.errors import locate_in_source

    source = ('X = 1\nSRC = r"""\n__global__ void k(float* x) {\n    x[0] = nope;\n}\n"""\n'
              'CPP = r"""\nint f() {\n    return 1 +;\n}\n"""\n')
    edg = 'cuda.cu(5): error: identifier "nope" is undefined\n      x[0] = nope;\n             ^'
    gcc = "main.cpp:3:15: error: expected primary-expression\n    3 |     return 1 +;\n      |               ^"
    out = locate_in_source(trim_errors(edg + "\n" + gcc), source, "/d/cand.py")
    assert out[0].startswith('cuda.cu:5 (cand.py:4): error: identifier "nope"')
    assert out[1].startswith("main.cpp:3 (cand.py:9): error:")
    assert locate_in_source(["k.cu:1: error: x"], source, "cand.py") == ["k.cu:1: error: x"]
