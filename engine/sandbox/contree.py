"""Remote sandboxes on Nebius Contree: the local harness, one disposable run per job.

A job travels as data. Each run uploads ``job.json`` next to a zip of the harness
(this engine's ``sandbox`` and ``harness`` packages plus the pure-Python pytest
the local tool uses), unpacks it in the image and runs
``python3 -m mutant_gate.engine.harness.worker --one-shot job.json``: the warm
worker's own imports, fork, isolation and harness for exactly one job, whose
result is the last stdout line. So a result has the same form, and for the same
toolchain the same content, as a local one. The image must hold ``python3`` (3.11+)
with torch, triton and numpy (official ``pytorch/pytorch`` images do);
``start`` proves it by running a probe job before any real one.

What this relies on in contree-sdk 0.3.6 (read in its source):

- Credentials are the ``IAMAuth`` fields ``NEBIUS_API_KEY`` and
  ``NEBIUS_PROJECT_ID``, resolved from the environment (or the SDK's
  ``auth.ini`` profile); an unresolved one stays the variable's *name* and only
  fails at the first request, so they are checked here, up front.
- ``run(timeout=T)`` is both the server's limit on the process and the client's
  wait for the operation, queueing included. The job's real limit is enforced
  inside the sandbox by the worker; the SDK gets ``T`` plus the interpreter's
  start-up allowance plus a grace, and a run that outlives that is
  infrastructure trouble, never a ``timeout`` verdict.
- Only starting a run retries (429 and transport timeouts). Upload errors, 5xx,
  dropped connections and polling errors reach the caller, so whole jobs are
  retried here with exponential backoff; a failed poll has already cancelled
  its operation (the SDK's canceller), so a retry never leaves a run behind.
- The async client keeps per-event-loop HTTP clients but loop-bound asyncio
  locks in its retrier, so one client lives on one loop: this sandbox owns a
  loop thread and every call goes through it.
- A session mutates itself on every run; an image's ``run`` copies the image.
  Concurrent jobs therefore use disposable image runs, never a shared session.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import json
import os
import random
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import fields
from pathlib import Path
from uuid import UUID

from contree_sdk import Contree
from contree_sdk.auth import IAMAuth
from contree_sdk.config import ContreeConfig
from contree_sdk.sdk.exceptions import (
    ApiStatusCodeError,
    ApiTimeoutError,
    CancelledOperationError,
    ContreeError,
    ContreeTransportError,
    FailedOperationError,
    OperationTimedOutError,
)
from contree_sdk.utils.models.file import UploadedFile, UploadFileSpec

from ..harness.isolation import scrubbed_env
from ..job import CLOSED_WHILE_RUNNING, Check, CheckKind, Job, JobResult, JobStatus
from . import Sandbox
from .local import SandboxStartError

#: Holds python3 with torch 2.8 + triton 3.4 + numpy; see README "Remote sandboxes".
DEFAULT_IMAGE = "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime"
#: Runs in flight when ``-j`` is not given (remote runs cost no local cores).
DEFAULT_JOBS = 8
#: Where the job and the harness are unpacked inside the image (the run's cwd).
REMOTE_DIR = "/mutant-gate"
#: Python start-up plus the torch/triton import in a cold sandbox.
STARTUP_ALLOWANCE_S = 60.0
#: Slack past the allowance before the SDK's wait gives up.
GRACE_S = 30.0
#: The result is the last stdout line; more than this cannot be a result.
OUTPUT_LIMIT_BYTES = 4 * 1024 * 1024
#: How long ``close`` waits for in-flight runs to be cancelled on the server.
CLOSE_GRACE_S = 10.0

#: Pure-Python packages shipped with the harness so the image needs no pytest
#: (and runs the very pytest the local harness runs).
VENDORED = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py")

#: Environment of the remote process: the image's own (PATH...) overlaid with these,
#: as container runtimes do (assumed: the service could not be reached while writing
#: this); never a credential.
REMOTE_ENV = {
    "PYTHONHASHSEED": "0",
    "PYTHONUNBUFFERED": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}

PROBE_SOURCE = "import torch  # noqa: F401\nimport triton  # noqa: F401\n"


def missing_credentials() -> list[str]:
    """Names of the credentials the SDK would not find (environment or auth.ini)."""
    resolved = IAMAuth().resolve()
    missing = []
    for f in fields(IAMAuth):
        if f.name in ("token", "project_id"):
            value = getattr(resolved, f.name)
            if not value or value == f.default:
                missing.append(f.default)
    return missing


def harness_archive() -> bytes:
    """A byte-for-byte reproducible zip of the code a remote run needs.

    Reproducible, so the content-addressed upload happens once per account.
    """
    engine = Path(__file__).resolve().parent.parent
    entries: dict[str, Path] = {"mutant_gate/engine/__init__.py": engine / "__init__.py"}
    for package in ("sandbox", "harness"):
        for path in sorted((engine / package).glob("*.py")):
            entries[f"mutant_gate/engine/{package}/{path.name}"] = path
    for name in VENDORED:
        spec = __import__(name)
        origin = Path(spec.__file__).resolve()
        if origin.name == "__init__.py":
            for path in sorted(origin.parent.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    rel = path.relative_to(origin.parent.parent).as_posix()
                    entries[rel] = path
        else:
            entries[origin.name] = origin
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, entries[name].read_bytes())
    return buffer.getvalue()


class _Retry(Exception):
    """Infrastructure trouble worth another attempt (the reason is the message)."""


def describe(exc: BaseException) -> str:
    """One line about what went wrong talking to Contree."""
    request = getattr(exc, "request", None)
    where = f" on {request.method} {request.url}" if request and request.method else ""
    if isinstance(exc, ApiStatusCodeError):
        return f"HTTP {exc.status}{where}: {exc.error or 'no detail'}"
    if isinstance(exc, ApiTimeoutError):
        return f"no answer in time ({exc.timeout_type} timeout){where}"
    if isinstance(exc, ContreeTransportError):
        return f"connection failed{where}: {exc.error}"
    if isinstance(exc, OperationTimedOutError):
        return "the run did not finish within its limit (queueing or a stuck sandbox)"
    if isinstance(exc, FailedOperationError):
        return f"the operation failed on the server: {exc.error}"
    if isinstance(exc, CancelledOperationError):
        return "the run was cancelled on the server"
    return str(exc) or type(exc).__name__


def transient(exc: BaseException) -> bool:
    """Whether another attempt may succeed: 5xx, 429, 408, drops, timeouts, lost runs."""
    if isinstance(exc, _Retry):
        return True
    if isinstance(exc, ApiStatusCodeError):
        return exc.status is None or exc.status >= 500 or exc.status in (408, 429)
    return isinstance(exc, ContreeError)


class ContreeSandbox(Sandbox):
    """Jobs as disposable Contree runs, ``workers`` at a time; ``run`` is thread-safe."""

    name = "contree"

    def __init__(
        self,
        workers: int | None = None,
        mode: str = "interpret",
        *,
        image: str | None = None,
        base_url: str | None = None,
        attempts: int = 3,
        backoff_s: float = 2.0,
        startup_allowance_s: float = STARTUP_ALLOWANCE_S,
        grace_s: float = GRACE_S,
        transport_timeout_s: float = 10.0,
        python: str = "python3",
    ) -> None:
        missing = missing_credentials()
        if missing:
            raise SandboxStartError(
                f"--backend contree needs {' and '.join(missing)}: "
                "not set in the environment (nor in the contree auth.ini profile)"
            )
        self.size = max(1, workers or DEFAULT_JOBS)
        self.mode = mode
        self.image_ref = image or DEFAULT_IMAGE
        self.base_url = base_url
        self.attempts = max(1, attempts)
        self.backoff_s = backoff_s
        self.startup_allowance_s = startup_allowance_s
        self.grace_s = grace_s
        self.transport_timeout_s = transport_timeout_s
        self.python = python
        self.versions: dict = {}
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._start_error: SandboxStartError | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task] = set()
        self._client: Contree | None = None
        self._image = None
        self._archive: UploadedFile | None = None
        self._slots: asyncio.Semaphore | None = None

    # -- life cycle ----------------------------------------------------------
    def start(self) -> None:
        """Connect, find the image, upload the harness, and run a probe job in it."""
        with self._lock:
            if self._closed:
                raise SandboxStartError("the sandbox is closed")
            if self._start_error is not None:
                raise self._start_error
            if self._started:
                return
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=self._loop.run_forever, name="mutant-gate-contree", daemon=True
            )
            self._thread.start()
            try:
                self._call(self._tracked(self._connect()))
            except SandboxStartError as exc:
                self._start_error = exc
                self._stop_loop()
                raise
            self._started = True

    async def _connect(self) -> None:
        auth = IAMAuth() if self.base_url is None else IAMAuth(base_url=self.base_url)
        config = ContreeConfig(auth=auth, transport_timeout=self.transport_timeout_s)
        self._client = Contree(config=config)
        self._slots = asyncio.Semaphore(self.size)
        where = f"contree ({auth.base_url})"
        await self._take_image(where)
        await self._upload_harness(where)
        await self._probe(where)

    async def _take_image(self, where: str) -> None:
        """Finds (or imports) the image; ``SandboxStartError`` where it is unavailable."""
        try:
            self._image = await self._with_retries(
                self._find_image,
                "find the image",
                # A failed import (no such image, registry refused) will fail again.
                retry=lambda exc: transient(exc) and not isinstance(exc, FailedOperationError),
            )
        except ContreeError as exc:
            raise SandboxStartError(
                f"{where}: image {self.image_ref!r} unavailable: {describe(exc)}"
            ) from None
        except _Retry as exc:
            raise SandboxStartError(f"{where}: image {self.image_ref!r}: {exc}") from None

    async def _upload_harness(self, where: str) -> None:
        """Uploads the harness archive the jobs run; ``SandboxStartError`` where it fails."""
        fd, path = tempfile.mkstemp(prefix="mutant-gate-harness-", suffix=".zip")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(harness_archive())
            self._archive = await self._with_retries(
                lambda: self._client.files.upload(path), "upload the harness"
            )
        except (ContreeError, _Retry) as exc:
            raise SandboxStartError(f"{where}: {describe(exc)}") from None
        finally:
            os.unlink(path)

    async def _probe(self, where: str) -> None:
        """Runs the probe job: the image must run the harness (python3 with torch, triton
        and numpy); sets ``versions`` from its answer."""
        probe = Job(
            files=(("probe.py", PROBE_SOURCE),),
            checks=(Check(CheckKind.MAIN, "probe.py", "probe"),),
            mode=self.mode,
            timeout_s=60.0,
        )
        result, versions = await self._execute(probe)
        if result.status is JobStatus.ERROR and result.error.startswith("contree: "):
            raise SandboxStartError(f"{where}: the probe job failed: {result.error[9:]}")
        if result.status is not JobStatus.PASSED:
            lines = [ln.strip() for ln in result.error.splitlines() if ln.strip()]
            why = lines[-1] if lines else result.status.value
            raise SandboxStartError(
                f"{where}: image {self.image_ref!r} cannot run the harness "
                f"(it needs python3 with torch, triton and numpy): {why}"
            )
        self.versions = versions

    async def _find_image(self):
        """A UUID or a tag already in Contree, else imported from its registry."""
        try:
            uuid = UUID(self.image_ref)
        except ValueError:
            return await self._client.images.oci(self.image_ref)
        return await self._client.images.use(uuid, strict=True)

    def close(self) -> None:
        """Cancel runs in flight (on the server too); they end as errors, never verdicts.

        A run whose start request is still unanswered cannot be named, so it ends
        at its own limit on the server.
        """
        with self._lock:
            self._closed = True
            loop = self._loop
        if loop is None or not loop.is_running():
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        try:
            future.result(CLOSE_GRACE_S + 5)
        except (concurrent.futures.TimeoutError, Exception):  # noqa: BLE001 - closing anyway
            pass
        self._stop_loop()

    async def _shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        # A cancelled run unwinds through the SDK's canceller, which DELETEs its
        # operation in a shielded task of its own: let those finish too.
        me, loop = asyncio.current_task(), asyncio.get_running_loop()
        deadline = loop.time() + CLOSE_GRACE_S
        while pending := [t for t in asyncio.all_tasks() if t is not me and not t.done()]:
            if loop.time() >= deadline:
                break
            await asyncio.wait(pending, timeout=deadline - loop.time())
        if self._client is not None:
            # One httpx client per event loop, kept by the SDK; this loop is ending.
            for client in list(getattr(self._client._api, "_client_per_loop", {}).values()):
                try:
                    await client.aclose()
                except Exception:  # noqa: BLE001 - best effort
                    pass

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(5)
        if not loop.is_running():
            loop.close()

    def __enter__(self) -> ContreeSandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- jobs ----------------------------------------------------------------
    def run(self, job: Job, on_progress=None) -> JobResult:
        """``on_progress`` is not called: a remote job reports when it ends."""
        self.start()
        closed = JobResult(JobStatus.ERROR, error=CLOSED_WHILE_RUNNING)
        if self._closed:
            return closed
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(self._run_job(job), self._loop)
        while True:
            try:
                return future.result(timeout=1.0)[0]
            except concurrent.futures.CancelledError:
                return closed
            except concurrent.futures.TimeoutError:
                if self._closed and not self._loop.is_running():
                    future.cancel()
                    return closed

    def run_many(self, jobs: Iterable[Job]) -> Iterator[tuple[int, JobResult]]:
        """Run jobs ``size`` at a time; yield ``(index, result)`` as each finishes."""
        self.start()
        with concurrent.futures.ThreadPoolExecutor(self.size) as pool:
            futures = {pool.submit(self.run, job): i for i, job in enumerate(jobs)}
            for future in concurrent.futures.as_completed(futures):
                yield futures[future], future.result()

    def _call(self, coro):
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _run_job(self, job: Job) -> tuple[JobResult, dict]:
        return await self._tracked(self._execute(job))

    async def _tracked(self, coro):
        """Await ``coro`` as a task ``close`` can cancel."""
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            return await coro
        finally:
            self._tasks.discard(task)

    async def _execute(self, job: Job) -> tuple[JobResult, dict]:
        """Run ``job`` with whole-job retries; infrastructure failure is an error result."""
        start = time.monotonic()
        assert self._slots is not None
        async with self._slots:
            try:
                return await self._with_retries(lambda: self._attempt(job), "run the job")
            except (ContreeError, _Retry) as exc:
                why = describe(exc)
            except Exception as exc:  # noqa: BLE001 - an SDK surprise is data too
                why = f"unexpected {type(exc).__name__}: {exc}"
        return JobResult(
            JobStatus.ERROR, error=f"contree: {why}", duration_s=time.monotonic() - start
        ), {}

    async def _with_retries(self, action, what: str, retry=transient):
        """Await ``action()``; on transient trouble back off and try again, then give up."""
        for attempt in range(1, self.attempts + 1):
            try:
                return await action()
            except (ContreeError, _Retry) as exc:
                if not retry(exc):
                    raise
                if attempt == self.attempts:
                    raise _Retry(
                        f"could not {what} after {attempt} attempts; last: {describe(exc)}"
                    ) from None
            delay = self.backoff_s * 2 ** (attempt - 1)
            await asyncio.sleep(min(30.0, delay) * random.uniform(0.5, 1.0))
        raise AssertionError("unreachable")

    async def _attempt(self, job: Job) -> tuple[JobResult, dict]:
        """One disposable run of the one-shot worker; raises ``_Retry`` on infrastructure trouble."""
        assert self._image is not None and self._archive is not None
        payload = json.dumps(job.to_json(), sort_keys=True).encode()
        limit_s = job.wall_limit_s + self.startup_allowance_s + self.grace_s
        env = dict(REMOTE_ENV)
        if self.mode == "interpret":
            env["TRITON_INTERPRET"] = "1"
        files = {
            f"{REMOTE_DIR}/harness.zip": UploadFileSpec(source=self._archive),
            f"{REMOTE_DIR}/job.json": payload,
        }
        done = await self._image.run(
            shell=(
                f"{self.python} -m zipfile -e harness.zip . && "
                f"exec {self.python} -m mutant_gate.engine.harness.worker --one-shot job.json"
            ),
            env=scrubbed_env({}, env),
            cwd=REMOTE_DIR,
            files=files,
            timeout=limit_s,
            disposable=True,
            truncate_output_at=OUTPUT_LIMIT_BYTES,
        )
        result = done.result
        raw = result._raw.result if result._raw is not None else None
        if raw is not None and raw.state.timed_out:
            raise _Retry(f"the sandbox outlived its limit of {limit_s:.0f} s")
        answer = _last_result_line(result.stdout or "")
        if answer is not None:
            return JobResult.from_json(answer["result"]), answer.get("versions", {})
        if result.truncated:
            why = f"the harness printed more than {OUTPUT_LIMIT_BYTES} bytes"
        else:
            why = f"the harness gave no result (exit code {result.exit_code})"
        tail = (result.stderr or "").strip()[-2000:]
        return JobResult(JobStatus.ERROR, error=f"contree: {why}\n{tail}".strip()), {}


def _last_result_line(stdout: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith('{"result"'):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


__all__ = ["DEFAULT_IMAGE", "DEFAULT_JOBS", "ContreeSandbox", "SandboxStartError"]
