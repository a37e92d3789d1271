"""What native code of a kernel extension may call: shared by the C++ source rules (`csource`) and the
built extension's symbol check (`symbols`).

The C library is judged by allowlist: every function and global the machine's libc exports
(read from the libc this process has mapped, with `elf.parse`) is refused in host code unless
`LIBC_ALLOWED` lists it (memory, strings, formatted output, the math library, the mutexes that
libstdc++'s headers use). So `renameat2`, `mkfifoat`, `posix_fallocate`, `process_vm_writev`,
`splice`, `environ` are refused without being named anywhere. The C++ standard library is a fixed
world, judged by a denylist of its file, thread, process and environment parts (`STD_DENIED`);
CUDA's runtime and driver by a denylist of what loads code, shares memory across processes,
captures graphs or resets the device (`CUDA_DENIED`).
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


LIBC_ALLOWED = _words("""
    malloc calloc realloc free aligned_alloc posix_memalign memalign
    memcpy memmove memset memcmp memchr memrchr bzero
    strlen strnlen strcmp strncmp strcpy strncpy strcat strncat strchr strrchr strstr strdup strndup strspn
    strcspn strpbrk strtok strtok_r strerror strerror_r strcasecmp strncasecmp strtol strtoul strtoll strtoull
    strtod strtof strtold atoi atol atoll atof tolower toupper isalpha isdigit isalnum isspace isupper islower
    isxdigit isprint ispunct __ctype_b_loc __ctype_tolower_loc __ctype_toupper_loc
    printf fprintf sprintf snprintf vprintf vfprintf vsprintf vsnprintf puts fputs fputc putc putchar fwrite
    fflush stdout stderr __printf_chk __fprintf_chk __sprintf_chk __snprintf_chk __vsnprintf_chk
    __vfprintf_chk __vsprintf_chk __memcpy_chk __memmove_chk __memset_chk __strcpy_chk __strncpy_chk
    __strcat_chk __strncat_chk __fwrite_chk
    sscanf __isoc99_sscanf __isoc23_sscanf __isoc23_strtol __isoc23_strtoul __isoc23_strtoll __isoc23_strtoull
    perror abs labs llabs div ldiv lldiv qsort bsearch rand srand rand_r random srandom
    time clock difftime clock_gettime gettimeofday
    abort __assert_fail __stack_chk_fail __errno_location __libc_single_threaded __cxa_atexit __cxa_finalize
    __cxa_thread_atexit_impl __tls_get_addr
    pthread_mutex_lock pthread_mutex_unlock pthread_mutex_trylock pthread_mutex_init pthread_mutex_destroy
    pthread_once pthread_key_create pthread_key_delete pthread_getspecific pthread_setspecific pthread_self
    pthread_cond_wait pthread_cond_signal pthread_cond_broadcast pthread_cond_init pthread_cond_destroy
    pthread_rwlock_rdlock pthread_rwlock_wrlock pthread_rwlock_unlock
    index rindex err errx warn warnx error
""")
"""C library names host code of a kernel extension may use. The last line: harmless functions whose
names are common variable names (`cudaError_t err = ...`)."""

LIBC_DENIED = re.compile(r"""^(?:
    open\w* | creat\w* | fopen\w* | freopen\w* | fdopen | tmpfile\w* | tmpnam\w* | tempnam | mkstemp\w* | mkostemp\w*
  | mkdtemp | mkfifo\w* | mknod\w* | unlink\w* | remove | rmdir | rename\w* | link\w* | symlink\w* | readlink\w*
  | truncate\w* | ftruncate\w* | fallocate\w* | posix_fallocate\w* | chmod | fchmod\w* | chown | fchown\w* | lchown
  | utime\w* | futime\w* | mkdir\w* | chdir | fchdir | chroot | mount | umount\w* | pivot_root | unshare | setns
  | exec\w* | fexecve | posix_spawn\w* | fork | vfork | clone\w* | system | popen | pclose | daemon | kill | killpg
  | tgkill | tkill | raise | sigqueue | ptrace | prctl | personality | dlopen | dlmopen | dlsym | dlvsym
  | socket\w* | connect | bind | listen | accept\w* | send\w* | recv\w* | getaddrinfo | gethostbyname\w*
  | getenv | secure_getenv | __secure_getenv | setenv | unsetenv | putenv | clearenv | environ | __environ
  | signal | sigaction | __sysv_signal | bsd_signal | sigset
  | process_vm_\w+ | splice | vmsplice | tee | sendfile\w* | copy_file_range | pipe\w* | mmap\w* | mremap
  | inotify_\w+ | fanotify_\w+ | memfd_\w+ | shm_open | shm_unlink | setuid | setgid | setreuid | setregid
  | setresuid | setresgid | capset | seccomp | pthread_create | pthread_detach | thrd_create
)$""", re.X)
"""C library calls that reach files, processes, the network, the environment, signals or loaded code:
a built extension importing one is refused. Anything else not in `LIBC_ALLOWED` is reported (a
warning): torch's CUDA headers import calls the CPU build does not (`syscall` for a thread id), and
a false rejection of an honest extension costs as much as a missed one."""

_MATH = _words("""
    acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh erf erfc exp exp2 exp10 expm1 fabs fdim
    floor fma fmax fmin fmod frexp hypot ilogb ldexp lgamma llrint llround log log10 log1p log2 logb lrint
    lround modf nan nearbyint nextafter nexttoward pow remainder remquo rint round scalbln scalbn sin sincos
    sinh sqrt tan tanh tgamma trunc j0 j1 jn y0 y1 yn signbit isnan isinf isfinite finite
""")
_MATH_NAME = re.compile(r"^(?:__)?(?P<base>[a-z0-9]+?)(?:f|l|f32|f64|f128|f32x|f64x)?(?:_finite)?$")


def is_math(name: str) -> bool:
    """A libm function (`sqrtf`, `__expf_finite`, `sincos`)."""
    m = _MATH_NAME.match(name)
    return m is not None and (m.group("base") in _MATH or name in _MATH)


STD_DENIED = _words("""
    thread jthread async launch this_thread packaged_task promise future shared_future
    filesystem fstream ifstream ofstream basic_fstream basic_ifstream basic_ofstream filebuf basic_filebuf
    system getenv setenv unsetenv putenv remove rename tmpfile tmpnam fopen freopen
    signal raise exit quick_exit _Exit atexit at_quick_exit
""")
"""`std::` components no kernel's host code needs: files, threads, processes, the environment."""

STD_DENIED_MANGLED = ("St6thread", "10filesystem", "fstream", "filebuf", "11this_thread", "13__future_base",
                      "6system", "6getenv")
"""The same parts as they appear in mangled symbol names (`_ZNSt6thread15_M_start_thread...`)."""

CUDA_DENIED = re.compile(r"""^(?:
    cudaIpc\w* | cuIpc\w* | cudaDeviceReset | cuDevicePrimaryCtxReset\w* | cuCtxDestroy\w*
  | cudaGetDriverEntryPoint\w* | cuGetProcAddress\w* | cudaGetFuncBySymbol
  | cuModuleLoad\w* | cuLibraryLoad\w* | cudaLibraryLoad\w* | cuLink\w* | nvrtc\w* | nvJitLink\w*
  | cudaGraph\w* | cuGraph\w* | cudaStreamBeginCapture\w* | cuStreamBeginCapture\w*
  | cudaLaunchHostFunc | cuLaunchHostFunc | cudaStreamAddCallback | cuStreamAddCallback
  | cudaStreamCreate\w* | cuStreamCreate\w* | cudaProfiler\w* | cuProfiler\w*
  | cudaSetDevice\w* | cudaDeviceSetLimit | cudaDeviceSetCacheConfig | cudaDeviceSetSharedMemConfig
  | cudaThreadExit | cudaThreadSetLimit | cuMemExport\w* | cuMemImport\w* | cudaHostRegister
  | cuMemHostRegister\w*
)$""", re.X)
"""CUDA entry points no kernel needs: ones that load device code the scan never read (cubins,
NVRTC, driver entry points), share memory with other processes (IPC, exported handles), capture
or launch graphs, run host callbacks, create streams, profile, or change device-wide state."""

VENDOR_COMPUTE = re.compile(r"^(?:cublas|cublasLt|cudnn|cusparse|cusparseLt|cufft|cusolver|curand)\w*$")
"""Vendor compute libraries: the work is theirs, not the candidate's (`static.cpp-torch-op`)."""

_LIBC_FALLBACK = _words("""
    open openat open64 creat fopen fopen64 freopen fdopen tmpfile mkstemp mkostemp mkstemps mkdtemp mktemp
    tmpnam read write pread pwrite readv writev close dup dup2 dup3 pipe pipe2 lseek ftruncate truncate
    fallocate posix_fallocate unlink unlinkat rmdir mkdir mkdirat rename renameat renameat2 link linkat
    symlink symlinkat readlink readlinkat chmod fchmod fchmodat chown fchown lchown fchownat mkfifo mkfifoat
    mknod mknodat stat lstat fstat fstatat statx access faccessat chdir fchdir chroot opendir readdir
    scandir nftw ftw mmap mmap64 munmap mprotect mremap msync sendfile splice tee vmsplice copy_file_range
    process_vm_readv process_vm_writev fork vfork clone clone3 execve execv execvp execl execlp execle
    fexecve posix_spawn posix_spawnp system popen pclose kill tgkill raise signal sigaction sigprocmask
    ptrace prctl setsid setpgid setuid setgid getenv secure_getenv setenv putenv unsetenv clearenv environ
    __environ dlopen dlsym dlvsym dlmopen dladdr dlinfo dl_iterate_phdr socket connect bind listen accept
    accept4 send sendto sendmsg recv recvfrom recvmsg shm_open shm_unlink memfd_create syscall ioctl fcntl
    flock lockf inotify_init inotify_add_watch exit _exit pthread_create pthread_kill pthread_detach
""")
"""Refused if the machine's libc can't be read (the issue's list and more): the allowlist above
still decides everything the scan recognises as libc."""


@functools.lru_cache(maxsize=1)
def libc_exports() -> frozenset[str]:
    """Every name the C library this process runs on exports (functions and objects, versions
    stripped), and libdl / libpthread / librt where glibc still keeps them apart."""
    from kiln.tools.integrity.elf import ElfError, parse

    names: set[str] = set()
    for path in _libc_paths():
        try:
            names |= parse(_read_capped(path)).defined()
        except (OSError, ElfError):
            continue
    return frozenset(names) if len(names) > 500 else _LIBC_FALLBACK


def _libc_paths() -> list[Path]:
    """The C libraries mapped into this process (/proc/self/maps), else the usual places."""
    wanted = re.compile(r"/lib(?:c|dl|pthread|rt)\.so\.\d+$")
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        maps = ""
    found = {line.split()[-1] for line in maps.splitlines() if wanted.search(line.split()[-1] if line.split() else "")}
    if not found:
        found = {str(p) for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
                                  "/lib/aarch64-linux-gnu") for p in Path(d).glob("lib[cd]*.so.[0-9]")}
    return sorted(Path(p) for p in found)


def _read_capped(path: Path, cap: int = 64 << 20) -> bytes:
    with path.open("rb") as f:
        return f.read(cap)


@functools.lru_cache(maxsize=1)
def pybind11_python_names() -> frozenset[str]:
    """The Python C API names torch's bundled pybind11 headers use (plus what Python.h's macros
    expand to: `_Py_NoneStruct`, `_Py_Dealloc`, `Py*_Type`): what a load_inline module's bindings
    import. Empty if torch's headers are not installed."""
    spec = importlib.util.find_spec("torch")
    roots = list(spec.submodule_search_locations or []) if spec else []
    pat = re.compile(rb"\b_?Py[A-Za-z0-9_]+")
    names: set[str] = set()
    for root in roots:
        for header in (Path(root) / "include" / "pybind11").rglob("*.h"):
            names |= {n.decode() for n in pat.findall(header.read_bytes())}
    return frozenset(names | PY_MACRO_TARGETS) if names else frozenset()


PY_MACRO_TARGETS = _words("""
    _Py_NoneStruct _Py_NotImplementedStruct _Py_TrueStruct _Py_FalseStruct _Py_EllipsisObject _Py_Dealloc
    _Py_IncRef _Py_DecRef Py_IncRef Py_DecRef _PyObject_New _PyObject_NewVar _PyObject_GC_New PyCMethod_New
    _Py_RefTotal _Py_NegativeRefcount
""")
PY_DENIED = re.compile(r"""^_?Py(?:
    Run_\w* | _?CompileString\w* | Eval_Eval\w* | Eval_GetFrame\w* | Eval_GetGlobals | Eval_GetLocals
  | Import_\w* | _?Sys_\w* | Marshal_\w* | _?Initialize\w* | _?Finalize\w* | Frame_FastToLocals\w*
  | Frame_LocalsToFast | ThreadState_GetFrame | Code_\w* | Function_\w* | _Main | Main
)$""", re.X)
"""Python C API entry points refused even where pybind11's headers name them (`py::eval`,
`py::module_::import`): running code, importing, `sys`, frames and code objects."""
