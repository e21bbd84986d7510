"""The content-addressed store: keys, misses, corrupt entries, run records."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import diskcache
import pytest

from mutant_gate.cache import Store
from mutant_gate.engine import job as job_module
from mutant_gate.engine.job import Check, CheckKind, CheckOutcome, Job, JobResult, JobStatus
from mutant_gate.engine.jobs import toolchain
from mutant_gate.engine.versions import installed_version

from .conftest import EXAMPLES, run_cli


def make_job(text: str = "x = 1\n", **kw) -> Job:
    return Job(files=(("k.py", text),), checks=(Check(CheckKind.MAIN, "k.py", "own-check"),), **kw)


def test_cache_key_is_content_addressed(monkeypatch):
    tc = toolchain("interpret")
    assert make_job().cache_key(tc) == make_job().cache_key(dict(tc))
    assert make_job().cache_key(tc) != make_job("x = 2\n").cache_key(tc)
    assert make_job().cache_key(tc) != make_job(seed=1).cache_key(tc)
    assert make_job().cache_key(tc) != make_job().cache_key({**tc, "triton": "0.0"})
    assert make_job().cache_key(tc) != make_job().cache_key({**tc, "torch": "0.0"})
    before = make_job().cache_key(tc)
    monkeypatch.setattr(job_module, "HARNESS_VERSION", "other")
    assert make_job().cache_key(tc) != before


def test_versions_are_importlib_metadata_s_without_importing_it(tmp_path, monkeypatch):
    """The toolchain's versions key every result: they must be exactly what
    importlib.metadata says, for every installed distribution, and read without it."""
    from importlib import metadata

    names = {d.metadata["Name"] for d in metadata.distributions()}
    assert {"torch", "triton", "libcst", "mutant-gate"} <= names
    assert {n: installed_version(n) for n in names} == {n: metadata.version(n) for n in names}
    assert installed_version("no-such-distribution-here") is None
    # Name normalisation, the first match on the path wins, a missing Version header.
    first, later = tmp_path / "first", tmp_path / "later"
    for where, version in ((first, "1.2.post3"), (later, "9.9")):
        (where / f"Foo_Bar-{version}.dist-info").mkdir(parents=True)
        (where / f"Foo_Bar-{version}.dist-info" / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: foo.bar\nVersion: {version}\n\nVersion: 0\n"
        )
    (first / "bare-1.0.dist-info").mkdir()
    (first / "bare-1.0.dist-info" / "METADATA").write_text("Name: bare\n\nVersion: 2\n")
    monkeypatch.syspath_prepend(str(later))
    monkeypatch.syspath_prepend(str(first))
    for name in ("foo.bar", "FOO-bar", "foo_bar", "bare"):
        assert installed_version(name) == metadata.version(name), name
    assert installed_version("foo-bar") == "1.2.post3"
    probe = (
        "import sys; from mutant_gate.engine.jobs import toolchain; tc = toolchain('interpret'); "
        "print(tc['torch'], tc['triton'], 'importlib.metadata' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.stdout.split() == [metadata.version("torch"), metadata.version("triton"), "False"]


def test_a_local_pool_keys_alike_before_and_after_it_started():
    """A library run makes one job runner a module, on one local pool that starts with the
    first job. Its workers report ``torch.__version__``, which on a GPU machine says
    "2.11.0+cu130" where the metadata says "2.11.0": the modules after the first keyed their
    jobs apart from a resumed run's (whose pool had not started yet), and 203 finished
    mutants ran again. A local pool's key is its interpreter's metadata, started or not; a
    backend started when opened (its image's versions known before any key) still wins."""
    from mutant_gate.engine.jobs import JobRunner
    from mutant_gate.engine.sandbox import Sandbox
    from mutant_gate.engine.sandbox.local import LocalSandbox

    with LocalSandbox(workers=1) as box:
        before = JobRunner(box, None, "interpret", 1).toolchain
        box.start()
        assert box.versions.get("torch")  # the workers' own words, kept
        box.versions = {**box.versions, "torch": box.versions["torch"] + "+cu130"}  # a GPU's
        after = JobRunner(box, None, "interpret", 1).toolchain
    assert after == before == toolchain("interpret")

    class Image(Sandbox):  # versions known at open, as a remote backend's
        name, mode, size, versions = "image", "interpret", 1, {"torch": "9.9", "python": "3.0"}

    keyed = JobRunner(Image(), None, "interpret", 1).toolchain
    assert keyed == {**toolchain("interpret"), "torch": "9.9", "python": "3.0"}


def test_time_limit_is_not_part_of_the_key_but_bounds_a_cached_timeout():
    tc = toolchain("interpret")
    assert make_job(timeout_s=5).cache_key(tc) == make_job(timeout_s=9).cache_key(tc)
    timed_out = JobResult(
        JobStatus.TIMEOUT, error="timed out after 5.0 s", extra={"timeout_s": 5.0}
    )
    assert timed_out.valid_for(make_job(timeout_s=5))
    assert timed_out.valid_for(make_job(timeout_s=3))
    assert not timed_out.valid_for(make_job(timeout_s=8))
    assert JobResult(JobStatus.PASSED).valid_for(make_job(timeout_s=100))


def test_job_and_result_round_trip_through_json():
    job = make_job(timeout_s=3.5)
    assert Job.from_json(json.loads(json.dumps(job.to_json()))) == job
    result = JobResult(
        JobStatus.FAILED, (CheckOutcome("own-check", "failed", 0.5, "boom"),), "boom", 0.6
    )
    assert JobResult.from_json(json.loads(json.dumps(result.to_json()))) == result


def test_store_round_trip_and_corrupt_entries_are_misses(tmp_path):
    result = JobResult(
        JobStatus.PASSED, (CheckOutcome("own-check", "passed", 0.1),), duration_s=0.2
    )
    with Store(str(tmp_path)) as store:
        store.put_result("abc", result.to_json())
        assert store.get_result("abc", JobResult.from_json) == result
        assert store.get_result("missing", JobResult.from_json) is None
    with diskcache.Cache(str(tmp_path)) as raw:
        raw.set("job:abc", "{not json")
        raw.set("job:wrong-shape", json.dumps({"status": "no-such-status"}))
        raw.set("job:wrong-type", 12345)
    with Store(str(tmp_path)) as store:
        for key in ("abc", "wrong-shape", "wrong-type"):
            assert store.get_result(key, JobResult.from_json) is None


def test_run_records_are_listed(tmp_path):
    with Store(str(tmp_path)) as store:
        store.put_run("20260101-000000-aaaa", {"report": {"score": 1}})
        store.put_run("20260102-000000-bbbb", {"report": None})
        assert store.list_runs() == ["20260101-000000-aaaa", "20260102-000000-bbbb"]
        assert store.get_run("20260101-000000-aaaa")["report"] == {"score": 1}
        assert store.get_run("nope") is None


def test_unusable_cache_dir_is_bad_input(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    proc = run_cli(
        "run", str(EXAMPLES / "vector_add.py"), "--cache-dir", str(blocker / "sub"), cwd=tmp_path
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("mutant-gate: error: cannot use cache directory")
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_corrupted_cache_is_rerun_not_a_crash(tmp_path):
    cache_dir = tmp_path / "c"
    args = [
        "run",
        str(EXAMPLES / "vector_add.py"),
        "--operators",
        "masks",
        "--cache-dir",
        str(cache_dir),
    ]
    first = run_cli(*args, "--json", str(tmp_path / "a.json"), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    with diskcache.Cache(str(cache_dir)) as raw:
        keys = [k for k in raw.iterkeys() if str(k).startswith("job:")]
        for key in keys:
            raw.set(key, "\x00garbage")
    second = run_cli(*args, "--json", str(tmp_path / "b.json"), cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    a = json.loads((tmp_path / "a.json").read_text())
    b = json.loads((tmp_path / "b.json").read_text())
    assert not any(m["cached"] for m in b["mutants"])
    assert [(m["id"], m["verdict"], m["by"]) for m in a["mutants"]] == [
        (m["id"], m["verdict"], m["by"]) for m in b["mutants"]
    ]


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("unshare") is None or os.geteuid() != 0, reason="needs root and unshare"
)
def test_full_disk_for_the_cache_loses_nothing_computed(tmp_path):
    """The cache's disk fills mid-run: the run finishes with every verdict and says so."""
    cache = tmp_path / "small"
    cache.mkdir()
    script = f"""
        set -e
        mount -t tmpfs -o size=256k tmpfs {cache}
        cd {tmp_path}
        {sys.executable} -m mutant_gate.cli run {EXAMPLES / "layer_norm.py"} --writer none -q \\
            --cache-dir {cache}/c --json {tmp_path}/r.json > {tmp_path}/out.txt 2>&1
    """
    proc = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, timeout=900
    )
    output = (tmp_path / "out.txt").read_text()
    assert proc.returncode == 0, output + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["complete"] and all(m["verdict"] != "pending" for m in report["mutants"])
    assert "cache writes failed" in output and "not saved" in output


def test_two_runs_of_a_file_in_the_same_second_keep_both_records(tmp_path):
    """A cached rerun takes well under a second: its id must not replace the last one's."""
    from mutant_gate.engine.pipeline import Run
    from mutant_gate.engine.sandbox.local import LocalSandbox
    from mutant_gate.engine.settings import RunSettings

    settings = RunSettings(kernel_path="k.py", cache_dir=str(tmp_path / "c"))
    with Store(settings.cache_dir) as store:
        run = Run(settings, LocalSandbox(workers=1), store)  # never started: no worker
        stamp = "20261201-213012-8c497c98"
        assert run._new_run_id(stamp) == stamp
        store.put_run(stamp, {"run_id": stamp, "report": None})
        assert run._new_run_id(stamp) == f"{stamp}-2"
        store.put_run(f"{stamp}-2", {"run_id": f"{stamp}-2", "report": None})
        assert run._new_run_id(stamp) == f"{stamp}-3"
        assert max(store.list_runs()) == f"{stamp}-2"  # `latest` is still the newest
