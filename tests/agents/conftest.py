"""A local OpenAI-compatible server (stdlib http.server in a thread) for the agent tests.

Each test queues the responses it wants (a chat completion, an HTTP error, a delay, a malformed
body) and the real `langchain-openai` client talks to it over 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


def completion(content: str | None, *, tokens: tuple[int, int] = (100, 20), tool_args: dict | None = None,
               tool_name: str = "JudgeVerdict", model: str = "local-model") -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_args is not None:
        message["tool_calls"] = [{"id": "call_1", "type": "function",
                                  "function": {"name": tool_name, "arguments": json.dumps(tool_args)}}]
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 1700000000, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1], "total_tokens": sum(tokens)},
    }


class FakeOpenAIServer:
    def __init__(self) -> None:
        self.script: deque[dict[str, Any]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.responder: Any = None  # request json -> completion body, used when the script is empty
        self.stopped = threading.Event()  # set at teardown: a trickling handler stops at once
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                server.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "json": json.loads(body)})
                item = server.next_item()
                time.sleep(item.get("delay", 0.0))
                payload = item["raw"] if "raw" in item else json.dumps(item["body"]).encode()
                try:
                    self.send_response(item.get("status", 200))
                    self.send_header("content-type", "application/json")
                    for k, v in item.get("headers", {}).items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self._body(payload, item.get("trickle_bps"))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _body(self, payload: bytes, bps: float | None) -> None:
                """The whole body at once, or `bps` bytes a second (a server trickling its reply:
                every read gets a few bytes, so no per-read timeout ever fires)."""
                if not bps:
                    self.wfile.write(payload)
                    return
                step = max(1, int(bps / 4))
                for i in range(0, len(payload), step):
                    self.wfile.write(payload[i:i + step])
                    self.wfile.flush()
                    if server.stopped.wait(step / bps):
                        return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def next_item(self) -> dict[str, Any]:
        if self.script:
            return self.script.popleft()
        if self.responder is not None:
            return {"body": self.responder(self.requests[-1]["json"])}
        return {"status": 500, "body": {"error": "script empty"}}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def reply(self, content: str, **kw: Any) -> None:
        self.script.append({"body": completion(content, **kw)})

    def reply_json(self, obj: Any, **kw: Any) -> None:
        self.reply(json.dumps(obj), **kw)

    def error(self, status: int, message: str = "boom", **kw: Any) -> None:
        self.script.append({"status": status, "body": {"error": {"message": message, "type": "server_error"}}, **kw})

    def push(self, **item: Any) -> None:
        self.script.append(item)

    def user_text(self, i: int = -1) -> str:
        """All message contents of request i, joined (what the model was shown)."""
        return "\n".join(str(m.get("content")) for m in self.requests[i]["json"]["messages"])


@pytest.fixture
def oai_server():
    server = FakeOpenAIServer()
    server.thread.start()
    yield server
    server.stopped.set()
    server.httpd.shutdown()
    server.httpd.server_close()
