"""Jobs on a Ray cluster: warm runners as Ray actors, each around a local warm worker.

Each actor (``RayRunner``, one CPU slot; ``num_gpus=1`` in compiled mode) starts the
very worker process ``LocalSandbox`` uses (``local._Worker``): a node pays the
torch/triton import once per actor, and each job runs under the same hardening as a
local one (private filesystem, network cut, dropped uid, limits, a scrubbed
environment). At start every actor runs a probe job and says whether that hardening
took; a node where it did not (no root there) is refused with one line (``BadInput``),
never used unsandboxed.

Keys: an actor gets an explicit ``runtime_env`` whose variables name no credential, a
local Ray this sandbox starts is started with every credential-like variable held out
of its environment, and each actor drops any that its node's own environment carries
(Ray's ``RAY_*`` settings aside) before it starts its worker, whose environment is the
allow-list of ``isolation.scrubbed_env``.

The driver stays the one place results are stored: ``run`` only returns a
``JobResult`` (``JobRunner`` stores it). A job whose actor or node is lost, or whose
worker died under it, runs again on another actor (``ATTEMPTS`` in all), and is an
``error`` when it cannot: never a kill.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed

import ray
import ray.exceptions as rex

from ..errors import BadInput
from ..harness.isolation import SECRET_NAME
from ..job import CLOSED_WHILE_RUNNING, Check, CheckKind, Job, JobResult, JobStatus
from . import Sandbox
from .handoff import Handoff
from .local import START_TIMEOUT_S, WORKER_GRACE_S, SandboxStartError

#: Tries of one job over lost actors before it is an error.
ATTEMPTS = 3
#: Slack past a job's own limit and the worker's grace before its actor is given up.
RAY_GRACE_S = 30.0
#: How long closing waits for the jobs in flight to come back as errors.
CLOSE_GRACE_S = 5.0
#: The actors' environment: explicit, and never a credential (``actor_env``).
ACTOR_ENV = {
    "PYTHONHASHSEED": "0",
    "PYTHONUNBUFFERED": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}
#: Errors that say the actor (its process or its node) is gone, not the job.
LOST = (
    rex.RayActorError,
    rex.WorkerCrashedError,
    rex.NodeDiedError,
    rex.ObjectLostError,
    rex.OwnerDiedError,
    rex.LocalRayletDiedError,
)

PROBE_JOB = Job(
    files=(("probe.py", "x = 1\n"),),
    checks=(Check(CheckKind.MAIN, "probe.py", "own-check"),),
    timeout_s=60.0,
)


def secret_names(env: dict[str, str]) -> list[str]:
    """Credential-like variable names in ``env``; Ray's own ``RAY_*`` settings aside."""
    return sorted(k for k in env if SECRET_NAME.search(k) and not k.startswith("RAY_"))


def actor_env() -> dict[str, str]:
    """The variables every actor is given (``runtime_env``): none names a credential."""
    assert not secret_names(ACTOR_ENV)
    return dict(ACTOR_ENV)


def hardening_refusal(probe: JobResult) -> str | None:
    """Why a probe job's result shows a job would run unsandboxed there, or None."""
    if probe.status is not JobStatus.PASSED:
        return f"the probe job did not pass ({probe.status.value}: {probe.error[-200:]})"
    isolation = probe.extra.get("isolation") or {}
    missing = []
    if not probe.network_cut:
        missing.append("no network namespace")
    if isolation.get("filesystem") != "private":
        missing.append("no private filesystem")
    if not str(isolation.get("user", "")).startswith("uid"):
        missing.append("no unprivileged uid")
    return ", ".join(missing) or None


@contextlib.contextmanager
def secrets_held_out() -> Iterator[None]:
    """While a local Ray starts: no credential in this process's environment, so its
    raylet (and every worker it starts) never inherits one. Restored afterwards."""
    held = {k: os.environ.pop(k) for k in secret_names(dict(os.environ))}
    try:
        yield
    finally:
        os.environ.update(held)


class RayRunner:
    """One warm runner on a Ray node: a ``local._Worker`` and the jobs it ran."""

    def __init__(self, mode: str, warm: bool) -> None:
        for name in secret_names(dict(os.environ)):
            del os.environ[name]  # whatever the node's own environment carries
        from .local import _Worker

        self.mode, self.warm = mode, warm
        self.worker = _Worker(mode, None, warm).wait_ready()

    def hello(self) -> dict:
        """Where this actor runs, its versions, and whether the hardening took there."""
        probe = self.worker.execute(PROBE_JOB)
        refused = "the worker died running the probe" if probe is None else None
        context = ray.get_runtime_context()
        return {
            "node_id": context.get_node_id(),
            "ip": ray.util.get_node_ip_address(),
            "pid": os.getpid(),
            "worker_pid": self.worker.proc.pid,
            "versions": self.worker.versions,
            "refused": refused or hardening_refusal(probe),
            "secrets": secret_names(dict(os.environ)),
        }

    def run(self, job_data: dict) -> dict:
        """Run one job; ``{"result": None}`` when the worker died under it (a fresh one
        is started here, and the driver runs the job again elsewhere)."""
        start = time.monotonic()
        result = self.worker.execute(Job.from_json(job_data))
        busy = time.monotonic() - start
        if result is None:
            self._replace()
            return {"result": None, "busy_s": busy}
        return {"result": result.to_json(), "busy_s": busy}

    def worker_pid(self) -> int:
        return self.worker.proc.pid

    def _replace(self) -> None:
        from .local import _Worker

        self.worker.kill()
        self.worker = _Worker(self.mode, None, self.warm).wait_ready()


class _Actor:
    """The driver's handle on one actor and the node it reported from."""

    def __init__(self, handle, hello: dict) -> None:
        self.handle = handle
        self.node_id = hello["node_id"]
        self.ip = hello["ip"]
        self.pid = hello["pid"]


class RaySandbox(Sandbox):
    """Jobs on a Ray cluster's actors; ``run`` is thread-safe, as ``LocalSandbox``'s."""

    name = "ray"

    def __init__(
        self,
        workers: int | None = None,
        mode: str = "interpret",
        address: str | None = None,
        warm: bool = True,
    ) -> None:
        self.requested = workers
        self.size = max(1, workers or 1)  # set from the cluster's slots at start
        self.mode, self.address, self.warm = mode, address, warm
        self.versions: dict = {}
        self.start_errors: list[str] = []
        self.started_ray = False  # a local Ray started for this run (stopped at close)
        #: compiled mode: each actor's runner keeps a Triton cache of its own (the report
        #: says so, as for a local pool without a shared one)
        self.triton_cache: str | None = None
        self.triton_cache_note = "each actor's, on its node"
        self.cluster: dict = {}
        #: per node id: {"ip", "jobs", "busy_s"}
        self.node_jobs: dict[str, dict] = {}
        self.lost = 0  # remote calls lost with their actor or worker
        self.retried = 0  # jobs run again after such a loss
        self._idle: Handoff[_Actor] = Handoff()  # first come, first served
        self._actors: list[_Actor] = []
        self._inflight: set = set()
        self._spawning: list = []  # actors started, not said hello yet
        self._replacers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._remote = None
        self._started = False
        self._closed = False

    # -- starting ----------------------------------------------------------------------
    def start(self) -> None:
        """Connect (or start a local Ray), then start the actors and wait for every one:
        a node that cannot harden jobs is ``BadInput``, none ready ``SandboxStartError``."""
        with self._lock:
            if self._started:
                return
            if self._closed:
                raise SandboxStartError("the sandbox is closed")
            self._started = True
        self._connect()
        self.cluster = cluster_resources()
        slots = self.cluster["gpus"] if self.mode == "compiled" else self.cluster["cpus"]
        if slots < 1:
            what = "GPU" if self.mode == "compiled" else "CPU"
            raise BadInput(f"--backend ray: the cluster has no {what} to run jobs on")
        self.size = min(self.requested or slots, slots)
        hellos = self._spawn_all(self.size)
        self._admit(hellos)

    def _connect(self) -> None:
        """Join ``address``; without one, a running cluster (``auto``), else a local Ray
        started for the run (``local`` always starts one), with no key in its environment."""
        if ray.is_initialized():
            return  # a driver that is already connected (a test, a notebook): keep it
        options = {"include_dashboard": False, "log_to_driver": False}
        if self.address and self.address != "local":
            try:
                ray.init(address=self.address, **options)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise BadInput(f"--ray-address {self.address}: {exc}") from None
            return
        if self.address is None:
            try:
                ray.init(address="auto", **options)
                return
            except ConnectionError:
                pass
        with secrets_held_out():
            ray.init(address="local", **options)
        self.started_ray = True

    def _options(self) -> dict:
        gpus = 1 if self.mode == "compiled" else 0
        return {"num_cpus": 1, "num_gpus": gpus, "runtime_env": {"env_vars": actor_env()}}

    def _spawn(self):
        if self._remote is None:  # one actor class for the run: Ray exports it once
            self._remote = ray.remote(**self._options())(RayRunner)
        return self._remote.remote(self.mode, self.warm)

    def _spawn_all(self, count: int) -> list[tuple[object, dict | str]]:
        """Start ``count`` actors in parallel; each with its hello or why it failed."""
        handles = [self._spawn() for _ in range(count)]
        with self._lock:
            self._spawning.extend(handles)  # closing kills these too
        refs = {h.hello.remote(): h for h in handles}
        ready: list = []
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(ready) < len(refs) and time.monotonic() < deadline and not self._closed:
            ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0.5)
        answers = []
        for ref, handle in refs.items():
            if ref not in ready:
                ray.kill(handle)
                answers.append((handle, f"no answer within {START_TIMEOUT_S:.0f} s"))
                continue
            try:
                answers.append((handle, ray.get(ref)))
            except rex.RayError as exc:
                answers.append((handle, f"{type(exc).__name__}: {str(exc)[-300:]}"))
        with self._lock:
            for handle in handles:
                self._spawning.remove(handle)
        return answers

    def _admit(self, hellos: list[tuple[object, dict | str]]) -> None:
        """Keep the actors that said hello and may run jobs; refuse a node that cannot
        harden them, or a cluster whose nodes run other toolchains."""
        admitted = []
        for handle, hello in hellos:
            if isinstance(hello, str):
                self.start_errors.append(f"ray actor failed to start: {hello}")
                continue
            if hello["refused"] or hello["secrets"]:
                self._kill_all([h for h, _ in hellos])
                why = hello["refused"] or f"credentials in its environment: {hello['secrets']}"
                raise BadInput(
                    f"--backend ray: node {hello['ip']} cannot sandbox jobs ({why}); "
                    "its Ray workers must run as root"
                )
            admitted.append(_Actor(handle, hello))
            self.versions = self.versions or hello["versions"]
            if hello["versions"] != self.versions:
                self._kill_all([h for h, _ in hellos])
                raise BadInput(
                    f"--backend ray: node {hello['ip']} runs {hello['versions']}, "
                    f"another {self.versions}: every node needs the same toolchain"
                )
        if not admitted:
            raise SandboxStartError((self.start_errors or ["--backend ray: no actor started"])[0])
        with self._lock:
            self._actors.extend(admitted)
        for actor in admitted:
            self._idle.put(actor)

    # -- running -----------------------------------------------------------------------
    def run(self, job: Job, on_progress: Callable[[dict], None] | None = None) -> JobResult:
        """Run ``job`` on an idle actor, again on another when its actor is lost.
        ``on_progress`` is not called: a job on the cluster reports when it ends."""
        self.start()
        why = ""
        for attempt in range(ATTEMPTS):
            if attempt:
                with self._lock:
                    self.retried += 1
            actor = self._take()
            if actor is None:
                return self._error(why or "no ray actor is left to run the job")
            answer, why = self._call(actor, job)
            if answer is not None:
                return answer
            if self._closed:
                break
        return self._error(why)

    def _take(self) -> _Actor | None:
        """An idle actor; None when the sandbox closes or none comes back in time."""

        def stop() -> bool:
            with self._lock:
                return self._closed or not self._actors

        return None if self._closed else self._idle.take(stop, 1.0)

    def _call(self, actor: _Actor, job: Job) -> tuple[JobResult | None, str]:
        """The job's result from ``actor``, or None and why it did not come back."""
        ref = actor.handle.run.remote(job.to_json())
        with self._lock:
            self._inflight.add(ref)
        try:
            answer = ray.get(ref, timeout=job.wall_limit_s + WORKER_GRACE_S + RAY_GRACE_S)
        except LOST as exc:
            return None, self._lose(actor, f"ray actor on {actor.ip} lost: {type(exc).__name__}")
        except rex.GetTimeoutError:
            return None, self._lose(actor, f"ray actor on {actor.ip} stopped answering")
        except rex.TaskCancelledError:
            return None, CLOSED_WHILE_RUNNING
        finally:
            with self._lock:
                self._inflight.discard(ref)
        if answer["result"] is None:
            self._count_lost()
            self._idle.put(actor)  # it started a fresh worker already
            return None, f"sandbox worker on {actor.ip} died under the job; it was replaced"
        self._record(actor, answer["busy_s"])
        self._idle.put(actor)
        return JobResult.from_json(answer["result"]), ""

    def _record(self, actor: _Actor, busy: float) -> None:
        with self._lock:
            node = self.node_jobs.setdefault(
                actor.node_id, {"ip": actor.ip, "jobs": 0, "busy_s": 0.0}
            )
            node["jobs"] += 1
            node["busy_s"] += busy

    def _count_lost(self) -> None:
        with self._lock:
            self.lost += 1

    def _lose(self, actor: _Actor, why: str) -> str:
        """Forget a lost actor and start another in its place (in the background)."""
        self._count_lost()
        with self._lock:
            if actor in self._actors:
                self._actors.remove(actor)
        with contextlib.suppress(Exception):
            ray.kill(actor.handle)
        if not self._closed:
            thread = threading.Thread(target=self._replace, name="mutant-gate-ray-replace")
            with self._lock:
                self._replacers.append(thread)
            thread.start()
        return why

    def _replace(self) -> None:
        ((handle, hello),) = self._spawn_all(1)
        if isinstance(hello, str) or hello["refused"] or hello["secrets"]:
            self.start_errors.append(f"ray actor failed to start again: {hello}")
            with contextlib.suppress(Exception):
                ray.kill(handle)
            return
        actor = _Actor(handle, hello)
        with self._lock:
            if self._closed:
                ray.kill(handle)
                return
            self._actors.append(actor)
        self._idle.put(actor)

    def _error(self, why: str) -> JobResult:
        if self._closed:
            why = CLOSED_WHILE_RUNNING
        return JobResult(JobStatus.ERROR, error=f"{why} (tried on {ATTEMPTS} actors at most)")

    def run_many(self, jobs: Iterable[Job]) -> Iterator[tuple[int, JobResult]]:
        """Run jobs on all actors; yield ``(index, result)`` as each finishes."""
        self.start()
        with ThreadPoolExecutor(self.size) as pool:
            futures = {pool.submit(self.run, job): i for i, job in enumerate(jobs)}
            for future in as_completed(futures):
                yield futures[future], future.result()

    def actor_pids(self) -> list[int]:
        """The live actors' process ids (on their nodes)."""
        with self._lock:
            return [a.pid for a in self._actors]

    # -- the record --------------------------------------------------------------------
    def cluster_record(self) -> dict:
        """The report's ``cluster``: the nodes, CPUs and GPUs seen at start, the
        actors, and per node the jobs run and the seconds its actors were busy."""
        with self._lock:
            nodes = [
                {
                    "node": n["ip"],
                    "node_id": node_id[:12],
                    "jobs": n["jobs"],
                    "busy_s": round(n["busy_s"], 2),
                }
                for node_id, n in sorted(self.node_jobs.items(), key=lambda kv: kv[1]["ip"])
            ]
            lost, retried = self.lost, self.retried
        return {
            "cluster": {
                **self.cluster,
                "actors": self.size,
                "started_here": self.started_ray,
                "per_node": nodes,
                "lost": lost,
                "retried": retried,
            }
        }

    # -- closing -----------------------------------------------------------------------
    def close(self) -> None:
        """Cancel the jobs in flight, kill every actor (their workers end with them:
        their stdin hangs up), and stop a Ray this sandbox started."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            refs, actors = list(self._inflight), list(self._actors)
            handles = [a.handle for a in actors] + list(self._spawning)
        for ref in refs:
            with contextlib.suppress(Exception):
                ray.cancel(ref)
        self._kill_all(handles)
        deadline = time.monotonic() + CLOSE_GRACE_S
        while self._inflight and time.monotonic() < deadline:
            time.sleep(0.05)  # the callers see their jobs end as errors
        for thread in list(self._replacers):  # none may touch Ray once it is shut down
            thread.join(max(0.0, deadline - time.monotonic()) + 1.0)
        if self.started_ray:
            ray.shutdown()

    def _kill_all(self, handles: list) -> None:
        for handle in handles:
            with contextlib.suppress(Exception):
                ray.kill(handle)

    def __enter__(self) -> RaySandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def cluster_resources() -> dict:
    """The live nodes, CPUs and GPUs of the connected cluster."""
    total = ray.cluster_resources()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return {
        "nodes": len(nodes),
        "node_addresses": sorted(n.get("NodeManagerAddress", "") for n in nodes),
        "cpus": int(total.get("CPU", 0)),
        "gpus": int(total.get("GPU", 0)),
    }
