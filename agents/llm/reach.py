"""Is anything listening at `--base-url`? Asked once, before a run starts: an unreachable server
is one clear line, not four retried calls and an empty run directory."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from kiln.tools.errors import KilnConfigError


def check_reachable(base_url: str, timeout_s: float = 3.0) -> None:
    """A TCP connection to the URL's host and port (nothing is sent); KilnConfigError when it fails."""
    parts = urlsplit(base_url)
    try:
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # a port that is not a number
        host, port = None, 0
    if parts.scheme not in ("http", "https") or not host:
        raise KilnConfigError("--base-url is not a server URL like http://localhost:8000/v1")
    shown = f"{parts.scheme}://{host}:{port}{parts.path}"  # never the URL's user:password part
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as err:
        why = err.strerror or str(err) or type(err).__name__
        raise KilnConfigError(f"--base-url {shown}: no answer ({why}); is a server listening at {host}:{port}?") from None
