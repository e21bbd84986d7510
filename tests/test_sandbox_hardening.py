"""Hostile code inside a job: contained, with a verdict, while the pool goes on.

Each test asks the host afterwards what really happened, rather than trusting
what the job says about itself.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from mutant_gate.engine.job import Check, CheckKind, Job, JobStatus

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0, reason="the hardened sandbox needs root (as sessions and CI run)"
    ),
]

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def sandbox(either_sandbox):
    """Every test here runs against the forked and the warm pool (conftest)."""
    return either_sandbox


def job(body: str, timeout_s: float = 20.0, **kw) -> Job:
    source = textwrap.dedent(body)
    return Job(
        files=(("hostile.py", source),),
        checks=(Check(CheckKind.MAIN, "hostile.py", "own-check"),),
        timeout_s=timeout_s,
        **kw,
    )


def test_isolation_is_reported(sandbox):
    result = sandbox.run(job("x = 1\n"))
    assert result.status is JobStatus.PASSED, result.error
    assert result.extra["isolation"]["filesystem"] == "private"
    assert result.extra["isolation"]["user"].startswith("uid ")


def test_cannot_write_outside_its_directory(sandbox, tmp_path):
    home = Path(os.path.expanduser("~root"))
    targets = [
        home / "mutant-gate-hostile",
        REPO / "mutant-gate-hostile",
        tmp_path / "hostile",
        Path("/var/tmp/mutant-gate-hostile"),
        Path("/etc/mutant-gate-hostile"),
    ]
    result = sandbox.run(
        job(f"""
        import os
        for target in {[str(t) for t in targets]!r}:
            try:
                with open(target, "w") as fh:
                    fh.write("pwned")
            except OSError:
                pass
        open("inside.txt", "w").write("fine")  # its own directory works
    """)
    )
    assert result.status is JobStatus.PASSED, result.error
    for target in targets:
        assert not target.exists(), f"the job wrote {target}"


def test_cannot_read_the_users_home_or_host_tmp(sandbox, tmp_path):
    home_secret = Path(os.path.expanduser("~root")) / ".mutant-gate-test-secret"
    tmp_secret = tmp_path / "secret.txt"
    home_secret.write_text("home-secret-value")
    tmp_secret.write_text("tmp-secret-value")
    try:
        result = sandbox.run(
            job(f"""
            for path in ({str(home_secret)!r}, {str(tmp_secret)!r}):
                try:
                    text = open(path).read()
                except OSError:
                    continue
                raise AssertionError("read " + path + ": " + text)
        """)
        )
    finally:
        home_secret.unlink()
    assert result.status is JobStatus.PASSED, result.error


def test_cannot_signal_the_tool(sandbox):
    result = sandbox.run(
        job(f"""
        import os, signal
        try:
            os.kill({os.getpid()}, signal.SIGKILL)
        except PermissionError:
            pass
        else:
            raise AssertionError("signalled the tool")
    """)
    )
    assert result.status is JobStatus.PASSED, result.error


def _processes_of_sandbox_users(sandbox) -> list[int]:
    """Processes still running (not dead and waiting to be reaped) as any of this
    pool's sandbox uids, but for the warm runners waiting for their next job."""
    from mutant_gate.engine.harness.isolation import processes_of, sandbox_uid

    runners = {w.runner_pid for w in sandbox._all}
    found = [p for w in sandbox._all for p in processes_of(sandbox_uid(w.proc.pid))]
    return [p for p in found if p not in runners]


def test_fork_bomb_is_contained(sandbox):
    result = sandbox.run(
        job(
            """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """,
            timeout_s=4.0,
        )
    )
    assert result.status in (JobStatus.TIMEOUT, JobStatus.CRASH), result
    assert _processes_of_sandbox_users(sandbox) == []
    assert sandbox.run(job("x = 1\n")).status is JobStatus.PASSED


def test_cannot_escape_its_process_group_to_outlive_the_job(sandbox):
    result = sandbox.run(
        job(
            """
        import os, time
        if os.fork() == 0:
            os.setsid()
            time.sleep(60)
    """,
            timeout_s=5.0,
        )
    )
    assert result.status is JobStatus.PASSED, result.error
    # The straggler left its process group but not its namespace: it died with the job.
    assert _processes_of_sandbox_users(sandbox) == []


def test_the_sandbox_user_has_a_name_as_libraries_expect(sandbox):
    """Libraries ask who runs them (getpass, pwd); the sandbox uid answers by name,
    in the sandbox alone: the host's /etc/passwd is unchanged."""
    before = Path("/etc/passwd").read_bytes()
    result = sandbox.run(
        job(
            """
        import getpass, os, pwd
        assert os.getuid() >= 1_500_000_000, os.getuid()
        assert getpass.getuser() == "mutant-gate"
        assert pwd.getpwuid(os.getuid()).pw_name == "mutant-gate"
        assert os.environ["USER"] == os.environ["LOGNAME"] == "mutant-gate"
        """
        )
    )
    assert result.status is JobStatus.PASSED, result.error
    assert Path("/etc/passwd").read_bytes() == before
