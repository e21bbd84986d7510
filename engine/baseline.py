"""The original runs first: it must pass every check, and its time sets each mutant's
limit (and, in the interpreter, its store trace gives the race hint: ``race_record``).
Then the own check is judged by running it with every kernel launch skipped.

``run_baseline`` raises ``BadInput`` (exit 2, one line) when the original fails or
times out: nothing can be judged against a failing original.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import replace

from .errors import BadInput
from .events import Event, OwnCheckJudged
from .job import TOO_BIG_WORDS, CheckOutcome, JobResult, JobStatus
from .kernel_file import EXTRA_TESTS, GIVEN, OWN_CHECK, KernelFile, TestFile
from .left_out_cases import (
    DESELECTED,
    LEFT_OUT_CASES,
    leave_out_cases,
    timeout_message,
    with_case_clock,
    without_slow_cases,
)
from .left_out_cases import left_out_line as left_out_line  # library.py reads it here
from .left_out_cases import nice_seconds as nice_seconds  # the tests read it here
from .limits import describe
from .own_check import NOTHING_ASSERTED
from .spread import run_original
from .stage import StageContext
from .verdicts import summarize_error

NO_KERNEL_LAUNCHED = (
    "the file launches no kernel: no check can see a kernel's output, so every mutant is "
    "not reached (survived, no evidence either way)"
)


def own_check_record(kernel: KernelFile) -> dict:
    """The report's ``own_check`` as read from the source (until ``judge_own_check``)."""
    return {
        "kinds": [c.kind.value for c in kernel.checks if c.name == OWN_CHECK],
        "module_level": kernel.module_check,
        "asserts": kernel.asserts,
        "evidence": "read from its source",
        "note": "" if kernel.asserts else NOTHING_ASSERTED,
    }


def cpu_tensor_hint(mode: str, error: str) -> str:
    """Compiled mode, and Triton refused a CPU tensor: say what to change."""
    if mode == "compiled" and "cannot be accessed from Triton" in error:
        return (
            " (the own check makes CPU tensors; compiled mode needs them on the GPU: "
            "device='cuda', or --mode interpret)"
        )
    return ""


def _each_test_file_launches_a_kernel(kernel: KernelFile, result: JobResult) -> None:
    """A ``--tests`` file none of whose cases launches a kernel of the file (project
    mode: of the module; ``jit_callers`` of any of its jit functions) can never kill a
    mutant, yet every mutant would run it: bad input. Judged by what the original's run
    launched, not by import lines, so a test that imports the kernel through a
    package's re-exports counts; a skipped case launches nothing."""
    coverage = result.extra.get("coverage")
    if coverage is None:
        return
    reaches = _reaches_a_kernel(kernel)
    skipped = _skipped_cases(result)
    of = kernel.project.module if kernel.project is not None else kernel.path
    for test in (t for t in kernel.tests if t.origin == GIVEN):
        cases = _cases_of_file(kernel, test, coverage)
        if cases and not any(reaches(v) for case, v in cases.items() if case not in skipped):
            reasons = [skipped[case] for case in cases if case in skipped]
            raise BadInput(f"{test.path}: {launches_nothing(len(cases), reasons, of)}")


def _reaches_a_kernel(kernel: KernelFile) -> Callable[[dict], bool]:
    """Whether a case's record launched a kernel of the file (project mode: of the module,
    or a function that calls one of its jit functions)."""
    from .project import jit_callers, record_reaches

    names = {f.name for f in kernel.jit_functions}
    reach = set().union(*(jit_callers(kernel.source, n) for n in names)) if names else set()
    module = kernel.project.module if kernel.project is not None else None
    return lambda record: record_reaches(record, module, reach)


def _cases_of_file(kernel: KernelFile, test: TestFile, coverage: dict) -> dict:
    """The per-case records of one test file: {case without its file: record}."""
    prefix = os.path.relpath(test.path, kernel.project.root) if kernel.project else test.name
    return {k.split("::", 1)[1]: v for k, v in coverage.items() if k.split("::", 1)[0] == prefix}


def _skipped_cases(result: JobResult) -> dict[str, str]:
    """The --tests cases pytest skipped: {case: its skip reason, "" when none came
    back}. Outcomes name a case without its file, so a name some file ran is not
    counted as skipped."""
    prefix = f"{EXTRA_TESTS}::"
    cases = [o for o in result.outcomes if o.name.startswith(prefix)]
    ran = {o.name[len(prefix) :] for o in cases if o.status != "skipped"}
    return {
        o.name[len(prefix) :]: o.message
        for o in cases
        if o.status == "skipped" and o.name[len(prefix) :] not in ran
    }


def launches_nothing(cases: int, reasons: list[str], of: str) -> str:
    """Why a test file cannot kill a mutant of ``of``: its ``cases`` launch no kernel of
    it, or pytest skipped them (``reasons``: one per skipped case, with pytest's words
    where they came back)."""
    why = _skip_reasons(reasons)
    if reasons and len(reasons) == cases:
        each = "its test case was" if cases == 1 else f"all {cases} of its test cases were"
        return f"{each} skipped{why}, so it launches no kernel of {of} and cannot kill its mutants"
    n = "its one test case never" if cases == 1 else f"none of its {cases} test cases"
    skipped = f" ({len(reasons)} skipped{why})" if reasons else ""
    return f"{n} launches a kernel of {of}{skipped}, so it cannot kill its mutants"


def _skip_reasons(reasons: list[str]) -> str:
    """pytest's skip reasons as said after "skipped": the first in order and how many
    others (": needs CUDA (and 2 other reasons)"); "" when none came back."""
    said = sorted({r.strip() for r in reasons if r.strip()})
    if not said:
        return ""
    others = len(said) - 1
    more = f" (and {others} other reason{'s' if others > 1 else ''})" if others else ""
    return f": {said[0]}{more}"


def interpreter_failure(result: JobResult, mode: str) -> str | None:
    """The one line for an original whose check failed because a launch raised inside
    Triton's interpreter (``harness.parity`` records it): the real exception, the kernel
    and its line, and the way on; None when the failure is not that (an assert of the
    test's stays what it is)."""
    records = result.extra.get("interpreter_errors") or []
    failing = result.first_failure
    if mode != "interpret" or not records or failing is None:
        return None
    if "InterpreterError" not in failing.message:
        return None
    case = f" (in {failing.name.split('::', 1)[1]})" if "::" in failing.name else ""
    return (
        f"the original fails inside Triton's interpreter, not in an assert of its checks{case}: "
        f"{_raised_where(records[0])}; the interpreter cannot run this kernel as a GPU would: "
        "run it compiled with --mode compiled on a CUDA machine"
    )


def _raised_where(record: dict) -> str:
    """An interpreter error record in words: the exception, the kernel, its file and line,
    and the source line where it came back."""
    where = os.path.basename(record.get("file") or "") or "?"
    source = f": {record['source']}" if record.get("source") else ""
    return (
        f"{record['exception']} in kernel {record['kernel']} at {where}:{record.get('line')}"
        f"{source}"
    )


def failing_test_file(kernel: KernelFile, failing: CheckOutcome | None) -> str | None:
    """The test file whose failure failed the original, in words (``--tests x.py``, the
    project's test, a written one), or None when the failure is the file's own check's.
    An outcome names its case, not its file: the one test file there is, else the one
    the failure's text names (pytest names the file in a collection error and in an
    assert's location), else every test file there is."""
    if failing is None or failing.name.split("::", 1)[0] != EXTRA_TESTS:
        return None
    tests = _blamed_tests(kernel, failing.message)
    said = " or ".join(_shown(t.path) if t.origin == GIVEN else t.name for t in tests)
    if all(t.origin == GIVEN for t in tests):
        return f"the project's test {said}" if kernel.project is not None else f"--tests {said}"
    return f"the test file {said}"


def _blamed_tests(kernel: KernelFile, message: str) -> list[TestFile]:
    """The test files a failure's text blames: the one there is, else the one ``message``
    names, else every one there is."""
    tests = list(kernel.tests)
    if len(tests) <= 1:
        return tests
    named = [t for t in tests if _names_file(message, t, kernel)]
    return named if len(named) == 1 else tests


def _names_file(message: str, test: TestFile, kernel: KernelFile) -> bool:
    """Whether pytest's text names ``test``'s file (by its path from the project's root
    in project mode, else by its name in the job)."""
    name = os.path.relpath(test.path, kernel.project.root) if kernel.project else test.name
    return re.search(rf"(?<![\w.-]){re.escape(name)}\b", message) is not None


def _shown(path: str) -> str:
    """A path as a user would type it: relative to the working directory when under it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _selection_leaves_cases(ctx: StageContext, result: JobResult) -> None:
    """``-k`` / ``-m``: a selection that leaves no case of any --tests file to run is bad
    input (nothing the tests do can judge a mutant), named with the expressions."""
    settings = ctx.settings
    if not (settings.keyword or settings.marker):
        return
    ran = [
        o for o in result.outcomes if o.name.split("::")[0] != OWN_CHECK and o.status != "skipped"
    ]
    if not ran:
        chosen = _selection_said(settings.keyword, settings.marker)
        raise BadInput(f"{ctx.kernel.path}: {chosen} selects no test case of the --tests files")


def _selection_said(keyword: str | None, marker: str | None) -> str:
    """The selection as the user gave it: "-k 'EXPR' -m 'MARK'", each where given."""
    return " ".join(
        f"{flag} {value!r}" for flag, value in (("-k", keyword), ("-m", marker)) if value
    )


def failed_original(kernel: KernelFile, mode: str, job_mode: str, result: JobResult) -> BadInput:
    """The one line for an original that failed its checks: the kernel file's import, a
    limit it hit, the interpreter, a test file (``--tests``, the project's, a written
    one: named as such), or the file's own check."""
    name = kernel.path
    unrun = _checks_unrun(name, result)
    if unrun is not None:
        return unrun
    why = summarize_error(result.error) or result.status.value
    failing = result.first_failure
    case = _failed_case(failing)
    limit = result.extra.get("limit")
    if limit:
        said = limit.get("said") or why
        return BadInput(
            f"{name}: the original hit {describe(limit)} ({case and case + ': '}{said})"
        )
    interpreted = interpreter_failure(result, job_mode)
    if interpreted is not None:
        return BadInput(f"{name}: {interpreted}")
    why = re.sub(r"^E\s{2,}", "", why)  # pytest's mark of an error line
    blamed = failing_test_file(kernel, failing)
    if blamed is not None:  # a test file's fault, not the kernel file's own check
        return BadInput(f"{blamed} failed on the original of {name}{case and f' ({case})'}: {why}")
    return BadInput(
        f"{name}: the original fails its own check ({result.status.value}): "
        f"{case and case + ': '}{why}" + cpu_tensor_hint(mode, result.error)
    )


def _failed_case(failing: CheckOutcome | None) -> str:
    """The test case whose failure failed the original, by its name without its file;
    "" when the failure is not one case's."""
    return failing.name.split("::", 1)[1] if failing and "::" in failing.name else ""


def _checks_unrun(name: str, result: JobResult) -> BadInput | None:
    """The one line for an original whose checks never ran: too many test cases to run
    (one test file's alone), or the kernel file's import failed; None otherwise."""
    if result.status is JobStatus.ERROR and TOO_BIG_WORDS in result.error:
        said = result.error.splitlines()[0]  # one test file's cases alone are too many
        return BadInput(f"{name}: the original's {said}; leave cases out with -k EXPR")
    failing = result.first_failure
    if failing is not None and failing.name == "import":
        return BadInput(f"{name}: {summarize_error(failing.message)}")
    return None


def run_baseline(
    ctx: StageContext,
    on_progress=None,
    *,
    original: JobResult | None = None,
    whole_suite: bool = False,
) -> tuple[JobResult, bool]:
    """The original with every check; sets ``ctx.baseline``, ``timeout_s`` and (the test
    cases' launches and times) ``coverage``. Returns (result, served from the cache).
    ``on_progress``: each progress report of its checks (pytest: cases collected, each
    case through). ``original``: the suite's passing result to take instead of running
    it, as served from the cache (a library run's, ``engine/library.py``);
    ``whole_suite``: a test file that reaches no kernel of this module is not bad input."""
    settings, kernel = ctx.settings, ctx.kernel
    job = _original_job(ctx)
    if original is not None:
        result, cached = original, True
    else:
        result, cached = run_original(ctx, job, on_progress)  # spread over the workers
    name = kernel.path
    if result.status is JobStatus.TIMEOUT and original is None:
        result, cached = without_slow_cases(ctx, job, result, cached, on_progress)
    if result.status is JobStatus.TIMEOUT:
        stopped = result.extra.get("timed_out")
        cases = result.extra.get("cases")
        raise BadInput(timeout_message(name, settings.timeout_s, cases, stopped))
    whole = result
    result = leave_out_cases(ctx, result)
    if result.status is not JobStatus.PASSED:
        raise failed_original(kernel, settings.mode, job.mode, result)
    _selection_leaves_cases(ctx, result)
    if settings.all_configs:
        result = _other_configs(ctx, result)
    if not whole_suite:
        _each_test_file_launches_a_kernel(kernel, whole)
    _record_baseline(ctx, result, job.trace_races)
    return result, cached


def _original_job(ctx: StageContext):
    """The original's job: race-traced in the interpreter, case-clocked by ``--case-time``."""
    job = ctx.job_for(None, ctx.settings.timeout_s)
    if job.mode == "interpret":
        job = replace(job, trace_races=True)  # the race hint rides on the original's run
    if ctx.settings.case_time_s is not None and ctx.kernel.project is not None:
        job = with_case_clock(job, ctx.settings.case_time_s)
    return job


def _record_baseline(ctx: StageContext, result: JobResult, trace_races: bool) -> None:
    """Sets the passing original on ``ctx`` and puts its sections in the report."""
    if result.extra.get(LEFT_OUT_CASES):
        ctx.ledger.put_section(LEFT_OUT_CASES, result.extra[LEFT_OUT_CASES])
    if result.extra.get(DESELECTED):  # the cases that ran past the limit: in no later job
        ctx.deselect(result.extra[DESELECTED])
    ctx.set_baseline(result)
    ctx.measured(result)
    if ctx.coverage is not None and (ctx.kernel.project is not None or ctx.coverage):
        # each mutant runs the test cases that launch its kernel (``StageContext.job_for``)
        ctx.ledger.put_section(
            "selection", {"suite_cases": len(ctx.coverage), "cases_run": 0, "mutants": 0}
        )
    if trace_races:
        ctx.ledger.put_section("races", race_record(result))


RACE_NOTE = (
    "several programs of one launch store to the same address: on a GPU the order of "
    "those stores is undefined, and where their values agree no value check (own check, "
    "tests, diff-oracle) can see it"
)


def race_record(result: JobResult) -> dict:
    """The report's ``races``: what the original's own check showed in the interpreter's
    store trace (``harness/bounds.py``): per kernel and store line, two programs of one
    launch that stored to one address."""
    found = list(result.extra.get("races") or [])
    return {
        "checked": "the original's checks, in the interpreter",
        "found": found,
        "note": RACE_NOTE if found else "",
    }


def _other_configs(ctx: StageContext, baseline: JobResult) -> JobResult:
    """``--all-configs``: the original must pass under every autotune config too.

    Returns the slowest of the baseline runs (it sets the mutants' limit).
    """
    ctx.set_configs(max(baseline.extra.get("autotune_configs", {}).values(), default=1))
    ctx.ledger.put_section("autotune", {"configs": ctx.configs, "all_configs": True})
    slowest = baseline
    for config in range(1, ctx.configs):
        job = ctx.job_for(None, ctx.settings.timeout_s, config=config)
        result, _ = ctx.execute(job)
        if result.status is not JobStatus.PASSED:
            why = summarize_error(result.error) or result.status.value
            raise BadInput(
                f"{ctx.kernel.path}: the original fails its own check with autotune config "
                f"{config + 1} of {ctx.configs}: {why}"
            )
        slowest = max(slowest, result, key=lambda r: r.duration_s)
    return slowest


def judge_own_check(ctx: StageContext) -> Iterator[Event]:
    """Run the own check once with every kernel launch skipped and empty tensors -31337
    (``harness/null_run.py``): if it still passes, it cannot see a wrong result,
    whatever its source says (``assert x.device == DEVICE`` is not a check of the
    output). Falls back on reading the source when that run says nothing."""
    own = tuple(c for c in ctx.kernel.checks if c.name == OWN_CHECK)  # as "kinds" counts them
    if not own:
        return

    def judged(**fields) -> None:
        ctx.ledger.update_section("own_check", lambda had: {**had, **fields}, {})

    if ctx.baseline is not None and ctx.baseline.extra.get("launched") == []:
        # Not the check's fault: the file's kernels never run, whatever the check asserts.
        evidence = (
            "no check launches any of the file's @triton.jit kernels: its wrappers compute "
            "without them"
        )
        judged(asserts=False, evidence=evidence, note=NO_KERNEL_LAUNCHED, launches=0)
        yield OwnCheckJudged(False, evidence, NO_KERNEL_LAUNCHED)
        return
    # the limit of a mutant's job (the original's CPU seconds, scaled): a check that
    # hangs without its kernels (sleeping, so its CPU limit never fires) stops at that
    # limit's wall-clock backstop, not the original's far one
    job = replace(ctx.job_for(None, ctx.timeout_s), checks=own, null_launches=True)
    result, _ = ctx.execute(job)
    asserts, evidence = _null_run_evidence(ctx.kernel, result)
    note = "" if asserts else NOTHING_ASSERTED
    judged(asserts=asserts, evidence=evidence, note=note)
    yield OwnCheckJudged(asserts, evidence, note)


def _null_run_evidence(kernel: KernelFile, result: JobResult) -> tuple[bool, str]:
    """Whether the own check asserts on the kernels' output, and the evidence, from its
    run with every launch skipped: passing says no, failing says yes; a run that ended
    otherwise (a timeout, an error) leaves the answer to reading the source."""
    skipped = int(result.extra.get("null_run", {}).get("skipped_launches", 0))
    if result.status is JobStatus.PASSED and skipped:
        launches = f"{skipped} kernel launch" + ("es" if skipped != 1 else "")
        return False, f"it still passes with its {launches} skipped, outputs left as -31337"
    if result.status is JobStatus.PASSED:
        return False, "it launches no kernel at all"
    if result.status in (JobStatus.FAILED, JobStatus.CRASH, JobStatus.BOUNDS):
        why = summarize_error(result.error) or result.status.value
        why = why if len(why) <= 120 else why[:117].rstrip() + "..."
        return True, f"it fails when no kernel runs ({why})"
    what = "finds a result check" if kernel.asserts else "finds no result check"
    return kernel.asserts, (
        f"reading its source {what} (the run without kernels ended "
        f"{result.status.value}: {summarize_error(result.error) or 'no detail'})"
    )
