"""A real loopback HTTP server that speaks the two endpoints the writers use.

``POST /v1/chat/completions`` answers from a script, ``GET /v1/models`` lists models.
The real ``openai`` client (which sends through httpx2, out of respx's reach) talks
to it over 127.0.0.1, from this process or from a ``mutant-gate`` subprocess.

A scripted reply is a ``Reply``: text content, the model it names, an HTTP status
(an error body for non-200), extra headers, a delay. ``replies`` is either a list
consumed in order or a function of the request body (to answer by what is asked).
Every request is recorded (path, body, authorization header) in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_MODEL = "nvidia/nemotron-3-super-120b-a12b"


@dataclass
class Reply:
    content: str = ""
    model: str | None = None  # None: the model the request asked for
    status: int = 200
    headers: dict = field(default_factory=dict)
    delay_s: float = 0.0
    prompt_tokens: int = 100
    completion_tokens: int = 50
    finish_reason: str = "stop"


def python_reply(code: str, prose: str = "Here is the test file.") -> Reply:
    return Reply(f"{prose}\n\n```python\n{code.strip()}\n```\n")


class FakeOpenAI:
    def __init__(
        self,
        replies: list[Reply] | Callable[[dict], Reply] = (),
        models: tuple[str, ...] = (DEFAULT_MODEL,),
        models_status: int = 200,
    ) -> None:
        self.script = replies if callable(replies) else list(replies)
        self.models = models
        self.models_status = models_status
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, str(v))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, status: int, message: str, headers: dict | None = None) -> None:
                self._send(
                    status, {"error": {"message": message, "type": "fake", "code": status}}, headers
                )

            def do_GET(self) -> None:
                fake._record("GET", self.path, None, self.headers)
                if self.path.rstrip("/") != "/v1/models":
                    return self._error(404, f"no route {self.path}")
                if fake.models_status != 200:
                    return self._error(fake.models_status, "Invalid API key provided")
                data = [
                    {"id": m, "object": "model", "created": 0, "owned_by": "fake"}
                    for m in fake.models
                ]
                self._send(200, {"object": "list", "data": data})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                fake._record("POST", self.path, body, self.headers)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._error(404, f"no route {self.path}")
                reply = fake._next(body)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.status != 200:
                    return self._error(
                        reply.status, reply.content or "scripted error", reply.headers
                    )
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{len(fake.requests)}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": reply.model or body.get("model", ""),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": reply.content},
                                "finish_reason": reply.finish_reason,
                            }
                        ],
                        "usage": {
                            "prompt_tokens": reply.prompt_tokens,
                            "completion_tokens": reply.completion_tokens,
                            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                        },
                    },
                    reply.headers,
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _record(self, method: str, path: str, body: dict | None, headers) -> None:
        with self._lock:
            self.requests.append(
                {
                    "method": method,
                    "path": path,
                    "body": body,
                    "authorization": headers.get("Authorization") or headers.get("authorization"),
                }
            )

    def _next(self, body: dict) -> Reply:
        with self._lock:
            if callable(self.script):
                return self.script(body)
            if not self.script:
                return Reply("fake server: no scripted reply left", status=400)
            return self.script.pop(0)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v1/"

    @property
    def chats(self) -> list[dict]:
        return [r for r in self.requests if r["path"].rstrip("/").endswith("chat/completions")]

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
