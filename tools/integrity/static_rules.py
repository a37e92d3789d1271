"""Rule tables for the static scan: dotted names (after alias resolution) and attribute names.

A dotted name matches a prefix when it equals it or starts with it plus a dot, so `threading`
matches `threading.Thread` and `threading.Thread.start`.
"""

from __future__ import annotations

THREADS = ("threading", "_thread", "multiprocessing", "concurrent", "subprocess", "asyncio", "os.fork",
           "os.forkpty", "os.system", "os.popen", "os.spawnl", "os.spawnle", "os.spawnlp", "os.spawnv",
           "os.spawnve", "os.spawnvp", "os.posix_spawn", "os.posix_spawnp", "os.execv", "os.execve",
           "os.execl", "os.execvp", "torch.multiprocessing", "sched", "signal", "pty", "joblib")
STREAM = ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.ExternalStream",
          "torch.cuda.StreamContext", "torch.cuda.streams", "torch.Stream", "torch.cuda.graphs",
          "torch.cuda.CUDAGraph", "torch.cuda.graph", "cupy.cuda.Stream", "cupy.cuda.ExternalStream",
          "cupy.cuda.stream", "numba.cuda.stream", "cuda.bindings.runtime.cudaStreamCreate",
          "cuda.bindings.driver.cuStreamCreate", "cuda.cudart.cudaStreamCreate", "cuda.cuda.cuStreamCreate",
          "torch.accelerator.set_stream")
STREAM_ATTRS = frozenset({"Stream", "ExternalStream", "StreamContext", "set_stream", "create_stream",
                          "cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority",
                          "cuStreamCreate", "cuStreamCreateWithPriority", "cudaStreamPerThread",
                          "cudaLaunchHostFunc", "cuLaunchHostFunc", "wait_stream"})
STREAM_CALLED_ATTRS = frozenset({"stream", "use_stream"})
INTROSPECTION = ("sys._getframe", "sys._current_frames", "sys.modules", "sys.settrace", "sys.setprofile",
                 "sys.gettrace", "sys.getprofile", "sys.addaudithook", "sys.exc_info", "sys._xoptions",
                 "inspect", "gc", "traceback", "builtins.globals", "builtins.locals", "builtins.vars",
                 "builtins.__import__", "builtins.eval", "builtins.exec", "builtins.compile",
                 "builtins.breakpoint", "importlib", "__main__", "marshal", "types.FrameType",
                 "torch.utils._python_dispatch", "torch._C._is_torch_function_mode_enabled",
                 "torch._C._get_dispatch_mode", "torch._C._get_torch_dispatch_mode", "torch.overrides",
                 "torch.profiler", "torch.autograd.profiler", "torch._C._autograd", "torch.compiler.is_compiling",
                 "torch._dynamo.is_compiling", "torch._C._cuda_isCurrentStreamCapturing",
                 "torch.cuda.is_current_stream_capturing", "dis", "code", "codeop", "pdb", "bdb", "linecache",
                 "threading.settrace", "threading.setprofile", "threading.enumerate")
INTROSPECTION_ATTRS = frozenset({
    "__globals__", "__closure__", "__code__", "__subclasses__", "__builtins__", "__loader__", "_getframe",
    # frames, tracebacks, generators, coroutines, async generators, code objects, closure cells
    "f_back", "f_globals", "f_locals", "f_code", "f_builtins", "f_lasti", "f_lineno", "f_trace", "f_trace_lines",
    "f_trace_opcodes", "f_generator", "tb_frame", "tb_next", "tb_lasti", "tb_lineno",
    "gi_frame", "gi_code", "gi_yieldfrom", "gi_running", "gi_suspended", "cr_frame", "cr_code", "cr_await",
    "cr_origin", "cr_running", "cr_suspended", "ag_frame", "ag_code", "ag_await", "ag_running", "ag_suspended",
    "co_code", "co_consts", "co_names", "co_varnames", "co_cellvars", "co_freevars", "co_filename", "co_name",
    "co_qualname", "co_firstlineno", "co_lnotab", "co_linetable", "co_exceptiontable", "co_flags", "co_argcount",
    "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals", "co_stacksize", "co_positions", "co_lines",
    "cell_contents",
})
"""Attributes that reach frames, code, closures and namespaces: refused on any object in both modes
(and any string naming one, for getattr / attrgetter on an object the scan can't resolve). The
allowlist refuses every other dunder besides."""
NATIVE = ("ctypes", "cffi")
"""Raw native calls: kiln can't see what they do (a warning; the runtime and timing checks still apply)."""
CLOCK = ("time", "timeit", "datetime", "torch.cuda.Event",
         "triton.testing", "torch.utils.benchmark")
ENV_OR_FILE = ("os.environ", "os.environb", "os.getenv", "os.getenvb", "os.putenv", "os.unsetenv", "builtins.open",
               "builtins.input", "io", "os.open", "os.read", "os.listdir", "os.scandir", "os.walk", "os.stat",
               "os.path", "os.getcwd", "os.readlink", "pathlib", "glob", "shutil", "tempfile", "pickle", "shelve",
               "dill", "joblib", "numpy.load", "numpy.fromfile", "numpy.memmap", "numpy.loadtxt", "numpy.genfromtxt",
               "numpy.save", "torch.load", "torch.save", "torch.from_file", "torch.hub", "torch.utils.cpp_extension.load",
               "urllib", "socket", "http", "requests", "sys.argv", "sys.stdin", "fileinput", "mmap", "sqlite3",
               "safetensors", "h5py")
ENV_WRITE_OK = frozenset({"TORCH_CUDA_ARCH_LIST", "MAX_JOBS"})
"""Environment variables a candidate may set (build settings kiln also controls), a warning only."""
TENSOR_BASES = ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase", "torch.nn.Parameter",
                "torch.nn.parameter.Parameter", "torch.utils._python_dispatch.TorchDispatchMode",
                "torch.overrides.TorchFunctionMode", "torch.masked.MaskedTensor", "torch._subclasses")
SUBCLASS_ATTRS = frozenset({"_make_subclass", "_make_wrapper_subclass", "as_subclass", "__torch_function__",
                            "__torch_dispatch__", "_disabled_torch_function_impl"})
GLOBAL_STATE_CALLS = ("torch.set_float32_matmul_precision", "torch.backends", "torch.set_default_dtype",
                      "torch.set_flush_denormal", "torch.use_deterministic_algorithms", "torch.cuda.set_device",
                      "torch.set_num_threads", "torch._C._set", "torch.cuda.memory._record_memory_history",
                      "torch.cuda.set_per_process_memory_fraction")
"""Calls that change process-wide state the reference and the timer also see: monkey-patching."""
PATCH_CALLS = ("builtins.setattr", "builtins.delattr", "builtins.object.__setattr__", "builtins.type.__setattr__",
               "unittest.mock", "mock")
DOWNCAST_ATTRS = frozenset({"half", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float8e4nv",
                            "float8e5", "float8e4b15"})
DYNAMIC = ("operator.attrgetter", "operator.methodcaller", "functools.reduce")
SOURCE_SINKS = frozenset({"load_inline", "CudaKernel", "RawKernel", "RawModule", "ElementwiseKernel",
                          "ReductionKernel", "SourceModule", "nvrtcCreateProgram", "Program", "compile_source"})
PYTHON_LAUNCHERS = frozenset({"CudaKernel", "RawKernel", "RawModule", "ElementwiseKernel", "ReductionKernel",
                              "SourceModule"})
"""Compile calls whose kernels are launched from Python (so C++ sources need no <<<>>>)."""
SINK_TEXT_HINTS = ("__global__", "#include", "torch::", "at::", "<<<", "extern \"C\"", "PYBIND11_MODULE")
KERNEL_DECORATORS = ("triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit")
HARNESS_NAMES = frozenset({"Model", "get_inputs", "get_init_inputs"})
"""String constants naming the problem's objects: a candidate looking them up is reaching for the reference."""
ALLOWED_KILN = ("kiln.tools.cuda",)


def matches(qual: str, prefixes: tuple[str, ...]) -> str | None:
    for p in prefixes:
        if qual == p or qual.startswith(p + "."):
            return p
    return None
