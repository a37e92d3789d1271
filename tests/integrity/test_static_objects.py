"""The allowlist on objects (issue 22, part 5): Triton kernels may only be launched, private and
Triton-internal attributes are refused on any object but a method's own `self`, keys are folded
like getattr names, `self` can't be forged, Triton's callbacks are refused. Each escape was open
before (main's scan passed it); each honest pattern must still pass."""

from __future__ import annotations

import textwrap

import pytest

from kiln.tools.integrity.static import scan_candidate
from kiln.tools.integrity.static_keys import Keys, format_fields
from kiln.tools.integrity.static_names import RESERVED_PRIVATE

HEAD = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
K = "@triton.jit\ndef k(x_ptr, n, B: tl.constexpr):\n    pass\n"


def rejects(src: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in scan_candidate(HEAD + textwrap.dedent(src), filename="cand.py", dtype="fp32"):
        if f.severity == "reject":
            assert f.line and f.evidence, f
            out.setdefault(f.rule, []).append(f.evidence)
    return out


KERNEL, DYNAMIC, IMPORT, PATCH = "static.kernel-object", "static.dynamic-access", "static.import-not-allowed", \
    "static.monkey-patch"
ESCAPES = [
    # Triton kernel objects: the launch only
    (KERNEL, K + "g = k.get_capture_scope()\n"),
    (KERNEL, K + "f = k.fn\n"),
    (KERNEL, K + "r = k.run\n"),
    (KERNEL, K + "c = k.cache\n"),
    (KERNEL, K + "w = k.warmup\n"),
    (KERNEL, K + "def g(z):\n    return z\ng(k)\n"),
    (KERNEL, K + "ks = [k]\n"),
    (KERNEL, K + "for kk in (k,):\n    kk[(1,)](1, 2, B=4)\n"),
    (KERNEL, K + "class A:\n    kern = k\n"),
    (KERNEL, K + "h = k[(1,)](1, 2, B=4)\n"),
    (KERNEL, K + "def f():\n    return k[(1,)](1, 2, B=4)\n"),
    (KERNEL, K + "launch = k[(1,)]\n"),
    (KERNEL, K + "y = [(q := k) for _ in [0]]\n"),
    (KERNEL, K + "f = lambda q=k: q\n"),
    (KERNEL, "def h(f):\n    return f\n@triton.jit\ndef c(a, b):\n    return a + b\n@triton.jit\ndef k(x):\n    h(c)\n"),
    (KERNEL, "def g(f):\n    return f.get_capture_scope()\ng(tl.sum)\n"),  # a library JIT function handed on
    (KERNEL, "d = {0: tl.sum}\ns = d[0].src\n"),
    (IMPORT, "f = tl.sum.fn\n"),
    # private attributes on any object
    (DYNAMIC, "def f(x):\n    return x._cdata\n"),
    (DYNAMIC, "def f(x):\n    return getattr(x, '_cdata')\n"),
    (DYNAMIC, "class M(nn.Module):\n    def f(self):\n        return self._forward_hooks\n"),
    (DYNAMIC, "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self._forward_pre_hooks = {0: print}\n"),
    (DYNAMIC, "class A:\n    _x = 1\n    @staticmethod\n    def f(ctx):\n        return ctx._x\n"),
    (DYNAMIC, "class A:\n    _x = 1\n    def m(self):\n        def g(self):\n            return self._x\n"
              "        return g(tl.sum)\n"),
    (DYNAMIC, "def f(t):\n    t.register_post_accumulate_grad_hook(print)\n"),
    # keys folded like getattr names
    (DYNAMIC, "d = {}\nx = d['__bu' + 'iltins__']\n"),
    (DYNAMIC, "def f(d):\n    return d.get('__bu' + 'iltins__')\n"),
    (DYNAMIC, "def f(d, v):\n    d['_' + '_builtins__'] = v\n"),
    (DYNAMIC, "def f(d):\n    return d[chr(95) * 2 + 'builtins' + chr(95) * 2]\n"),
    (DYNAMIC, "def f(d):\n    return d[bytes([95, 95]).decode()]\n"),
    (DYNAMIC, "def f(d, n):\n    return d[f'{n}']\n"),
    (DYNAMIC, "def f(d):\n    k = chr(95) + chr(95) + 'import' + chr(95) + chr(95)\n    return d[k]\n"),
    (DYNAMIC, "def f(d):\n    return d.pop(''.join(['__', 'import', '__']))\n"),
    (DYNAMIC, "def f(d):\n    return d[''.join([chr(95) * 2, 'builtins', chr(95) * 2])]\n"),
    (DYNAMIC, "def f(d, x):\n    p = f'{chr(95)}'\n    return d[f'{p}{p}builtins{p}{p}']\n"),
    # match patterns are look-ups too
    (DYNAMIC, "def f(x):\n    match x:\n        case object(__class__=c):\n            return c\n"),
    (DYNAMIC, "def f(x):\n    match x:\n        case object(__globals__=g):\n            return g\n"),
    (DYNAMIC, "def f(x):\n    match x:\n        case object(_cdata=c):\n            return c\n"),
    (DYNAMIC, "def f(d):\n    match d:\n        case {'_priv': b}:\n            return b\n"),
    # str.format fields walk attributes and keys
    (DYNAMIC, "def f(x):\n    return ('{0.__cl' + 'ass__}').format(x)\n"),
    (DYNAMIC, "def f(x):\n    return '{0[__builtins__]}'.format(x)\n"),
    (DYNAMIC, "def f(t, x):\n    return t.format(x)\n"),
    (DYNAMIC, "def f(x, n):\n    return f'{{0.{n}}}'.format(x)\n"),
    # a forged self: unbound methods, classes as values, decorators the file defines, rebinding self
    (DYNAMIC, "class A:\n    def m(self):\n        return self.get_capture_scope()\n"
              "    def get_capture_scope(self):\n        return 1\nA.m(tl.sum)\n"),
    (DYNAMIC, "class A:\n    def m(self):\n        return 1\nf = getattr(A, 'm')\n"),
    (DYNAMIC, "class A:\n    def m(self):\n        return 1\nclass B(A):\n    pass\nB.m(tl.sum)\n"),
    (DYNAMIC, "class A:\n    pass\nx = A\n"),
    (DYNAMIC, "class A:\n    pass\ndef f(c):\n    return c\nf(A)\n"),
    (DYNAMIC, "def deco(c):\n    return c\n@deco\nclass A:\n    pass\n"),
    (DYNAMIC, "def deco(f):\n    return f\nclass A:\n    @deco\n    def m(self):\n        return 1\n"),
    (DYNAMIC, "import functools\ndef deco(a, c):\n    return c\n@functools.partial(deco, 1)\nclass A:\n    pass\n"),
    (DYNAMIC, "class A(nn.Module):\n    def __init__(self):\n        super().__init__()\ndef f(o):\n    A.__init__(o)\n"),
    (DYNAMIC, "def f(x, y):\n    x.__init__(y)\n"),
    (DYNAMIC, "f = nn.Module.__init__\n"),
    (DYNAMIC, "class A:\n    def m(self):\n        return self.get_capture_scope()\n    def get_capture_scope(self):\n"
              "        return 1\n    p = property(m)\ng = A.p.fget(tl.sum)\n"),
    (DYNAMIC, "class A:\n    def m(self):\n        return 1\n    s = staticmethod(m)\ng = A.s(tl.sum)\n"),
    (DYNAMIC, "class A:\n    def m(self):\n        return 1\n    h = {'a': m}\ng = A.h['a'](tl.sum)\n"),
    (DYNAMIC, "def f(p):\n    return p.fget\n"),
    (DYNAMIC, "class M(nn.Module):\n    def _call_impl(self, *a):\n        return 1\n"),
    (DYNAMIC, "class M(nn.Module):\n    _modules = {}\n"),
    # Triton callbacks and compile-time inputs
    (DYNAMIC, "c = triton.Config({'B': 128}, pre_hook=print)\n"),
    (DYNAMIC, "c = triton.Config({'B': 128}, 4, 3, 1, None, print)\n"),
    (DYNAMIC, "c = triton.Config({}, ir_override='/tmp/k.ttgir')\n"),
    (DYNAMIC, "@triton.autotune(configs=[], key=['n'], prune_configs_by={'early_config_prune': print})\n"
              "@triton.jit\ndef k(x, n):\n    pass\n"),
    (DYNAMIC, "@triton.autotune(configs=[], key=['n'], do_bench=print)\n@triton.jit\ndef k(x, n):\n    pass\n"),
    (DYNAMIC, "def f(x):\n    pass\nk2 = triton.jit(f, repr=print)\n"),
    (DYNAMIC, "def f(x):\n    pass\nk2 = triton.jit(f, launch_metadata=print)\n"),
    # compiled objects keep the source the scan read
    (PATCH, "from kiln.tools.cuda import CudaKernel\nK = CudaKernel('__global__ void k(){}', 'k')\nK.source = 'x'\n"),
    (PATCH, "from kiln.tools.cuda import CudaKernel\nK = CudaKernel('__global__ void k(){}', 'k')\n"
            "setattr(K, 'source', 'x')\n"),
    # modules through class attributes, frames through generators and cells
    (DYNAMIC, "class A:\n    t = torch\nm = A.t.sys.modules\n"),
    ("static.introspection", "def f():\n    g = (i for i in range(3))\n    return g.gi_code.co_consts\n"),
    ("static.introspection", "def f(c):\n    return c.cell_contents\n"),
]


@pytest.mark.parametrize(("rule", "src"), ESCAPES, ids=[f"{r}-{i}" for i, (r, _) in enumerate(ESCAPES)])
def test_escape_is_refused(rule: str, src: str) -> None:
    assert rule in rejects(src), rejects(src)


HONEST = [
    "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._cache = {}\n"
    "    def forward(self, x):\n        return self._cache.get(tuple(x.shape))\n",
    "class M(nn.Module):\n    def _launch(self, x):\n        return x\n    def forward(self, x):\n"
    "        return self._launch(x)\n",
    "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._n = 4\n"
    "    def forward(self, x):\n        grid = lambda meta: (triton.cdiv(self._n, meta['B']),)\n        return grid\n",
    "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.kernel = None\n"
    "        self.cache = {}\n    def forward(self, x):\n        return self.kernel, self.cache[f'{x.shape[0]}x1']\n",
    "import collections\nP = collections.namedtuple('P', 'a b')\np = P(1, 2)._replace(a=3)\n",
    "class F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        ctx.save_for_backward(x)\n"
    "        return x\ny = F.apply(torch.ones(2))\n",
    "class E(Exception):\n    pass\nclass C:\n    pass\ndef f(x):\n    if isinstance(x, (C, int)):\n"
    "        raise E('no')\n    return issubclass(E, Exception), C()\n",
    "import functools\nfrom dataclasses import dataclass\n@dataclass\nclass Cfg:\n    b: int = 1\n    @property\n"
    "    def p(self):\n        return self.b\n    @p.setter\n    def p(self, v):\n        self.b = v\n"
    "    @functools.lru_cache(maxsize=None)\n    def q(self):\n        return 1\nc = Cfg(b=2)\n",
    "from typing import Optional\nclass C:\n    pass\ndef f(x: Optional[C]) -> C:\n    y: C = C()\n    return y\n",
    "class A(nn.Module):\n    def __init__(self):\n        nn.Module.__init__(self)\nclass B(A):\n"
    "    def __init__(self):\n        A.__init__(self)\n",
    "def f(x, i, meta, **kw):\n    n = x.shape[i - 1]\n    return x[:, None], x[..., i], meta['B'], x[i:i + 2], kw[f'{n}']\n",
    "@triton.jit\ndef c(a, b):\n    return a + b\n@triton.jit\ndef k(x_ptr):\n    x = tl.load(x_ptr + tl.arange(0, 4))\n"
    "    s = tl.reduce(x, 0, c)\n    y = c(s, s).to(tl.float32)\n",
    "@triton.jit\ndef a(x):\n    pass\n@triton.jit\ndef b(x):\n    pass\ndef f(c):\n    kern, blk = (a, 1) if c else (b, 2)\n"
    "    kern2 = a if c else b\n    kern[(1,)](blk)\n    kern2[(1,)](blk)\n",
    "@triton.autotune(configs=[triton.Config({'B': 128}, num_warps=4, num_stages=2)], key=['n'], reset_to_zero=['y'])\n"
    "@triton.heuristics({'EVEN': lambda args: args['n'] % args['B'] == 0})\n@triton.jit\n"
    "def k(x, y, n, B: tl.constexpr, EVEN: tl.constexpr):\n    pass\n",
    "@triton.jit(do_not_specialize=['n'])\ndef k(x, n):\n    pass\n",
    "def f(x):\n    return '{} {:.3f} {0.shape} {n:>8}'.format(x, 1.0, n=3)\n",
    "from kiln.tools.cuda import CudaKernel\nK = CudaKernel('__global__ void k(float* x){}', 'k')\n"
    "def f(x):\n    K.launch((1,), (32,), [x])\n",
]


@pytest.mark.parametrize("src", HONEST, ids=[f"honest-{i}" for i in range(len(HONEST))])
def test_honest_patterns_pass(src: str) -> None:
    assert rejects(src) == {}


def test_reserved_private_names_cover_module_and_kernel_internals() -> None:
    for name in ("_forward_hooks", "_forward_pre_hooks", "_modules", "_parameters", "_call_impl", "_backward_hooks",
                 "_base", "_cdata", "_src", "_fn_name", "_make_subclass"):
        assert name in RESERVED_PRIVATE, name


def test_format_fields_are_every_attribute_and_key() -> None:
    assert list(format_fields("{0.__class__} {x[__builtins__]} {:{1._a}} {} {0:.3f} {{0.skip}}")) == [
        "__class__", "__builtins__", "_a"]
    assert list(format_fields("{0.}")) == [] and list(format_fields("{")) == []


def test_key_kinds() -> None:
    import ast

    from kiln.tools.integrity.resolve import Scope

    src = "a = chr(95) * 2 + 'bu' + 'iltins__'\nb = f'{x}y'\nc = 3\nd = 'weight'\ne = bytes([95]).decode() + d\n"
    tree = ast.parse(src)
    keys = Keys(list(ast.walk(tree)), Scope(tree))
    kinds = {n: keys.key_kind(ast.Name(id=n)) for n in "abcde"}
    assert kinds == {"a": "private", "b": "opaque", "c": "other", "d": "str", "e": "opaque"}
