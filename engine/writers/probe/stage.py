"""The probe's stage: capture the calls, plan a search per survivor, run its rounds within
the budget, prove each hit's test (``proving``) and say what each search found."""

from __future__ import annotations

import re
import time
from collections.abc import Generator, Iterator

from ...events import Event, TestAccepted, TestRejected, WriterNote
from ...job import Job, JobResult
from ...jobs import Meter
from ...kernel_file import TestFile
from ...records import Mutant, Verdict
from ...stage import StageContext
from ...verdicts import summarize_error
from .. import proving, reading
from .budget import Budget, Spend
from .inputs import Candidate, describe_call
from .jobs import (
    answer_of,
    calls_of,
    capture_job,
    compare_job,
    kernel_module,
    module_name,
    original_job,
    original_jobs,
)
from .search import (
    BATCH,
    Search,
    estimate,
    failed_job,
    fit,
    into_jobs,
    new_search,
    read_mutant,
    read_original,
    slowness,
    work,
)
from .text import golden_text, render_test

#: a mutant this many times slower than the original on the own check: its hangs on
#: bigger inputs are proved only while the probe's time lasts
SLOW = 4.0


def capture(ctx: StageContext) -> tuple[list[dict], str]:
    """The own check's wrapper calls (replayable ones), and a note saying what was learned."""
    kernel = ctx.kernel
    result = proving.run_all(ctx, {"capture": capture_job(ctx)}).get("capture")
    if result is None:
        return [], "the run was cancelled"
    data = answer_of(result[0])
    if data is None:
        why = summarize_error(result[0].error) or result[0].status.value
        return [], f"could not capture the own check's calls: {why}"
    calls = calls_of(data)
    source, verb = (
        ("the project's tests", "call")
        if kernel.project is not None
        else ("the own check", "calls")
    )
    if not calls:
        return [], _nothing_to_vary(data, source, verb)
    return calls, _learned(calls, source)


def _nothing_to_vary(data: dict, source: str, verb: str) -> str:
    """The note for a capture that found no call to vary: the module's public functions
    it saw, and the errors it met (``data``: the capture's answer)."""
    functions = ", ".join(data.get("functions", [])) or "none"
    errors = "; ".join(data.get("errors") or [])[:300]
    return (
        f"{source} {verb} no public function of the kernel module that launches a "
        f"kernel (public functions: {functions}); nothing to vary"
        + (f" ({errors})" if errors else "")
    )


def _learned(calls: list[dict], source: str) -> str:
    """What the capture learned from ``source``: the calls, a few shown, and the test
    cases they came from."""
    shown = "; ".join(describe_call(c) for c in calls[:4])
    more = f" and {len(calls) - 4} more" if len(calls) > 4 else ""
    came = _cases_came_from(calls)
    launches = sum(1 for c in calls if c.get("launch"))
    what = f"{len(calls)} wrapper calls" + (
        f" ({launches} of them kernel launches: no public function of the module was on their path)"
        if launches
        else ""
    )
    return f"learned {what} from {source}: {shown}{more}{came}"


def _cases_came_from(calls: list[dict]) -> str:
    """`` (from N test cases: a, b, c, ...)`` naming the test cases of ``calls``; "" if none."""
    cases = sorted({c["case"] for c in calls if c.get("case")})
    if not cases:
        return ""
    return f" (from {len(cases)} test cases: {', '.join(cases[:3])}" + (
        ", ...)" if len(cases) > 3 else ")"
    )


#: what ``originals_ahead`` hands on to the probe's first round (``StageContext.hand_on``)
AHEAD = "probe: the original's jobs started ahead"


def originals_ahead(ctx: StageContext, captured: JobResult) -> None:
    """With the capture's answer, beside the mutant phase: start the original's jobs on
    the first inputs of every mutant the calls reach, whatever its verdict so far (the
    first round's compare jobs need them first). Not only the survivors known by then:
    which those are follows the machine's load, and with them the first round's jobs, the
    seconds they cost the budget and so the inputs the probe gets to try (on a busy
    machine it wrote no test where idle it wrote two). The candidates of mutants of one
    function and family are the same, so the set grows little. The probe's first round
    takes them (``_taken_ahead``)."""
    data = answer_of(captured)
    calls = calls_of(data) if data is not None else []
    if not calls or not ctx.settings.writers.probe_share:
        return
    needed = _first_inputs(ctx, calls)
    if not needed:
        return
    jobs = list(original_jobs(ctx, list(needed.values()), ship=True).values())
    ctx.hand_on(AHEAD, jobs)
    ctx.start_ahead([job for job, _ in jobs])


def _first_inputs(ctx: StageContext, calls: list[dict]) -> dict[str, Candidate]:
    """The first batch of inputs of every mutant's search over ``calls``, by id, in order."""
    needed: dict[str, Candidate] = {}
    for m in ctx.mutants:
        search = new_search(ctx, m, calls)
        if search is not None:
            needed.update((c.id, c) for c in search.batch({}) if c.id not in needed)
    return needed


def _never_launched(ctx: StageContext, mutant: Mutant, calls: list[dict]) -> str:
    """The note for a survivor no call reaches: the calls never launch its function,
    and the kernels they do launch."""
    launched = sorted({k for c in calls for k in c.get("kernels", ())})
    calls_of = "the project tests' calls" if ctx.kernel.project else "the own check's wrapper calls"
    return (
        f"{calls_of} never launch {mutant.function} "
        f"(they launch {', '.join(launched) or 'nothing'}): nothing to vary"
    )


def _taken_ahead(ctx: StageContext) -> dict[str, tuple[Job, list]]:
    """The original's jobs started ahead for the first round (``originals_ahead``): they
    cover every survivor's first inputs (the first round's own inputs not among them, a
    rerun's reordered ones, get a job of their own: ``_originals_first``)."""
    started = ctx.take(AHEAD, [])
    return {f"ahead-{i}": (job, chunk) for i, (job, chunk) in enumerate(started)}


def _test_for(ctx: StageContext, search: Search) -> TestFile:
    assert search.hit is not None
    candidate, outputs, why = search.hit
    mutant = search.mutant
    stem = f"{reading.file_stem(ctx)}_probe_{mutant.id}"
    taken = reading.taken_names(ctx)
    name = f"test_{candidate.function}_{candidate.slug}"
    name = re.sub(r"\W", "_", name)
    source = render_test(
        module=kernel_module(ctx),
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
    source = reading.rename_taken(source, taken)
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
    spend = Spend.of(summary.get("spend"))
    summary["spend"] = spend.to_json()  # its place in the record; filled in at the end
    meter = None
    try:
        with ctx.metered() as meter:
            yield from _Probing(ctx, survivors, summary, spend, meter).events()
    finally:
        spend.ended(time.perf_counter() - start, meter)
        summary["spend"] = spend.to_json()
        # the stage's own record of this run of it, into the run's ``writers.probe``
        ctx.ledger.update_section("writers", lambda had: {**had, "probe": summary}, {"notes": []})


class _Probing:
    """One run of the probe stage over its survivors: the rounds of inputs, the original's
    runs they share, the budget they spend, the proofs of what they find."""

    def __init__(
        self,
        ctx: StageContext,
        survivors: list[Mutant],
        summary: dict,
        spend: Spend,
        meter: Meter,
    ) -> None:
        self.ctx, self.survivors, self.summary, self.spend = ctx, survivors, summary, spend
        self.probes = max(1, ctx.settings.writers.probes)  # inputs a survivor may plan
        self.budget = Budget(ctx, meter, spend)
        self.share = ctx.settings.writers.probe_share
        self.searches: dict[str, Search] = {}
        self.tried: dict[str, int] = summary.setdefault("probes_by_trigger", {})
        self.kills: dict[str, int] = summary.setdefault("kills_by_trigger", {})
        self.known: dict[str, dict] = {}  # the original's runs: candidate id -> digest, outputs
        self.unusable: dict[str, str] = {}  # candidate id -> why no survivor runs it
        self.refit = True  # off for the round right after the original ran its candidates
        self.first = True  # the first round: the original's runs started ahead are taken there

    def events(self) -> Iterator[Event]:
        ctx, survivors = self.ctx, self.survivors
        many = f"{len(survivors)} survivor" + ("s" if len(survivors) != 1 else "")
        yield WriterNote("probe", f"probing {many} (up to {self.probes} inputs each)")
        calls, note = capture(ctx)
        yield WriterNote("probe", note, "info" if calls else "warning")
        if not calls:
            for m in survivors:
                ctx.ledger.put_row(m.id, "probe", {"probes": 0, "result": note})
            return
        yield from self._plan(calls)
        self.summary["survivors"] = self.summary.get("survivors", 0) + len(survivors)
        finished = yield from self._rounds()
        if finished:
            yield from self._results()

    def _rounds(self) -> Generator[Event, None, bool]:
        """The rounds, each with its proofs, while searches have inputs left; False when
        the run was cancelled."""
        while active := self._active():
            if self.share:
                ran = self._originals_first(active)
                if ran is None:
                    return False  # cancelled
                if ran:
                    continue  # the batches again, without what the original rejects
                groups, originals = self._groups(active)
            else:
                groups, originals = [[s] for s in active], {}
            if not self._round(groups, originals):
                return False  # cancelled
            yield from self._proofs()
        return True

    def _plan(self, calls: list[dict]) -> Iterator[Event]:
        """A search per survivor over the calls that launch its function (or a kernel that
        calls it); a survivor no call reaches is said so."""
        ctx = self.ctx
        for m in self.survivors:
            search = new_search(ctx, m, calls)
            if search is None:
                text = _never_launched(ctx, m, calls)
                ctx.ledger.put_row(m.id, "probe", {"probes": 0, "result": text})
                yield WriterNote("probe", text, mutant_id=m.id)
                continue
            self.searches[m.id] = search
            self.spend.planned += len(search.queue)
            search.slow = slowness(ctx, m)

    def _active(self) -> list[Search]:
        """The searches with inputs left to run this round, each round fitted to its share of
        the time left (a survivor out of time says so and stops)."""
        active = [s for s in self.searches.values() if self._has_inputs_left(s)]
        if not self.budget.limited:
            return active
        return self._fitted(active)

    def _fitted(self, active: list[Search]) -> list[Search]:
        """The ``active`` searches whose batch fits their share of the time left (refitted
        unless the original's runs just set the shares); the others are out of time."""
        unusable, budget = self.unusable, self.budget
        if self.refit:
            fit(active, budget.left(), budget.scale(), self.known, unusable, budget.under_floor())
        for s in active:
            if not s.batch(unusable):
                s.out_of_time, s.done = budget.says, True
        return [s for s in active if not s.done]

    def _has_inputs_left(self, s: Search) -> bool:
        """A search still on (no hit, no hang to prove, its mutant alive) with a batch."""
        return (
            not s.done
            and s.hit is None
            and s.hang is None
            and self.ctx.ledger.verdict(s.mutant.id) is Verdict.SURVIVED
            and bool(s.batch(self.unusable))
        )

    def _originals_first(self, active: list[Search]) -> bool | None:
        """The original first, once per candidate not run yet (all survivors share it): True
        when it ran (the round's batches are planned again), False when nothing needed it,
        None when the run was cancelled."""
        known, unusable = self.known, self.unusable
        for s in active:
            s.reorder(self.kills)
        needed = {c.id: c for s in active for c in s.batch(unusable) if c.id not in known}
        if not needed or not self.refit:  # once a round: what a rejected one's place
            self.refit = True  # brings in runs in the compare job, beside the mutants
            return False
        before = len(unusable)
        originals = self._original_jobs(list(needed.values()))
        if not self._run_originals(originals):
            return None
        self._unrecorded_unusable(needed, originals)
        self.spend.unusable += len(unusable) - before
        self.refit = False  # the shares stand: what it ran is part of them
        return True

    def _run_originals(self, originals: dict[str, tuple[Job, list]]) -> bool:
        """Run the original's jobs and read each (``_read_original``); False when the run
        was cancelled."""
        results = proving.run_all(self.ctx, {k: job for k, (job, _) in originals.items()})
        if len(results) < len(originals):
            return False
        for key, (result, cached) in results.items():
            self.spend.job(result, cached)
            self._read_original(result, originals[key][1])
        return True

    def _unrecorded_unusable(self, needed: dict[str, Candidate], originals: dict) -> None:
        """The inputs of ``needed`` the original's jobs ran but left no record of: unusable."""
        ran = {c.id for _, chunk in originals.values() for c in chunk}
        for cid in needed:
            if cid in ran and cid not in self.known:
                self.unusable.setdefault(cid, "the original's run on it was not recorded")

    def _original_jobs(self, needed: list[Candidate]) -> dict[str, tuple[Job, list]]:
        """The original's jobs on ``needed``: in the first round those started ahead
        (``_taken_ahead``), and jobs of their own for the inputs they do not cover."""
        originals = _taken_ahead(self.ctx) if self.first else {}
        covered = {c.id for _, chunk in originals.values() for c in chunk}
        left = [c for c in needed if c.id not in covered]
        if left:
            originals.update(original_jobs(self.ctx, left, ship=self.first))
        self.first = False
        self.spend.ahead += sum(k.startswith("ahead-") for k in originals)
        return originals

    def _read_original(self, result: JobResult, chunk: list[Candidate]) -> None:
        """An original's job on ``chunk``: its time into the budget, what it learned of each
        input into ``known`` (or why it is unusable)."""
        self.budget.clocked(sum(c.est_s for c in chunk), result)
        self.spend.shipped += read_original(result, chunk, self.known, self.unusable)

    def _groups(self, active: list[Search]) -> tuple[list[list[Search]], dict]:
        """The round's compare jobs' survivors, and the original's jobs on the next batches
        beside them (not in the first round: most survivors that die, die there)."""
        groups = into_jobs(active, self.ctx.workers, {s.mutant.id: work(s) for s in active})
        ahead = self._next_batches(active)
        return groups, (original_jobs(self.ctx, list(ahead.values())) if ahead else {})

    def _next_batches(self, active: list[Search]) -> dict[str, Candidate]:
        """The inputs of the searches' next batches (of those that ran one) the original
        has not run and that are not unusable, by id: its jobs beside the round run them."""
        known, unusable = self.known, self.unusable
        return {
            c.id: c
            for s in active
            for c in s.pending[len(s.batch(unusable)) :][:BATCH]
            if c.id not in known and c.id not in unusable and s.ran
        }

    def _round(self, groups: list[list[Search]], originals: dict) -> bool:
        """One round: the compare jobs and the original's beside them, read into the
        searches; False when the run was cancelled."""
        ctx, known, unusable = self.ctx, self.known, self.unusable
        entries = {str(i): [(s, s.batch(unusable)) for s in g] for i, g in enumerate(groups)}
        jobs = {
            key: compare_job(ctx, [(s.mutant, b) for s, b in group], known if self.share else {})
            for key, group in entries.items()
        }
        jobs.update({k: job for k, (job, _) in originals.items()})
        results = proving.run_all(ctx, jobs)
        if len(results) < len(jobs):
            return False
        self._read_round(results, entries, originals)
        return True

    def _read_round(
        self,
        results: dict[str, tuple[JobResult, bool]],
        entries: dict[str, list[tuple[Search, list[Candidate]]]],
        originals: dict,
    ) -> None:
        """The round's job results read, in order (``_read_round_job``), each one's cost
        and the inputs it found unusable into the spend."""
        spend, unusable = self.spend, self.unusable
        for key, (result, cached) in results.items():
            spend.job(result, cached)
            before = len(unusable)
            self._read_round_job(key, result, entries, originals)
            spend.unusable += len(unusable) - before

    def _read_round_job(
        self,
        key: str,
        result: JobResult,
        entries: dict[str, list[tuple[Search, list[Candidate]]]],
        originals: dict,
    ) -> None:
        """One of the round's jobs read: an original's, or a compare job's into its searches."""
        if key in originals:
            self._read_original(result, originals[key][1])
        else:
            self.budget.clocked(estimate(entries[key], self.known), result)
            self._compared(result, entries[key])

    def _compared(self, result: JobResult, entries: list[tuple[Search, list[Candidate]]]):
        """A compare job's answer into its survivors' searches."""
        data = answer_of(result)
        if data is None:
            failed_job(result, entries, self.unusable, self.spend)
            return
        if self.share:
            self._rejected_by_original(data)
        for search, batch in entries:
            answer = (data.get("mutants") or {}).get(module_name(search.mutant)) or {
                "error": "the job's answer has no part for this mutant"
            }
            read_mutant(search, batch, answer, self.ctx.kernel.name, self.tried)

    def _rejected_by_original(self, data: dict) -> None:
        """The inputs a compare job's original failed on or ran unstably: unusable."""
        for cid, record in (data.get("originals") or {}).items():
            if record.get("status") in ("error", "unstable") and cid not in self.unusable:
                self.unusable[cid] = record.get("detail", "")

    def _proofs(self) -> Iterator[Event]:
        """What the round found, proved: a hang's golden outputs, a hit's written test."""
        ctx, searches = self.ctx, self.searches
        for search in searches.values():
            if search.hang is not None and search.hit is None:
                if self._hang_left_unproved(search):
                    continue
                yield from _golden_for_hang(ctx, search)
            if search.hit is None or ctx.ledger.verdict(search.mutant.id) is not Verdict.SURVIVED:
                continue
            yield from self._prove_hit(search)

    def _hang_left_unproved(self, search: Search) -> bool:
        """A mutant that is slower everywhere hangs where the inputs are big; proving it
        costs its whole time limit and the oracle's, and shows a difference only if its
        outputs differ too: once the budget is spent its hang is left (True), said so."""
        if search.slow < SLOW or not self.budget.spent():
            return False
        search.hang = None
        search.unkept = (
            f"it runs {search.slow:.0f}x the original's time on the own check, "
            f"and {self.budget.says} ran out before its hang was proved"
        )
        search.done = True
        return True

    def _prove_hit(self, search: Search) -> Iterator[Event]:
        """A hit's written test proved, the other survivors beside it (``_prove``)."""
        searches = self.searches
        likely, slow = self._likely_and_slow()
        others = [m for m in self.survivors if m.id not in searches or not searches[m.id].alike]
        yield from _prove(self.ctx, search, others, likely, slow, self.kills)

    def _likely_and_slow(self) -> tuple[set[str], set[str]]:
        """The ids of the survivors seen to differ (their evidence goes in the proof's
        round), and of those that hung on an input or run slower everywhere (the test may
        run long on them: ``proving.prove_killer``'s ``slow``)."""
        searches = self.searches.values()
        likely = {s.mutant.id for s in searches if s.differs or s.hit}
        slow = {s.mutant.id for s in searches if s.hung or s.slow >= SLOW}
        return likely, slow

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


def _golden_for_hang(ctx: StageContext, search: Search) -> Iterator[Event]:
    """The mutant hung or crashed on a candidate: get the original's outputs for it."""
    assert search.hang is not None
    candidate, why = search.hang
    search.hang = None
    job = original_job(ctx, [candidate], golden=True)
    result = proving.run_all(ctx, {"golden": job}).get("golden")
    data = answer_of(result[0]) if result else None
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
    search: Search,
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
    asked = proving.Asked(
        test,
        mutant,
        expected_s=search.hit[0].est_s,
        others=tuple(survivors),
        likely=frozenset(likely),
        slow=frozenset(slow),
    )
    proof = proving.prove_killer(ctx, asked)
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
