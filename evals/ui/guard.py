"""Who may talk to `kiln ui`: a token when it listens beyond loopback, loopback Host names when it
does not (so a web page cannot reach it through DNS rebinding), and strict headers on every answer
(a Content-Security-Policy that allows only the UI's own scripts, no framing, no sniffing)."""

from __future__ import annotations

import hmac
import ipaddress
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, quote, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "kiln_ui_token"
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}
HEADERS = [
    (b"content-security-policy", b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                 b"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
                                 b"frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(scope: Scope) -> str:
    raw = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
    if raw.startswith("["):
        return raw[1:].split("]")[0]
    return raw.rsplit(":", 1)[0] if raw.count(":") == 1 else raw


def _presented(scope: Scope) -> tuple[str | None, str | None]:
    """(token from the cookie or an Authorization header, token from ?token=)."""
    headers = dict(scope.get("headers") or [])
    auth = headers.get(b"authorization", b"").decode("latin-1")
    cookie = SimpleCookie(headers.get(b"cookie", b"").decode("latin-1"))
    held = auth[7:] if auth.lower().startswith("bearer ") else cookie[COOKIE].value if COOKIE in cookie else None
    query = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [None])[0]
    return held, query


class Guard:
    """ASGI middleware in front of the whole app."""

    def __init__(self, app: ASGIApp, *, token: str | None, loopback: bool) -> None:
        self.app, self.token, self.loopback = app, token, loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.loopback and not self.token and not is_loopback(_host_name(scope)):
            await _plain(send, 403, "kiln ui: this server answers loopback host names only")
            return
        if self.token:
            held, query = _presented(scope)
            if query and hmac.compare_digest(query, self.token):
                await _redirect_with_cookie(scope, send, self.token)
                return
            if not (held and hmac.compare_digest(held, self.token)):
                await _plain(send, 401, "kiln ui: a token is required (open the URL printed at start-up)")
                return
        static = str(scope.get("path", "")).startswith("/static/")
        await self.app(scope, receive, _with_headers(send, static))


def _with_headers(send: Send, static: bool) -> Send:
    """Static files are versioned (`?v=`), so browsers may keep them; nothing else is cached."""
    extra = [(b"cache-control", b"public, max-age=86400, immutable")] if static else []

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", [])) + extra
            names = {k.lower() for k, _ in headers}
            message["headers"] = headers + [h for h in HEADERS if h[0] not in names]
        await send(message)

    return wrapped


async def _plain(send: Send, status: int, text: str) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), *HEADERS]})
    await send({"type": "http.response.body", "body": text.encode() + b"\n"})


async def _redirect_with_cookie(scope: Scope, send: Send, token: str) -> None:
    """`?token=` once, then a cookie: the token leaves the address bar and the history."""
    query = {k: v for k, v in parse_qs(scope.get("query_string", b"").decode("latin-1")).items() if k != "token"}
    path = "/" + quote(str(scope.get("path", "/"))).lstrip("/")  # never '//host': no open redirect
    location = path + (f"?{urlencode(query, doseq=True)}" if query else "")
    cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", location.encode()), (b"set-cookie", cookie.encode()), *HEADERS]})
    await send({"type": "http.response.body", "body": b""})
