"""What every writer shares: proving a test by running it (reading it first is ``reading``'s).

Nothing here runs generated code in this process: ``ast`` reads it, the sandbox runs it.
A test is believed only from sandbox results:
- ``prove_on_original``: it passes the original ``runs`` times in a row, each with a
  fresh job seed (flaky tests fail here), each test function within its time budget
  (``time_budget``); its cases' times and launches are kept (``Proof.cases``);
- ``prove_killer``: that, and it fails the mutant, with a time limit scaled from its
  time on the original (a slow test is not a kill by timeout);
- ``kill_others``: an accepted killer test is run against the other survivors too;
- ``accept_killer``: then it is the user's file (``on_disk.keep``: in the run's folder).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from ..checks.diff_oracle import CHECK as ORACLE_CHECK
from ..checks.diff_oracle import PER_JOB as ORACLE_PER_JOB
from ..checks.diff_oracle import OracleJobs, compare, oracle_jobs, variant_run
from ..checks.harness_jobs import harness_data
from ..events import Event, TestAccepted
from ..job import Check, CheckKind, Job, JobResult, JobStatus
from ..kernel_file import EXTRA_TESTS, GIVEN, OWN_CHECK, TRUSTED_ORIGINS, TestFile
from ..project import jit_callers
from ..records import Mutant
from ..stage import StageContext
from ..testlist import find_test_functions
from ..verdicts import RULES, attribute, decide, kill_evidence, summarize_error
from .on_disk import keep
from .reading import REFUSED_ATTRIBUTES as REFUSED_ATTRIBUTES  # prompts.py reads it here
from .reading import source_problem

FEEDBACK_CHARS = 1500


# -- running tests -------------------------------------------------------------------
def failure_text(result: JobResult, limit: int = FEEDBACK_CHARS * 3) -> str:
    """The failing tests and their error tails, for the model or a rejection reason."""
    parts = []
    for o in result.outcomes:
        if o.status == "failed":
            message = o.message.strip()
            if len(message) > FEEDBACK_CHARS:
                message = "..." + message[-FEEDBACK_CHARS:]
            parts.append(f"{o.name.split('::', 1)[-1]}:\n{message}")
    if not parts:
        parts.append(result.error.strip()[-FEEDBACK_CHARS:] or result.status.value)
    text = "\n\n".join(parts)
    return text if len(text) <= limit else text[:limit] + "\n..."


def job_with_test(
    ctx: StageContext,
    test: TestFile,
    source: str | None,
    seed: int,
    timeout_s: float,
    *,
    with_checks: bool = False,
) -> Job:
    """``test`` against the original (``source`` None) or a mutant; ``with_checks``: after
    the run's own checks and tests, exactly as it will run in every mutant's job."""
    kernel = ctx.kernel
    own = kernel.files(source) if with_checks else (kernel.own_file(source),)
    files = (*own, (test.name, test.source), *test.data)
    check = Check(
        CheckKind.PYTEST,
        test.name,
        EXTRA_TESTS,
        preload=kernel.preload_for(test),
        trusted=test.origin in TRUSTED_ORIGINS,
        plugins=test.origin == GIVEN,
    )
    return Job(
        project=kernel.project.to_json() if kernel.project is not None else None,
        files=files,
        checks=(*kernel.checks, check) if with_checks else (check,),
        mode=ctx.settings.mode,
        seed=seed,
        timeout_s=round(timeout_s, 1),
        memory_mb=ctx.settings.memory_mb,
        poison_undefined=ctx.settings.poison_undefined,
        interpreter=ctx.settings.interpreter,
        stop_on_first_failure=not with_checks,
    )


def run_all(ctx: StageContext, jobs: dict[str, Job]) -> dict[str, tuple[JobResult, bool]]:
    """Run jobs in parallel, cache first; (result, cached) per key."""
    return ctx.run_all(jobs)


@dataclass
class Proof:
    ok: bool
    why: str = ""  # the rejection reason, one line
    feedback: str = ""  # what the model should read to fix it
    original_s: float = 0.0  # slowest passing run on the original
    mutant: JobResult | None = None
    cached: bool = False
    runs: list[JobResult] = field(default_factory=list)
    #: the test's cases on the original: {case: {duration_s (slowest run), functions}}
    cases: dict[str, dict] = field(default_factory=dict)
    #: test functions over the time budget: {function: seconds on the original}
    slow: dict[str, float] = field(default_factory=dict)
    #: jobs run beside the original's (``prove_on_original``): key -> (result, cached)
    beside: dict[str, tuple[JobResult, bool]] = field(default_factory=dict)
    #: the test on other survivors and their diff-oracle evidence, run ahead in the
    #: proof's round (``Asked.others``) for ``kill_others``: key -> result
    ahead: dict[str, tuple[JobResult, bool]] = field(default_factory=dict)
    ahead_limit_s: float = 0.0  # the limit the tests in ``ahead`` ran under


def own_check_s(ctx: StageContext) -> float | None:
    """The own check's time in the original's run (None before the baseline)."""
    if ctx.baseline is None:
        return None
    own = [
        o.duration_s
        for o in ctx.baseline.outcomes
        if o.name == OWN_CHECK or o.name.startswith(OWN_CHECK + "::")
    ]
    return sum(own)


def time_budget(ctx: StageContext) -> tuple[float, str] | None:
    """The most a written test function may take on the original, and how it was set
    (None: no budget, or no baseline yet)."""
    s = ctx.settings.writers
    own = own_check_s(ctx)
    if s.test_budget_factor <= 0 or own is None:
        return None
    budget = max(s.test_budget_factor * own, s.test_budget_min_s)
    how = (
        f"{s.test_budget_factor:g}x the own check's {own:.2f} s on the original, "
        f"at least {s.test_budget_min_s:g} s"
    )
    return budget, how


def case_record(test: TestFile, runs: list[JobResult]) -> dict[str, dict]:
    """``test``'s cases in its runs on the original: the slowest run's time (setup and
    teardown included) and the jit functions each launched (None: no launch record)."""
    functions = set(find_test_functions(test.source))
    cases: dict[str, dict] = {}
    for result in runs:
        launches = result.extra.get("coverage")
        for o in result.outcomes:
            if not o.name.startswith(EXTRA_TESTS + "::"):
                continue
            case = o.name.split("::", 1)[1]
            if case.split("[", 1)[0] not in functions:
                continue  # the own check's, another test file's
            entry = cases.setdefault(case, {"duration_s": 0.0, "functions": None})
            entry["duration_s"] = round(max(entry["duration_s"], o.duration_s), 4)
            launched = (launches or {}).get(f"{test.name}::{case}")
            if launched is not None:
                seen = set(entry["functions"] or ()) | set(launched.get("functions", ()))
                entry["functions"] = sorted(seen)
    return cases


def function_times(cases: dict[str, dict]) -> dict[str, float]:
    """Seconds per test function (its parametrised cases added up)."""
    times: dict[str, float] = {}
    for case, info in cases.items():
        function = case.split("[", 1)[0]
        times[function] = round(times.get(function, 0.0) + info["duration_s"], 4)
    return times


def file_time(test: TestFile) -> float | None:
    """A written test file's time on the original (its cases added up), if recorded."""
    if not test.cases:
        return None
    return round(sum(info["duration_s"] for info in test.cases.values()), 4)


def timing(test: TestFile) -> dict:
    """What the report keeps of an accepted test's proof on the original: the file's time
    and, per test function, its time and the jit functions it launched."""
    if not test.cases:
        return {}
    seen: dict[str, set[str] | None] = {}
    for case, info in test.cases.items():
        function = case.split("[", 1)[0]
        known = seen.get(function, set())
        launched = info.get("functions")
        seen[function] = None if known is None or launched is None else known | set(launched)
    return {
        "duration_s": file_time(test),
        "timings": {
            function: {
                "duration_s": seconds,
                "launches": sorted(seen[function]) if seen[function] is not None else None,
            }
            for function, seconds in function_times(test.cases).items()
        },
    }


def too_slow(ctx: StageContext, proof: Proof) -> Proof:
    """A proof on the original refused when a test function takes longer than the
    budget (``time_budget``): every mutant it reaches runs it, so the model is told its
    time and asked to shrink it."""
    budget = time_budget(ctx)
    if budget is None:
        return proof
    limit, how = budget
    proof.slow = {f: s for f, s in function_times(proof.cases).items() if s > limit}
    if not proof.slow:
        return proof
    times = ", ".join(f"{f} {s:.2f} s" for f, s in sorted(proof.slow.items(), key=lambda x: -x[1]))
    proof.ok = False
    proof.why = f"too slow on the original: {times} (budget {limit:.2f} s per test: {how})"
    proof.feedback = (
        f"The tests pass on the ORIGINAL kernel but are too slow: {times} on the original, "
        f"measured in the sandbox; the budget is {limit:.2f} s per test function ({how}). "
        "Every mutant runs these tests in Triton's interpreter on the CPU, where each "
        "program of the grid runs as Python. Shrink the shapes (a few blocks, sizes just "
        "off a block multiple), drop loops and repeats over inputs, and keep what each test "
        "checks."
    )
    return proof


def seeds(ctx: StageContext, test: TestFile | None = None) -> list[int]:
    """The seeds a test's proof on the original runs with: ``writers.runs`` of them. A
    probe test seeds its own inputs, its expected values are the original's outputs on
    them (the probe's run), and the one run of the proof must agree with them: one run
    (where bits may vary between runs, the probe ran the original twice alike first,
    ``harness/probe/comparing._Originals.confirm``)."""
    n = 1 if test is not None and test.origin == "probe" else max(1, ctx.settings.writers.runs)
    return [ctx.settings.seed + i for i in range(n)]


def prove_on_original(
    ctx: StageContext, test: TestFile, *, with_checks: bool = False, beside: dict | None = None
) -> Proof:
    """Passes the original ``runs`` times in a row, a fresh seed each time; ``beside``:
    jobs run in the same round, their results in ``Proof.beside``."""
    refused = source_problem(ast.parse(test.source))
    if refused is not None:
        why = f"refused before it ran: {refused}"
        return Proof(False, why, why[0].upper() + why[1:] + ".")
    jobs = {
        str(seed): job_with_test(
            ctx, test, None, seed, ctx.settings.timeout_s, with_checks=with_checks
        )
        for seed in seeds(ctx, test)
    }
    beside = beside or {}
    results = run_all(ctx, {**jobs, **beside})
    extra = {k: results.pop(k) for k in beside if k in results}
    return _proof_of_runs(ctx, test, jobs, results, extra)


def _proof_of_runs(
    ctx: StageContext,
    test: TestFile,
    jobs: dict[str, Job],
    results: dict[str, tuple[JobResult, bool]],
    beside: dict[str, tuple[JobResult, bool]],
) -> Proof:
    """``prove_on_original``'s proof from the ``results`` of its ``jobs`` (by seed):
    cancelled where some did not come back, else failed or passed."""
    runs = [results[k][0] for k in jobs if k in results]
    if len(runs) < len(jobs):
        return Proof(False, "the run was cancelled", runs=runs)
    failed = [(int(k), results[k][0]) for k in jobs if results[k][0].status is not JobStatus.PASSED]
    if failed:
        return _failed_on_original(failed, runs, jobs)
    return _passed_on_original(ctx, test, runs, beside)


def _passed_on_original(
    ctx: StageContext,
    test: TestFile,
    runs: list[JobResult],
    beside: dict[str, tuple[JobResult, bool]],
) -> Proof:
    """The proof of a test that passed every run on the original: refused where every
    test was skipped, or one is over its time budget (``too_slow``)."""
    ran = [o for o in runs[0].outcomes if o.status == "passed"]
    if not ran:
        return Proof(False, "every test was skipped", "Every test was skipped.", runs=runs)
    proof = Proof(True, original_s=max(r.duration_s for r in runs), runs=runs)
    proof.beside = beside
    proof.cases = case_record(test, runs)
    return too_slow(ctx, proof)


def _failed_on_original(
    failed: list[tuple[int, JobResult]], runs: list[JobResult], jobs: dict[str, Job]
) -> Proof:
    """The refused proof of a test that failed (some of) its runs on the original: the
    first failing run says why, flaky where other runs passed."""
    seed, first = failed[0]
    if first.status is JobStatus.ERROR:
        return Proof(
            False, f"the sandbox could not run it: {summarize_error(first.error)}", runs=runs
        )
    summary = summarize_error(first.error) or first.status.value
    if first.status is JobStatus.TIMEOUT:
        summary = f"timed out after {jobs[str(seed)].timeout_s:g} s"
    detail = failure_text(first)
    if len(failed) < len(runs):
        passed = len(runs) - len(failed)
        return Proof(
            False,
            f"flaky on the original: passed {passed} of {len(runs)} runs "
            f"(fresh seeds); with seed {seed}: {summary}",
            f"The tests are flaky: they passed {passed} of {len(runs)} runs on the ORIGINAL "
            f"kernel and failed with seed {seed}:\n{detail}",
            runs=runs,
        )
    return Proof(
        False,
        f"fails the original: {summary}",
        f"The tests fail on the ORIGINAL kernel, which is correct by definition:\n{detail}",
        runs=runs,
    )


def mutant_limit(ctx: StageContext, original_s: float) -> float:
    return ctx.mutant_timeout(original_s)


@dataclass(frozen=True)
class Asked:
    """What a proof is asked: that ``test`` kills ``mutant`` (``prove_killer``); with
    ``expected_s`` (the original's time on the test, known beforehand), the ``others``
    (the other survivors) run it in the same round, ``likely`` (ids seen to differ) with
    their evidence, ``slow`` (ids expected to run long) each alone."""

    test: TestFile
    mutant: Mutant
    expected_s: float | None = None
    others: tuple[Mutant, ...] = ()
    likely: frozenset[str] = frozenset()
    slow: frozenset[str] = frozenset()


def prove_killer(ctx: StageContext, asked: Asked) -> Proof:
    """Passes the original (every seed) and fails the mutant, both run in the sandbox.
    ``expected_s``: the original's time on the test, known beforehand (the probe ran it
    and saw the mutant differ): the mutant's run, and the diff-oracle's on the test
    (the behaviour evidence a kill needs), go beside the original's, their limits from
    that; one round of jobs instead of three. With it, ``others`` (the other survivors)
    run the test in that round too, and those in ``likely`` (seen to differ already)
    their evidence: ``Proof.ahead``, for ``accept_killer``, which uses a result made
    ahead only where its own job's limit could not have changed it. A mutant with
    evidence jobs runs the test there only: the oracle's run of the test on it is the
    run its own job would make (``variant_run``); where the oracle has none (a variant
    cut by the group's deadline, a run over the limit), its own job runs after.
    ``slow``: mutants expected to run long (one that hung on an input): each runs the
    test in a job of its own, first in the round, and has an evidence job to itself (a
    run over the limit in the oracle job would send it to a second round after it, and
    its time would hold the others of a shared one)."""
    test, mutant, expected_s = asked.test, asked.mutant, asked.expected_s
    if expected_s is None:
        proof = prove_on_original(ctx, test)
        if not proof.ok:
            return proof
        limit = mutant_limit(ctx, proof.original_s)
        job = job_with_test(ctx, test, mutant.source, ctx.settings.seed, limit)
        result, cached = run_all(ctx, {"mutant": job}).get("mutant", (None, False))
        ran: dict[str, tuple[JobResult, bool]] = {}
    else:
        proof, (result, cached), ran = _prove_in_one_round(ctx, asked, expected_s)
        if not proof.ok:
            return proof
    if result is None:
        return Proof(False, "the run was cancelled")
    proof.mutant, proof.cached = result, cached
    return _judge_mutant_run(ctx, asked, proof, result, ran)


def _prove_in_one_round(
    ctx: StageContext, asked: Asked, expected_s: float
) -> tuple[Proof, tuple[JobResult | None, bool], dict[str, tuple[JobResult, bool]]]:
    """``prove_killer`` where the original's time is known: the proof on the original with
    the mutant's run, the evidence jobs and the test on the others beside it, in one round
    (what ``kill_others`` may use: ``Proof.ahead``). The proof, the mutant's run (None:
    cancelled) and its evidence made beside, by mutant id."""
    test, mutant = asked.test, asked.mutant
    limit = mutant_limit(ctx, expected_s)
    job = job_with_test(ctx, test, mutant.source, ctx.settings.seed, limit)
    tests, evidence = _ahead_jobs(ctx, asked, expected_s)
    proof = prove_on_original(ctx, test, beside=_beside_the_proof(asked, job, tests, evidence))
    made = evidence.per_mutant(_evidence_beside(proof, evidence))
    runs = _test_runs(made, limit)
    _keep_ahead(proof, tests, made, runs, mutant.id)
    proof.ahead_limit_s = limit
    ran = {mid: r for mid, r in made.items() if mid == mutant.id}
    if not proof.ok:
        return proof, (None, False), ran
    return proof, _mutant_run(ctx, proof, runs, mutant.id, evidence, job), ran


def _evidence_beside(proof: Proof, evidence: OracleJobs) -> dict[str, tuple[JobResult, bool]]:
    """The evidence jobs' results taken out of ``proof.beside``, by job key."""
    return {
        k: proof.beside.pop(f"evidence:{k}")
        for k in evidence.jobs
        if f"evidence:{k}" in proof.beside
    }


def _mutant_run(
    ctx: StageContext,
    proof: Proof,
    runs: dict[str, tuple[JobResult, bool]],
    mid: str,
    evidence: OracleJobs,
    job: Job,
) -> tuple[JobResult | None, bool]:
    """The test's run on the mutant: made beside the proof, or in the oracle's evidence
    (``runs``), else, where the oracle covers it but has no run of it, run now."""
    result, cached = proof.beside.get("mutant") or runs.get(mid) or (None, False)
    if result is None and mid in evidence.covered:  # the oracle has no run of it
        result, cached = run_all(ctx, {"mutant": job}).get("mutant", (None, False))
    return result, cached


def _keep_ahead(
    proof: Proof,
    tests: dict[str, Job],
    made: dict[str, tuple[JobResult, bool]],
    runs: dict[str, tuple[JobResult, bool]],
    mutant_id: str,
) -> None:
    """Into ``Proof.ahead``, for ``kill_others``: the test's runs on the other mutants made
    in the proof's round (its own jobs' and the evidence jobs'), and their evidence."""
    proof.ahead = {k: proof.beside.pop(k) for k in tests if k in proof.beside}
    proof.ahead.update({f"evidence:{mid}": r for mid, r in made.items() if mid != mutant_id})
    proof.ahead.update({f"other:{mid}": r for mid, r in runs.items() if mid != mutant_id})


def _beside_the_proof(
    asked: Asked, job: Job, tests: dict[str, Job], evidence: OracleJobs
) -> dict[str, Job]:
    """The jobs run beside the proof on the original, in the order they start: the mutant's
    own (where the evidence jobs do not run the test on it, or it is slow), the test on the
    slow others, the evidence jobs, the test on the rest of the others."""
    slow = asked.slow
    keyed = {f"evidence:{k}": j for k, j in evidence.jobs.items()}
    first = {k: j for k, j in tests.items() if k.removeprefix("other:") in slow}
    beside = {**first, **keyed, **tests}  # the long ones start first
    if asked.mutant.id in slow or asked.mutant.id not in evidence.covered:
        beside = {"mutant": job, **beside}
    return beside


def _judge_mutant_run(
    ctx: StageContext,
    asked: Asked,
    proof: Proof,
    result: JobResult,
    ran: dict[str, tuple[JobResult, bool]],
) -> Proof:
    """The proof refused where the test passed the mutant, could not run on it, or failed
    it with no difference in the kernel's outputs (``behaviour``, ``ran``: its evidence)."""
    if result.status is JobStatus.PASSED:
        proof.ok = False
        proof.why = "passes on the mutant too: it does not kill it"
        proof.feedback = (
            "The test passed on the ORIGINAL kernel (good) but also passed on the MUTANT, so "
            "it does not kill it. Find an input where the mutant's behaviour differs."
        )
        return proof
    if result.status is JobStatus.ERROR:
        proof.ok = False
        proof.why = f"the sandbox could not run it on the mutant: {summarize_error(result.error)}"
        return proof
    mutant = asked.mutant
    failed = {mutant.id: (mutant, result)}
    why = behaviour(ctx, asked.test, failed, proof.original_s, ran)[mutant.id]
    if why is not None:
        proof.ok = False
        proof.why = f"not a kill: {why}"
        proof.feedback = (
            "The test passed on the ORIGINAL and failed on the MUTANT, but the kernel's "
            f"outputs did not differ ({why}). A kill counts only when the test sees the "
            "kernel's outputs differ from a correct reference. Find an input where they do."
        )
    return proof


def _ahead_jobs(
    ctx: StageContext, asked: Asked, expected_s: float
) -> tuple[dict[str, Job], OracleJobs]:
    """The test's runs ``kill_others`` would make on the ``others`` after the proof, built
    ahead (their limits from ``expected_s``), and the evidence jobs: for the mutant and
    for the others in ``likely``, several beside one run of the original (one in
    ``slow``: alone). A mutant the evidence jobs run needs no job of its own (they run
    the test on it), but one in ``slow``."""
    test, mutant, likely, slow = asked.test, asked.mutant, asked.likely, asked.slow
    others = [
        m for m in asked.others if m.id != mutant.id and ctx.ledger.verdict(m.id) in RULES["kill"]
    ]
    limit = mutant_limit(ctx, expected_s)
    compared = [mutant, *(m for m in others if m.id in likely)]
    evidence = _evidence_jobs(ctx, test, compared, slow, expected_s)
    jobs = {
        f"other:{m.id}": job_with_test(ctx, test, m.source, ctx.settings.seed, limit)
        for m in others
        if m.id in slow or m.id not in evidence.covered
    }
    return jobs, evidence


def _evidence_jobs(
    ctx: StageContext,
    test: TestFile,
    compared: list[Mutant],
    slow: frozenset[str],
    expected_s: float,
) -> OracleJobs:
    """The diff-oracle's jobs on ``compared`` (``behaviour_jobs``): several mutants beside
    one run of the original, each of those in ``slow`` alone."""
    shared = behaviour_jobs(ctx, test, [m for m in compared if m.id not in slow], expected_s)
    alone = behaviour_jobs(ctx, test, [m for m in compared if m.id in slow], expected_s, 1)
    return OracleJobs({**shared.jobs, **alone.jobs}, {**shared.members, **alone.members})


def _test_runs(
    made: dict[str, tuple[JobResult, bool]], limit: float
) -> dict[str, tuple[JobResult, bool]]:
    """The test's runs on the mutants inside their evidence jobs (``variant_run``), by
    mutant id: those its own job, under ``limit``, would have made (``_reusable``)."""
    runs = {mid: (variant_run(result), cached) for mid, (result, cached) in made.items()}
    return {
        mid: (run, cached)
        for mid, (run, cached) in runs.items()
        if run is not None and _reusable((run, cached), limit, limit)
    }


def _reusable(made: tuple[JobResult, bool] | None, ran_under: float, limit: float) -> bool:
    """Whether a test's run made ahead under the limit ``ran_under`` is the run a job
    with the limit ``limit`` would make: it ended inside both, or timed out under a
    limit at least as long."""
    if made is None or made[0].status is JobStatus.ERROR:
        return False
    result = made[0]
    if result.status is JobStatus.TIMEOUT:
        return ran_under >= limit
    return result.duration_s <= min(limit, ran_under)


def _evidence_reusable(made: tuple[JobResult, bool] | None) -> bool:
    """An oracle pair made ahead counts where it compared to the end (no time limit
    cut it: then its inner limit could not have changed what it saw)."""
    if made is None:
        return False
    data = harness_data(made[0], ORACLE_CHECK)
    if data is None or data.get("timed_out"):
        return False
    poisoned = data.get("poisoned") or {}
    return not poisoned.get("timed_out")


@dataclass(frozen=True)
class Kill:
    """What a proved test did to a mutant: the evidence a ``Ledger.kill`` records."""

    by: str  # test:NAME
    reason: str
    duration_s: float
    cached: bool


def kill_of(test: TestFile, result: JobResult, cached: bool) -> Kill:
    """How ``test`` failed a mutant: attributed to the failing test."""
    _, by, reason = decide(result)
    failure = result.first_failure
    if failure is not None:
        name = attribute(failure.name)
    else:
        name = "test:" + next(iter(find_test_functions(test.source)), test.name)
    if by and not by.startswith("test:"):
        reason = f"{by}: {reason}"
    return Kill(name, reason, result.duration_s, cached)


def record_kill(
    ctx: StageContext, mutant: Mutant, test: TestFile, kill: Kill, stage: str
) -> Iterator[Event]:
    """Record a proved kill in the ledger (and say so, when the ledger took it)."""
    outcome = ctx.ledger.kill(
        mutant.id,
        by=kill.by,
        reason=kill.reason,
        duration_s=kill.duration_s,
        cached=kill.cached,
        stage=stage,
        evidence=(
            f"{test.name} passes the original on every seed and fails this mutant: {kill.reason}"
        ),
    )
    yield from ctx.updated(mutant, outcome)


def kill_others(
    ctx: StageContext,
    test: TestFile,
    others: Iterable[Mutant],
    original_s: float,
    proof: Proof | None = None,
) -> list[tuple[Mutant, Kill]]:
    """Run an accepted killer test against the other survivors (and mutants claimed
    equivalent: a kill refutes the claim); the ones it fails. ``proof``: the test's,
    with runs made in its round (``Asked.others``), used where they are the
    runs these jobs would make (``_reusable``)."""
    others = [
        m for m in others if ctx.ledger.verdict(m.id) in RULES["kill"] and launches(ctx, test, m)
    ]
    if not others:
        return []
    limit = mutant_limit(ctx, original_s)
    results = _runs_on_others(ctx, test, others, limit, proof)
    failed = _failed_by(others, results)
    refused = behaviour(ctx, test, failed, original_s, _evidence_made_ahead(proof, failed))
    return [
        (m, kill_of(test, result, results[m.id][1]))
        for m, result in failed.values()
        if refused.get(m.id) is None
    ]


def _failed_by(
    mutants: list[Mutant], results: dict[str, tuple[JobResult, bool]]
) -> dict[str, tuple[Mutant, JobResult]]:
    """The ``mutants`` whose run in ``results`` neither passed nor errored, with that run."""
    return {
        m.id: (m, results[m.id][0])
        for m in mutants
        if m.id in results and results[m.id][0].status not in (JobStatus.PASSED, JobStatus.ERROR)
    }


def _runs_on_others(
    ctx: StageContext, test: TestFile, others: list[Mutant], limit: float, proof: Proof | None
) -> dict[str, tuple[JobResult, bool]]:
    """``test``'s run on each of ``others`` under ``limit``, by mutant id: the one made in
    ``proof``'s round where it is the run its job would make (``_reusable``), else run now."""
    ahead = proof.ahead if proof is not None else {}
    jobs = {m.id: job_with_test(ctx, test, m.source, ctx.settings.seed, limit) for m in others}
    results = {
        mid: ahead[f"other:{mid}"]
        for mid in jobs
        if proof is not None and _reusable(ahead.get(f"other:{mid}"), proof.ahead_limit_s, limit)
    }
    results.update(run_all(ctx, {k: job for k, job in jobs.items() if k not in results}))
    return results


def _evidence_made_ahead(
    proof: Proof | None, mutant_ids: Iterable[str]
) -> dict[str, tuple[JobResult, bool]]:
    """The diff-oracle's evidence on these mutants made in ``proof``'s round, by mutant id,
    where it still counts (``_evidence_reusable``)."""
    ahead = proof.ahead if proof is not None else {}
    return {
        mid: ahead[f"evidence:{mid}"]
        for mid in mutant_ids
        if _evidence_reusable(ahead.get(f"evidence:{mid}"))
    }


def launches(ctx: StageContext, test: TestFile, mutant: Mutant) -> bool:
    """Whether ``test`` may launch ``mutant``'s function: its proof on the original says
    it launched that kernel (or one calling it), or the record is unknown."""
    records = [info.get("functions") for info in (test.cases or {}).values()]
    if mutant.in_launcher or not records or any(r is None for r in records):
        return True
    reach = jit_callers(ctx.kernel.source, mutant.function)
    return any(reach & set(r) for r in records)


def behaviour_jobs(
    ctx: StageContext,
    test: TestFile,
    mutants: Iterable[Mutant],
    original_s: float,
    per_job: int = ORACLE_PER_JOB,
) -> OracleJobs:
    """The diff-oracle's jobs for ``behaviour``: the original and the mutants side by
    side with ``test`` as the only check, several mutants beside one run of the original
    (in the interpreter; none in compiled mode)."""
    if ctx.settings.mode != "interpret":
        return OracleJobs({}, {})
    inner = job_with_test(ctx, test, None, ctx.settings.seed, mutant_limit(ctx, original_s))
    # one job for up to ``per_job`` mutants: its variants run at once, a process each,
    # and the original runs once for all of them
    return oracle_jobs(ctx, list(mutants), inner, per_job)


def behaviour(
    ctx: StageContext,
    test: TestFile,
    failed: dict[str, tuple[Mutant, JobResult]],
    original_s: float,
    ran: dict[str, tuple[JobResult, bool]] | None = None,
) -> dict[str, str | None]:
    """For each mutant ``test`` failed: why that is not a kill (``kill_evidence``), or
    None. In the interpreter the diff-oracle runs original and mutant side by side with
    ``test`` as the only check, so the evidence is what the kernel did in that run
    (``ran``: those runs by mutant id, made beforehand from ``behaviour_jobs``)."""
    needed = [m for m, result in failed.values() if result.status is not JobStatus.BOUNDS]
    fields = {}
    for mid, (result, _) in _oracle_runs(ctx, test, needed, original_s, ran).items():
        if mid in failed:
            fields[mid], _ = compare(ctx, failed[mid][0], result)
    return {
        mid: kill_evidence(result.status, fields.get(mid), ctx.settings.mode)
        for mid, (_, result) in failed.items()
    }


def _oracle_runs(
    ctx: StageContext,
    test: TestFile,
    mutants: list[Mutant],
    original_s: float,
    ran: dict[str, tuple[JobResult, bool]] | None,
) -> dict[str, tuple[JobResult, bool]]:
    """The diff-oracle's run of ``test`` on each of ``mutants``, by mutant id: the one in
    ``ran`` where there is one, else run now (``behaviour_jobs``)."""
    results = {m.id: ran[m.id] for m in mutants if ran is not None and m.id in ran}
    rest = [m for m in mutants if m.id not in results]
    for per_job in (ORACLE_PER_JOB, 1):  # those a job of several gave no answer: alone
        if not rest:
            break
        needs = behaviour_jobs(ctx, test, rest, original_s, per_job)
        results.update(needs.per_mutant(run_all(ctx, needs.jobs)))
        rest = [m for m in rest if m.id not in results]
    return results


def accept_killer(
    ctx: StageContext,
    stage: str,
    test: TestFile,
    mutant: Mutant,
    proof: Proof,
    pool: list[Mutant],
) -> Iterator[Event]:
    """A proved killer test joins the run, kills its mutant, then every other mutant of
    ``pool`` it fails; ends with ``TestAccepted``."""
    assert proof.mutant is not None
    test = replace(test, cases=proof.cases)
    ctx.add_tests([test])
    yield from record_kill(ctx, mutant, test, kill_of(test, proof.mutant, proof.cached), stage)
    kills = [mutant.id]
    others = [m for m in pool if m.id != mutant.id]
    for other, kill in kill_others(ctx, test, others, proof.original_s, proof):
        kills.append(other.id)
        yield from record_kill(ctx, other, test, kill, stage)
    functions = tuple(find_test_functions(test.source))
    yield TestAccepted(
        stage, keep(ctx, test), functions, mutant.id, tuple(kills), duration_s=file_time(test)
    )


# -- per-mutant records ------------------------------------------------------------------
def claims(ctx: StageContext, mutant_id: str) -> list[dict]:
    """A copy of the mutant's claims (``add_claim`` adds one)."""
    return ctx.ledger.row(mutant_id, "claims", [])


def add_claim(ctx: StageContext, mutant_id: str, claim: dict) -> None:
    ctx.ledger.update_row(mutant_id, "claims", lambda had: [*had, claim], [])


def attempts(ctx: StageContext, mutant_id: str) -> list[dict]:
    """A copy of the mutant's rejected attempts (``add_attempt`` adds one)."""
    return ctx.ledger.row(mutant_id, "attempts", [])


def add_attempt(ctx: StageContext, mutant_id: str, entry: dict) -> int:
    """Add a rejected attempt of ``entry["by"]``, numbered after that writer's earlier
    ones (``entry["attempt"]``, set here when missing); returns its number."""

    def add(had: list[dict]) -> list[dict]:
        numbered = {"attempt": 1 + sum(1 for a in had if a.get("by") == entry.get("by"))}
        return [*had, {**numbered, **entry}]

    return ctx.ledger.update_row(mutant_id, "attempts", add, [])[-1]["attempt"]
