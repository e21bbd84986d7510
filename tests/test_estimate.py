"""The mutant phase's estimate: said once the original has run, from the original's time
on the checks each mutant runs; past a few minutes, what would cut it; an ETA while it
runs; the report keeps it."""

from __future__ import annotations

import json
import re
import shutil
from types import SimpleNamespace

import pytest

from mutant_gate.cli.reporter import Eta
from mutant_gate.engine.estimate import CUT_AFTER_S, estimate
from mutant_gate.engine.events import RunEstimated, about
from mutant_gate.engine.job import Job
from mutant_gate.engine.kernel_file import load_kernel_file
from mutant_gate.engine.mutate import generate_mutants
from mutant_gate.engine.settings import RunSettings
from tests.conftest import EXAMPLES, run_cli


def context(path: str, per_job_s: float, workers: int, **settings) -> SimpleNamespace:
    """What ``estimate`` reads of a run: its settings, kernel file, workers, and the
    original's time on a job's checks (here the same for every job)."""
    return SimpleNamespace(
        settings=RunSettings(path, **settings),
        kernel=load_kernel_file(path),
        workers=workers,
        original_s=lambda checks, warm=False: per_job_s,
    )


def plan(path: str) -> tuple[dict, dict]:
    mutants = {m.id: m for m in generate_mutants(open(path).read(), path)}
    jobs = {f"{i}@0": Job(files=(("k.py", m.source),), checks=()) for i, m in mutants.items()}
    return jobs, mutants


def test_the_estimate_shares_the_work_over_the_workers_and_counts_cached_as_free():
    path = str(EXAMPLES / "layer_norm.py")
    jobs, mutants = plan(path)
    n = len(mutants)
    cached = set(list(jobs)[:4])
    event = estimate(context(path, 2.0, 2), jobs, mutants, cached, n + 3)
    assert (event.mutants, event.to_run, event.cached, event.not_reached) == (n + 3, n - 4, 4, 3)
    assert event.seconds == pytest.approx((n - 4) * 2.0 / 2)
    assert event.cuts == ()  # a minute or so: nothing to cut
    first = event.lines()[0]
    assert (
        first
        == f"{n + 3} mutants: {n - 4} to run, about {about(event.seconds)} at 2 workers (the original's 2.0 s each)"
    )


def test_a_long_run_names_what_would_cut_it():
    path = str(EXAMPLES / "layer_norm.py")
    jobs, mutants = plan(path)
    per_job = 2 * CUT_AFTER_S / len(mutants) * 2  # twice the threshold at 2 workers
    event = estimate(context(path, per_job, 2), jobs, mutants, set(), len(mutants))
    assert event.seconds > CUT_AFTER_S
    assert event.cuts[0].startswith("--operators (most mutants: ")
    assert "--changed-since REF" in event.cuts and "--mode compiled on a GPU" in event.cuts
    assert "-k EXPR" not in event.cuts  # no test file to select cases of
    assert event.lines()[1].startswith("to cut it: --operators")
    compiled = estimate(
        context(path, per_job, 2, mode="compiled", changed_since="HEAD"),
        jobs,
        mutants,
        set(),
        len(mutants),
    )
    assert "--changed-since REF" not in compiled.cuts
    assert "--mode compiled on a GPU" not in compiled.cuts


def test_durations_and_the_eta_read_as_a_person_says_them():
    assert [about(s) for s in (0.2, 40, 89, 3300, 4800, 7200)] == [
        "1 s",
        "40 s",
        "89 s",
        "55 min",
        "1 h 20 min",
        "2 h",
    ]
    eta = Eta(to_run=10, seconds=100.0, workers=2)
    start = eta.started
    assert eta.left(start + 30) == pytest.approx(70.0)  # the estimate until 2 have run
    eta.ran = 5  # then the pace seen: 5 in 50 s, 5 to go
    assert eta.left(start + 50) == pytest.approx(50.0)
    eta.ran = 10
    assert eta.left() is None and eta.words() == ""
    assert RunEstimated(1, 1, 0, 0, 1, 0.5, 0.5).lines() == [
        "1 mutant: about 1 s at 1 worker (the original's 0.5 s each)"
    ]


@pytest.mark.slow
def test_a_run_says_its_estimate_and_keeps_it(tmp_path):
    shutil.copy(EXAMPLES / "layer_norm.py", tmp_path / "layer_norm.py")
    args = ("run", "layer_norm.py", "--writer", "none", "--operators", "mask-drop")
    args += ("--cache-dir", "c", "--json", "r.json", "--no-write-tests")
    out = run_cli(*args, cwd=tmp_path, env={"MUTANT_GATE_PROGRESS_S": "0.5"})
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    kept = report["estimate"]
    n = len(report["mutants"])
    assert (kept["mutants"], kept["to_run"], kept["cached"]) == (n, n, 0)
    assert kept["workers"] == report["sandbox"]["workers"] and kept["seconds"] > 0
    line = re.compile(
        rf"^{n} mutants: about \d+ (s|min) at {kept['workers']} workers? \(the original's"
    )
    assert any(line.match(ln) for ln in out.stdout.splitlines()), out.stdout
    again = run_cli(*args, cwd=tmp_path)  # all from the cache: nothing to estimate aloud
    assert again.returncode == 0
    assert not any(line.match(ln) for ln in again.stdout.splitlines())
    assert json.loads((tmp_path / "r.json").read_text())["estimate"]["cached"] == n


def test_a_selections_time_never_loses_its_cases_to_the_whole_runs_overlap():
    """A mutant's limit and the phase's estimate come from the original's time on the cases
    it runs: the time outside the cases is never below 0, so cases whose own times add up to
    more than the original's whole time (a spread suite) still count in full."""
    from mutant_gate.engine.stage import selection_seconds

    assert selection_seconds(10.0, 4.0, 1.5) == 7.5  # 6 s outside the cases, 1.5 s of them
    assert selection_seconds(671.6, 1400.0, 12.0) == 12.0  # was max(671.6 - 1400 + 12, 0) = 0


def test_the_estimate_leaves_out_the_imports_a_warm_runner_keeps_and_limits_keep_them():
    """The original paid its test files' third-party imports (``extra["imports"]``); a
    mutant's job on a warm runner does not, so the estimate prices it without them, while
    its limit (a job on a fresh runner pays them) keeps them."""
    from mutant_gate.engine.job import JobResult, JobStatus
    from mutant_gate.engine.stage import StageContext

    path = str(EXAMPLES / "layer_norm.py")
    ctx = StageContext(RunSettings(path), None, None, load_kernel_file(path), [])
    imports = {"cpu_s": 6.0, "wall_s": 7.0, "modules": 40}
    ctx.set_baseline(
        JobResult(JobStatus.PASSED, duration_s=10.0, cpu_s=8.5, extra={"imports": imports})
    )
    assert ctx.original_s(()) == pytest.approx(8.5)
    assert ctx.original_s((), warm=True) == pytest.approx(2.5)
    assert ctx.timeout_s == pytest.approx(ctx.mutant_timeout(8.5))
