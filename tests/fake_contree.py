"""A loopback fake of the Contree HTTP API that the real contree-sdk talks to.

Only the endpoints contree-sdk 0.3.6 calls for ``ContreeSandbox`` exist, with
the paths and payloads its client code uses (``contree_sdk/_internals/client/v1``):

- ``GET /v1/files/{sha256}``, ``POST /v1/files``: content-addressed uploads
- ``GET /v1/inspect/?tag=``, ``GET /v1/inspect/{uuid}/``, ``POST /v1/images/import``
- ``POST /v1/instances``: start a run; ``GET|DELETE /v1/operations/{uuid}``: poll, cancel

A run really executes: its files are written under a fresh directory that
stands for the image's root (absolute paths and ``cwd`` are mapped into it),
its command runs as a local subprocess with the image's environment (``PATH``:
this interpreter's directory, standing for the image's ``python3`` with torch and
triton, then the host's; plus the image's variables) overlaid by the request's,
and its output comes back base64-encoded and truncated as asked. So the real harness runs,
with ``TRITON_INTERPRET=1``, on this machine's torch and triton.

Faults: ``inject(method, path, action, times)`` makes the next matching
requests answer 500/503 (any status), drop the connection without an answer,
or hang until the client gives up; ``hang_runs`` accepts runs that never start.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

TORCH_IMAGE = "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime"


@dataclass
class Fault:
    method: str
    path: str  # a regex searched in the path below the API prefix
    action: str  # an HTTP status ("500"), "drop" or "hang"
    times: int = 1


@dataclass
class Image:
    uuid: str
    tag: str | None
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Operation:
    uuid: str
    kind: str
    metadata: dict
    status: str = "PENDING"
    error: str | None = None
    result: dict | None = None
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    cancelled: bool = False
    proc: subprocess.Popen | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def to_json(self) -> dict:
        end = self.finished or time.monotonic()
        return {
            "kind": self.kind,
            "status": self.status,
            "duration": end - self.started,
            "error": self.error,
            "metadata": self.metadata,
            "result": self.result,
        }


def _stream(data: bytes, limit: int) -> dict:
    return {
        "value": base64.b64encode(data[:limit]).decode("ascii"),
        "encoding": "base64",
        "truncated": len(data) > limit,
    }


def _decode_stream(stream: dict) -> bytes:
    if stream.get("encoding") == "base64":
        return base64.b64decode(stream.get("value", ""))
    return stream.get("value", "").encode()


def _resources(elapsed: float) -> dict:
    names = (
        "block_input block_output involuntary_switches max_rss page_faults page_faults_io "
        "shared_memory signals swaps unshared_memory voluntary_switches"
    ).split()
    return {
        **dict.fromkeys(names, 0),
        "cost": 0.0,
        "elapsed_time": elapsed,
        "monotonic_time": elapsed,
        "system_cpu_time": 0.0,
        "user_cpu_time": 0.0,
    }


class FakeContree:
    """Start with ``with FakeContree() as fake:``; point the SDK at ``fake.url``."""

    def __init__(
        self,
        *,
        token: str = "fake-key",
        project: str = "fake-project",
        prefix: str = "/sandboxes",
        images: dict[str, dict[str, str]] | None = None,
        allow_import: bool = False,
    ) -> None:
        self.token, self.project, self.prefix = token, project, prefix.rstrip("/")
        self.allow_import = allow_import
        self.images: dict[str, Image] = {}
        for tag, env in (images if images is not None else {TORCH_IMAGE: {}}).items():
            image = Image(str(uuid.uuid4()), tag, dict(env))
            self.images[image.uuid] = image
        self.files: dict[str, bytes] = {}  # uuid -> content
        self.file_ids: dict[str, str] = {}  # sha256 -> uuid
        self.operations: dict[str, Operation] = {}
        self.spawns: list[dict] = []
        self.log: list[tuple[str, str, str]] = []  # (method, path, outcome)
        self.faults: list[Fault] = []
        self.hang_runs = False
        self.running = 0  # runs executing now
        self.max_running = 0  # the most that ever executed at once
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._runs: list[threading.Thread] = []

    # -- control -------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._server is not None, "start the fake first"
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.prefix}/"

    def start(self) -> FakeContree:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        for op in list(self.operations.values()):
            self._cancel(op)
        for run in self._runs:  # each removes its root directory as it ends
            run.join(10)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeContree:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def inject(self, method: str, path: str, action: str, times: int = 1) -> None:
        with self._lock:
            self.faults.append(Fault(method.upper(), path, action, times))

    def count(self, method: str, path: str, outcome: str | None = None) -> int:
        """Requests seen (``outcome``: a status like "200", or "drop"/"hang")."""
        return sum(
            1
            for m, p, o in list(self.log)
            if m == method.upper() and re.search(path, p) and (outcome is None or o == outcome)
        )

    def image_by_tag(self, tag: str) -> Image | None:
        return next((i for i in self.images.values() if i.tag == tag), None)

    # -- request handling (called from the handler's threads) ---------------
    def fault_for(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.times > 0 and fault.method == method and re.search(fault.path, path):
                    fault.times -= 1
                    return fault
        return None

    def authorized(self, headers) -> bool:
        return (
            headers.get("Authorization") == f"Bearer {self.token}"
            and headers.get("Project") == self.project
        )

    def route(self, method: str, path: str, query: dict, body: bytes) -> tuple[int, object]:
        if method == "GET" and (m := re.fullmatch(r"/v1/files/([0-9a-f]{64})", path)):
            file_id = self.file_ids.get(m[1])
            if file_id is None:
                return 404, {"status": 404, "error": "file not found"}
            return 200, {"uuid": file_id, "sha256": m[1]}
        if method == "POST" and path == "/v1/files":
            sha = hashlib.sha256(body).hexdigest()
            with self._lock:
                file_id = self.file_ids.setdefault(sha, str(uuid.uuid4()))
                self.files[file_id] = body
            return 200, {"uuid": file_id, "sha256": sha}
        if method == "GET" and path == "/v1/inspect/":
            image = self.image_by_tag(query.get("tag", [""])[0])
            if image is None:
                return 404, {"status": 404, "error": "image not found"}
            return 200, {"uuid": image.uuid, "tag": image.tag, "created_at": None}
        if method == "GET" and (m := re.fullmatch(r"/v1/inspect/([^/]+)/", path)):
            image = self.images.get(m[1])
            if image is None:
                return 404, {"status": 404, "error": "image not found"}
            return 200, {"uuid": image.uuid, "tag": image.tag, "created_at": None}
        if method == "POST" and path == "/v1/images/import":
            return self._import(json.loads(body))
        if method == "POST" and path == "/v1/instances":
            return self._spawn(json.loads(body))
        if m := re.fullmatch(r"/v1/operations/([^/]+)", path):
            op = self.operations.get(m[1])
            if op is None:
                return 404, {"status": 404, "error": "operation not found"}
            if method == "GET":
                with op.lock:
                    return 200, op.to_json()
            if method == "DELETE":
                self._cancel(op)
                return 200, {}
        return 404, {"status": 404, "error": f"no route for {method} {path}"}

    def _import(self, request: dict) -> tuple[int, object]:
        tag = request.get("tag")
        op = Operation(str(uuid.uuid4()), "image_import", request)
        if self.allow_import:
            image = Image(str(uuid.uuid4()), tag)
            self.images[image.uuid] = image
            op.status, op.result = "SUCCESS", {"image": image.uuid, "tag": tag}
        else:
            op.status, op.error = "FAILED", f"cannot pull {request['registry']['url']}"
        op.finished = time.monotonic()
        self.operations[op.uuid] = op
        return 200, {"uuid": op.uuid}

    def _spawn(self, request: dict) -> tuple[int, object]:
        ref = request["image"]
        image = self.image_by_tag(ref[4:]) if ref.startswith("tag:") else self.images.get(ref)
        if image is None:
            return 404, {"status": 404, "error": f"image {ref} not found"}
        for spec in request["files"].values():
            if spec["uuid"] not in self.files:
                return 404, {"status": 404, "error": f"file {spec['uuid']} not found"}
        metadata = {
            key: request.get(key, default)
            for key, default in (
                ("args", []),
                ("command", ""),
                ("cwd", ""),
                ("disposable", False),
                ("env", {}),
                ("files", {}),
                ("hostname", "localhost"),
                ("image", ref),
                ("shell", False),
                ("stdin", {"value": "", "encoding": "ascii", "truncated": False}),
                ("timeout", 60),
                ("truncate_output_at", 65535),
                ("preserve_env", False),
            )
        }
        metadata["result"] = None
        op = Operation(str(uuid.uuid4()), "instance", metadata)
        with self._lock:
            self.spawns.append(request)
            self.operations[op.uuid] = op
        if not self.hang_runs:
            run = threading.Thread(target=self._execute, args=(op, image), daemon=True)
            self._runs.append(run)
            run.start()
        return 200, {"uuid": op.uuid}

    def _execute(self, op: Operation, image: Image) -> None:
        req = op.metadata
        root = tempfile.mkdtemp(prefix="fake-contree-")
        os.chmod(root, 0o755)
        try:
            for path, spec in req["files"].items():
                dest = os.path.normpath(os.path.join(root, path.lstrip("/")))
                assert dest.startswith(root + os.sep), path
                os.makedirs(os.path.dirname(dest), mode=0o755, exist_ok=True)
                with open(dest, "wb") as fh:
                    fh.write(self.files[spec["uuid"]])
                os.chmod(dest, int(spec["mode"], 8))
            cwd = os.path.normpath(os.path.join(root, req["cwd"].lstrip("/")))
            os.makedirs(cwd, mode=0o755, exist_ok=True)
            env = {
                "PATH": _image_path(),
                "HOME": root,
                "LANG": "C.UTF-8",
                **image.env,
                **req["env"],
            }
            argv = (
                ["/bin/sh", "-c", req["command"]]
                if req["shell"]
                else [req["command"], *req["args"]]
            )
            with op.lock, self._lock:
                if op.cancelled:
                    return
                self.running += 1
                self.max_running = max(self.max_running, self.running)
                op.status = "EXECUTING"
                op.proc = subprocess.Popen(
                    argv,
                    cwd=cwd,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
            start = time.monotonic()
            timed_out = False
            try:
                out, err = op.proc.communicate(_decode_stream(req["stdin"]), timeout=req["timeout"])
            except subprocess.TimeoutExpired:
                timed_out = True
                _killpg(op.proc)
                out, err = op.proc.communicate()
            elapsed = time.monotonic() - start
            with self._lock:
                self.running -= 1
            code = op.proc.returncode
            limit = req["truncate_output_at"]
            with op.lock:
                op.finished = time.monotonic()
                if op.cancelled:
                    return
                req["result"] = {
                    "resources": _resources(elapsed),
                    "state": {
                        "continued": False,
                        "core_dump": False,
                        "exit_code": code if code >= 0 else 128 - code,
                        "pid": op.proc.pid,
                        "signal": -code if code < 0 else 0,
                        "stopped": False,
                        "timed_out": timed_out,
                    },
                    "stdout": _stream(out, limit),
                    "stderr": _stream(err, limit),
                }
                image_id = None if req["disposable"] else str(uuid.uuid4())
                op.status, op.result = "SUCCESS", {"image": image_id, "tag": None}
        except Exception as exc:  # noqa: BLE001 - the server reports, never crashes
            with op.lock:
                op.status, op.error, op.finished = "FAILED", repr(exc), time.monotonic()
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _cancel(self, op: Operation) -> None:
        with op.lock:
            if op.status in ("SUCCESS", "FAILED", "CANCELLED"):
                return
            op.cancelled = True
            op.status, op.finished = "CANCELLED", time.monotonic()
            if op.proc is not None:
                _killpg(op.proc)


def _image_path() -> str:
    """The ``PATH`` of an image: the image holds ``python3`` with torch and triton, and
    here that is this interpreter (a venv's ``bin`` holds ``python3`` even when the
    venv is not activated), so its directory comes first, then the host's ``PATH``."""
    here = os.path.dirname(sys.executable)
    rest = os.environ.get("PATH", "/usr/bin:/bin")
    return os.pathsep.join([here, *(p for p in rest.split(os.pathsep) if p and p != here)])


def _killpg(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeContree

    def log_message(self, *args) -> None:  # quiet
        pass

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        body = self._body()
        fake = self.fake
        if not parts.path.startswith(fake.prefix + "/"):
            return self._send(404, {"status": 404, "error": "outside the API"})
        path = parts.path[len(fake.prefix) :]
        method = self.command
        fault = fake.fault_for(method, path)
        if fault is not None:
            fake.log.append((method, path, fault.action))
            if fault.action == "drop":
                self.close_connection = True
                return None
            if fault.action == "hang":
                fake._release.wait()
                self.close_connection = True
                return None
            code = int(fault.action)
            return self._send(code, {"status": code, "error": "injected fault"})
        if not fake.authorized(self.headers):
            fake.log.append((method, path, "401"))
            return self._send(401, {"status": 401, "error": "unauthorized"})
        status, payload = fake.route(method, path, parse_qs(parts.query), body)
        fake.log.append((method, path, str(status)))
        return self._send(status, payload)

    def _body(self) -> bytes:
        """The request body; file uploads from a file object arrive chunked."""
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        chunks = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline()

    def _send(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_HEAD = do_PATCH = _handle
