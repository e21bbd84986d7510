"""The Contree backend against a loopback fake of its HTTP API (tests/fake_contree.py).

The real contree-sdk talks real HTTP to the fake, which runs each job's command
as a local subprocess: the shipped harness really runs, in interpret mode.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mutant_gate.engine.job import Check, CheckKind, Job, JobResult, JobStatus
from mutant_gate.engine.sandbox.contree import (
    GRACE_S,
    STARTUP_ALLOWANCE_S,
    ContreeSandbox,
)
from mutant_gate.engine.sandbox.local import SandboxStartError

from .conftest import EXAMPLES, ROOT, run_cli
from .fake_contree import TORCH_IMAGE, FakeContree

pytestmark = pytest.mark.contree

KEY = "nb-test-key-7f3a9c"  # distinctive, so a leak anywhere is found by value
PROJECT = "project-e2e1"


def check_job(source: str, timeout_s: float = 60.0) -> Job:
    return Job(
        files=(("check.py", source),),
        checks=(Check(CheckKind.MAIN, "check.py", "own-check"),),
        timeout_s=timeout_s,
    )


@pytest.fixture(scope="module")
def credentials(tmp_path_factory):
    """The SDK's variables, and no auth.ini of this machine's user."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NEBIUS_API_KEY", KEY)
        mp.setenv("NEBIUS_PROJECT_ID", PROJECT)
        mp.setenv("CONTREE_HOME", str(tmp_path_factory.mktemp("contree-home")))
        yield


@pytest.fixture(scope="module")
def fake(credentials):
    with FakeContree(token=KEY, project=PROJECT) as server:
        yield server


@pytest.fixture(scope="module")
def box(fake):
    """One started sandbox (the probe job runs once) for the tests that inject faults."""
    sandbox = ContreeSandbox(
        2, base_url=fake.url, image=TORCH_IMAGE, backoff_s=0.01, transport_timeout_s=2.0
    )
    sandbox.start()
    yield sandbox
    sandbox.close()


@pytest.fixture
def clean_fake(fake):
    """The shared fake with no faults left over and an empty request log."""
    fake.faults.clear()
    fake.log.clear()
    fake.spawns.clear()
    yield fake
    fake.faults.clear()


# -- credentials ------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "named", "not_named"),
    [
        ({}, ["NEBIUS_API_KEY", "NEBIUS_PROJECT_ID"], []),
        ({"NEBIUS_API_KEY": "k"}, ["NEBIUS_PROJECT_ID"], ["NEBIUS_API_KEY"]),
        ({"NEBIUS_PROJECT_ID": "p"}, ["NEBIUS_API_KEY"], ["NEBIUS_PROJECT_ID"]),
    ],
)
def test_missing_credentials_are_one_line_and_exit_2(tmp_path, env, named, not_named):
    full = {k: v for k, v in os.environ.items() if not k.startswith("NEBIUS_")}
    full.update(env, CONTREE_HOME=str(tmp_path))  # no auth.ini profile either
    cli = [sys.executable, "-m", "mutant_gate.cli", "run", str(EXAMPLES / "vector_add.py")]
    proc = subprocess.run(
        [*cli, "--backend", "contree", "--no-cache"],
        cwd=tmp_path,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for name in named:
        assert name in lines[0]
    for name in not_named:
        assert name not in lines[0]


def test_contree_flags_need_the_contree_backend(tmp_path):
    proc = run_cli("run", str(EXAMPLES / "vector_add.py"), "--contree-image", "x", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--backend contree" in proc.stderr


# -- what runs remotely -----------------------------------------------------

LEAK_CHECK = f"""
import os, sys
from pathlib import Path

env = dict(os.environ)
assert not any(k.startswith("NEBIUS") for k in env), sorted(env)
key = {KEY[::-1]!r}[::-1]  # reversed: the job file itself must not hold the key
assert not any(key in v for v in env.values()), "the API key reached the job"
runner = sys.modules["mutant_gate.engine.harness.runner"].__file__
assert not runner.startswith({str(ROOT)!r}), runner  # the shipped copy ran, not this checkout
print("clean")
"""


def test_job_runs_the_shipped_harness_and_never_sees_the_key(box, clean_fake):
    job = check_job(LEAK_CHECK)
    result = box.run(job)
    assert result.status is JobStatus.PASSED, result.error
    # Nothing the service received carries the key either (the header is the only place).
    spawn = clean_fake.spawns[-1]
    assert KEY not in json.dumps(spawn)
    assert all(KEY.encode() not in data for data in clean_fake.files.values())
    # The SDK is given the job's limit plus start-up allowance plus grace; the
    # job's own limit travels in the job file and is enforced inside.
    assert spawn["timeout"] == math.ceil(job.wall_limit_s + STARTUP_ALLOWANCE_S + GRACE_S)
    assert spawn["disposable"] is True


def test_results_have_the_local_form(box, sandbox, clean_fake):
    """The same failing job gives the same result data, locally and remotely."""
    job = check_job("import torch\nassert torch.ones(3).sum().item() == 4, 'three'\n")
    remote, local = box.run(job), sandbox.run(job)
    assert remote.status is local.status is JobStatus.FAILED
    assert remote.to_json().keys() == local.to_json().keys()
    # A remote sandbox runs one job per process: only the local pool's warm runner
    # says which runner served it.
    assert remote.extra.keys() == local.extra.keys() - {"runner"}
    assert "runner" in local.extra and "runner" not in remote.extra
    assert [(o.name, o.status) for o in remote.outcomes] == [
        (o.name, o.status) for o in local.outcomes
    ]
    assert "three" in remote.first_failure.message
    assert JobResult.from_json(json.loads(json.dumps(remote.to_json()))) == remote


def test_many_jobs_at_once_within_the_limit(box, clean_fake):
    clean_fake.max_running = 0
    jobs = [check_job(f"assert {i} == {i}\n") for i in range(4)]
    results = dict(box.run_many(jobs))
    assert sorted(results) == [0, 1, 2, 3]
    assert all(r.status is JobStatus.PASSED for r in results.values())
    assert 1 <= clean_fake.max_running <= box.size


# -- faults -----------------------------------------------------------------


def test_5xx_when_starting_runs_is_retried(box, clean_fake):
    clean_fake.inject("POST", r"^/v1/instances$", "500", times=2)
    result = box.run(check_job("pass\n"))
    assert result.status is JobStatus.PASSED, result.error
    assert clean_fake.count("POST", r"^/v1/instances$", "500") == 2
    assert clean_fake.count("POST", r"^/v1/instances$", "200") == 1


def test_persistent_5xx_is_reported_as_an_error_with_the_reason(box, clean_fake):
    clean_fake.inject("POST", r"^/v1/instances$", "503", times=box.attempts)
    result = box.run(check_job("pass\n"))
    assert result.status is JobStatus.ERROR
    assert "HTTP 503" in result.error and f"{box.attempts} attempts" in result.error
    assert clean_fake.count("POST", r"^/v1/instances$") == box.attempts


def test_5xx_on_upload_is_retried(box, clean_fake):
    clean_fake.inject("POST", r"^/v1/files$", "502")
    result = box.run(check_job("assert 'upload' == 'upload'\n"))
    assert result.status is JobStatus.PASSED, result.error
    assert clean_fake.count("POST", r"^/v1/files$", "502") == 1


def test_dropped_connection_while_polling_is_retried_and_the_run_cancelled(box, clean_fake):
    clean_fake.inject("GET", r"^/v1/operations/", "drop")
    result = box.run(check_job("assert 'poll' == 'poll'\n"))
    assert result.status is JobStatus.PASSED, result.error
    assert clean_fake.count("GET", r"^/v1/operations/", "drop") == 1
    assert clean_fake.count("POST", r"^/v1/instances$", "200") == 2
    # The SDK cancels the run whose polling failed: nothing is left running.
    assert clean_fake.count("DELETE", r"^/v1/operations/", "200") >= 1


def test_request_that_hangs_is_retried(box, clean_fake):
    clean_fake.inject("GET", r"^/v1/files/", "hang")  # the job file's lookup
    result = box.run(check_job("assert 'hang' == 'hang'\n"))
    assert result.status is JobStatus.PASSED, result.error
    assert clean_fake.count("GET", r"^/v1/files/", "hang") == 1


def test_run_that_never_finishes_is_an_error_not_a_timeout_verdict(credentials):
    with FakeContree(token=KEY, project=PROJECT) as fake:
        box = ContreeSandbox(
            1,
            base_url=fake.url,
            attempts=2,
            backoff_s=0.01,
            startup_allowance_s=0.0,
            grace_s=1.0,
        )
        try:
            box.start()
            fake.hang_runs = True
            job = check_job("pass\n", timeout_s=0.1)
            result = box.run(job)
        finally:
            box.close()
        assert result.status is JobStatus.ERROR
        assert "2 attempts" in result.error and "did not finish" in result.error
        # each attempt waited out the job's wall-clock backstop (its limit is CPU seconds)
        waited = math.ceil(job.wall_limit_s + 1.0)
        hung = [op for op in fake.operations.values() if op.metadata.get("timeout") == waited]
        assert len(hung) == 2
        assert all(op.status == "CANCELLED" for op in hung)


def test_close_ends_runs_in_flight_as_errors_and_cancels_them(credentials):
    with FakeContree(token=KEY, project=PROJECT) as fake:
        box = ContreeSandbox(1, base_url=fake.url, backoff_s=0.01)
        box.start()
        results: list[JobResult] = []
        runner = threading.Thread(
            target=lambda: results.append(box.run(check_job("import time\ntime.sleep(600)\n")))
        )
        runner.start()
        probe = next(iter(fake.operations))
        polled = threading.Event()
        for _ in range(2400):  # until the client polls the running job (the probe has finished)
            ops = [uid for uid in fake.operations if uid != probe]
            if ops and fake.running and fake.count("GET", f"/v1/operations/{ops[0]}$"):
                break
            polled.wait(0.05)
        assert fake.running == 1, "the run never started"
        box.close()
        runner.join(60)
        assert results and results[0].status is JobStatus.ERROR
        assert "closed" in results[0].error
        last = list(fake.operations.values())[-1]
        assert last.status == "CANCELLED"


def test_image_that_lacks_triton_fails_at_start_in_one_line(tmp_path, credentials):
    stub = tmp_path / "stub"
    (stub / "triton").mkdir(parents=True)
    (stub / "triton" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'triton'\")\n"
    )
    images = {"no-triton:1": {"PYTHONPATH": str(stub)}}
    with FakeContree(token=KEY, project=PROJECT, images=images) as fake:
        box = ContreeSandbox(1, base_url=fake.url, image="no-triton:1", backoff_s=0.01)
        with pytest.raises(SandboxStartError) as info:
            box.start()
        box.close()
    message = str(info.value)
    assert "\n" not in message
    assert "cannot run the harness" in message and "No module named 'triton'" in message


def test_unknown_image_fails_at_start(credentials):
    with FakeContree(token=KEY, project=PROJECT) as fake:
        box = ContreeSandbox(1, base_url=fake.url, image="nosuch/image:1", backoff_s=0.01)
        with pytest.raises(SandboxStartError, match="nosuch/image:1"):
            box.start()
        box.close()
        assert fake.count("POST", r"^/v1/images/import$") == 1  # a failed import is not retried
        assert fake.count("POST", r"^/v1/instances$") == 0


def test_wrong_key_is_not_retried(clean_fake):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NEBIUS_API_KEY", "wrong")
        box = ContreeSandbox(1, base_url=clean_fake.url, backoff_s=0.01)
        with pytest.raises(SandboxStartError, match="HTTP 401"):
            box.start()
        box.close()
    assert clean_fake.count("GET", "^/v1/inspect/", "401") == 1
    assert len(clean_fake.log) == 1


# -- the whole tool ------------------------------------------------------------


SCALE_KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x * 2.0, mask=mask)


def scale(x):
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK=64)
    return out


if __name__ == "__main__":
    x = torch.randn(1000)
    torch.testing.assert_close(scale(x), x * 2)
"""


def _verdicts(path: Path) -> dict[str, tuple[str, str | None]]:
    report = json.loads(path.read_text())
    return {m["id"]: (m["verdict"], m["by"]) for m in report["mutants"]}


@pytest.mark.slow
def test_local_and_contree_backends_give_the_same_verdicts(fake, tmp_path):
    """A kernel whose check lets two mutants survive: kills by own check and by bounds,
    and survivors, must all come out the same."""
    kernel = tmp_path / "scale.py"
    kernel.write_text(SCALE_KERNEL)
    common = ["run", str(kernel), "--no-cache", "-q", "-j", "2"]
    local = run_cli(*common, "--json", str(tmp_path / "local.json"), cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    remote = run_cli(
        *common,
        "--json",
        str(tmp_path / "contree.json"),
        "--backend",
        "contree",
        "--contree-url",
        fake.url,
        "--contree-image",
        TORCH_IMAGE,
        cwd=tmp_path,
    )
    assert remote.returncode == 0, remote.stderr
    local_verdicts = _verdicts(tmp_path / "local.json")
    assert set(local_verdicts.values()) >= {
        ("killed", "own-check"),
        ("killed", "bounds"),
        ("survived", None),
    }
    assert _verdicts(tmp_path / "contree.json") == local_verdicts
    report = json.loads((tmp_path / "contree.json").read_text())
    assert report["sandbox"]["backend"] == "contree"
    assert report["settings"]["backend"] == "contree"
    assert fake.count("POST", r"^/v1/instances$", "200") >= len(local_verdicts) + 1
