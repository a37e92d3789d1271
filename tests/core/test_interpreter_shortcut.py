"""`kiln.tools.interpreter`: Triton's interpreter without its repeated language walks and its dead
overflow sanitizer. The same results as the interpreter's own path (int32 overflow wraps either
way), far fewer walks, off where the interpreter is, and in every CPU check's workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from kiln.tools.check import check
from kiln.tools.records import CheckOptions

DATA = Path(__file__).parent / "data"

# A row softmax whose max and sum go through jitted helpers (tl.max, tl.sum and an own helper):
# every helper call walked the language again before the shortcut.
RUN = textwrap.dedent("""
    import hashlib, json, os, sys
    import torch, triton, triton.language as tl
    import triton.runtime.interpreter as it

    walks = []
    original = it._patch_lang
    def counted(fn):
        walks.append(fn.__name__)
        return original(fn)
    it._patch_lang = counted

    applied = {}
    if sys.argv[1] == "shortcut":
        from kiln.tools import interpreter
        applied = interpreter.install()
        assert interpreter.install() == applied  # idempotent

    @triton.jit
    def _row_max(v, mask):
        return tl.max(tl.where(mask, v, -float("inf")), axis=0)

    @triton.jit
    def int_hash(x_ptr, y_ptr, n, BLOCK: tl.constexpr):  # int32 products that overflow: they wrap, as on a GPU
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(y_ptr + offs, v * 65599 + 1013904223, mask=offs < n)

    @triton.jit
    def softmax(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
        e = tl.exp(x - _row_max(x, mask))
        tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)

    torch.manual_seed(0)
    x = torch.randn(48, 100)
    outs = []
    for _ in range(2):  # a second launch: the shortcut's state starts again per launch
        y = torch.empty_like(x)
        softmax[(x.shape[0],)](x, y, x.shape[1], BLOCK=128)
        outs.append(y)
    ints = torch.randint(-2**31, 2**31 - 1, (1000,), dtype=torch.int32)
    hashed = torch.empty_like(ints)
    int_hash[(8,)](ints, hashed, 1000, BLOCK=128)
    wrapped = ((ints.to(torch.int64) * 65599 + 1013904223 + 2**31) % 2**32 - 2**31).to(torch.int32)
    print(json.dumps({"walks": len(walks), "applied": applied, "ints_wrap": torch.equal(hashed, wrapped),
                      "sanitizer": it.interpreter_builder.options.sanitize_overflow,
                      "bits": [hashlib.sha256(o.numpy().tobytes()).hexdigest() for o in outs],
                      "err": (outs[0] - torch.softmax(x, -1)).abs().max().item()}))
""")


def _run(mode: str, interpret: bool = True) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    done = subprocess.run([sys.executable, "-c", RUN, mode], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_shortcut_keeps_every_result_and_drops_the_repeated_walks() -> None:
    plain, fast = _run("plain"), _run("shortcut")
    assert fast["bits"] == plain["bits"]  # bit for bit, both launches
    assert fast["err"] < 1e-6
    assert plain["ints_wrap"] and fast["ints_wrap"]  # int32 overflow wraps with the sanitizer and without
    assert fast["applied"] == {"helper_walks": True, "overflow_sanitizer": True}, fast  # Triton 3.9's interpreter
    assert plain["sanitizer"] and not fast["sanitizer"]
    # the interpreter's own path: per launch, one walk plus one per helper call per program
    # (three helpers x 48 rows), and one for the hash's launch ...
    assert plain["walks"] >= 2 * (1 + 3 * 48) + 1
    # ... the shortcut: per softmax launch, one walk for the kernel's `tl` and one for the helpers' `tl.core`
    assert fast["walks"] <= 2 * 2 + 1, fast


def test_nothing_is_installed_where_the_interpreter_is_off() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import json; from kiln.tools import interpreter; import triton.runtime.interpreter as it;"
         "print(json.dumps([interpreter.install(), hasattr(it._patch_lang, '__wrapped__')]))"],
        capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
        timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [{"helper_walks": False, "overflow_sanitizer": False},
                                                                False]


def test_an_interpreter_of_another_shape_is_left_alone() -> None:
    import types

    from kiln.tools.interpreter import _has_shape

    other = types.ModuleType("other_interpreter")
    other._patch_lang = lambda fn, builder: None  # another signature: not the code the shortcut relies on
    assert not _has_shape(other)


def test_every_cpu_check_worker_runs_with_the_shortcut() -> None:
    """The candidate raises unless its worker has the shortcut: the check must pass, all trials."""
    rec = check(DATA / "add_problem.py", DATA / "interp" / "add_via_helper.py",
                CheckOptions(device="cpu", trials=1, timeout_s=120, static="denylist"))
    assert rec.status == "ok", rec.reasons
    assert rec.correctness is not None and rec.correctness.passed
