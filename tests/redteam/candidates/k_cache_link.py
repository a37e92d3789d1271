"""RED TEAM, the parent reading the compile cache (Python past the allowlist, executed with
`run_rejected`). kiln's own process reads the extensions a candidate built (`symbols.native_findings`
on its cache's `ext/`) before it loads them; at import the candidate makes its cache's `ext/` (`top`)
or a folder inside it (`inner`) a link to a folder in the user's HOME, __TARGET__, which holds a
`.so`. Before the fix kiln walked through the link, read the file and named it in the record (a
leak to the Coder, and with `ext -> /` a walk of the whole disk with no deadline)."""

import os

MODE = "__MODE__"
_ext = os.path.join(os.path.dirname(os.environ["TRITON_CACHE_DIR"]), "ext")
if MODE == "top":
    if os.path.isdir(_ext) and not os.path.islink(_ext):
        os.rmdir(_ext)
    if not os.path.islink(_ext):
        os.symlink("__TARGET__", _ext)
else:
    os.makedirs(_ext, exist_ok=True)
    if not os.path.islink(os.path.join(_ext, "build")):
        os.symlink("__TARGET__", os.path.join(_ext, "build"))

# <include relu_kernel>
