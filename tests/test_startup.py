"""Commands that run no kernel start without the heavy imports: `--help`, `cache ls` and
`report` import neither torch, triton, libcst nor numpy (checked in a fresh process).
Timings are for benchmarks; these assert what was imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "triton", "libcst", "numpy")
#: Lazy on a cached rerun (ms measured on one here, interpreted from source): reading
#: versions through importlib.metadata (11-21), the probe writer with no survivor to
#: probe (22), the bar with -q (6.5), the report formats (4), the model client (3).
CACHED_LAZY = (
    "importlib.metadata",
    "mutant_gate.engine.writers.probe.stage",
    "rich.progress",
    "mutant_gate.engine.formats.html",
    "mutant_gate.engine.writers.llm",
)

PROBE = """
import json, sys
from mutant_gate.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)
"""


def imported(*argv: str, cwd, modules: tuple[str, ...] = HEAVY) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=modules), *argv],
        capture_output=True, text=True, cwd=cwd, timeout=120,
    )  # fmt: skip
    return json.loads(proc.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "argv",
    [("--help",), ("run", "--help"), ("report", "--help")],
)
def test_commands_that_run_no_kernel_import_nothing_heavy(argv, tmp_path):
    assert imported(*argv, cwd=tmp_path) == []


def test_a_report_of_a_cached_run_imports_nothing_heavy(tmp_path):
    from mutant_gate.cache import Store

    report = json.loads(
        (Path(__file__).parent / "data" / "tui_affine_oracle_report.json").read_text()
    )
    with Store(str(tmp_path / "c")) as store:
        store.put_run(report["run_id"], {"run_id": report["run_id"], "report": report})
    argv = ("report", "latest", "--format", "markdown", "--out", "r.md", "--cache-dir", "c")
    assert imported(*argv, cwd=tmp_path) == []
    assert "affine" in (tmp_path / "r.md").read_text()


def test_cache_ls_of_a_cache_with_a_run_imports_nothing_heavy(tmp_path):
    """``cache ls`` on a cache that holds a run, and lists it (on a missing cache it
    stops at "No cache" before it could import anything)."""
    from mutant_gate.cache import Store

    report = json.loads(
        (Path(__file__).parent / "data" / "tui_affine_oracle_report.json").read_text()
    )
    with Store(str(tmp_path / "c")) as store:
        store.put_run(report["run_id"], {"run_id": report["run_id"], "report": report})
    assert imported("cache", "ls", "--cache-dir", "c", cwd=tmp_path) == []
    listed = subprocess.run(
        [sys.executable, "-m", "mutant_gate.cli", "cache", "ls", "--cache-dir", "c"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert report["run_id"] in listed.stdout and "No cache" not in listed.stdout


def test_a_run_does_import_the_engine(tmp_path):
    """The probe above can see heavy imports: a bad-input run gets as far as the loader."""
    (tmp_path / "k.py").write_text("x = 1\n")
    assert "libcst" in imported("run", "k.py", "--no-cache", cwd=tmp_path)


def test_trace_jobs_are_built_without_numpy():
    """A cached rerun whose probe found a kill builds trace jobs (keyed by the trace
    version) to look its evidence up: that side of the harness needs no numpy (a cold
    run of a file that shows it, matmul, takes most of a minute here)."""
    from mutant_gate.engine.harness import trace

    code = (
        "import sys; from mutant_gate.engine.checks import harness_jobs; "
        "print(harness_jobs.TRACE_VERSION, 'numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.split() == [str(trace.TRACE_VERSION), "False"], out.stderr


@pytest.mark.slow
def test_a_fully_cached_rerun_imports_nothing_heavy(tmp_path):
    """The second run of the same file finds its parsed form, its mutants and every job
    result in the cache (the probe writer's too): no parser, no torch, no triton and no
    numpy in the tool's process, none of what only a run with work to do needs
    (``CACHED_LAZY``), and the same verdicts as the first run."""
    from .conftest import EXAMPLES

    kernel = str(EXAMPLES / "vector_add.py")
    argv = ("run", kernel, "--cache-dir", "c", "-q")
    first = imported(*argv, "--json", "a.json", cwd=tmp_path)
    assert "libcst" in first  # the first run parses the file
    again = imported(*argv, "--json", "b.json", cwd=tmp_path, modules=HEAVY + CACHED_LAZY)
    assert again == [], again
    a, b = (json.loads((tmp_path / n).read_text()) for n in ("a.json", "b.json"))
    assert [(m["id"], m["verdict"]) for m in a["mutants"]] == [
        (m["id"], m["verdict"]) for m in b["mutants"]
    ]
    assert all(m["cached"] for m in b["mutants"]) and a["mutants"]
    # A changed file is parsed again: the memo is keyed by the file's bytes.
    changed = tmp_path / "k.py"
    changed.write_text(Path(kernel).read_text().replace("BLOCK_SIZE=1024", "BLOCK_SIZE=512"))
    assert "libcst" in imported("run", str(changed), "--cache-dir", "c", "-q", cwd=tmp_path)


EXIT_PROBE = """
import atexit, sys, threading, time
from mutant_gate.cli.main import entry
atexit.register(lambda: print("exit handler ran", flush=True))
if sys.argv[1] == "thread":  # still running when the command ends: the exit waits for it
    def late():
        time.sleep(0.5)
        with open("late.txt", "w") as fh:
            fh.write("done")
    threading.Thread(target=late).start()
sys.argv = ["mutant-gate", *sys.argv[2:]]
entry()
"""


@pytest.mark.parametrize("mode", ["alone", "thread"])
def test_the_command_line_exits_with_its_code_its_whole_output_and_exit_handlers(mode, tmp_path):
    """``entry`` skips the interpreter's teardown, nothing the ordinary exit does: the
    output (buffered into a pipe) comes whole, exit handlers run, the code is the
    command's, and a thread still running is waited for."""
    report = str(Path(__file__).parent / "data" / "tui_affine_oracle_report.json")
    expected = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=()), "report", report, "--format", "html"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    ).stdout  # fmt: skip
    assert len(expected) > 10_000 and "</html>" in expected

    def probe(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", EXIT_PROBE, mode, *argv],
            capture_output=True, text=True, cwd=tmp_path, timeout=120,
        )  # fmt: skip

    ok = probe("report", report, "--format", "html")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == expected + "exit handler ran\n"
    bad = probe("report", "nothere.json")
    assert bad.returncode == 2
    assert bad.stderr.startswith("mutant-gate: error:") and bad.stdout == "exit handler ran\n"
    assert (tmp_path / "late.txt").exists() == (mode == "thread")


def test_a_profiled_command_line_still_writes_its_profile(tmp_path):
    """cProfile writes its numbers after the program returns: no early exit under it."""
    report = str(Path(__file__).parent / "data" / "tui_affine_oracle_report.json")
    argv = ["-m", "cProfile", "-o", "p.out", "-m", "mutant_gate.cli", "report", report]
    proc = subprocess.run(
        [sys.executable, *argv, "--format", "markdown"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "affine" in proc.stdout and (tmp_path / "p.out").stat().st_size > 0
