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
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from kiln.agents.llm.redact import Redactor
from kiln.evals.ui import batchview, discover, live, nodeview, records, runview
from kiln.evals.ui.control import Control, StartRequest
from kiln.evals.ui.guard import Guard
from kiln.evals.ui.roots import Refused, Roots, read_text

HERE = Path(__file__).parent
RESCAN_S = 5.0


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


def _not_found(_request: Request, _exc: Exception) -> Response:
    return JSONResponse({"error": "not found"}, status_code=404)


def routes(ui: Ui) -> list:
    async def index(request: Request) -> Response:
        return ui.render("runs.html.j2", "kiln runs", {"items": await run_in_threadpool(ui.listing)})

    async def run_page(request: Request) -> Response:
        rid = request.path_params["rid"]
        path = ui.folder(rid, "run")
        data = await run_in_threadpool(runview.load, path)
        return ui.render("run.html.j2", f"kiln run {path.name}", {"id": rid, **data, **_control_state(ui, path)})

    async def batch_page(request: Request) -> Response:
        rid = request.path_params["rid"]
        path = ui.folder(rid, "batch")
        data = await run_in_threadpool(batchview.load, ui.roots, path)
        return ui.render("batch.html.j2", f"kiln batch {path.name}", {"id": rid, **data})

    async def file_page(request: Request) -> Response:
        rid = request.path_params["rid"]
        path = ui.roots.resolve(rid)
        if not path.is_file():
            raise Refused(rid)
        text = await run_in_threadpool(read_text, path)
        return ui.render("file.html.j2", path.name, {"id": rid, "name": path.name, "text": text})

    async def api_runs(request: Request) -> Response:
        return ui.json({"items": await run_in_threadpool(ui.listing)})

    async def api_run(request: Request) -> Response:
        path = ui.folder(request.path_params["rid"], "run")
        data = await run_in_threadpool(runview.load, path)
        return ui.json({"id": request.path_params["rid"], **data, **_control_state(ui, path)})

    async def api_node(request: Request) -> Response:
        path = ui.folder(request.path_params["rid"], "run")
        data = await run_in_threadpool(nodeview.load, path, request.query_params.get("id", ""))
        if data is None:
            raise Refused("node")
        return ui.json(data)

    async def api_batch(request: Request) -> Response:
        path = ui.folder(request.path_params["rid"], "batch")
        return ui.json({"id": request.path_params["rid"], **await run_in_threadpool(batchview.load, ui.roots, path)})

    return [
        Route("/", index), Route("/run/{rid:path}", run_page), Route("/batch/{rid:path}", batch_page),
        Route("/file/{rid:path}", file_page), Route("/api/runs", api_runs), Route("/api/run/{rid:path}", api_run),
        Route("/api/node/{rid:path}", api_node), Route("/api/batch/{rid:path}", api_batch),
        *sse_routes(ui), *control_routes(ui),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]


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
        return _sse(request, lambda: live.batch_signature(path), max(ui.cfg.poll_s, 0.5))

    return [Route("/sse/runs", runs), Route("/sse/run/{rid:path}", run), Route("/sse/batch/{rid:path}", batch)]


def _control_state(ui: Ui, path: Path) -> dict:
    return {"control": {"stoppable": bool(ui.control and ui.control.running(path))}}


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
