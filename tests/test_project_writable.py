"""The project's tests see a writable view of the project: a conftest that writes its
results file into the project root, and a test that writes beside itself, pass as under
plain pytest; nothing they write reaches the user's tree or the next job (each job gets
a fresh view, also in a warm runner that serves job after job)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from mutant_gate.engine.harness import isolation
from mutant_gate.engine.job import Check, CheckKind, Job, JobStatus
from mutant_gate.engine.sandbox.local import LocalSandbox

from .conftest import run_cli

FIXTURE = Path(__file__).parent / "data" / "writable_lib"
MODULE = "src/wlib/ops/scale.py"
TESTS = "tests/test_scale.py"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the private filesystem needs root")


def tree_digest(root: Path) -> dict[str, str]:
    """Every entry below ``root``: its kind, mode and (for a file) content hash."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(folder) / name
            info = path.lstat()
            body = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
            key = str(path.relative_to(root))
            found[key] = f"{stat.filemode(info.st_mode)} {info.st_uid} {body}"
    return found


@pytest.fixture
def project(tmp_path) -> Path:
    """The fixture as a user's checkout after a plain pytest run: the conftest's
    ``result.json`` is there already (the tests overwrite it, in their view)."""
    root = tmp_path / "wlib"
    shutil.copytree(FIXTURE, root)
    (root / "result.json").write_text('{"from": "the user\'s own run"}')
    return root


def test_outermost_keeps_the_directories_no_other_one_holds(tmp_path):
    (tmp_path / "a" / "src").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    paths = (str(tmp_path / "a" / "src"), str(tmp_path / "a"), str(tmp_path / "b"))
    assert isolation.outermost(paths) == [str(tmp_path / "a"), str(tmp_path / "b")]


def test_hand_over_leaves_hidden_directories_sources_and_link_targets_alone(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("")
    (tmp_path / "pkg" / "result.json").write_text("{}")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("")
    (tmp_path / "link").symlink_to("/etc/hostname")
    owner = isolation.SANDBOX_UID_BASE + 7
    try:
        assert isolation.hand_over(str(tmp_path), owner) == 4  # root, pkg, result.json, link
        assert (tmp_path / "pkg").stat().st_uid == owner
        assert (tmp_path / "pkg" / "result.json").stat().st_uid == owner
        assert (tmp_path / "pkg" / "mod.py").stat().st_uid == 0
        assert (tmp_path / "link").lstat().st_uid == owner
        assert (tmp_path / ".git" / "HEAD").stat().st_uid == 0
        assert Path("/etc/hostname").stat().st_uid == 0  # the link's target is not touched
    finally:
        isolation.hand_over(str(tmp_path), 0)


def in_private_filesystem(project: Path) -> dict:
    """In a forked child: the sandbox's private filesystem with a view of ``project``
    over it, a file written into the view as the sandbox's uid; what it saw."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - reports through the pipe
        said: dict = {}
        try:
            isolation.private_filesystem(os.path.expanduser("~root"), project=(str(project),))
            said["view"] = isolation.project_views((str(project),), isolation.SANDBOX_UID_BASE + 9)
            os.setgid(isolation.SANDBOX_UID_BASE + 9)
            os.setuid(isolation.SANDBOX_UID_BASE + 9)
            (project / "written.txt").write_text("in the view")
            said["read_back"] = (project / "written.txt").read_text()
        except BaseException as exc:  # noqa: BLE001
            said["error"] = repr(exc)
        os.write(write, json.dumps(said).encode())
        os._exit(0)
    os.close(write)
    data = os.read(read, 65536)
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(data)


def test_where_the_overlay_is_refused_a_scratch_copy_is_laid_over_the_project(tmp_path):
    """A comma in the project's path is one that overlay's options cannot name."""
    project = tmp_path / "lib,copy"
    shutil.copytree(FIXTURE, project)
    before = tree_digest(project)
    said = in_private_filesystem(project)
    assert said.get("view") == isolation.COPY, said
    assert said.get("read_back") == "in the view", said
    assert tree_digest(project) == before


def test_an_overlay_view_is_written_and_the_tree_is_untouched(tmp_path):
    project = tmp_path / "lib"
    shutil.copytree(FIXTURE, project)
    before = tree_digest(project)
    said = in_private_filesystem(project)
    assert said.get("view") == isolation.OVERLAY, said
    assert said.get("read_back") == "in the view", said
    assert tree_digest(project) == before


def project_job(root: Path) -> Job:
    info = {
        "root": str(root),
        "import_root": str(root / "src"),
        "module": "wlib.ops.scale",
        "module_file": str(root / MODULE),
    }
    check = Check(CheckKind.PYTEST, str(root / TESTS), "test", trusted=True)
    return Job(
        files=(("mutant/scale.py", (root / MODULE).read_text()),),
        checks=(check,),
        project=info,
        timeout_s=120.0,
        stop_on_first_failure=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("warm", [False, True], ids=["forked", "warm"])
def test_each_job_writes_into_a_fresh_view_and_never_into_the_users_tree(project, warm):
    """Three jobs in a row on one worker (in one warm runner, when warm): each test's
    ``scratch.txt`` and the conftest's ``result.json`` are written, none is there when
    the next job starts, and the user's tree ends byte-identical."""
    before = tree_digest(project)
    with LocalSandbox(workers=1, warm=warm) as box:
        box.start()
        results = [box.run(project_job(project)) for _ in range(3)]
    for result in results:
        assert result.status is JobStatus.PASSED, result.error
        assert result.extra["isolation"]["project_view"] == isolation.OVERLAY
        assert {o.status for o in result.outcomes} == {"passed"}, result.outcomes
    if warm:
        runners = {(r.extra.get("runner") or {}).get("pid") for r in results}
        assert len(runners) == 1 and None not in runners, runners  # one runner served all
    assert tree_digest(project) == before
    assert not (project / "tests" / "scratch.txt").exists()


@pytest.mark.slow
def test_a_library_whose_tests_write_into_the_project_is_judged(project, tmp_path):
    """The original passes under the tool as under plain pytest (its conftest writes
    result.json into the project root), the mutants get verdicts, the tree is unchanged."""
    before = tree_digest(project)
    work = tmp_path / "elsewhere"
    work.mkdir()
    report = work / "r.json"
    proc = run_cli(
        "run",
        str(project / MODULE),
        "--tests",
        str(project / TESTS),
        "--writer",
        "none",
        "--no-cache",
        "--json",
        str(report),
        cwd=work,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(report.read_text())
    verdicts = [m["verdict"] for m in data["mutants"]]
    assert verdicts and "error" not in verdicts, verdicts
    assert "killed" in verdicts
    assert tree_digest(project) == before
