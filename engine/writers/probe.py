"""The probe writer: no model, the default. Survivors meet inputs the own check never tried.

1. capture: one sandbox job runs the own check with the kernel module's public
   functions wrapped (``harness/probe.capture``): which function, what arguments.
2. search: per survivor, candidates near those calls (``probe_inputs``) planned up
   to ``--probes``, run in rounds (``harness/probe.compare``): ``FIRST_BATCH`` inputs
   first (most kills are there), then up to ``BATCH`` (the rest of the budget). The
   original's run on a candidate does not depend on the survivor: it runs once per
   candidate (keyed by the candidate's request), in jobs of its own, and its digest
   is shipped to the mutants' jobs, where a mutant bit-identical to it needs no
   original run (otherwise the original runs beside it and the two are compared with
   tolerance, as before). A candidate the original rejects, or on which it varies
   between runs, is run by no survivor. Several survivors share a compare job (each
   mutant under its own module name; ``_groups`` keeps at least as many jobs as
   workers), and each stops at its first hit; a job that hangs or crashes names the
   guilty side in its output tail (``_failed_job``): the others run again. Between
   rounds the kinds that killed in this run move to the front of every survivor's
   remaining candidates. A difference beyond the dtype's tolerance, an exception only
   the mutant raises, or a bounds violation is a hit; the original's outputs on that
   input come back as golden values. What it cost is the run's
   ``writers.probe.spend``.
3. prove: the hit becomes an ordinary pytest file (+ a golden JSON file) that must
   pass the original and fail the mutant in the sandbox, like any killer test (one
   seed: the test seeds its own inputs, and the search already ran the original on
   them twice, alike), in a warm runner (the test is the tool's, from a template:
   ``kernel_file.TRUSTED_ORIGINS``); then it runs against the other survivors too.
4. time: the search spends at most ``--probe-time`` seconds of jobs, by default
   ``BUDGET_PART`` of what the mutants' jobs took (``_time_budget``): every survivor's
   first round runs, then each round is cut to each survivor's share of what is left
   (``_fit``).
A survivor the probe cannot separate keeps its verdict, and its ``probe`` row says
"not distinguished by N probes (kinds ...)": not found is not equivalent, and the
probe claims nothing (only the claims check, on the evidence it names, may call a
mutant equivalent; it reads this row as one part of that evidence). A survivor that
differs on some probe but yields no test (no differing input small enough to keep
its expected values, or no written test that passed the proof) keeps its verdict
too, and the note says that it differs: no equivalence claim then.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import weakref
from collections.abc import Iterator

from ..events import Event, TestAccepted, TestRejected, WriterNote
from ..harness import probe as harness
from ..job import Check, CheckKind, Job, JobResult, JobStatus
from ..kernel_file import GIVEN, TestFile
from ..project import jit_callers
from ..records import Mutant, Verdict
from ..stage import StageContext
from ..verdicts import summarize_error
from . import proving
from .probe_inputs import (
    Candidate,
    candidates,
    describe_call,
    golden_text,
    kinds,
    render_test,
)

#: inputs per round after the first: the rest of the default budget in one round (a
#: mutant stops at its first difference inside a job, so a long batch wastes nothing on
#: the ones that die, and fewer rounds are fewer jobs one after the other)
BATCH = 24
#: a survivor's first round: the learned call with fresh values and the next kind, where
#: most kills are (the original runs on few inputs before the first proofs can start)
FIRST_BATCH = 2
#: survivors sharing one compare job at most: a hang costs the whole job's time limit
#: (and a retry of the others), and more jobs than workers keep every worker busy
PER_JOB = 4
#: a mutant this many times slower than the original on the own check: its hangs on
#: bigger inputs are proved only while the probe's time lasts
SLOW = 4.0
#: the probe's default time, a part of the mutants' job seconds: its last round's
#: estimates come out short, and the tool's own work between rounds and around the
#: proofs is not a job's; with the whole of it the phase ran past the mutants' (on
#: examples/softmax, 1.02 of it, where the budget ends the search)
BUDGET_PART = 0.8
#: the budget's floor, in seconds of the probe's jobs (``--probe-time`` where given): below
#: it no survivor is left with a kind of input never tried, whatever the mutants took (a
#: row softmax's mutants took 3.5 s: its probe stopped six survivors after 2 of 13 kinds)
FLOOR_S = 30.0
#: the part of the time left on the wall clock (the path) a round is planned to fill: a
#: survivor's round is as long as its slowest candidate, and estimates come out short by
#: up to a third on the examples (the measured over the estimated seconds of a round)
PATH_MARGIN = 0.7
#: the original's outputs a compare job gets whole, in bytes of their text at most (the
#: first candidates', where most hits are): the request travels to the sandbox and its
#: key is hashed
SHIP_BYTES = 4 << 20
REQUEST = "_mg_probe.json"
MUTANT_MODULE = "_mg_mutant"
_MARKER = re.compile(re.escape(harness.MARKER) + r" (\S+) (\S+)")
_WHY = {
    "differs": "its outputs differ",
    "mutant_error": "it raises where the original does not",
    "bounds": "it accesses memory out of bounds",
}
#: what a candidate is worth nothing on: the original rejects it, or varies on it
_UNUSABLE = ("original_error", "original_unstable")


def _module(ctx: StageContext) -> str:
    """The name the kernel module is imported by: a package's dotted path in project mode."""
    project = ctx.kernel.project
    return project.module if project is not None else ctx.kernel.module


def _harness_job(ctx: StageContext, request: dict, files: tuple, timeout_s: float) -> Job:
    project = ctx.kernel.project
    return Job(
        project=project.to_json() if project is not None else None,
        files=(*files, (REQUEST, json.dumps(request, sort_keys=True))),
        checks=(Check(CheckKind.HARNESS, REQUEST, "probe"),),
        mode=ctx.settings.mode,
        seed=ctx.settings.seed,
        timeout_s=round(timeout_s, 1),
        memory_mb=ctx.settings.memory_mb,
        poison_undefined=ctx.settings.poison_undefined,
        interpreter=ctx.settings.interpreter,
    )


def _data(result: JobResult) -> dict | None:
    data = (result.extra or {}).get("harness", {}).get("probe")
    return data if isinstance(data, dict) else None


def capture_job(ctx: StageContext) -> Job:
    """The job that learns the wrapper calls: the original alone, so the driver starts
    it beside the mutant phase once a mutant survives (``Stage.ahead``)."""
    kernel = ctx.kernel
    request = {
        "entry": "probe:capture",
        "version": harness.VERSION,
        "module": _module(ctx),
        "kernel": kernel.name,
        "main": kernel.has_main,
        "tests": bool(kernel.test_functions),
    }
    if kernel.project is not None:  # the project's selected cases, where they lie
        request["project"] = {
            "root": kernel.project.root,
            "import_root": kernel.project.import_root,
            "tests": [[t.path, list(t.select)] for t in kernel.tests if t.origin == GIVEN],
            # the cases -k / -m select: the ones the run judges by, the ones learned from
            "keyword": ctx.settings.keyword or "",
            "marker": ctx.settings.marker or "",
        }
    return _harness_job(ctx, request, (ctx.kernel.own_file(),), ctx.settings.timeout_s)


def capture(ctx: StageContext) -> tuple[list[dict], str]:
    """The own check's wrapper calls (replayable ones), and a note saying what was learned."""
    kernel = ctx.kernel
    result = proving.run_all(ctx, {"capture": capture_job(ctx)}).get("capture")
    if result is None:
        return [], "the run was cancelled"
    data = _data(result[0])
    if data is None:
        why = summarize_error(result[0].error) or result[0].status.value
        return [], f"could not capture the own check's calls: {why}"
    calls = _calls(data)
    source, verb = (
        ("the project's tests", "call")
        if kernel.project is not None
        else ("the own check", "calls")
    )
    if not calls:
        functions = ", ".join(data.get("functions", [])) or "none"
        errors = "; ".join(data.get("errors") or [])[:300]
        return [], (
            f"{source} {verb} no public function of the kernel module that launches a "
            f"kernel (public functions: {functions}); nothing to vary"
            + (f" ({errors})" if errors else "")
        )
    shown = "; ".join(describe_call(c) for c in calls[:4])
    more = f" and {len(calls) - 4} more" if len(calls) > 4 else ""
    cases = sorted({c["case"] for c in calls if c.get("case")})
    came = f" (from {len(cases)} test cases: {', '.join(cases[:3])}" if cases else ""
    came += (", ..." if len(cases) > 3 else "") + (")" if cases else "")
    launches = sum(1 for c in calls if c.get("launch"))
    what = f"{len(calls)} wrapper calls" + (
        f" ({launches} of them kernel launches: no public function of the module was on their path)"
        if launches
        else ""
    )
    return calls, f"learned {what} from {source}: {shown}{more}{came}"


def _calls(data: dict) -> list[dict]:
    """The replayable calls of a capture's answer: those that launched a kernel."""
    return [c for c in data.get("calls", []) if c.get("launches")]


#: the original's jobs on the first round's inputs, started beside the mutant phase
#: (``originals_ahead``), by the job runner of the run that started them, until the
#: probe takes them
_AHEAD: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_AHEAD_LOCK = threading.Lock()


def originals_ahead(ctx: StageContext, captured: JobResult) -> None:
    """With the capture's answer, beside the mutant phase: start the original's jobs on
    the first round's inputs of the survivors known now (the first round's compare jobs
    need them first). The probe's first round takes them (``_taken_ahead``)."""
    data = _data(captured)
    calls = _calls(data) if data is not None else []
    if not calls or not ctx.settings.writers.probe_share:
        return
    needed: dict[str, Candidate] = {}
    for m in ctx.mutants:
        if ctx.ledger.verdict(m.id) is not Verdict.SURVIVED:
            continue
        search = _search(ctx, m, calls)
        if search is not None:
            needed.update((c.id, c) for c in search.batch({}) if c.id not in needed)
    if not needed:
        return
    jobs = list(_original_jobs(ctx, list(needed.values()), ship=True).values())
    with _AHEAD_LOCK:
        _AHEAD[ctx.jobs] = jobs
    ctx.start_ahead([job for job, _ in jobs])


def _taken_ahead(ctx: StageContext) -> dict[str, tuple[Job, list]]:
    """The original's jobs started ahead for the first round (``originals_ahead``). The
    first round's inputs they do not cover (survivors known only later) need no round
    of their own: the compare jobs run the original on them, beside the mutants (most
    survivors that die, die on the inputs covered, and never reach the others)."""
    with _AHEAD_LOCK:
        started = _AHEAD.pop(ctx.jobs, [])
    return {f"ahead-{i}": (job, chunk) for i, (job, chunk) in enumerate(started)}


def _search(ctx: StageContext, m: Mutant, calls: list[dict]) -> _Search | None:
    """A survivor's search over the calls that launch its function (None: none does)."""
    reach = jit_callers(ctx.kernel.source, m.function)
    reaching = [c for c in calls if reach & set(c.get("kernels", ()))]
    if not reaching:
        return None
    budget = max(1, ctx.settings.writers.probes)
    triggers = ctx.settings.writers.probe_triggers
    return _Search(
        m,
        candidates(reaching, m.family, budget, ctx.settings.seed, triggers),
        kinds(reaching, m.family, triggers),
    )


def module_name(mutant: Mutant) -> str:
    """The module a mutant's file is loaded as in a compare job (one per survivor)."""
    return f"{MUTANT_MODULE}_{mutant.id}"


def _limit(ctx: StageContext, work_s: float, mutants: int) -> float:
    return min(
        max(10.0, work_s * ctx.settings.timeout_factor + ctx.settings.timeout_base_s + 2.0),
        max(ctx.settings.timeout_s, 10.0) * max(1, mutants),
    )


def _request(ctx: StageContext, batch: list[Candidate]) -> dict:
    project = ctx.kernel.project
    return {
        "entry": "probe:compare",
        "version": harness.VERSION,
        "module": _module(ctx),
        # project mode: mutants load as modules of the kernel's package
        **({"package": project.module.rpartition(".")[0]} if project is not None else {}),
        "exact": ctx.settings.mode == "interpret",
        "candidates": [c.request() for c in batch],
    }


def _original_job(
    ctx: StageContext, batch: list[Candidate], golden: bool, ship: bool = False
) -> Job:
    """The original alone on ``batch``: what it does there (digests), shared by every
    survivor probing those candidates; with ``golden`` its outputs on the first; with
    ``ship`` (the first round's inputs, where most hits are) its outputs whole where
    small enough, run twice alike first (``harness/probe._Originals.run``)."""
    request = {**_request(ctx, batch), "mutants": [], "golden": golden}
    if ship:  # only when set: every other job keeps its cache key
        request["ship"] = True
    work = sum(c.est_s for c in batch) * (2 if ship else 1)
    return _harness_job(ctx, request, (ctx.kernel.own_file(),), _limit(ctx, work, 1))


def _compare_job(
    ctx: StageContext, entries: list[tuple[Mutant, list[Candidate]]], known: dict[str, dict]
) -> Job:
    """Several survivors' next candidates in one job, each mutant under its own module
    name, against the original's runs ``known`` from earlier jobs (where it is not
    known, it runs in this job, once per candidate)."""
    union = list({c.id: c for _, batch in entries for c in batch}.values())
    request = {
        **_request(ctx, union),
        "mutants": [
            {"module": module_name(m), "candidates": [c.id for c in batch]} for m, batch in entries
        ],
        "originals": _shipped(union, known),
    }
    files = (ctx.kernel.own_file(),) + tuple((module_name(m) + ".py", m.source) for m, _ in entries)
    # each mutant on its candidates, the original at most once per candidate
    work = sum(c.est_s for _, batch in entries for c in batch) + sum(c.est_s for c in union)
    return _harness_job(ctx, request, files, _limit(ctx, work, len(entries)))


def _shipped(union: list[Candidate], known: dict[str, dict]) -> dict[str, dict]:
    """What a compare job gets of the original's runs on its candidates: digests, and
    outputs whole (``harness/probe._ship``) for the first of them up to ``SHIP_BYTES``
    in all (the rest of them run the original again where a mutant differs)."""
    room = SHIP_BYTES
    shipped = {}
    for c in union:
        entry = known.get(c.id)
        if entry is None:
            continue
        size = sum(len(v.get("data", "")) for v in (entry.get("outputs") or {}).values())
        if size > room:
            entry = {k: v for k, v in entry.items() if k != "outputs"}
        else:
            room -= size
        shipped[c.id] = entry
    return shipped


class _Search:
    """One survivor's search state."""

    def __init__(self, mutant: Mutant, queue: list[Candidate], offered: list[str] = ()) -> None:
        self.mutant = mutant
        self.offered = list(offered)  # every kind the calls offer it, planned or not
        self.queue = queue  # the planned candidates, in the prior's order
        self.pending = list(queue)  # those not run yet, in the order they will run
        self.ran: list[Candidate] = []
        self.probes = 0  # candidates the original accepted and both sides ran
        self.hit: tuple[Candidate, dict, str] | None = None  # candidate, outputs, why
        self.hang: tuple[Candidate, str] | None = None  # needs the original's outputs
        self.done = False
        self.solo = False  # its shared job failed with no culprit named: run it alone
        self.note = ""
        self.differs = 0  # probes on which the mutant differed (a hit or not)
        self.first: str = ""  # what the first of them showed
        self.unkept: str = ""  # why the last difference did not become a test
        self.hung = False  # its hit is a hang (or a crash): its test may run to the limit
        #: slow, and its test's proof found its outputs alike the original's ("not a
        #: kill"): the run's other tests, which would hang on it the same way, skip it
        self.alike = False
        #: the most candidates its next round may run (the time budget's share); None: all
        self.cap: int | None = None
        #: how much slower than the original its own check ran (a mutant that loops 256
        #: times as often is as slow on every probe): its side of a candidate's cost
        self.slow = 1.0
        self.out_of_time = ""  # the time budget it ran out of, said in its result

    def differed(self, what: str, unkept: str = "") -> None:
        self.differs += 1
        self.first = self.first or what
        self.unkept = unkept or self.unkept

    def result(self) -> str:
        """What the search found, for a survivor it did not separate."""
        if not self.differs:
            if self.note:
                return self.note
            tried = list(dict.fromkeys(c.kind for c in self.ran))
            probes = "probe" if self.probes == 1 else "probes"
            text = f"not distinguished by {self.probes} {probes}" + (
                f" (kinds {', '.join(tried)})" if tried else ""
            )
            return text + self._unprobed(tried)
        probes = "probe" if self.differs == 1 else "probes"
        text = (
            f"the mutant differs on {self.differs} {probes} (first: {self.first[:300]}), "
            f"but {self.unkept or 'no test came of it'}"
        )
        return f"{text}; then {self.note}" if self.note else text

    def _unprobed(self, tried: list[str]) -> str:
        """What a budget left unprobed: the kinds never run, and why."""
        text = ""
        if self.out_of_time and self.pending:
            never = [k for k in dict.fromkeys(c.kind for c in self.pending) if k not in tried]
            inputs = "input" if len(self.pending) == 1 else "inputs"
            text += (
                f"; {len(self.pending)} planned {inputs} left unprobed when {self.out_of_time} "
                "ran out" + (f" (kinds never tried: {', '.join(never)})" if never else "")
            )
        planned = {c.kind for c in self.queue}
        left = [k for k in self.offered if k not in planned]
        if left:
            text += f"; left unprobed when its budget of {len(self.queue)} inputs ran out: "
            text += ", ".join(left)
        return text

    def batch(self, unusable: dict[str, str]) -> list[Candidate]:
        """The next candidates to run: none the original is known to reject."""
        self.pending = [c for c in self.pending if c.id not in unusable]
        size = BATCH if self.ran else FIRST_BATCH
        return self.pending[: size if self.cap is None else min(size, self.cap)]

    def consume(self, batch: list[Candidate]) -> None:
        ids = {c.id for c in batch}
        self.pending = [c for c in self.pending if c.id not in ids]
        self.ran += batch

    def reorder(self, kills: dict[str, int]) -> None:
        """Kinds that killed in this run first (most kills first), the rest as planned."""
        if kills:
            order = {c.id: i for i, c in enumerate(self.queue)}
            self.pending.sort(
                key=lambda c: (
                    (0, -kills[c.kind], order[c.id]) if kills.get(c.kind) else (1, 0, order[c.id])
                )
            )


def _read_mutant(
    search: _Search,
    batch: list[Candidate],
    answer: dict,
    kernel_name: str,
    tried: dict[str, int],
) -> None:
    """One mutant's part of a compare job's answer into ``search``; ``tried`` counts the
    probes run (both sides) by trigger kind."""
    by_id = {c.id: c for c in batch}
    search.consume(batch)
    if answer.get("error"):
        search.note = f"probe job failed: {answer['error']}"
        search.done = True
        return
    module = module_name(search.mutant) + ".py"
    statuses = answer.get("results", [])
    for r in statuses:
        if r["status"] not in _UNUSABLE and r["id"] in by_id:
            search.probes += 1
            kind = by_id[r["id"]].kind
            tried[kind] = tried.get(kind, 0) + 1
    golden = answer.get("golden") or {}
    unkept = ""
    if golden.get("error"):
        unkept = (
            "no differing input was small enough to keep its expected values"
            if "too many" in golden["error"]
            else "the original's outputs could not be kept as expected values"
        ) + f" ({golden['error'][:200]})"
    whys = {}
    for status in statuses:
        if status["status"] in _WHY:
            detail = status["detail"].replace(module, kernel_name)
            whys[status["id"]] = f"{_WHY[status['status']]}: {detail}"
            search.differed(whys[status["id"]], unkept)
    if golden.get("outputs") and golden.get("id") in whys:
        search.hit = (by_id[golden["id"]], golden["outputs"], whys[golden["id"]])


def _failed_job(
    result: JobResult,
    entries: list[tuple[_Search, list[Candidate]]],
    unusable: dict[str, str],
    spend: dict,
) -> None:
    """A compare job that timed out, crashed or failed: the marker lines say which
    candidate on which side did it. That side alone pays: a mutant that hangs or
    crashes has its finding (``hang``), a candidate the original cannot run is left
    out; the other survivors of the job run their candidates again. With no side
    named, each survivor of a shared job runs again alone; one alone is done."""
    by_module = {module_name(s.mutant): (s, batch) for s, batch in entries}
    markers = _MARKER.findall(result.error) if result.status in _LOST else []
    what = "hangs" if result.status is JobStatus.TIMEOUT else "crashes"
    culprit = None
    if markers:
        cid, side = markers[-1]
        if side == "original":
            unusable[cid] = f"the original {what} on this input"
            culprit = "original"
        elif side in by_module and any(c.id == cid for c in by_module[side][1]):
            search, batch = by_module[side]
            candidate = next(c for c in batch if c.id == cid)
            search.consume(batch)
            search.hang = (candidate, f"the mutant {what} on this input")
            search.probes += 1
            search.differed(f"the mutant {what} on {candidate.call}")
            culprit = side
    if culprit is None and len(entries) == 1:
        search = entries[0][0]
        search.note = f"probe job failed: {summarize_error(result.error) or result.status.value}"
        search.done = True
        return
    for search, _ in entries:
        if module_name(search.mutant) != culprit:
            search.solo = search.solo or culprit is None
            spend["retried"] += 1


_LOST = (JobStatus.TIMEOUT, JobStatus.CRASH)


def _groups(searches: list[_Search], workers: int, est: dict[str, float]) -> list[list[_Search]]:
    """Survivors into compare jobs: at most ``PER_JOB`` each, at least as many jobs as
    workers (a multiple of them where there are enough survivors), the estimated work
    balanced (longest first, onto the lightest job)."""
    alone = [[s] for s in searches if s.solo]
    rest = [s for s in searches if not s.solo]
    if not rest:
        return alone
    n = max(math.ceil(len(rest) / PER_JOB), min(workers, len(rest)))
    n = min(len(rest), math.ceil(n / workers) * workers)
    groups: list[list[_Search]] = [[] for _ in range(n)]
    loads = [0.0] * n
    for s in sorted(rest, key=lambda s: -est[s.mutant.id]):
        i = min(range(n), key=lambda i: (len(groups[i]) >= PER_JOB, loads[i]))
        groups[i].append(s)
        loads[i] += est[s.mutant.id]
    return alone + [g for g in groups if g]


def _original_jobs(
    ctx: StageContext, needed: list[Candidate], ship: bool = False
) -> dict[str, tuple[Job, list]]:
    """The original on candidates not run yet, once each, split over the workers;
    ``ship``: the first round's (``_original_job``)."""
    n = min(len(needed), ctx.workers)
    chunks: list[list[Candidate]] = [[] for _ in range(n)]
    for i, c in enumerate(needed):
        chunks[i % n].append(c)
    return {
        f"original-{i}": (_original_job(ctx, chunk, golden=False, ship=ship), chunk)
        for i, chunk in enumerate(chunks)
    }


def _read_original(
    result: JobResult, chunk: list[Candidate], known: dict[str, dict], unusable: dict[str, str]
) -> int:
    """What the original did on ``chunk`` into ``known`` (digests, outputs sent whole),
    or ``unusable``; how many of them came with their outputs whole."""
    data = _data(result)
    if data is not None:
        shipped = 0
        for cid, record in (data.get("originals") or {}).items():
            if record.get("status") == "ok":
                known[cid] = {k: record[k] for k in ("digest", "kept", "outputs") if k in record}
                shipped += "outputs" in record
            else:
                unusable[cid] = record.get("detail") or record.get("status", "")
        return shipped
    markers = _MARKER.findall(result.error) if result.status in _LOST else []
    what = "hangs" if result.status is JobStatus.TIMEOUT else "crashes"
    if markers and markers[-1][1] == "original":
        unusable[markers[-1][0]] = f"the original {what} on this input"
    else:
        why = summarize_error(result.error) or result.status.value
        for c in chunk:
            unusable.setdefault(c.id, f"probe job failed: {why}")
    return 0


def _spent(spend: dict, result: JobResult, cached: bool) -> None:
    """A compare job into the spend: jobs, and (run now, not from the cache) the runs."""
    spend["jobs"] += 1
    if cached:
        spend["cached_jobs"] += 1
        return
    runs = (_data(result) or {}).get("runs") or {}
    spend["original_runs"] += int(runs.get("original", 0))
    spend["mutant_runs"] += int(runs.get("mutant", 0))


def _test_for(ctx: StageContext, search: _Search) -> TestFile:
    assert search.hit is not None
    candidate, outputs, why = search.hit
    mutant = search.mutant
    stem = f"{proving.file_stem(ctx)}_probe_{mutant.id}"
    taken = proving.taken_names(ctx)
    name = f"test_{candidate.function}_{candidate.slug}"
    name = re.sub(r"\W", "_", name)
    source = render_test(
        module=_module(ctx),
        kernel_name=ctx.kernel.name,
        candidate=candidate,
        outputs=outputs,
        golden_name=stem + ".json",
        test_name=name,
        why=(
            f"Mutant {mutant.id} ({mutant.operator}, line {mutant.line}: "
            f"`{mutant.before}` -> `{mutant.after}`) fails it: {why[:300]}"
        ),
    )
    source = proving.rename_taken(source, taken)
    return TestFile(
        path="",
        name=stem + ".py",
        source=source,
        origin="probe",
        data=((stem + ".json", golden_text(outputs)),),
    )


def probe_stage(ctx: StageContext, survivors: list[Mutant]) -> Iterator[Event]:
    """Separate each survivor from the original with an input the own check never tried."""
    start = time.perf_counter()
    summary = _summary(ctx)
    spend = summary.setdefault("spend", dict.fromkeys(SPEND, 0))
    for key in SPEND:
        spend.setdefault(key, 0)
    meter = None
    try:
        with ctx.metered() as meter:
            yield from _probe(ctx, survivors, summary, spend, meter)
    finally:
        spend["originals_saved"] = max(0, spend["mutant_runs"] - spend["original_runs"])
        spend["seconds"] = round(spend["seconds"] + time.perf_counter() - start, 2)
        if meter is not None:
            spend["job_s"] = round(spend["job_s"] + meter[0], 2)
            spend["path_s"] = round(spend.get("path_s", 0.0) + meter[1], 2)
        # the stage's own record of this run of it, into the run's ``writers.probe``
        ctx.ledger.update_section("writers", lambda had: {**had, "probe": summary}, {"notes": []})


#: the probe's spend in the run's ``writers.probe.spend``
SPEND = (
    "planned",  # candidates planned, all survivors together (up to --probes each)
    "mutant_runs",  # candidate runs on a mutant
    "original_runs",  # candidate runs on the original
    "originals_saved",  # mutant runs with no original run of their own
    "unusable",  # candidates the original rejects or varies on: no survivor runs them
    "jobs",  # compare jobs (the proofs of hits not counted)
    "cached_jobs",  # of them served from the cache (their runs not counted)
    "retried",  # survivors whose candidates ran again after a shared job failed
    "seconds",  # the probe's wall time, proofs included
    "job_s",  # its sandbox jobs' seconds (at their time when run), against ``budget_s``
    "path_s",  # its rounds of jobs one after the other (``JobRunner.metered``)
    "ahead",  # the original's jobs on the first inputs started beside the mutant phase
    # inputs whose original outputs came back whole (run twice alike) and went to the
    # compare jobs: a mutant differing there runs no original of its own
    "shipped",
)


def _time_budget(ctx: StageContext) -> tuple[float | None, str]:
    """The probe's time in seconds of jobs, and how to say it: ``--probe-time``, or
    ``BUDGET_PART`` of what the mutants' jobs took (None: no limit but the number of
    inputs)."""
    given = ctx.settings.writers.probe_time
    if given == 0:
        return None, ""
    if given is not None:
        return given, f"the probe's time ({given:g} s of jobs, --probe-time)"
    mutants = BUDGET_PART * ctx.mutant_job_seconds()
    return mutants, (
        f"the probe's time ({mutants:.1f} s of jobs, {BUDGET_PART:g} of what the mutants' took)"
    )


def _fit(
    active: list[_Search],
    left: float,
    scale: float,
    known: dict,
    unusable: dict,
    floor: bool = False,
) -> None:
    """After its first round (which runs whatever the budget), each survivor's next round
    is what fits its share of the time left (``left`` seconds of jobs): its candidates'
    estimates times ``scale`` (the probe's jobs so far, measured over estimated), on the
    mutant's side times its slowness, plus the original's run where it has not run yet.
    Under the budget's ``floor``, a round also runs every kind the survivor never tried."""
    share = max(0.0, left) / max(1, len(active))
    for search in active:
        search.cap = None
        if not search.ran:
            continue
        cost, n = 0.0, 0
        for c in search.batch(unusable):
            cost += c.est_s * scale * (search.slow + (c.id not in known))
            if cost > share:
                break
            n += 1
        search.cap = max(n, _untried(search, unusable)) if floor else n


def _untried(search: _Search, unusable: dict) -> int:
    """How much of its next batch a round must run to try every kind ``search`` never ran
    (the batch holds each kind's best candidate before any kind's second)."""
    seen = {c.kind for c in search.ran}
    last = 0
    for i, c in enumerate(search.batch(unusable)):
        if c.kind not in seen:  # the best input of a kind never tried
            seen.add(c.kind)
            last = i + 1
    return last


def _probe(
    ctx: StageContext, survivors: list[Mutant], summary: dict, spend: dict, meter: list[float]
) -> Iterator[Event]:
    yield from _Probing(ctx, survivors, summary, spend, meter).events()


class _Probing:
    """One run of the probe stage over its survivors: the rounds of inputs, the original's
    runs they share, the budget they spend, the proofs of what they find."""

    def __init__(
        self,
        ctx: StageContext,
        survivors: list[Mutant],
        summary: dict,
        spend: dict,
        meter: list[float],
    ) -> None:
        self.ctx, self.survivors, self.summary, self.spend, self.meter = (
            ctx, survivors, summary, spend, meter,
        )  # fmt: skip
        self.budget = max(1, ctx.settings.writers.probes)
        self.limit, self.limit_text = _time_budget(ctx)
        #: below it (seconds of the probe's jobs), a round tries every kind never tried
        self.floor = ctx.settings.writers.probe_time or FLOOR_S
        self.started = meter[0]
        self.path_limit: float | None = None
        if self.limit is not None:
            spend["budget_s"] = round(spend.get("budget_s", 0.0) + self.limit, 3)
            # as long on the wall clock as the mutants' phase: its rounds one after the other
            # may take the budget's seconds over the workers (``JobRunner.metered``'s path)
            self.path_limit = meter[1] + self.limit / max(1, ctx.workers)
            self.limit += meter[0]  # the meter counts from the stage's start
        self.share = ctx.settings.writers.probe_share
        self.searches: dict[str, _Search] = {}
        self.tried: dict[str, int] = summary.setdefault("probes_by_trigger", {})
        self.kills: dict[str, int] = summary.setdefault("kills_by_trigger", {})
        self.known: dict[str, dict] = {}  # the original's runs: candidate id -> digest, outputs
        self.unusable: dict[str, str] = {}  # candidate id -> why no survivor runs it
        self.clock = [0.0, 0.0]  # the probe's harness jobs: estimated, measured seconds
        self.refit = True  # off for the round right after the original ran its candidates
        self.first = True  # the first round: the original's runs started ahead are taken there

    def events(self) -> Iterator[Event]:
        ctx, survivors = self.ctx, self.survivors
        many = f"{len(survivors)} survivor" + ("s" if len(survivors) != 1 else "")
        yield WriterNote("probe", f"probing {many} (up to {self.budget} inputs each)")
        calls, note = capture(ctx)
        yield WriterNote("probe", note, "info" if calls else "warning")
        if not calls:
            for m in survivors:
                ctx.ledger.put_row(m.id, "probe", {"probes": 0, "result": note})
            return
        yield from self._plan(calls)
        self.summary["survivors"] = self.summary.get("survivors", 0) + len(survivors)
        while True:
            active = self._active()
            if not active:
                break
            if self.share:
                ran = self._originals_first(active)
                if ran is None:
                    return  # cancelled
                if ran:
                    continue  # the batches again, without what the original rejects
                groups, originals = self._groups(active)
            else:
                groups, originals = [[s] for s in active], {}
            if not self._round(groups, originals):
                return  # cancelled
            yield from self._proofs()
        yield from self._results()

    def _plan(self, calls: list[dict]) -> Iterator[Event]:
        """A search per survivor over the calls that launch its function (or a kernel that
        calls it); a survivor no call reaches is said so."""
        ctx = self.ctx
        for m in self.survivors:
            search = _search(ctx, m, calls)
            if search is None:
                launched = sorted({k for c in calls for k in c.get("kernels", ())})
                calls_of = (
                    "the project tests' calls"
                    if ctx.kernel.project
                    else "the own check's wrapper calls"
                )
                text = (
                    f"{calls_of} never launch {m.function} "
                    f"(they launch {', '.join(launched) or 'nothing'}): nothing to vary"
                )
                ctx.ledger.put_row(m.id, "probe", {"probes": 0, "result": text})
                yield WriterNote("probe", text, mutant_id=m.id)
                continue
            self.searches[m.id] = search
            self.spend["planned"] += len(search.queue)
            search.slow = _slowness(ctx, m)

    def _active(self) -> list[_Search]:
        """The searches with inputs left to run this round, each round fitted to its share of
        the time left (a survivor out of time says so and stops)."""
        unusable, meter = self.unusable, self.meter
        active = [
            s
            for s in self.searches.values()
            if not s.done
            and s.hit is None
            and s.hang is None
            and self.ctx.ledger.verdict(s.mutant.id) is Verdict.SURVIVED
            and s.batch(unusable)
        ]
        if self.limit is None:
            return active
        if self.refit:
            clock = self.clock
            scale = min(50.0, max(0.5, clock[1] / clock[0])) if clock[0] else 1.0
            assert self.path_limit is not None
            # a round takes its slowest job: plan it to a part of the path that is left
            # (``PATH_MARGIN``), the rest covers estimates that came out short
            path_left = PATH_MARGIN * (self.path_limit - meter[1]) * self.ctx.workers
            left = min(self.limit - meter[0], path_left)
            floor = meter[0] - self.started < self.floor
            _fit(active, left, scale, self.known, unusable, floor)
        for s in active:
            if not s.batch(unusable):
                s.out_of_time, s.done = self.limit_text, True
        return [s for s in active if not s.done]

    def _originals_first(self, active: list[_Search]) -> bool | None:
        """The original first, once per candidate not run yet (all survivors share it): True
        when it ran (the round's batches are planned again), False when nothing needed it,
        None when the run was cancelled."""
        ctx, spend, known, unusable = self.ctx, self.spend, self.known, self.unusable
        for s in active:
            s.reorder(self.kills)
        needed = {c.id: c for s in active for c in s.batch(unusable) if c.id not in known}
        if not needed or not self.refit:  # once a round: what a rejected one's place
            self.refit = True  # brings in runs in the compare job, beside the mutants
            return False
        before = len(unusable)
        originals = _taken_ahead(ctx) if self.first else {}
        if not self.first or not originals:
            originals = _original_jobs(ctx, list(needed.values()), ship=self.first)
        self.first = False
        spend["ahead"] += sum(k.startswith("ahead-") for k in originals)
        results = proving.run_all(ctx, {k: job for k, (job, _) in originals.items()})
        if len(results) < len(originals):
            return None
        for key, (result, cached) in results.items():
            _spent(spend, result, cached)
            _clocked(self.clock, sum(c.est_s for c in originals[key][1]), result)
            spend["shipped"] += _read_original(result, originals[key][1], known, unusable)
        ran = {c.id for _, chunk in originals.values() for c in chunk}
        for cid in needed:
            if cid in ran and cid not in known:
                unusable.setdefault(cid, "the original's run on it was not recorded")
        spend["unusable"] += len(unusable) - before
        self.refit = False  # the shares stand: what it ran is part of them
        return True

    def _groups(self, active: list[_Search]) -> tuple[list[list[_Search]], dict]:
        """The round's compare jobs' survivors, and the original's jobs on the next batches
        beside them (not in the first round: most survivors that die, die there)."""
        known, unusable = self.known, self.unusable
        groups = _groups(active, self.ctx.workers, {s.mutant.id: _work(s) for s in active})
        ahead = {
            c.id: c
            for s in active
            for c in s.pending[len(s.batch(unusable)) :][:BATCH]
            if c.id not in known and c.id not in unusable and s.ran
        }
        return groups, (_original_jobs(self.ctx, list(ahead.values())) if ahead else {})

    def _round(self, groups: list[list[_Search]], originals: dict) -> bool:
        """One round: the compare jobs and the original's beside them, read into the
        searches; False when the run was cancelled."""
        ctx, spend, known, unusable = self.ctx, self.spend, self.known, self.unusable
        entries = {str(i): [(s, s.batch(unusable)) for s in g] for i, g in enumerate(groups)}
        jobs = {
            key: _compare_job(ctx, [(s.mutant, b) for s, b in group], known if self.share else {})
            for key, group in entries.items()
        }
        jobs.update({k: job for k, (job, _) in originals.items()})
        results = proving.run_all(ctx, jobs)
        if len(results) < len(jobs):
            return False
        for key, (result, cached) in results.items():
            _spent(spend, result, cached)
            before = len(unusable)
            if key in originals:
                _clocked(self.clock, sum(c.est_s for c in originals[key][1]), result)
                spend["shipped"] += _read_original(result, originals[key][1], known, unusable)
            else:
                _clocked(self.clock, _estimate(entries[key], known), result)
                self._compared(result, entries[key])
            spend["unusable"] += len(unusable) - before
        return True

    def _compared(self, result: JobResult, entries: list[tuple[_Search, list[Candidate]]]):
        """A compare job's answer into its survivors' searches."""
        data = _data(result)
        if data is None:
            _failed_job(result, entries, self.unusable, self.spend)
            return
        if self.share:
            for cid, record in (data.get("originals") or {}).items():
                if record.get("status") in ("error", "unstable") and cid not in self.unusable:
                    self.unusable[cid] = record.get("detail", "")
        for search, batch in entries:
            answer = (data.get("mutants") or {}).get(module_name(search.mutant)) or {
                "error": "the job's answer has no part for this mutant"
            }
            _read_mutant(search, batch, answer, self.ctx.kernel.name, self.tried)

    def _proofs(self) -> Iterator[Event]:
        """What the round found, proved: a hang's golden outputs, a hit's written test."""
        ctx, searches, meter = self.ctx, self.searches, self.meter
        for search in searches.values():
            if search.hang is not None and search.hit is None:
                spent = self.limit is not None and (
                    meter[0] >= self.limit or meter[1] >= self.path_limit
                )
                if search.slow >= SLOW and spent:
                    # a mutant that is slower everywhere hangs where the inputs are big;
                    # proving it costs its whole time limit and the oracle's, and shows
                    # a difference only if its outputs differ too
                    search.hang = None
                    search.unkept = (
                        f"it runs {search.slow:.0f}x the original's time on the own check, "
                        f"and {self.limit_text} ran out before its hang was proved"
                    )
                    search.done = True
                    continue
                yield from _golden_for_hang(ctx, search)
            if search.hit is None or ctx.ledger.verdict(search.mutant.id) is not Verdict.SURVIVED:
                continue
            # the other survivors seen to differ: their evidence goes in the proof's round
            likely = {s.mutant.id for s in searches.values() if s.differs or s.hit}
            # those that hung on an input, or run slower everywhere: the test may run
            # long on them (``proving.prove_killer``'s ``slow``)
            slow = {s.mutant.id for s in searches.values() if s.hung or s.slow >= SLOW}
            others = [m for m in self.survivors if m.id not in searches or not searches[m.id].alike]
            yield from _prove(ctx, search, others, likely, slow, self.kills)

    def _results(self) -> Iterator[Event]:
        """Each survivor still alive: what its search found, in its row and said."""
        for search in self.searches.values():
            mid = search.mutant.id
            if self.ctx.ledger.verdict(mid) is not Verdict.SURVIVED:
                continue
            text = search.result()
            details = {"probes": search.probes, "result": text}
            if search.differs:
                details["differs"] = search.differs
            self.ctx.ledger.put_row(mid, "probe", details)
            yield WriterNote("probe", text, "warning" if search.differs else "info", mid)


def _clocked(clock: list[float], estimate: float, result: JobResult) -> None:
    """A harness job's estimated seconds and its measured seconds."""
    clock[0] += estimate
    clock[1] += result.duration_s


def _estimate(entries: list[tuple[_Search, list[Candidate]]], known: dict) -> float:
    """A compare job's estimated seconds: each mutant on its candidates (times its
    slowness), the original once on each candidate it has not run before."""
    union = {c.id: c for _, batch in entries for c in batch if c.id not in known}
    mutants = sum(c.est_s * s.slow for s, batch in entries for c in batch)
    return mutants + sum(c.est_s for c in union.values())


def _slowness(ctx: StageContext, mutant: Mutant) -> float:
    """The mutant's own job over the original's (1 to 100; 1 where either is unknown)."""
    outcome = ctx.ledger.outcome(mutant.id)
    original = ctx.baseline.duration_s if ctx.baseline is not None else 0.0
    if outcome is None or original <= 0 or outcome.duration_s <= 0:
        return 1.0
    return min(100.0, max(1.0, outcome.duration_s / original))


def _work(search: _Search) -> float:
    return search.slow * sum(
        c.est_s for c in search.pending[: BATCH if search.ran else FIRST_BATCH]
    )


def _golden_for_hang(ctx: StageContext, search: _Search) -> Iterator[Event]:
    """The mutant hung or crashed on a candidate: get the original's outputs for it."""
    assert search.hang is not None
    candidate, why = search.hang
    search.hang = None
    job = _original_job(ctx, [candidate], golden=True)
    result = proving.run_all(ctx, {"golden": job}).get("golden")
    data = _data(result[0]) if result else None
    golden = (data or {}).get("golden") or {}
    if golden.get("outputs"):
        search.hit = (candidate, golden["outputs"], why)
        search.hung = True
    else:
        search.unkept = "the original's outputs on that input could not be recorded"
        yield WriterNote(
            "probe",
            f"{why}, but the original's outputs could not be recorded",
            "warning",
            search.mutant.id,
        )


def _prove(
    ctx: StageContext,
    search: _Search,
    survivors: list[Mutant],
    likely: set[str],
    slow: set[str],
    kills: dict[str, int],
) -> Iterator[Event]:
    mutant = search.mutant
    test = _test_for(ctx, search)
    # the search ran the original on this input: its time is known, the mutant runs
    # beside, and the test on the other survivors (evidence for those ``likely`` to die)
    assert search.hit is not None
    proof = proving.prove_killer(
        ctx,
        test,
        mutant,
        expected_s=search.hit[0].est_s,
        others=survivors,
        likely=likely,
        slow=slow,
    )
    if not proof.ok:
        attempt = proving.add_attempt(
            ctx,
            mutant.id,
            {"by": "probe", "file": test.name, "source": test.source, "why": proof.why},
        )
        yield TestRejected("probe", attempt, proof.why, mutant.id)
        search.unkept = f"no test written from them passed the proof ({proof.why[:200]})"
        search.hit = None  # search on with the next batch
        search.alike = mutant.id in slow and proof.why.startswith("not a kill")
        return
    candidate = search.hit[0] if search.hit is not None else None
    for event in proving.accept_killer(ctx, "probe", test, mutant, proof, survivors):
        if isinstance(event, TestAccepted) and candidate is not None:
            _record_trigger(ctx, event, candidate, search.probes, kills)
        yield event


def _record_trigger(
    ctx: StageContext,
    accepted: TestAccepted,
    candidate: Candidate,
    probes: int,
    kills: dict[str, int],
) -> None:
    """Each mutant the probe's test killed: which trigger kind (and input) did it, in its
    ``probe`` row and in the count by trigger kind (``kills``: ``writers.probe``'s)."""
    test = f"{accepted.file}::{accepted.tests[0]}" if accepted.tests else accepted.file
    for mid in accepted.kills:
        row = {
            "trigger": candidate.kind,
            "input": candidate.describe,
            "result": f"killed by {test} ({candidate.kind}: {candidate.describe})",
        }
        if mid == accepted.mutant_id:
            row["probes"] = probes
        else:
            row["result"] += f", written for {accepted.mutant_id}"
        ctx.ledger.put_row(mid, "probe", row)
        kills[candidate.kind] = kills.get(candidate.kind, 0) + 1


def _summary(ctx: StageContext) -> dict:
    """A copy of the run's ``writers.probe`` (what the probe tried and what killed) for
    this run of the stage to add to; ``probe_stage`` puts it back when it ends."""
    writers = ctx.ledger.section("writers", {"notes": []})
    return writers.get("probe") or {"survivors": 0, "kills_by_trigger": {}}
