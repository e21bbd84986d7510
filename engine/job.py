"""Jobs and their results: the data every sandbox backend speaks.

A Job says what to run (files, checks, mode, seed, limits); a JobResult says
what happened. Both are JSON-serialisable so the cache and any backend treat
them alike. This module is imported inside the sandbox too: stdlib only.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from enum import StrEnum

#: Bump when the harness changes in a way that can change a result.
HARNESS_VERSION = "10"  # 2: private filesystem and unprivileged user; 3: interpreter parity;
#: 4: a writable view of the project, and the jit functions each launch reaches; 5: the
#: original's case clock (--case-time), a collection failure names its file; 6: a bounds
#: violation names the test case that made it, which fails with it; 7: results carry the
#: closeness assertions the checks made (``harness/closeness.py``), and ``Job.tighten``;
#: 8: a job's limit is CPU seconds (``JobResult.cpu_s``, cases' ``cpu_s``), the wall clock
#: a far backstop (``Job.wall_limit_s``); 9: device memory from ``torch.empty`` is filled
#: in compiled mode, host memory by glibc alone again (``runner.fill_uninitialized``);
#: 10: a worker runs pytest once before any job (``runner.warm_pytest``): a forked job's
#: CPU seconds no longer hold the installed plugins' imports

#: The wall clock's backstop: a job whose processes use little CPU (a sleep, a wait on a
#: lock) is stopped at ``WALL_FACTOR`` times its CPU limit plus ``WALL_BASE_S``; on a busy
#: machine a job's CPU seconds stay what they are, its wall seconds do not.
WALL_FACTOR = 5.0
WALL_BASE_S = 10.0


class CheckKind(StrEnum):
    MAIN = "main"  # run a file as ``__main__``
    PYTEST = "pytest"  # run a pytest file (optionally selected node ids)
    #: call a function of ``mutant_gate.engine.harness`` with a JSON request (``path``
    #: names the request file); what it returns lands in ``JobResult.extra["harness"][name]``
    HARNESS = "harness"


#: a result's ``extra`` key: how many bounds violations no test case made (the others name
#: their case, and that case failed with it: an original's is left out like a failing one)
BOUNDS_OUTSIDE_CASES = "bounds_outside_cases"
#: the words of a job whose answer passed the limit a result may hold (``harness/worker``):
#: a large suite's original, split in two and run again (``spread``)
TOO_BIG_WORDS = "bytes a result may hold"

#: the words a case stopped by the original's ``--case-time`` clock fails with
#: (``baseline.leave_out_cases`` reads them: such a case is slow, not failing)
CASE_TIME_WORDS = "ran past --case-time"


@dataclass(frozen=True)
class Check:
    """One thing to run inside the sandbox.

    ``name`` is how a kill is attributed: ``own-check`` for the kernel file's
    own check, ``test:NAME`` for an extra test.
    """

    kind: CheckKind
    path: str
    name: str
    select: tuple[str, ...] = ()
    #: a module of the job's files loaded before this check without its module-level
    #: check (``harness/probe/capturing._definitions``): a probe test only calls the
    #: wrapper, and importing a tutorial can cost its whole own check (18 s for the layer
    #: norm's)
    preload: str = ""
    #: pytest's own selection (``-k EXPR``, ``-m EXPR``) for a given test file
    keyword: str = ""
    marker: str = ""
    #: the user's own code (the own check's ``test_*``, ``--tests`` files, a project's
    #: tests), trusted as the own check is: a warm runner may serve it. A test a writer
    #: generated is not, and always runs in a process of its own.
    trusted: bool = False
    #: pytest loads the plugins installed in its environment (entry points): for the
    #: user's tests, which may need them. A test the tool or a model wrote needs none,
    #: and runs without them: the same on every machine (no plugin reseeding or
    #: reordering it), and a process's first pytest session costs 0.05 s, not the
    #: seconds importing every installed plugin takes.
    plugins: bool = True
    #: ``--case-time S`` on the original: each test case's call is stopped once it has
    #: run S seconds (``harness/runner.CaseClock``), so one slow case costs S, not the
    #: job's limit; 0: no clock
    case_time_s: float = 0.0

    def to_json(self) -> dict:
        data = {
            "kind": self.kind.value,
            "path": self.path,
            "name": self.name,
            "select": list(self.select),
        }
        if self.preload:  # only when set: every other check keeps its cache key
            data["preload"] = self.preload
        if self.keyword:  # likewise
            data["keyword"] = self.keyword
        if self.marker:
            data["marker"] = self.marker
        if self.trusted:
            data["trusted"] = True
        if not self.plugins:
            data["plugins"] = False
        if self.case_time_s:
            data["case_time_s"] = self.case_time_s
        return data

    @staticmethod
    def from_json(data: dict) -> Check:
        return Check(
            CheckKind(data["kind"]),
            data["path"],
            data["name"],
            tuple(data.get("select", ())),
            data.get("preload", ""),
            data.get("keyword", ""),
            data.get("marker", ""),
            bool(data.get("trusted", False)),
            bool(data.get("plugins", True)),
            float(data.get("case_time_s", 0.0)),
        )


@dataclass(frozen=True)
class Job:
    """Everything a sandbox needs to run one original or mutant.

    ``files`` maps a relative path in the job's fresh directory to its text.
    """

    files: tuple[tuple[str, str], ...]
    checks: tuple[Check, ...]
    mode: str = "interpret"
    seed: int = 0
    timeout_s: float = 60.0
    memory_mb: int = 4096
    output_limit_bytes: int = 4 * 1024 * 1024
    stop_on_first_failure: bool = True
    max_processes: int = 64  # per job, where the sandbox can drop to an unprivileged user
    sanitize: bool = False  # compiled mode: run under compute-sanitizer memcheck
    #: project mode (engine/project.py): root, import_root, module, module_file
    project: dict | None = None
    autotune_config: int = 0  # interpreter: the @triton.autotune config pinned (--all-configs)
    #: every kernel launch skipped, empty tensors -31337 (harness/null_run.py): can the check notice?
    null_launches: bool = False
    #: record which lines of the kernel file ran (``extra["lines"]``): the original's
    #: run, so mutants on lines no check executes need no job (harness/runner.py)
    trace_lines: bool = False
    #: interpreter: masked loads without ``other=`` read NaN / the integer maximum on
    #: masked-off lanes instead of 0 (harness/bounds_poison.py); a GPU leaves them undefined
    poison_undefined: bool = True
    #: interpreter: keep which program stored to which address (``harness/bounds_races.py``),
    #: for the race hint; the original's baseline job only
    trace_races: bool = False
    #: interpreter: who runs a launch's programs, "batched" (all at once,
    #: harness/batched.py) or "triton" (Triton's own loop)
    interpreter: str = "batched"
    #: test line ("path.py:LINE", as ``harness/closeness.py`` attributes calls) -> {"atol":
    #: float, "rtol": float}: the closeness calls made there run with these tolerances
    #: instead (the tolerance check runs a test with a proposed tolerance)
    tighten: dict | None = None
    #: a job run once more because a limit decided its verdict within a margin of it
    #: (``engine/steady.py``): 1, 2, ...; 0 for every first run (and its cache key)
    attempt: int = 0

    @property
    def wall_limit_s(self) -> float:
        """The wall-clock backstop (``timeout_s`` is CPU seconds): far past what the job
        may use on any load, for what uses no CPU (a sleep, a deadlock)."""
        return self.timeout_s * WALL_FACTOR + WALL_BASE_S

    def to_json(self) -> dict:
        data = {
            "files": [list(f) for f in self.files],
            "checks": [c.to_json() for c in self.checks],
            "mode": self.mode,
            "seed": self.seed,
            "timeout_s": self.timeout_s,
            "memory_mb": self.memory_mb,
            "output_limit_bytes": self.output_limit_bytes,
            "stop_on_first_failure": self.stop_on_first_failure,
            "max_processes": self.max_processes,
            "sanitize": self.sanitize,
            "project": self.project,
            "autotune_config": self.autotune_config,
            "poison_undefined": self.poison_undefined,
        }
        if self.null_launches:  # only when set: every other job keeps its cache key
            data["null_launches"] = True
        if self.trace_lines:
            data["trace_lines"] = True
        if self.trace_races:  # likewise
            data["trace_races"] = True
        if self.interpreter != "batched":  # likewise: the default keeps every job's key
            data["interpreter"] = self.interpreter
        if self.tighten:  # likewise
            data["tighten"] = self.tighten
        if self.attempt:  # likewise
            data["attempt"] = self.attempt
        return data

    @staticmethod
    def from_json(data: dict) -> Job:
        return Job(
            files=tuple((p, t) for p, t in data["files"]),
            checks=tuple(Check.from_json(c) for c in data["checks"]),
            mode=data["mode"],
            seed=data["seed"],
            timeout_s=data["timeout_s"],
            memory_mb=data["memory_mb"],
            output_limit_bytes=data["output_limit_bytes"],
            stop_on_first_failure=data["stop_on_first_failure"],
            max_processes=data.get("max_processes", 64),
            sanitize=data.get("sanitize", False),
            project=data.get("project"),
            autotune_config=data.get("autotune_config", 0),
            null_launches=data.get("null_launches", False),
            trace_lines=data.get("trace_lines", False),
            poison_undefined=data.get("poison_undefined", True),
            trace_races=data.get("trace_races", False),
            interpreter=data.get("interpreter", "batched"),
            tighten=data.get("tighten"),
            attempt=int(data.get("attempt", 0)),
        )

    def cache_key(self, toolchain: dict) -> str:
        """sha256 of the canonical job plus the toolchain and harness versions.

        The time limit is left out: it is re-derived from the original's
        measured time on every run, and a result does not depend on it unless
        it is a timeout (see ``JobResult.valid_for``). So is the memory limit (sized
        to the machine by default): a result depends on it only through hitting it.
        """
        canonical = {k: v for k, v in self.to_json().items() if k not in ("timeout_s", "memory_mb")}
        payload = {"job": canonical, "toolchain": toolchain, "harness": HARNESS_VERSION}
        if self.project:  # the tests read the project's files, not the job's: their contents
            payload["tests"] = tests_digest(
                self.project["root"], tuple(c.path for c in self.checks)
            )
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()


#: a project's files that configure its tests, beside the test files' folders
TEST_CONFIG = ("pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini", "conftest.py")


def tests_digest(root: str, paths: tuple[str, ...]) -> str:
    """sha256 of what a project-mode job's tests read from the project besides the module
    it mutates: every .py file in the folders of its test files (the tests, their helpers),
    each conftest.py from there up to the root, and the root's pytest configuration. A
    project's tests are read from the project, not sent with the job, so an edited test must
    change the job's key (the library modules the tests import are the user's code: an edit
    there is the user's new kernel, judged by ``--changed-since``, not a stale test)."""
    h = hashlib.sha256()
    for path in _test_side_files(os.path.abspath(root), paths):
        h.update(path.encode() + b"\0" + _file_sha(path).encode() + b"\0")
    return h.hexdigest()


def _test_side_files(root: str, paths: tuple[str, ...]) -> tuple[str, ...]:
    found: set[str] = set()
    for name in TEST_CONFIG:
        found.add(os.path.join(root, name))
    for path in paths:
        folder = os.path.dirname(os.path.abspath(path))
        if not folder.startswith(root):
            continue
        try:
            found.update(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".py"))
        except OSError:
            pass
        while folder.startswith(root) and folder != root:
            found.add(os.path.join(folder, "conftest.py"))
            folder = os.path.dirname(folder)
    return tuple(sorted(f for f in found if os.path.isfile(f)))


def _file_sha(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    return _sha_of(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4096)
def _sha_of(path: str, mtime_ns: int, size: int) -> str:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return "unreadable"


#: A job in flight when its sandbox closed: an error, never a verdict.
CLOSED_WHILE_RUNNING = "the sandbox was closed while the job ran"


class JobStatus(StrEnum):
    PASSED = "passed"  # every check passed
    FAILED = "failed"  # a check failed (assertion, exception, non-zero exit)
    BOUNDS = "bounds"  # an unmasked load/store left every tensor of its launch
    CRASH = "crash"  # the child died by a signal (segfault, abort, limits)
    #: its CPU-time limit reached (``JobResult.cpu_s``), or the wall clock's far backstop
    #: (``Job.wall_limit_s``: the error says which); process group killed
    TIMEOUT = "timeout"
    ERROR = "error"  # the harness itself failed: never evidence about the kernel


@dataclass(frozen=True)
class CheckOutcome:
    name: str  # the Check's name; for pytest checks "NAME::nodeid"
    status: str  # passed | failed | skipped
    duration_s: float
    message: str = ""


@dataclass(frozen=True)
class JobResult:
    status: JobStatus
    outcomes: tuple[CheckOutcome, ...] = ()
    error: str = ""  # tail of the error / output
    duration_s: float = 0.0
    network_cut: bool = False
    signal: int | None = None
    bounds: dict | None = None
    shims: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict)
    #: the CPU seconds of the job's processes (the child, what it waited for; a warm
    #: runner's share while it ran the job): what its limit counts
    cpu_s: float = 0.0

    def valid_for(self, job: Job) -> bool:
        """Whether this (cached) result answers ``job``: a timeout under a
        shorter limit than the job's says nothing about the longer one, nor does a
        result that hit a smaller memory limit than the job's. A result that hit no
        limit answers any memory limit: the default follows ``-j``, and a rerun with
        other workers is served from the cache."""
        memory = self.extra.get("memory_mb")
        hit_memory = (self.extra.get("limit") or {}).get("limit") == "memory"
        if hit_memory and memory is not None and job.memory_mb > memory:
            return False  # it might fit in the more memory this job may have: run again
        if self.status is not JobStatus.TIMEOUT:
            return True
        return float(self.extra.get("timeout_s", 0.0)) >= job.timeout_s

    @property
    def spent_s(self) -> float:
        """What the job cost, in the seconds its limit counts: CPU seconds, or its wall
        seconds for a result from before they were measured."""
        return self.cpu_s if self.cpu_s > 0 else self.duration_s

    @property
    def first_failure(self) -> CheckOutcome | None:
        return next((o for o in self.outcomes if o.status == "failed"), None)

    def to_json(self) -> dict:
        data = asdict(self)
        data["status"] = self.status.value
        return data

    @staticmethod
    def from_json(data: dict) -> JobResult:
        return JobResult(
            status=JobStatus(data["status"]),
            outcomes=tuple(CheckOutcome(**o) for o in data.get("outcomes", ())),
            error=data.get("error", ""),
            duration_s=float(data.get("duration_s", 0.0)),
            network_cut=bool(data.get("network_cut", False)),
            signal=data.get("signal"),
            bounds=data.get("bounds"),
            shims=tuple(data.get("shims", ())),
            extra=dict(data.get("extra", {})),
            cpu_s=float(data.get("cpu_s", 0.0)),
        )
