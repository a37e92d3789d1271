"""The allowlist: which modules, attributes, builtins and dunders LLM-written code may use.

`ALLOWED` maps every module a candidate may import to the names it may use from it: an explicit
set, or the generated table in `static_names` for namespaces opened wholesale (torch's tensor
operators, `torch.nn.functional`, `triton.language`, `math`, ...). A name that is itself a key of
`ALLOWED` is a submodule one may walk into (`torch.nn`, `torch.utils.cpp_extension`); any other
module reached through an allowed one (`torch.sys`, `F.np`, `tl.extra.pkgutil`) is refused, as is
every private name (`torch._C`). What honest kernels use, from the corpus, the built-in Coder's
output and real LLM transcripts, is all in here; docs/integrity.md explains the choices.
"""

from __future__ import annotations

from kiln.tools.integrity.static_names import NAMES


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


TORCH_EXTRA = _words("""
    Tensor Size device dtype layout memory_format no_grad inference_mode enable_grad set_grad_enabled
    autocast finfo iinfo is_tensor is_floating_point is_complex get_default_dtype broadcast_shapes
    nn cuda linalg fft special autograd utils version
""")
"""torch's classes and helpers beyond its operators, and the submodules one may walk into."""

TORCH_CUDA = _words("""
    is_available current_device device_count current_stream default_stream get_device_properties
    get_device_capability get_device_name synchronize device is_bf16_supported
""")
"""Device queries only: no streams, graphs, events (timing), allocators, RNG or memory statistics."""

TRITON = _words("jit autotune heuristics Config cdiv next_power_of_2 language")
"""The decorators, launch helpers and the language. Not `triton.runtime` (its driver patches
launches: for the SM count use `torch.cuda.get_device_properties`), `triton.knobs`, `triton.compile`,
`triton.testing`."""

TYPING = _words("""
    Any Callable ClassVar Dict Final FrozenSet Generic Iterable Iterator List Literal Mapping NamedTuple
    Optional Protocol Sequence Set Tuple Type TypeVar TypedDict Union TYPE_CHECKING cast overload
""")
"""Annotation helpers; not `get_type_hints` or `ForwardRef` (they evaluate strings as code)."""

ALLOWED: dict[str, frozenset[str]] = {
    "torch": NAMES["torch"] | TORCH_EXTRA,
    "torch.nn": NAMES["torch.nn"] | _words("functional init"),
    "torch.nn.functional": NAMES["torch.nn.functional"],
    "torch.nn.init": NAMES["torch.nn.init"],
    "torch.linalg": NAMES["torch.linalg"],
    "torch.fft": NAMES["torch.fft"],
    "torch.special": NAMES["torch.special"],
    "torch.cuda": TORCH_CUDA,
    "torch.autograd": _words("Function"),
    "torch.utils": _words("cpp_extension"),
    "torch.utils.cpp_extension": _words("load_inline"),
    "torch.version": _words("cuda hip"),
    "triton": TRITON,
    "triton.language": NAMES["triton.language"] | _words("math extra"),
    "triton.language.math": NAMES["triton.language.math"],
    "triton.language.extra": _words("libdevice cuda"),
    "triton.language.extra.libdevice": NAMES["triton.language.extra.libdevice"],
    "triton.language.extra.cuda": _words("libdevice"),
    "triton.language.extra.cuda.libdevice": NAMES["triton.language.extra.cuda.libdevice"],
    "kiln": _words("tools"),
    "kiln.tools": _words("cuda"),
    "kiln.tools.cuda": _words("CudaKernel i64 f64 CudaCompileError CudaLaunchError"),
    "math": NAMES["math"],
    "itertools": NAMES["itertools"],
    "functools": _words("partial reduce lru_cache cache wraps cached_property total_ordering"),
    "typing": TYPING,
    "dataclasses": _words("dataclass field fields asdict astuple replace InitVar KW_ONLY MISSING is_dataclass"),
    "enum": _words("Enum IntEnum Flag IntFlag StrEnum auto unique"),
    "numbers": _words("Number Complex Real Rational Integral"),
    "collections": _words("namedtuple OrderedDict defaultdict deque Counter abc"),
    "collections.abc": NAMES["collections.abc"],
    "abc": _words("ABC abstractmethod"),
    "contextlib": _words("contextmanager nullcontext"),
    "__future__": _words("annotations"),
    "os": _words("environ"),
}
"""Module -> the names one may use from it. `os` is here only for the KernelBench habit of setting
`os.environ["TORCH_CUDA_ARCH_LIST"]` at module level: the denylist rules refuse every other use of
the environment (reading it, or writing anything but the build settings)."""

ALLOWED_BUILTINS = _words("""
    abs all any bool bytes callable chr classmethod complex dict divmod enumerate filter float format
    frozenset getattr hasattr hash int isinstance issubclass iter len list map max min next object
    ord pow print property range repr reversed round set setattr slice sorted staticmethod str sum
    super tuple zip NotImplemented Ellipsis
    ArithmeticError AssertionError AttributeError Exception ImportError IndexError KeyError
    ModuleNotFoundError NotImplementedError OverflowError RuntimeError StopIteration TypeError
    UserWarning ValueError Warning ZeroDivisionError
""")
"""Builtins a kernel may name. Not: `open`, `input`, `eval`, `exec`, `compile`, `__import__`,
`globals`, `locals`, `vars`, `dir`, `type` (`type(k).run = ...` patches a class kiln hooks),
`delattr`, `memoryview`, `breakpoint`, `help`, `exit`, `quit`. `getattr`, `setattr` and `hasattr`
only with a string-literal name."""

ALLOWED_DUNDER_ATTRS = _words("__init__ __name__ __doc__ __version__")
"""`super().__init__()`, `nn.Module.__init__(self)`, `fn.__name__`, `torch.__version__`."""

ALLOWED_DUNDER_NAMES = _words("__name__ __doc__ __debug__ __all__ __slots__ __version__")
"""Module-level dunder names one may read or set (`if __name__ == "__main__":`, `__all__ = [...]`)."""

ALLOWED_DUNDER_DEFS = _words("""
    __init__ __call__ __repr__ __str__ __len__ __iter__ __next__ __getitem__ __setitem__ __contains__
    __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __bool__ __post_init__ __enter__ __exit__
    __add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __floordiv__
    __mod__ __pow__ __neg__ __pos__ __abs__ __matmul__ __index__ __int__ __float__
""")
"""Special methods a class may define. Not attribute hooks (`__getattr__`, `__getattribute__`,
`__setattr__`), finalizers (`__del__`), descriptors, pickling, class-creation hooks
(`__init_subclass__`, `__class_getitem__`, `__new__`), `__torch_function__`, `__array__`."""

REFUSED_METHODS = _words("""
    numpy __array__ add_pre_run_hook add_post_run_hook pre_hook post_hook launch_enter_hook launch_exit_hook
    register_forward_hook register_forward_pre_hook register_full_backward_hook register_module_forward_hook
    register_hook register_dispatch_key
""")
"""Attribute names refused on any object: `x.numpy()` hands a tensor to numpy; Triton's launch
hooks (`kernel.add_pre_run_hook(...)`) and module or tensor hooks run code where kiln's accounting
of the forward does not expect it, and no kernel needs them."""

ATTRS_HINT = {
    "triton.runtime": "for the SM count use torch.cuda.get_device_properties(i).multi_processor_count",
    "torch.cuda.Event": "timing is kiln's job",
    "torch.cuda.Stream": "launch on the current stream",
}
"""A hint appended to a refusal, for the few things an honest kernel might reach for."""


def allowed_modules_text() -> str:
    roots = sorted({m.split(".")[0] for m in ALLOWED if m not in ("kiln", "kiln.tools", "__future__", "os")})
    return ", ".join(roots + ["kiln.tools.cuda"])
