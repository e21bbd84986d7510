"""The probe writer: no model, the default. Survivors meet inputs the own check never tried.

1. capture: one sandbox job runs the own check with the kernel module's public
   functions wrapped (``harness/probe.capture``): which function, what arguments.
2. search: per survivor, candidates near those calls (``probe_inputs``) run on the
   original and the mutant side by side, in batches, all survivors in parallel
   (``harness/probe.compare``). A difference beyond the dtype's tolerance, an
   exception only the mutant raises, or a bounds violation is a hit; the original's
   outputs on that input come back as golden values.
3. prove: the hit becomes an ordinary pytest file (+ a golden JSON file) that must
   pass the original on every seed and fail the mutant in the sandbox, like any
   killer test; then it runs against the other survivors too.
A survivor the probe cannot separate keeps its verdict: "no difference found on N
probes" is recorded as the probe's claim, never as equivalence. A survivor that
differs on some probe but yields no test (no differing input small enough to keep
its expected values, or no written test that passed the proof) keeps its verdict
too, and the note says that it differs: no equivalence claim then.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from ..events import Event, TestAccepted, TestRejected, WriterNote
from ..harness import probe as harness
from ..kernel_file import TestFile
from ..project import jit_callers
from ..records import Mutant, Verdict
from ..sandbox.job import Check, CheckKind, Job, JobResult, JobStatus
from ..stage import StageContext
from ..verdicts import summarize_error
from . import common
from .probe_inputs import Candidate, candidates, describe_call, golden_text, render_test

BATCH = 8
REQUEST = "_mg_probe.json"
MUTANT_MODULE = "_mg_mutant"
_MARKER = re.compile(re.escape(harness.MARKER) + r" (\S+) (original|mutant)")
_WHY = {
    "differs": "its outputs differ",
    "mutant_error": "it raises where the original does not",
    "bounds": "it accesses memory out of bounds",
}


def _harness_job(ctx: StageContext, request: dict, files: tuple, timeout_s: float) -> Job:
    return Job(
        files=(*files, (REQUEST, json.dumps(request, sort_keys=True))),
        checks=(Check(CheckKind.HARNESS, REQUEST, "probe"),),
        mode=ctx.settings.mode,
        seed=ctx.settings.seed,
        timeout_s=round(timeout_s, 1),
        memory_mb=ctx.settings.memory_mb,
        poison_undefined=ctx.settings.poison_undefined,
    )


def _data(result: JobResult) -> dict | None:
    data = (result.extra or {}).get("harness", {}).get("probe")
    return data if isinstance(data, dict) else None


def capture(ctx: StageContext) -> tuple[list[dict], str]:
    """The own check's wrapper calls (replayable ones), and a note saying what was learned."""
    kernel = ctx.kernel
    request = {
        "entry": "probe:capture",
        "version": harness.VERSION,
        "module": kernel.module,
        "kernel": kernel.name,
        "main": kernel.has_main,
        "tests": bool(kernel.test_functions),
    }
    job = _harness_job(ctx, request, ((kernel.name, kernel.source),), ctx.settings.timeout_s)
    result = common.run_all(ctx, {"capture": job}).get("capture")
    if result is None:
        return [], "the run was cancelled"
    data = _data(result[0])
    if data is None:
        why = summarize_error(result[0].error) or result[0].status.value
        return [], f"could not capture the own check's calls: {why}"
    calls = [c for c in data.get("calls", []) if c.get("launches")]
    if not calls:
        functions = ", ".join(data.get("functions", [])) or "none"
        return [], (
            "the own check calls no public function of the kernel module that launches a "
            f"kernel (public functions: {functions}); nothing to vary"
        )
    shown = "; ".join(describe_call(c) for c in calls[:4])
    more = f" and {len(calls) - 4} more" if len(calls) > 4 else ""
    return calls, f"learned {len(calls)} wrapper calls from the own check: {shown}{more}"


def _compare_job(
    ctx: StageContext,
    mutant: Mutant | None,
    batch: list[Candidate],
    module_source: str | None = None,
) -> Job:
    kernel = ctx.kernel
    request = {
        "entry": "probe:compare",
        "version": harness.VERSION,
        "module": kernel.module,
        "mutant_module": MUTANT_MODULE if mutant is not None else None,
        "candidates": [c.request() for c in batch],
    }
    files: tuple = ((kernel.name, kernel.source),)
    if mutant is not None:
        files += ((MUTANT_MODULE + ".py", mutant.source),)
    sides = 2 if mutant is not None else 1
    work = sum(c.est_s for c in batch) * sides
    limit = min(
        max(10.0, work * ctx.settings.timeout_factor + ctx.settings.timeout_base_s + 2.0),
        max(ctx.settings.timeout_s, 10.0),
    )
    return _harness_job(ctx, request, files, limit)


class _Search:
    """One survivor's search state."""

    def __init__(self, mutant: Mutant, queue: list[Candidate]) -> None:
        self.mutant = mutant
        self.queue = queue
        self.next = 0
        self.probes = 0  # candidates the original accepted and both sides ran
        self.hit: tuple[Candidate, dict, str] | None = None  # candidate, outputs, why
        self.hang: tuple[Candidate, str] | None = None  # needs the original's outputs
        self.done = False
        self.note = ""
        self.differs = 0  # probes on which the mutant differed (a hit or not)
        self.first: str = ""  # what the first of them showed
        self.unkept: str = ""  # why the last difference did not become a test

    def differed(self, what: str, unkept: str = "") -> None:
        self.differs += 1
        self.first = self.first or what
        self.unkept = unkept or self.unkept

    def result(self) -> str:
        """What the search found, for a survivor it did not separate."""
        if not self.differs:
            return self.note or f"no difference found on {self.probes} probes"
        probes = "probe" if self.differs == 1 else "probes"
        text = (
            f"the mutant differs on {self.differs} {probes} (first: {self.first[:300]}), "
            f"but {self.unkept or 'no test came of it'}"
        )
        return f"{text}; then {self.note}" if self.note else text

    def batch(self) -> list[Candidate]:
        return self.queue[self.next : self.next + BATCH]


def _read_compare(
    search: _Search,
    batch: list[Candidate],
    result: JobResult,
    kernel_name: str,
    tried: dict[str, int] | None = None,
) -> None:
    """Read one compare job into ``search``; ``tried`` counts the probes run (both sides)
    by trigger kind."""
    by_id = {c.id: c for c in batch}
    search.next += len(batch)
    data = _data(result)
    if data is not None:
        statuses = data.get("results", [])
        search.probes += sum(1 for r in statuses if r["status"] != "original_error")
        for r in statuses:
            if r["status"] != "original_error" and r["id"] in by_id and tried is not None:
                kind = by_id[r["id"]].kind
                tried[kind] = tried.get(kind, 0) + 1
        golden = data.get("golden") or {}
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
                detail = status["detail"].replace(MUTANT_MODULE + ".py", kernel_name)
                whys[status["id"]] = f"{_WHY[status['status']]}: {detail}"
                search.differed(whys[status["id"]], unkept)
        if golden.get("outputs") and golden.get("id") in whys:
            search.hit = (by_id[golden["id"]], golden["outputs"], whys[golden["id"]])
        return
    if result.status in (JobStatus.TIMEOUT, JobStatus.CRASH):
        markers = _MARKER.findall(result.error)
        if markers and markers[-1][1] == "mutant" and markers[-1][0] in by_id:
            what = "hangs" if result.status is JobStatus.TIMEOUT else "crashes"
            search.hang = (by_id[markers[-1][0]], f"the mutant {what} on this input")
            search.probes += 1
            search.differed(f"the mutant {what} on {by_id[markers[-1][0]].call}")
        return
    search.note = f"probe job failed: {summarize_error(result.error) or result.status.value}"
    search.done = True


def _test_for(ctx: StageContext, search: _Search) -> TestFile:
    assert search.hit is not None
    candidate, outputs, why = search.hit
    mutant = search.mutant
    stem = f"{common.file_stem(ctx)}_probe_{mutant.id}"
    taken = common.taken_names(ctx)
    name = f"test_{candidate.function}_{candidate.slug}"
    name = re.sub(r"\W", "_", name)
    source = render_test(
        module=ctx.kernel.module,
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
    source = common.rename_taken(source, taken)
    return TestFile(
        path="",
        name=stem + ".py",
        source=source,
        origin="probe",
        data=((stem + ".json", golden_text(outputs)),),
    )


def probe_stage(ctx: StageContext, survivors: list[Mutant]) -> Iterator[Event]:
    """Separate each survivor from the original with an input the own check never tried."""
    budget = max(1, ctx.settings.writers.probes)
    yield WriterNote("probe", f"probing {len(survivors)} survivors (up to {budget} inputs each)")
    calls, note = capture(ctx)
    yield WriterNote("probe", note, "info" if calls else "warning")
    if not calls:
        for m in survivors:
            ctx.ledger.put_row(m.id, "probe", {"probes": 0, "result": note})
        return
    searches = {}
    for m in survivors:
        # Only calls that launch the mutated function (or a kernel calling it) can show it.
        reach = jit_callers(ctx.kernel.source, m.function)
        reaching = [c for c in calls if reach & set(c.get("kernels", ()))]
        if not reaching:
            launched = sorted({k for c in calls for k in c.get("kernels", ())})
            text = (
                f"the own check's wrapper calls never launch {m.function} "
                f"(they launch {', '.join(launched) or 'nothing'}): nothing to vary"
            )
            ctx.ledger.put_row(m.id, "probe", {"probes": 0, "result": text})
            yield WriterNote("probe", text, mutant_id=m.id)
            continue
        searches[m.id] = _Search(
            m,
            candidates(
                reaching, m.family, budget, ctx.settings.seed, ctx.settings.writers.probe_triggers
            ),
        )
    summary = _summary(ctx)
    summary["survivors"] = summary.get("survivors", 0) + len(survivors)
    tried: dict[str, int] = summary.setdefault("probes_by_trigger", {})
    while True:
        active = [
            s
            for s in searches.values()
            if not s.done
            and s.hit is None
            and s.hang is None
            and ctx.ledger.verdict(s.mutant.id) is Verdict.SURVIVED
            and s.batch()
        ]
        if not active:
            break
        batches = {s.mutant.id: s.batch() for s in active}
        jobs = {mid: _compare_job(ctx, searches[mid].mutant, b) for mid, b in batches.items()}
        results = common.run_all(ctx, jobs)
        if len(results) < len(jobs):
            return  # cancelled
        for mid, (result, _) in results.items():
            _read_compare(searches[mid], batches[mid], result, ctx.kernel.name, tried)
        for search in searches.values():
            if search.hang is not None and search.hit is None:
                yield from _golden_for_hang(ctx, search)
            if search.hit is None or ctx.ledger.verdict(search.mutant.id) is not Verdict.SURVIVED:
                continue
            yield from _prove(ctx, search, survivors)
    for search in searches.values():
        mid = search.mutant.id
        if ctx.ledger.verdict(mid) is not Verdict.SURVIVED:
            continue
        text = search.result()
        details = {"probes": search.probes, "result": text}
        if search.differs:
            details["differs"] = search.differs
        ctx.ledger.put_row(mid, "probe", details)
        if search.probes and not search.note and not search.differs:
            # only where every probe ran both sides and none differed
            kinds = ", ".join(dict.fromkeys(c.kind for c in search.queue[: search.next]))
            common.claims(ctx, mid).append(
                {
                    "by": "probe",
                    "claim": "equivalent",
                    "reason": f"no difference found on {search.probes} probes "
                    f"(trigger kinds {kinds}, near the own check's calls)",
                }
            )
        yield WriterNote("probe", text, "warning" if search.differs else "info", mid)


def _golden_for_hang(ctx: StageContext, search: _Search) -> Iterator[Event]:
    """The mutant hung or crashed on a candidate: get the original's outputs for it."""
    assert search.hang is not None
    candidate, why = search.hang
    search.hang = None
    job = _compare_job(ctx, None, [candidate])
    result = common.run_all(ctx, {"golden": job}).get("golden")
    data = _data(result[0]) if result else None
    golden = (data or {}).get("golden") or {}
    if golden.get("outputs"):
        search.hit = (candidate, golden["outputs"], why)
    else:
        search.unkept = "the original's outputs on that input could not be recorded"
        yield WriterNote(
            "probe",
            f"{why}, but the original's outputs could not be recorded",
            "warning",
            search.mutant.id,
        )


def _prove(ctx: StageContext, search: _Search, survivors: list[Mutant]) -> Iterator[Event]:
    mutant = search.mutant
    test = _test_for(ctx, search)
    proof = common.prove_killer(ctx, test, mutant)
    if not proof.ok:
        tried = common.attempts(ctx, mutant.id)
        attempt = 1 + sum(1 for a in tried if a.get("by") == "probe")
        tried.append(
            {
                "by": "probe",
                "attempt": attempt,
                "file": test.name,
                "source": test.source,
                "why": proof.why,
            }
        )
        yield TestRejected("probe", attempt, proof.why, mutant.id)
        search.unkept = f"no test written from them passed the proof ({proof.why[:200]})"
        search.hit = None  # search on with the next batch
        return
    candidate = search.hit[0] if search.hit is not None else None
    for event in common.accept_killer(ctx, "probe", test, mutant, proof, survivors):
        if isinstance(event, TestAccepted) and candidate is not None:
            _record_trigger(ctx, event, candidate, search.probes)
        yield event


def _record_trigger(
    ctx: StageContext, accepted: TestAccepted, candidate: Candidate, probes: int
) -> None:
    """Each mutant the probe's test killed: which trigger kind (and input) did it, in its
    ``probe`` row and in the run's count by trigger kind (``writers.probe``)."""
    test = f"{accepted.file}::{accepted.tests[0]}" if accepted.tests else accepted.file
    summary = _summary(ctx)
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
        kills = summary.setdefault("kills_by_trigger", {})
        kills[candidate.kind] = kills.get(candidate.kind, 0) + 1


def _summary(ctx: StageContext) -> dict:
    """The run's ``writers.probe``: what the probe tried and what killed."""
    writers = ctx.ledger.section("writers", {"notes": []})
    return writers.setdefault("probe", {"survivors": 0, "kills_by_trigger": {}})
