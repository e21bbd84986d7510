"""The driver: load, baseline, own-check judgement, mutants, stages in order, report.

Every decision lives elsewhere: verdicts in ``verdicts.py`` (``decide`` and the
``Ledger``), jobs in ``jobs.py`` (cache first, stored as they arrive), the baseline in
``baseline.py``, and what each stage does in its own module behind the contract of
``stage.py`` (writers, checks, ``--compare-modes``). A ``Plan`` says which mutants a
run judges: every mutant of the file, or (``rerun.py``) chosen mutants of a past run
whose other verdicts are carried over. Faces drive a run through ``session.py``.
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from collections import Counter
from collections.abc import Generator, Iterator
from dataclasses import replace

from mutant_gate.cache import Store

from . import predictions, steady
from .baseline import judge_own_check, own_check_record, run_baseline
from .checks import ALWAYS, CHECKS
from .errors import BadInput
from .estimate import Watch
from .events import (
    BaselineFinished,
    BaselineProgress,
    BaselineStarted,
    Event,
    MutantFinished,
    MutantStarted,
    RunFinished,
    RunStarted,
    WriterNote,
)
from .job import CheckKind, Job, JobResult, JobStatus
from .jobs import JobRunner
from .kernel_file import EXTRA_TESTS, KernelFile, TestFile, load_kernel_file
from .limits import REMOTE_MEMORY_MB, machine_memory_mb, sized_memory_mb
from .load_memo import load_key
from .modes import auto_recheck_stage, compare_modes_stage
from .project import jit_callers, record_reaches
from .records import Mutant, Verdict
from .report import build_report, check_bound, mutant_row
from .sandbox import Sandbox
from .settings import KEY_VARIABLES, RunSettings
from .stage import BEFORE_MUTANTS, Stage, StageContext, ahead_caller
from .verdicts import Ledger, decide
from .writers import ModelSession, stage2_stage, writer_stages

TESTS = EXTRA_TESTS + "::"  # the outcome names of a test file's cases
#: ``-k`` of a warm-up job: collect the user's test files, run none of their cases
WARM_UP_SELECTS_NOTHING = "mutant_gate_warm_up_selects_no_case"


def load(
    settings: RunSettings, store: Store | None = None
) -> tuple[KernelFile, list[Mutant], float, dict | None]:
    """Read the kernel file and plant its mutants: (kernel, mutants, seconds, changed_since).

    Bad input (a missing or broken file, unknown operators, a bad git ref) raises
    ``BadInput`` here, before anything runs. With a ``store``, a file loaded before
    (same bytes, tests, operators and generator code) comes from it: libcst, the
    parser behind the operators, is not even imported."""
    key = load_key(settings) if store is not None else None
    if key is not None:
        memo = store.get_load(key)
        if memo is not None:
            kernel = KernelFile.from_json(memo["kernel"])
            return kernel, [Mutant(**m) for m in memo["mutants"]], memo["seconds"], None
    from .mutate import generate_mutants, select_operators

    kernel = load_kernel_file(settings.kernel_path, settings.tests, settings.project_root)
    try:
        operators = select_operators(settings.operators)
    except ValueError as exc:
        raise BadInput(f"--operators: {exc}") from None
    start = time.perf_counter()
    mutants = generate_mutants(kernel.source, kernel.path, operators)
    if key is not None and kernel.project is None:
        seconds = time.perf_counter() - start
        memo = {"kernel": kernel.to_json(), "mutants": [m.to_json() for m in mutants]}
        store.put_load(key, {**memo, "seconds": seconds})
    changed = None
    if settings.changed_since is not None:
        mutants, changed = _changed_only(kernel, mutants, settings.changed_since)
    return kernel, mutants, time.perf_counter() - start, changed


def _changed_only(kernel: KernelFile, mutants: list[Mutant], ref: str) -> tuple[list, dict]:
    """``--changed-since REF``: the mutants of the jit functions whose lines changed since
    ``ref``, and the record of which changed."""
    from .changes import changed_functions  # git: only for --changed-since

    names = [f.name for f in kernel.jit_functions]
    functions = changed_functions(kernel.path, kernel.source, names, ref)
    changed = {
        "ref": ref,
        "functions": functions,
        "unchanged": [n for n in names if n not in functions],
    }
    return [m for m in mutants if m.function in functions], changed


class _Retuned:
    """A run's stage context read with other settings (``run_writers``'s harder probe):
    ``settings`` is this one's; everything else (jobs, ledger, the tests a stage adds)
    is the run's own context, so what the stage does lands in the run."""

    def __init__(self, ctx: StageContext, settings: RunSettings) -> None:
        self._ctx, self.settings = ctx, settings

    def __getattr__(self, name: str):
        return getattr(self._ctx, name)


def _deciding_config(ordered: list[tuple[JobResult, bool]]) -> int:
    """The first autotune config whose result does not let the mutant survive, else the last."""
    killing = (c for c, r in enumerate(ordered) if decide(r[0])[0] is not Verdict.SURVIVED)
    return next(killing, len(ordered) - 1)


class _Beside:
    """A stage's events produced in a thread of its own while the run goes on:
    ``ready`` yields those that have come, ``finish`` waits for the rest (and raises
    what the stage raised)."""

    def __init__(self, events: Iterator[Event]) -> None:
        self._events: queue.Queue = queue.Queue()
        self._done = False

        def work() -> None:
            try:
                for event in events:
                    self._events.put(("event", event))
            except BaseException as exc:  # noqa: BLE001 - raised again in the run's thread
                self._events.put(("error", exc))
            self._events.put(("end", None))

        threading.Thread(target=work, name="beside", daemon=True).start()

    def _take(self, block: bool) -> Iterator[Event]:
        while not self._done:
            try:
                kind, value = self._events.get(block=block)
            except queue.Empty:
                return
            if kind == "event":
                yield value
            elif kind == "error":
                self._done = True
                raise value
            else:
                self._done = True

    def ready(self) -> Iterator[Event]:
        yield from self._take(block=False)

    def finish(self) -> Iterator[Event]:
        yield from self._take(block=True)


class Plan:
    """Which mutants a run judges: by default every mutant of the file, with the writers,
    the checks and the own-check judgement. ``rerun.RerunPlan`` judges chosen mutants of
    a past run again."""

    stage = "mutants"  # the ledger's name for the step that judges the mutants
    judge_own_check = True
    writers = True

    def choose(self, ctx: StageContext, mutants: list[Mutant]) -> list[Mutant]:
        """The mutants to run (``ctx.mutants`` may be set to the run's whole list)."""
        return mutants

    def finish(self, ctx: StageContext, report: dict) -> None:
        """Last words on the report before it is saved."""

    #: a test file none of whose cases reaches the kernel is bad input (one module with
    #: its own tests); a library run (``library.LibraryPlan``) gives every module the
    #: whole suite, where most files reach other modules
    whole_suite = False

    def original(self, ctx: StageContext) -> JobResult | None:
        """The original's passing result to take instead of running it (a library run's
        suite, run once for every module), or None: run it."""
        return None

    def ran_original(self, ctx: StageContext, result: JobResult) -> None:
        """The original's passing result, as the run's baseline took it."""


class Run:
    """One run: iterate ``events()`` to drive it; the last event is ``RunFinished``."""

    def __init__(
        self,
        settings: RunSettings,
        sandbox: Sandbox,
        store: Store | None,
        *,
        other_sandbox: Sandbox | None = None,
        plan: Plan | None = None,
        fresh: bool = False,
        extra_stages: tuple[Stage, ...] = (),
    ) -> None:
        self.sandbox = sandbox
        self.store = store if settings.use_cache else None
        self.jobs = JobRunner(sandbox, self.store, settings.mode, settings.workers, fresh=fresh)
        #: no --memory-mb: each local job's memory is the machine's share of a worker (a
        #: remote sandbox's machine is not this one: its jobs keep the fixed default)
        self.memory_sized = settings.memory_mb is None and sandbox.name == "local"
        if self.memory_sized:
            settings = replace(settings, memory_mb=sized_memory_mb(self.jobs.workers))
        elif settings.memory_mb is None:
            settings = replace(settings, memory_mb=REMOTE_MEMORY_MB)
        self.settings = settings
        self.ledger = Ledger()
        self.plan = plan or Plan()
        self.other_sandbox = other_sandbox
        self.extra_stages = extra_stages
        #: survivor checks by name, on or off (the explorer toggles them while it runs)
        self.checks = {
            "compile-check": settings.compile_check,
            "big-index": True,  # always: it runs only on overflow survivors
            "claims": True,  # always: a claim excludes nothing without evidence
            "diff-oracle": settings.diff_oracle,
            "tolerance": settings.tolerance,
        }
        self.ctx: StageContext | None = None
        self.session: ModelSession | None = None
        self.run_id = ""
        self.generation_s = 0.0
        self.judged = False  # every mutant of the plan has its verdict
        self.started = time.perf_counter()
        #: seconds the original's runs took in this run (none when served from the cache)
        self.original_s = 0.0
        #: the mutants' jobs' phase, start to end (wall seconds)
        self.mutants_wall_s = 0.0

    @property
    def cancel(self):
        return self.jobs.cancel

    @property
    def kernel(self) -> KernelFile:
        assert self.ctx is not None
        return self.ctx.kernel

    @property
    def mutants(self) -> list[Mutant]:
        return self.ctx.mutants if self.ctx is not None else []

    # -- the run ------------------------------------------------------------------------
    def events(self) -> Iterator[Event]:
        settings = self.settings
        self.started = time.perf_counter()
        kernel, mutants, self.generation_s, changed = load(settings, self.store)
        entries = None
        if settings.accepted_path:
            from . import accepted  # the accepted survivors' file: only with --accepted

            entries = accepted.load(settings.accepted_path)
        predicted = predictions.register(settings.predict_path) if settings.predict_path else None
        ctx = self.ctx = StageContext(settings, self.jobs, self.ledger, kernel, mutants)
        if changed is not None:
            self.ledger.put_section("changed_since", changed)
        self.ledger.put_section("own_check", own_check_record(kernel))
        targets = self.plan.choose(ctx, mutants)
        self.run_id = self._new_run_id(time.strftime("%Y%m%d-%H%M%S") + "-" + kernel.sha256[:8])
        stages: list[Stage] = []
        if self.plan.writers:
            self.session = ModelSession(ctx)
            stages = writer_stages(ctx, self.session)
        if predicted is not None:  # stored with the run before anything executes
            self.ledger.put_section("predictions", predicted)
            self.save(None)
        yield RunStarted(self.run_id, kernel, tuple(targets), self.generation_s)
        null_run = yield from self._originals(ctx, kernel, stages)
        yield from self._mutant_phase(ctx, targets, stages, null_run)
        yield from self._later_stages(targets, stages)
        yield RunFinished(self._finished(kernel, entries, predicted))

    def _originals(
        self, ctx: StageContext, kernel, stages: list[Stage]
    ) -> Generator[Event, None, _Beside | None]:
        """The model check, the original (again where written tests joined it), the stages
        before the mutants; the null run started beside what follows."""
        from .writers import BEFORE_BASELINE  # the model check: before anything runs

        for stage in (s for s in stages if s.phase == BEFORE_BASELINE):
            yield from stage.run(ctx, ctx.mutants)
        yield from self._timed_original(ctx)
        # The null run (does the own check see outputs?) decides no verdict: it runs
        # beside the mutants (in compiled mode it is a forked job with a CUDA context of
        # its own, seconds long), and what it found is said as soon as it is known.
        null_run = _Beside(judge_own_check(ctx)) if self.plan.judge_own_check else None
        self.save(None)
        for stage in (s for s in stages if s.phase == BEFORE_MUTANTS):
            yield from stage.run(ctx, ctx.mutants)
        if ctx.kernel is not kernel:  # written tests join every job: time the whole set
            yield from self._timed_original(ctx, started=False)
        return null_run

    def _timed_original(self, ctx: StageContext, started: bool = True) -> Iterator[Event]:
        """The original's run, its seconds added to the run's (a cached one adds none)."""
        if started:
            yield BaselineStarted(self.settings.timeout_s)
        baseline, cached = yield from self._baseline(ctx)
        self.original_s += 0.0 if cached else baseline.duration_s
        yield BaselineFinished(baseline, cached, ctx.timeout_s, bool(ctx.coverage))

    def _mutant_phase(
        self, ctx: StageContext, targets: list[Mutant], stages: list[Stage], null_run
    ) -> Iterator[Event]:
        """The reached mutants judged; the survivor stages' jobs of the original alone
        started beside them at the first survivor; the null run's findings said as they
        come."""
        reached = yield from self._not_reached(targets)
        if ctx.kernel.project is not None:  # which cases judge each kernel's mutants
            functions = sorted({m.function for m in targets})
            self.ledger.put_section("judged_by", {f: ctx.judged_by(f) for f in functions})
        phase = time.perf_counter()
        saw = ahead_caller(ctx, stages)
        for event in self._run_mutants(
            reached, done=len(targets) - len(reached), total=len(targets)
        ):
            yield event
            saw(event)
            if null_run is not None:
                yield from null_run.ready()
        self.mutants_wall_s += time.perf_counter() - phase
        if null_run is not None:
            yield from null_run.finish()
            self.save(None)
        self.judged = True

    def _later_stages(self, targets: list[Mutant], stages: list[Stage]) -> Iterator[Event]:
        """The stages on the survivors (a second mode's first), then the checks switched on."""
        survivors = [s for s in stages if s.phase != BEFORE_MUTANTS]
        if self.other_sandbox is not None and self.settings.compare_modes:
            survivors.insert(0, compare_modes_stage(self.other_sandbox))
        elif self.other_sandbox is not None:  # --mode auto on a GPU
            survivors.insert(0, auto_recheck_stage(self.other_sandbox))
        for stage in [*self.extra_stages, *survivors]:
            yield from self._run_stage(stage, targets)
        for name, stage in CHECKS.items():  # looked up now: the explorer may toggle them
            if self.checks[name]:
                yield from self._run_stage(stage, targets)

    def _finished(self, kernel, entries, predicted) -> dict:
        """The accepted survivors marked, the report (with the predictions' score), saved."""
        settings = self.settings
        if entries is not None:
            from . import accepted

            assert settings.accepted_path is not None
            accepted.mark(
                self.ledger, kernel.source, kernel.path, self.ctx.mutants, entries,
                settings.accepted_path,
            )  # fmt: skip
        report = self.report()
        if predicted is not None:
            self.ledger.update_section(
                "predictions",
                lambda had: {
                    **had,
                    "result": predictions.score(had, report["mutants"]),
                    "file_now": predictions.file_now(had),
                },
                {},
            )
            report = self.report()
        self.plan.finish(self.ctx, report)
        self.save(report)
        return report

    def _baseline(self, ctx: StageContext) -> Generator[Event, None, tuple[JobResult, bool]]:
        """``run_baseline`` in a thread of its own, its progress yielded as it comes (a
        project's suite can take minutes); its result, or its error, once it ends."""
        reports: queue.Queue = queue.Queue()
        outcome: dict = {}

        shared = self.plan.original(ctx)
        whole = self.plan.whole_suite

        def work() -> None:
            try:
                outcome["value"] = run_baseline(
                    ctx, on_progress=reports.put, original=shared, whole_suite=whole
                )
            except BaseException as exc:  # noqa: BLE001 - raised again in the run's thread
                outcome["error"] = exc
            reports.put(None)

        threading.Thread(target=work, name="baseline", daemon=True).start()
        done = total = 0
        warming = False
        while (report := reports.get()) is not None:
            if not warming:  # the original holds its worker now: warm the others
                warming = True
                self._warm_up_runners(ctx)
            if report.get("status") == "running":  # a case started: kept for a timeout
                continue
            if "collected" in report:
                total += int(report["collected"])
                case, status, seconds = "", "collected", 0.0
            else:
                done += 1
                case, status = str(report.get("case", "")), str(report.get("status", ""))
                seconds = float(report.get("duration_s") or 0.0)
            yield BaselineProgress(str(report.get("check", "")), case, status, seconds, done, total)
        if "error" in outcome:
            raise outcome["error"]
        self.plan.ran_original(ctx, outcome["value"][0])
        return outcome["value"]

    def _warm_up_runners(self, ctx: StageContext) -> None:
        """While the original runs (in a process of its own, its cases followed live),
        the other workers' warm runners collect the user's test files, selecting no
        case: each imports what the tests import (the project's third-party world) once,
        before its first mutant job instead of during it. Results are not kept."""
        box = self.sandbox
        trusted = tuple(
            replace(c, keyword=WARM_UP_SELECTS_NOTHING, marker="", select=())
            for c in ctx.kernel.checks
            if c.kind is CheckKind.PYTEST and c.trusted
        )
        if not trusted or not box.warm or box.name != "local":
            return
        job = replace(ctx.job_for(None, ctx.settings.timeout_s), checks=trusted, trace_lines=False)

        def warm_up() -> None:
            try:
                box.run(job)
            except Exception:  # noqa: BLE001 - a warm-up that fails costs the first job its imports
                pass

        for number in range(self.jobs.workers - 1):
            threading.Thread(target=warm_up, name=f"warm-up-{number}", daemon=True).start()

    def _new_run_id(self, stamp: str) -> str:
        """``stamp`` (start second + kernel hash), or ``stamp-2``... when a run of the same
        file started in the same second is already cached (a fast cached rerun): one
        run's record never replaces another's."""
        if self.store is None:
            return stamp
        run_id, n = stamp, 1
        while self.store.get_run(run_id) is not None:
            n += 1
            run_id = f"{stamp}-{n}"
        return run_id

    def _run_stage(self, stage: Stage, mutants: list[Mutant]) -> Iterator[Event]:
        """``stage`` on the mutants it applies to. A stage that raises loses nothing but
        its own work: each of its mutants gets an ``error`` row section with the reason,
        the run a ``stage_errors`` entry with the traceback, and the run goes on to its
        report."""
        assert self.ctx is not None
        chosen = stage.targets(self.ctx, mutants)
        if not chosen:
            return
        try:
            yield from stage.run(self.ctx, chosen)
        except Exception as exc:  # noqa: BLE001 - a stage's bug is recorded, not fatal
            reason = (f"{type(exc).__name__}: {exc}".strip().splitlines() or ["?"])[0][:300]
            entry = {"stage": stage.name, "reason": reason}
            for mutant in chosen:
                errors = self.ledger.details(mutant.id).get("error") or []
                self.ledger.put_row(mutant.id, "error", [*errors, entry])
            failed = {
                **entry,
                "mutants": [m.id for m in chosen],
                "traceback": traceback.format_exc(limit=-6)[-3000:],
            }
            before = self.ledger.sections().get("stage_errors") or []
            self.ledger.put_section("stage_errors", [*before, failed])
            yield WriterNote(
                stage.name,
                f"the {stage.name} stage failed on {len(chosen)} mutants and was left: {reason}",
                "error",
            )

    def _not_reached(self, mutants: list[Mutant]) -> Generator[Event, None, list[Mutant]]:
        """Mutants of a kernel no check launches (the baseline's launch record) are
        survivors with no job and no evidence; returns the rest."""
        ctx = self.ctx
        assert ctx is not None and ctx.baseline is not None
        launched = ctx.baseline.extra.get("launched")
        if launched is None:  # a result from a harness that kept no launch record
            return mutants
        # The interpreter ran the kernel file as Python: the lines it executed (None when
        # the original's result has no trace: compiled mode, project mode, an old cache).
        lines = ctx.baseline.extra.get("lines")
        ran = set(lines) if lines else None
        reached, done = [], 0
        record = {"functions": launched, "reaches": ctx.baseline.extra.get("reaches")}
        module = ctx.kernel.project.module if ctx.kernel.project is not None else None
        for m in mutants:
            line = None
            if (
                m.in_launcher
                and launched
                or record_reaches(record, module, jit_callers(ctx.kernel.source, m.function))
            ):
                if ran is None or ran.intersection(range(m.line, m.end_line + 1)):
                    reached.append(m)
                    continue
                line = m.line
            done += 1
            outcome = self.ledger.unreached(m.id, launched, line)
            yield MutantFinished(m, outcome, done, len(mutants))
        return reached

    def _run_mutants(self, mutants: list[Mutant], *, done: int, total: int) -> Iterator[Event]:
        """Every mutant's job (once per autotune config with ``--all-configs``); the first
        config that kills it decides. ``done`` of ``total`` were decided before."""
        ctx = self.ctx
        assert ctx is not None
        configs = ctx.configs
        jobs = {f"{m.id}@{c}": ctx.mutant_job(m, c) for m in mutants for c in range(configs)}
        selection = self._selection_recorded(mutants, jobs)
        by_id = {m.id: m for m in mutants}
        results: dict[str, dict[int, tuple[JobResult, bool]]] = {m.id: {} for m in mutants}
        #: verdicts a limit decided near its edge, or the GPU's memory: run once more
        #: before they are recorded
        near: dict[str, tuple[Job, JobResult, bool, str, str]] = {}
        watch = Watch(ctx, jobs, by_id, total)  # the estimate, as the first job starts
        for event in ctx.run_jobs(jobs):
            if (estimated := watch.see(event)) is not None:
                yield estimated
            mutant_id, config = event.key.split("@")
            mutant = by_id[mutant_id]
            if event.result is None:  # started
                if not results[mutant_id]:
                    yield MutantStarted(mutant)
                continue
            results[mutant_id][int(config)] = (event.result, event.cached)
            if len(results[mutant_id]) < configs:
                continue
            done += 1
            ordered = [results[mutant_id][c] for c in range(configs)]
            chosen = _deciding_config(ordered)
            note = f"autotune config {chosen + 1} of {configs}" if configs > 1 else ""
            job = jobs[f"{mutant_id}@{chosen}"]
            if (side := steady.in_doubt(job, ordered[chosen][0])) is not None:
                done -= 1  # judged once its second run is in
                near[mutant_id] = (job, *ordered[chosen], note, side)  # type: ignore[assignment]
                continue
            yield self._judged(mutant, job, ordered[chosen], note, selection, done, total)
        yield from self._run_again(near, by_id, selection, done, total)
        if (estimated := watch.end()) is not None:  # every result came from the cache
            yield estimated

    def _selection_recorded(self, mutants: list[Mutant], jobs: dict[str, Job]) -> dict | None:
        """Where the run selects cases per mutant: each mutant's count of selected cases and
        its limit in its row, the totals in the ``selection`` section (returned)."""
        selection = self.ledger.sections().get("selection")
        if selection is None:
            return None
        for m in mutants:
            job = jobs[f"{m.id}@0"]
            cases = sum(len(c.select) for c in job.checks)
            self.ledger.put_row(m.id, "tests_selected", cases)
            self.ledger.put_row(m.id, "timeout_s", job.timeout_s)
            selection["cases_run"] += cases
            selection["mutants"] += 1
        self.ledger.put_section("selection", selection)
        return selection

    def _judged(
        self, mutant: Mutant, job: Job, ran: tuple[JobResult, bool], note: str, selection,
        done: int, total: int,
    ) -> MutantFinished:  # fmt: skip
        """Record a mutant's verdict from its job's result; a timeout says its limit's
        figures (``StageContext.limit_words``)."""
        result, cached = ran
        if result.status is JobStatus.TIMEOUT:
            note = "; ".join(filter(None, [self.ctx.limit_words(job), note]))
        outcome = self.ledger.judge(mutant.id, result, cached, stage=self.plan.stage, note=note)
        if selection is not None:  # the cases its job ran, to the first kill
            ran_cases = [
                o.name.split("::", 1)[1] for o in result.outcomes if o.name.startswith(TESTS)
            ]
            self.ledger.put_row(mutant.id, "tests_run", ran_cases)
        return MutantFinished(mutant, outcome, done, total)

    def _run_again(
        self, near: dict, by_id: dict, selection, done: int, total: int
    ) -> Iterator[Event]:
        """The jobs whose verdict a limit decided near its edge, or the GPU's memory, once
        more (``steady``): one verdict from both runs stands; two make the mutant flaky. A
        job that ran out of GPU memory runs again alone, after the others."""
        if not near:
            return
        ctx = self.ctx
        again = {i: steady.again(job, side) for i, (job, _, _, _, side) in near.items()}
        shared = {i: j for i, j in again.items() if near[i][-1] != steady.ALONE}
        batches = [shared] + [{i: j} for i, j in again.items() if i not in shared]
        for event in (e for batch in batches if batch for e in ctx.run_jobs(batch)):
            if event.result is None:
                continue
            done += 1
            mutant, first_run, job_again = by_id[event.key], near[event.key], again[event.key]
            yield self._settled(mutant, first_run, job_again, event, selection, done, total)

    def _settled(
        self, mutant: Mutant, first_run: tuple, job_again: Job, event, selection,
        done: int, total: int,
    ) -> MutantFinished:  # fmt: skip
        """A mutant run twice (``first_run``: its job, result, cached, note and side; the
        second run's ``event``): judged where both runs agree, else flaky."""
        job, first, cached, note, side = first_run
        record = steady.settle((job, first), (job_again, event.result), side)
        if record is None:
            ran = (event.result, cached and event.cached)
            if side == steady.ALONE:
                note = "; ".join(filter(None, [steady.ALONE_NOTE, note]))
            return self._judged(mutant, job_again, ran, note, selection, done, total)
        spent = first.duration_s + event.result.duration_s
        if side != steady.ALONE:
            record["reason"] += f" ({self.ctx.limit_words(job)})"
        outcome = self.ledger.flaky(
            mutant.id, record, spent, cached and event.cached, stage=self.plan.stage
        )
        return MutantFinished(mutant, outcome, done, total)

    # -- what the faces may ask of a running or finished run -----------------------------
    def row(self, mutant: Mutant) -> dict:
        """The mutant's report row as things stand."""
        return mutant_row(mutant, self.ledger.outcome(mutant.id), self.ledger.details(mutant.id))

    def accepted_tests(self) -> tuple[TestFile, ...]:
        return self.ctx.kernel.tests if self.ctx is not None else ()

    def set_check(self, name: str, on: bool) -> Stage:
        """Turn a survivor check on or off for the rest of the run; returns its stage."""
        if name not in CHECKS:
            raise KeyError(name)
        self.checks[name] = on or name in ALWAYS
        return CHECKS[name]

    def stage_named(self, name: str) -> Stage:
        """A stage the explorer runs on chosen mutants: a check, ``probe`` or ``stage2``."""
        if name in CHECKS:
            return CHECKS[name]
        if name == "probe":
            from .writers.probe.stage import probe_stage

            return Stage("probe", probe_stage)
        if name == "stage2":
            assert self.ctx is not None
            if self.session is None:
                self.session = ModelSession(self.ctx)
            return stage2_stage(self.session)
        raise KeyError(name)

    def run_stage(self, stage: Stage, mutant_ids: list[str]) -> Iterator[Event]:
        """``stage`` on chosen mutants once they are judged (those its verdicts allow)."""
        by_id = {m.id: m for m in self.mutants}
        yield from self._run_stage(stage, [by_id[i] for i in mutant_ids if i in by_id])

    def run_writers(
        self, mutant_ids: list[str], *, model: bool, harder: bool = False
    ) -> Iterator[Event]:
        """Test writers on chosen survivors: the probe (no model needed), then, with
        ``model``, stage 2 on those the probe left alive.

        ``harder`` (the explorer's stage 2 without a model): the probe goes past the
        run's own (twice ``--probes`` inputs each, every trigger kind, no time limit);
        a survivor it tried no more inputs on than before gets a note saying so."""
        probe = self.stage_named("probe")
        tried: dict[str, int | None] = {}
        if harder:
            writers = self.settings.writers
            wider = replace(writers, probes=2 * writers.probes, probe_time=0, probe_triggers=())
            settings = replace(self.settings, writers=wider)
            run = probe.run
            probe = Stage(probe.name, lambda ctx, ms: run(_Retuned(ctx, settings), ms))
            tried = {i: (self.ledger.row(i, "probe") or {}).get("probes") for i in mutant_ids}
        yield from self.run_stage(probe, mutant_ids)
        for mutant_id, before in tried.items():
            now = (self.ledger.row(mutant_id, "probe") or {}).get("probes")
            if before and now == before and self.ledger.verdict(mutant_id) is Verdict.SURVIVED:
                yield WriterNote(
                    "probe",
                    f"nothing more to try: no input beyond the {before} the run's probe "
                    "tried; a model would read the mutated code and write a test aimed at "
                    f"it (set {' or '.join(KEY_VARIABLES)})",
                    "info",
                    mutant_id,
                )
        if model:
            yield from self.run_stage(self.stage_named("stage2"), mutant_ids)

    def rerun_mutant(self, mutant_id: str, *, force: bool = False) -> Iterator[Event]:
        """Judge one mutant again after the baseline: from the cache, or (``force``) in
        the sandbox, storing what arrives. Yields ``MutantStarted`` then ``MutantUpdated``."""
        from .events import MutantUpdated

        ctx = self.ctx
        assert ctx is not None
        mutant = next(m for m in ctx.mutants if m.id == mutant_id)
        job = ctx.mutant_job(mutant)
        yield MutantStarted(mutant)
        if force:
            result, cached = self.sandbox.run(job), False
            self.jobs.store_result(job, result)
        else:
            result, cached = ctx.execute(job)
        yield MutantUpdated(mutant, self.ledger.judge(mutant.id, result, cached, stage="rerun"))

    # -- the record -------------------------------------------------------------------
    def report(self) -> dict:
        """The JSON report as things stand (again after a later stage, e.g. stage 2)."""
        ctx = self.ctx
        assert ctx is not None and ctx.baseline is not None
        baseline = ctx.baseline
        report = build_report(
            run_id=self.run_id,
            kernel=ctx.kernel,
            mutants=ctx.mutants,
            ledger=self.ledger,
            baseline=baseline,
            settings=self.settings.to_json(),
            toolchain=self.jobs.toolchain,
            sandbox={
                "backend": self.sandbox.name,
                "workers": self.jobs.workers,
                "network_cut": baseline.network_cut,
                "isolation": baseline.extra.get("isolation", {}),
                "mutant_timeout_s": round(ctx.timeout_s, 2),
                **self._memory_record(),
                "mutant_generation_s": round(self.generation_s, 4),
                "original_s": round(self.original_s, 4),
                "mutants_wall_s": round(self.mutants_wall_s, 2),
                "wall_s": round(time.perf_counter() - self.started, 2),
                # compiled mode's warm runners: one Triton cache for the pool, or why not
                **({"triton_cache": t} if (t := triton_cache_words(self.sandbox)) else {}),
                # compiled mode: jobs per visible GPU (a pool is dealt over all of them)
                **({"gpus": g} if (g := self._gpu_throughput()) else {}),
                # workers that never started (the pool ran without them)
                **({"start_errors": list(e)} if (e := self.sandbox.start_errors) else {}),
                **self.sandbox.cluster_record(),
            },
        )
        report["bound"] = check_bound(report)
        return report

    def _memory_record(self) -> dict:
        """Each job's memory limit and where it came from, and the kills by a limit."""
        details = [self.ledger.details(m.id).get("limit") for m in self.ctx.mutants]
        kills = Counter(limit for limit in details if limit)
        source = "machine" if self.memory_sized else "--memory-mb"
        if not self.memory_sized and self.sandbox.name != "local":
            source = "--memory-mb or the remote default"
        memory: dict = {"memory_mb": self.settings.memory_mb, "memory_from": source}
        if self.memory_sized:
            memory["machine_memory_mb"] = machine_memory_mb()
        if self.settings.mode != "interpret":
            memory["memory_from"] += " (interpreted jobs only: compiled jobs are not bounded)"
        return {**memory, **({"kills_by_limit": dict(kills)} if kills else {})}

    def _gpu_throughput(self) -> list[dict]:
        return self.sandbox.gpu_throughput(time.perf_counter() - self.started)

    def save(self, report: dict | None) -> None:
        """The run record that replay and reports read (``report`` None while running)."""
        if self.store is not None and self.ctx is not None:
            record = {
                "run_id": self.run_id,
                "settings": self.settings.to_json(),
                "kernel": self.ctx.kernel.path,
            }
            registered = self.ledger.sections().get("predictions")
            if registered is not None:
                record["predictions"] = registered
            self.store.put_run(self.run_id, {**record, "report": report})


def triton_cache_words(box: Sandbox | None) -> str:
    """The report's ``sandbox.triton_cache``: how a compiled run's warm runners keep
    Triton's cache (shared, or one each and why); "" where no warm runner compiles."""
    if box is None or not box.warm or box.mode != "compiled":
        return ""
    if box.triton_cache:
        return f"shared by the warm runners: {box.triton_cache}"
    note = box.triton_cache_note
    return f"one per warm runner{': ' + note if note else ''}"
