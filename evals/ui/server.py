"""The Starlette app: three pages (runs, run, batch) and a file viewer, their JSON, server-sent
events, and the opt-in control endpoints. Pages are Jinja templates that embed their first JSON
(so the first paint needs no second request); the UI's own scripts draw it with DOM and SVG calls
and never insert recorded text as HTML. Every JSON answer passes through the redactor."""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from kiln.agents.llm.redact import Redactor
from kiln.evals.ui import batchview, discover, files, live, nodeview, records, runview
from kiln.evals.ui.control import Control, StartRequest
from kiln.evals.ui.guard import Guard
from kiln.evals.ui.roots import Refused, Roots, read_text

HERE = Path(__file__).parent
RESCAN_S = 5.0
BATCH_CACHE_S = 5.0


class UiConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    roots: Roots
    token: str | None = None
    loopback: bool = True
    allow_control: bool = False
    poll_s: float = 0.2


def asset_version() -> str:
    """Changes whenever a static file does: page links carry it, so cached scripts never go stale."""
    stamp = "".join(f"{p.name}{p.stat().st_mtime_ns}{p.stat().st_size}" for p in sorted((HERE / "static").iterdir()))
    return hashlib.sha256(stamp.encode()).hexdigest()[:12]


class Ui:
    """The app's state: served roots, the redactor, the page templates, the control registry."""

    def __init__(self, cfg: UiConfig) -> None:
        self.cfg = cfg
        self.roots = cfg.roots
        self.redact = Redactor()
        self.csrf = secrets.token_urlsafe(24)
        self.control = Control(cfg.roots) if cfg.allow_control else None
        self.jinja = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True,
                                 undefined=StrictUndefined)
        self.asset_version = asset_version()
        self._found: list[discover.Found] = []
        self._found_at = 0.0
        self._batches: dict[Path, tuple[tuple, float, dict]] = {}

    # -- data
    def found(self) -> list[discover.Found]:
        if time.monotonic() - self._found_at > RESCAN_S:
            self._found, self._found_at = discover.discover(self.roots), time.monotonic()
        return self._found

    def listing(self) -> list[dict]:
        out = []
        for f in self.found():
            try:
                item = runview.brief(f.path) if f.kind == "run" else batchview.brief(self.roots, f.path)
            except Exception as err:  # noqa: BLE001 - one unreadable folder must not hide the others
                item = {"kind": f.kind, "name": f.path.name, "status": "unreadable", "error": str(err)[:200]}
            out.append({"id": f.id, **item})
        return out

    def folder(self, rid: str, kind: str) -> Path:
        path = self.roots.resolve(rid)
        if discover.kind_of(path) != kind:
            raise Refused(rid)
        return path

    def render(self, name: str, title: str, data: Any) -> HTMLResponse:
        page = self.jinja.get_template(name).render(title=title, data=self.redact.deep(data), csrf=self.csrf,
                                                    control=self.control is not None, v=self.asset_version)
        return HTMLResponse(page)

    def json(self, data: Any, status: int = 200) -> JSONResponse:
        return JSONResponse(self.redact.deep(data), status_code=status)

    # -- what each page and its API answer with (run in a worker thread: they read files)
    def runs_view(self, _request: Request) -> dict:
        return {"items": self.listing()}

    def run_view(self, request: Request) -> dict:
        rid = request.path_params["rid"]
        path = self.folder(rid, "run")
        stoppable = bool(self.control and self.control.running(path))
        return {"id": rid, **runview.load(path), "control": {"stoppable": stoppable}}

    def batch_view(self, request: Request) -> dict:
        """Cached while the batch's signature holds (a few seconds at most: its ETA moves with the clock)."""
        rid = request.path_params["rid"]
        path = self.folder(rid, "batch")
        sig, now = self.batch_signature(path), time.monotonic()
        hit = self._batches.get(path)
        if not hit or hit[0] != sig or now - hit[1] > BATCH_CACHE_S:
            hit = (sig, now, batchview.load(self.roots, path))
            self._batches[path] = hit
        return {"id": rid, **hit[2]}

    def batch_signature(self, path: Path) -> tuple:
        hit = self._batches.get(path)
        running = [self.roots.resolve(r["run"]) for r in (hit[2]["running"] if hit else []) if r.get("run")]
        return live.batch_signature(path, running)

    def node_view(self, request: Request) -> dict:
        data = nodeview.load(self.folder(request.path_params["rid"], "run"), request.query_params.get("id", ""))
        if data is None:
            raise Refused("no such candidate")
        return data

    def file_view(self, request: Request) -> dict:
        rid = request.path_params["rid"]
        path = self.roots.resolve(rid)
        if not files.is_recorded(self.roots, path):  # only what a run's or batch's records name
            raise Refused(rid)
        return {"id": rid, "name": path.name, "text": read_text(path)}


def _not_found(request: Request, _exc: Exception) -> Response:
    if request.url.path.startswith(("/api/", "/sse/")):
        return JSONResponse({"error": "not found"}, status_code=404)
    return PlainTextResponse("kiln ui: not found (not a run, batch or file inside the served folders)", status_code=404)


def _page(ui: Ui, template: str, load: Callable[[Request], dict]) -> Callable:
    async def endpoint(request: Request) -> Response:
        data = await run_in_threadpool(load, request)
        return ui.render(template, f"kiln · {data.get('name') or 'runs'}", data)

    return endpoint


def _api(ui: Ui, load: Callable[[Request], dict]) -> Callable:
    async def endpoint(request: Request) -> Response:
        return ui.json(await run_in_threadpool(load, request))

    return endpoint


def routes(ui: Ui) -> list:
    views = {"runs": ui.runs_view, "run": ui.run_view, "batch": ui.batch_view}
    pages = [Route("/", _page(ui, "runs.html.j2", views["runs"]))]
    pages += [Route(f"/{k}/{{rid:path}}", _page(ui, f"{k}.html.j2", views[k])) for k in ("run", "batch")]
    pages.append(Route("/file/{rid:path}", _page(ui, "file.html.j2", ui.file_view)))
    apis = [Route("/api/runs", _api(ui, views["runs"])), Route("/api/node/{rid:path}", _api(ui, ui.node_view))]
    apis += [Route(f"/api/{k}/{{rid:path}}", _api(ui, views[k])) for k in ("run", "batch")]
    static = Mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    return [*pages, *apis, *sse_routes(ui), *control_routes(ui), static]


def _sse(request: Request, probe: Any, poll_s: float) -> StreamingResponse:
    return StreamingResponse(live.stream(request, probe, poll_s), media_type="text/event-stream",
                             headers={"x-accel-buffering": "no"})


def sse_routes(ui: Ui) -> list:
    async def runs(request: Request) -> Response:
        return _sse(request, lambda: discover.signature(ui.found()), max(ui.cfg.poll_s, 1.0))

    async def run(request: Request) -> Response:
        path = ui.folder(request.path_params["rid"], "run")
        return _sse(request, lambda: live.run_signature(path), ui.cfg.poll_s)

    async def batch(request: Request) -> Response:
        path = ui.folder(request.path_params["rid"], "batch")
        return _sse(request, lambda: ui.batch_signature(path), max(ui.cfg.poll_s, 0.5))

    return [Route("/sse/runs", runs), Route("/sse/run/{rid:path}", run), Route("/sse/batch/{rid:path}", batch)]


def control_routes(ui: Ui) -> list:
    async def guarded(request: Request) -> dict | Response:
        if ui.control is None:
            return JSONResponse({"error": "read-only: start kiln ui with --allow-control"}, status_code=403)
        if not secrets.compare_digest(request.headers.get("x-kiln-csrf", ""), ui.csrf):
            return JSONResponse({"error": "missing or wrong X-Kiln-CSRF header"}, status_code=403)
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            body = None
        return body if isinstance(body, dict) else JSONResponse({"error": "a JSON object is required"}, status_code=400)

    async def start(request: Request) -> Response:
        body = await guarded(request)
        if isinstance(body, Response):
            return body
        try:
            req = StartRequest.model_validate(body)
        except ValidationError as err:
            return JSONResponse({"error": err.errors()[0]["msg"]}, status_code=400)
        assert ui.control is not None
        out = await run_in_threadpool(ui.control.start, req)
        return ui.json({"run": ui.roots.id_of(out)})

    async def stop(request: Request) -> Response:
        body = await guarded(request)
        if isinstance(body, Response):
            return body
        assert ui.control is not None
        path = ui.roots.resolve(str(body.get("run", "")))
        code = await run_in_threadpool(ui.control.stop, path)
        return ui.json({"stopped": True, "exit_code": code})

    return [Route("/api/control/start", start, methods=["POST"]), Route("/api/control/stop", stop, methods=["POST"])]


def build_app(cfg: UiConfig) -> Guard:
    ui = Ui(cfg)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        await run_in_threadpool(records.warm_imports)
        yield
        if ui.control:
            await run_in_threadpool(ui.control.close)

    app = Starlette(routes=routes(ui), exception_handlers={Refused: _not_found, 404: _not_found}, lifespan=lifespan)
    app.state.ui = ui
    return Guard(app, token=cfg.token, loopback=cfg.loopback)
