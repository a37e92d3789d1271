"""`kiln ui [DIR ...]`: serve the dashboard for the runs and batches under these folders."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated

import typer

from kiln.tools.errors import KilnConfigError


def _require_packages() -> None:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as err:
        raise KilnConfigError(f"kiln ui needs {err.name}: pip install 'kernelkiln[ui]'") from err


def serve_url(host: str, port: int, token: str | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def ui(
    dirs: Annotated[list[Path] | None, typer.Argument(help="folders holding run directories (default: runs)")] = None,
    host: Annotated[str, typer.Option(help="address to listen on; anything but loopback needs a token")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8765,
    token: Annotated[str | None, typer.Option(help="access token (default: a random one off loopback; "
                                                   "$KILN_UI_TOKEN)")] = None,
    allow_control: Annotated[bool, typer.Option(help="allow starting and stopping runs from the UI")] = False,
) -> None:
    """Serve a live web dashboard over run directories and batches (read-only unless --allow-control)."""
    _require_packages()
    import uvicorn

    from kiln.evals.ui.guard import is_loopback
    from kiln.evals.ui.roots import Roots
    from kiln.evals.ui.server import UiConfig, build_app

    roots = Roots(list(dirs or [Path("runs")]))
    loopback = is_loopback(host)
    if not loopback and not token:
        token = secrets.token_urlsafe(24)
    if token is not None and len(token) < 16:
        raise KilnConfigError("--token must be at least 16 characters")
    app = build_app(UiConfig(roots=roots, token=token, loopback=loopback, allow_control=allow_control))
    typer.echo(f"kiln ui: serving {', '.join(map(str, roots.folders))}"
               f"{' (control allowed)' if allow_control else ' (read-only)'}")
    typer.echo(f"kiln ui: open {serve_url(host, port, token)}")
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=2)
