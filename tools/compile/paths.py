"""Where kiln's compile cache lives: the importer, the fast CUDA path (kiln.tools.cuda) and the check's
caches all start from this root."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_root() -> Path:
    """kiln's compile cache: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln."""
    if os.environ.get("KILN_CACHE_DIR"):
        return Path(os.environ["KILN_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kiln"
