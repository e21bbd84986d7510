"""``--backend ray`` against a real Ray cluster started here (2 CPUs): the same verdicts
as the local pool, an actor or worker killed mid-run loses nothing and kills nothing, and
no key reaches an actor or a job."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'mutant-gate[ray]')")

from mutant_gate.engine.job import Check, CheckKind, Job, JobResult, JobStatus  # noqa: E402
from mutant_gate.engine.sandbox.ray import RaySandbox, hardening_refusal  # noqa: E402

from .conftest import EXAMPLES, run_cli, start_cli  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]

#: Fake credentials in the environment of this process, and so of the cluster it starts:
#: the worst case, a cluster whose own environment carries keys.
SECRETS = {
    "NEBIUS_API_KEY": "sk-nebius-must-not-leak",
    "OPENAI_API_KEY": "sk-openai-must-not-leak",
    "GITHUB_TOKEN": "ghp-must-not-leak",
}


@pytest.fixture(scope="module")
def cluster():
    """A local Ray of 2 CPUs started by this test (keys in its environment); its address."""
    saved = {k: os.environ.get(k) for k in SECRETS}
    os.environ.update(SECRETS)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_args(name: str, out: str, *extra: str) -> list[str]:
    return ["run", str(EXAMPLES / name), "--writer", "none", "--no-cache", "-j", "2"] + [
        "--json",
        out,
        *extra,
    ]


def verdicts(path) -> dict[str, str]:
    report = json.loads(open(path).read())
    return {row["id"]: row["verdict"] for row in report["mutants"]}


_LOCAL: dict[str, str] = {}  # example -> the local pool's report


def local_verdicts(name: str, tmp_path) -> dict[str, str]:
    """The local pool's verdicts on an example (run once per module)."""
    if name not in _LOCAL:
        out = str(tmp_path / "local.json")
        proc = run_cli(*run_args(name, out), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        _LOCAL[name] = out
    return verdicts(_LOCAL[name])


def differing(name: str, out: str, tmp_path) -> dict[str, tuple[str, str]]:
    """Mutant -> (this run's verdict, the local pool's) where they differ. No allowance:
    a limit counts the job's CPU seconds, which the pool does not change (``steady``),
    and memory a mutant leaves unwritten reads NaN in both (``fill_uninitialized``)."""
    local = local_verdicts(name, tmp_path)
    found = verdicts(out)
    assert set(found) == set(local)
    return {k: (found[k], v) for k, v in local.items() if found[k] != v}


@pytest.mark.parametrize("name", ["vector_add.py", "softmax.py"])
def test_same_verdicts_as_local(cluster, tmp_path, name):
    out = tmp_path / "ray.json"
    proc = run_cli(
        *run_args(name, str(out), "--backend", "ray", "--ray-address", cluster), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert differing(name, str(out), tmp_path) == {}
    sandbox = json.loads(out.read_text())["sandbox"]
    assert sandbox["backend"] == "ray"
    assert sandbox["network_cut"] and sandbox["isolation"]["filesystem"] == "private"
    record = sandbox["cluster"]
    assert (record["nodes"], record["cpus"], record["gpus"], record["actors"]) == (1, 2, 0, 2)
    assert not record["started_here"]  # it joined this test's cluster, and left it running
    ran = sum(node["jobs"] for node in record["per_node"])
    assert ran >= len(verdicts(out))  # every mutant's job (and the original's) ran there
    assert record["lost"] == 0


def processes(prefix: str) -> list[tuple[int, str]]:
    """(pid, command line) of every process whose command line starts with ``prefix``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    line = fh.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if line.startswith(prefix):
                found.append((int(entry), line))
    return found


def victim(target: str) -> int | None:
    """An actor busy with a job (Ray titles it ``ray::RayRunner.run``), or its worker."""
    busy = [pid for pid, _ in processes("ray::RayRunner.run")]
    if not busy or target == "actor":
        return busy[0] if busy else None
    for pid, line in processes(sys.executable):
        if "mutant_gate.engine.harness.worker" in line and parent(pid) == busy[0]:
            return pid
    return None


def parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        return int(fh.read().rsplit(b")", 1)[1].split()[1])


@pytest.mark.parametrize("target", ["actor", "worker"])
def test_a_process_killed_mid_run_loses_nothing(cluster, tmp_path, target):
    """Kill an actor's process (or its warm worker) while it runs a job: the job runs
    again on another actor, and every verdict is the local pool's. (vector_add: on
    softmax.py one mutant leaves its output unwritten, and whether that is noticed depends
    on what the runner's allocator held before, i.e. on which jobs ran there first.)"""
    out = tmp_path / "ray.json"
    args = run_args("vector_add.py", str(out), "--backend", "ray", "--ray-address", cluster)
    proc = start_cli(*args, cwd=tmp_path)
    killed = None
    while killed is None and proc.poll() is None:
        killed = victim(target)
        if killed is not None:
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.002)
    _, err = proc.communicate(timeout=600)
    assert killed is not None, "the run ended before a job could be caught running"
    assert proc.returncode == 0, err[-2000:]
    found = verdicts(out)
    assert "error" not in found.values()
    assert found == local_verdicts("vector_add.py", tmp_path)
    record = json.loads(out.read_text())["sandbox"]["cluster"]
    assert record["lost"] >= 1 and record["retried"] >= 1


#: A job that reads its whole environment and says what it found in its failure message
#: (a message is shortened, so it says only what the test needs).
ENV_DUMP = """
import os, re
names = sorted(os.environ)
leaked = [k for k in names if re.search("KEY|TOKEN|SECRET", k, re.I)]
raise AssertionError(f"LEAKED={leaked} INTERPRET={os.environ.get('TRITON_INTERPRET')} N={len(names)}")
"""


def test_no_key_reaches_an_actor_or_a_job(cluster):
    """The cluster's own environment carries keys; the job's environment holds none."""
    job = Job(
        files=(("dump.py", ENV_DUMP),), checks=(Check(CheckKind.MAIN, "dump.py", "own-check"),)
    )
    with RaySandbox(1) as box:
        box.start()  # its actors said hello with no credential left in their environment
        result = box.run(job)
    assert result.status is JobStatus.FAILED
    message = result.outcomes[0].message
    assert "LEAKED=[] INTERPRET=1" in message  # the job read its real environment
    text = json.dumps(result.to_json())
    assert not any(value in text for value in SECRETS.values())


def test_a_node_without_the_hardening_is_refused():
    """What a non-root node's probe job reports (the worker's own words) is refused."""
    unsandboxed = JobResult(
        JobStatus.PASSED,
        network_cut=False,
        extra={"isolation": {"filesystem": "shared", "user": "unchanged"}},
    )
    why = hardening_refusal(unsandboxed)
    assert why == "no network namespace, no private filesystem, no unprivileged uid"
    hardened = JobResult(
        JobStatus.PASSED,
        network_cut=True,
        extra={"isolation": {"filesystem": "private", "user": "uid 1500000001"}},
    )
    assert hardening_refusal(hardened) is None


def environ_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as fh:
        pairs = [item.split(b"=", 1) for item in fh.read().split(b"\0") if b"=" in item]
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def descends(pid: int, ancestor: int) -> bool:
    """Whether ``ancestor`` started ``pid`` (a local Ray's processes are the driver's)."""
    while pid > 1:
        pid = parent(pid)
        if pid == ancestor:
            return True
    return False


def test_a_ray_started_for_the_run_never_holds_a_key(cluster, tmp_path):
    """``--ray-address local`` (as no address where no cluster runs) starts a Ray for the
    run with the keys held out: its actors' processes never had them."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    args = run_args(
        "vector_add.py", str(tmp_path / "ray.json"), "--backend", "ray", "--ray-address", "local"
    )
    proc = start_cli(*args, cwd=tmp_path, environ={**env, **SECRETS})
    seen: dict[int, dict[str, str]] = {}
    while proc.poll() is None:
        for pid, _ in processes("ray::RayRunner"):
            try:  # this run's actors only (the module's cluster carries keys on purpose)
                if descends(pid, proc.pid):
                    seen.setdefault(pid, environ_of(pid))
            except OSError:
                pass
        time.sleep(0.05)
    _, err = proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    assert seen, "no actor was seen while the run ran"
    for environ in seen.values():
        assert not set(SECRETS) & set(environ)
    record = json.loads((tmp_path / "ray.json").read_text())["sandbox"]["cluster"]
    assert record["started_here"]


def test_ctrl_c_leaves_no_task_running_and_the_next_run_resumes(cluster, tmp_path):
    """Ctrl-C in the middle of the mutants: the run stops, cancels what it sent the
    cluster and kills its actors, so no runner (``ray::RayRunner``) nor a sandbox worker
    of it is left busy on the cluster; what it finished was stored as it arrived, and the
    next run takes it from the cache and ends with the local pool's verdicts."""
    cache = str(tmp_path / "cache")
    out = str(tmp_path / "ray.json")
    args = ["run", str(EXAMPLES / "layer_norm.py"), "--writer", "none", "-j", "2"]
    args += ["--cache-dir", cache, "--backend", "ray", "--ray-address", cluster]
    proc = start_cli(
        *args, "--json", out, cwd=tmp_path, environ={**os.environ, "MUTANT_GATE_PROGRESS_S": "0.2"}
    )
    done: list[int] = []  # mutants done, from the progress lines

    def follow() -> None:
        for line in proc.stdout:
            if match := re.match(r"mutants: (\d+)/\d+ mutants done", line):
                done.append(int(match.group(1)))

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    deadline = time.monotonic() + 300
    while not (done and done[-1] >= 2 and processes("ray::RayRunner.run")):
        assert proc.poll() is None, "the run ended before it could be stopped"
        assert time.monotonic() < deadline, "no job ever ran on the cluster"
        time.sleep(0.05)
    runners = {pid for pid, _ in processes("ray::RayRunner")}
    workers = [
        pid
        for pid, line in processes(sys.executable)
        if "mutant_gate.engine.harness.worker" in line and parent_of(pid) in runners
    ]
    assert workers, "no sandbox worker of an actor was seen"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)
    reader.join(timeout=10)
    assert proc.returncode != 0  # stopped, not finished
    finished = done[-1]
    # An actor dies at once; its worker when it sees its stdin hang up (at once in a
    # job, after its imports while it starts: seconds on a loaded machine).
    deadline = time.monotonic() + 60
    while (processes("ray::RayRunner") or alive(workers)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not processes("ray::RayRunner"), processes("ray::RayRunner")
    assert not alive(workers), [open(f"/proc/{p}/status").read()[:300] for p in alive(workers)]
    again = run_cli(*args, "--json", out, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    rows = json.loads(open(out).read())["mutants"]
    assert sum(bool(r["cached"]) for r in rows) >= finished >= 2
    assert differing("layer_norm.py", out, tmp_path) == {}


def test_a_node_lost_mid_run_loses_nothing(tmp_path):
    """A cluster of two nodes (two raylets on this machine, a CPU each): one node is
    removed (every process of it killed) while its actor runs a job. The job runs again
    on the other node, no verdict is an error, they are the local pool's, and the report
    names both nodes and the loss."""
    from ray.cluster_utils import Cluster

    two = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        doomed = two.add_node(num_cpus=1)
        two.wait_for_nodes()
        raylet = doomed.all_processes["raylet"][0].process.pid
        out = str(tmp_path / "ray.json")
        args = ["run", str(EXAMPLES / "layer_norm.py"), "--writer", "none", "--no-cache"]
        args += ["-j", "2", "--backend", "ray", "--ray-address", two.address, "--json", out]
        proc = start_cli(*args, cwd=tmp_path)
        deadline = time.monotonic() + 300
        while not [p for p, _ in processes("ray::RayRunner.run") if parent_of(p) == raylet]:
            assert proc.poll() is None, "the run ended before the node could be removed"
            assert time.monotonic() < deadline, "no job ever ran on the second node"
            time.sleep(0.05)
        two.remove_node(doomed, allow_graceful=False)
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
    finally:
        two.shutdown()
    report = json.loads(open(out).read())
    assert differing("layer_norm.py", out, tmp_path) == {}
    assert not [r for r in report["mutants"] if r["verdict"] == "error"]
    record = report["sandbox"]["cluster"]
    assert record["nodes"] == 2 and record["lost"] >= 1 and record["retried"] >= 1, record
    # a node is listed once it finished a job (the removed one may have finished none)
    assert 1 <= len(record["per_node"]) <= 2, record
    assert sum(n["jobs"] for n in record["per_node"]) >= len(report["mutants"]), record


def parent_of(pid: int) -> int | None:
    try:
        return parent(pid)
    except (OSError, IndexError, ValueError):
        return None


def alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (a zombie is not)."""
    left = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            left.append(pid)
    return left


def test_project_mode_gives_the_local_verdicts(cluster, tmp_path):
    """A kernel module judged by its package's own tests (``examples/kernel_lib``): the
    same verdicts on the cluster as in the local pool."""
    lib = EXAMPLES / "kernel_lib"
    module = str(lib / "src" / "kernel_lib" / "ops" / "rms_norm.py")
    tests = str(lib / "tests" / "test_rms_norm.py")
    base = ["run", module, "--tests", tests, "--writer", "none", "--no-cache", "-j", "2"]
    local = run_cli(*base, "--json", "local.json", cwd=tmp_path)
    assert local.returncode == 0, local.stderr[-2000:]
    remote = run_cli(
        *base, "--json", "ray.json", "--backend", "ray", "--ray-address", cluster, cwd=tmp_path
    )
    assert remote.returncode == 0, remote.stderr[-2000:]
    assert verdicts(tmp_path / "ray.json") == verdicts(tmp_path / "local.json")
    assert json.loads((tmp_path / "ray.json").read_text())["sandbox"]["backend"] == "ray"


def test_a_compiled_run_on_ray_says_how_its_runners_keep_triton_s_cache():
    """The report's ``sandbox.triton_cache`` for a compiled run reads the sandbox: on Ray
    (an actor's runner per GPU, each with a cache of its own) as on the local pool (a
    run on a GPU machine through Ray once ended in an AttributeError here)."""
    from mutant_gate.engine.pipeline import triton_cache_words
    from mutant_gate.engine.sandbox.local import LocalSandbox

    on_ray = triton_cache_words(RaySandbox(1, mode="compiled"))
    assert on_ray == "one per warm runner: each actor's, on its node"
    local = LocalSandbox(1, mode="compiled")
    local.triton_cache = "/tmp/shared"
    assert triton_cache_words(local) == "shared by the warm runners: /tmp/shared"
    assert triton_cache_words(RaySandbox(1, mode="interpret")) == ""
