"""import_candidate in a real worker-like subprocess: Triton under the interpreter, fast-path CUDA on
CPU (imports; compiles lazily), and the failure records a Coder gets for broken candidates."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kiln.tools.compile import detect_lang, extract_cuda_sources, import_candidate
from kiln.tools.compile.importer import source_hash

KERNELS = Path(__file__).parents[1] / "fixtures" / "kernels"

DRIVER = textwrap.dedent("""\
    import json, os, sys
    from pathlib import Path
    import torch
    from kiln.tools.compile import import_candidate
    mod, rec = import_candidate(Path(sys.argv[1]), device="cpu", cache_root=Path(sys.argv[2]))
    out = {"rec": rec.model_dump(), "ext": os.environ.get("TORCH_EXTENSIONS_DIR")}
    if mod is not None and sys.argv[3] == "run":
        torch.manual_seed(0)
        m = mod.ModelNew(0.5, 7)
        x = torch.randn(5, 7)
        ref = torch.nn.functional.gelu(x * 0.5 + m.bias)
        out["max_err"] = (m(x) - ref).abs().max().item()
    Path(sys.argv[4]).write_text(json.dumps(out))
""")


def _run(tmp_path: Path, cand: Path, action: str = "import") -> dict:
    result = tmp_path / "result.json"
    env = {**os.environ, "TRITON_INTERPRET": "1", "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    env.pop("TORCH_EXTENSIONS_DIR", None)
    p = subprocess.run([sys.executable, "-c", DRIVER, str(cand), str(tmp_path / "cache"), action, str(result)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(result.read_text())


def test_triton_candidate_imports_and_runs_under_interpreter(tmp_path):
    out = _run(tmp_path, KERNELS / "correct" / "triton" / "elementwise_gelu.py", "run")
    rec = out["rec"]
    assert rec["ok"] and rec["lang"] == "triton" and rec["backend"] == "triton-interpreter"
    assert out["max_err"] < 1e-5


def test_fast_path_candidate_keys_build_dir_by_source_hash(tmp_path):
    cand = KERNELS / "correct" / "cuda" / "row_softmax_fast.py"
    out = _run(tmp_path, cand)
    assert out["rec"]["ok"] and out["rec"]["backend"] == "nvrtc"
    assert out["ext"] == str(tmp_path / "cache" / "ext" / source_hash(cand.read_text())[:16])


def _write(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "cand.py"
    p.write_text(textwrap.dedent(body))
    return p


def test_syntax_error_gives_line(tmp_path):
    mod, rec = import_candidate(_write(tmp_path, "import torch\ndef f(:\n    pass\n"), device="cpu",
                                cache_root=tmp_path)
    assert mod is None and not rec.ok
    assert rec.errors[0].startswith("cand.py:2: SyntaxError")


def test_exception_at_import_gives_line(tmp_path):
    body = "import torch\n\nX = torch.zeros(3)\nY = X.reshape(7)\n"
    mod, rec = import_candidate(_write(tmp_path, body), device="cpu", cache_root=tmp_path)
    assert mod is None and not rec.ok
    assert rec.errors[0].startswith("cand.py:4: RuntimeError:")


def test_sys_exit_at_import_is_a_record(tmp_path):
    mod, rec = import_candidate(_write(tmp_path, "import sys\nsys.exit(3)\n"), device="cpu", cache_root=tmp_path)
    assert mod is None and "sys.exit(3)" in rec.errors[0]


def test_missing_model_new(tmp_path):
    mod, rec = import_candidate(_write(tmp_path, "import torch\nclass Model: pass\n"), device="cpu",
                                cache_root=tmp_path)
    assert not rec.ok and "no class ModelNew" in rec.errors[0]


def test_candidate_prints_are_captured_not_leaked(tmp_path, capfd):
    body = "print('hello from candidate')\nclass ModelNew: pass\n"
    _, rec = import_candidate(_write(tmp_path, body), device="cpu", cache_root=tmp_path)
    assert rec.ok and "hello from candidate" in rec.log_tail
    assert "hello from candidate" not in capfd.readouterr().out


@pytest.mark.parametrize(
    ("name", "lang"),
    [("triton/elementwise_gelu.py", "triton"), ("cuda/relu_fast.py", "cuda"),
     ("cuda/relu_load_inline.py", "cuda")],
)
def test_detect_lang_on_corpus(name, lang):
    assert detect_lang((KERNELS / "correct" / name).read_text()) == lang


def test_detect_lang_plain_torch_and_unknown():
    assert detect_lang("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n") == "torch"
    assert detect_lang("x = 1\n") == "unknown"


def test_extract_sources_from_load_inline_and_fast_path():
    li = extract_cuda_sources((KERNELS / "correct" / "cuda" / "row_softmax_load_inline_kiln.py").read_text())
    assert len(li["cuda"]) == 1 and "__global__" in li["cuda"][0]
    assert len(li["cpp"]) == 1 and "torch/extension.h" in li["cpp"][0]
    fast = extract_cuda_sources((KERNELS / "correct" / "cuda" / "row_softmax_fast.py").read_text())
    assert len(fast["kernel"]) == 1 and 'extern "C"' in fast["kernel"][0]


INTERP_DRIVER = textwrap.dedent("""\
    import json, sys
    from pathlib import Path
    import torch
    from kiln.tools.compile import classify_first_call_error, import_candidate
    mod, rec = import_candidate(Path(sys.argv[1]), device="cpu", cache_root=Path(sys.argv[2]))
    try:
        mod.ModelNew()(torch.zeros(100))
        out = None
    except Exception as exc:
        r = classify_first_call_error(exc)
        out = r.model_dump() if r else repr(exc)
    Path(sys.argv[3]).write_text(json.dumps(out))
""")


def test_interpreter_name_error_is_a_compile_error(tmp_path):
    cand = _write(tmp_path, """\
        import torch
        import triton
        import triton.language as tl


        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, undefined_thing, mask=offs < n)


        class ModelNew(torch.nn.Module):
            def forward(self, x):
                k[(1,)](x, x.numel(), BLOCK=128)
                return x
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1", "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    p = subprocess.run([sys.executable, "-c", INTERP_DRIVER, str(cand), str(tmp_path / "c"), str(tmp_path / "r.json")],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    rec = json.loads((tmp_path / "r.json").read_text())
    assert isinstance(rec, dict) and rec["backend"] == "triton-interpreter"
    assert rec["errors"][0].startswith("cand.py:9: NameError:") and "undefined_thing" in rec["errors"][0]


def test_stale_build_lock_of_a_dead_worker_is_removed(tmp_path):
    from kiln.tools.compile.importer import clear_stale_locks

    claim = ("import sys\nfrom pathlib import Path\nfrom kiln.tools.compile.importer import clear_stale_locks\n"
             "clear_stale_locks(Path(sys.argv[1]))\nprint('claimed', flush=True)\nsys.stdin.read()")
    (tmp_path / "ext_name").mkdir()
    lock = tmp_path / "ext_name" / "lock"
    lock.write_text("")
    live = subprocess.Popen([sys.executable, "-c", claim, str(tmp_path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert live.stdout.readline().strip() == "claimed"
    lock.write_text("")  # the live worker's build lock: left alone
    assert clear_stale_locks(tmp_path) == [] and lock.exists()
    live.communicate("")  # that worker ends (or is killed): its claim goes with it
    assert clear_stale_locks(tmp_path) == [lock] and not lock.exists()
