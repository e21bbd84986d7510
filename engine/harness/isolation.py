"""What a forked sandbox child does to itself before it runs any job code.

Each step is best effort where the OS may refuse (namespaces need root or user
namespaces) and reports whether it took, so the report can say so.
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import resource
import shutil
import signal
import stat
import tempfile
import time
import traceback
from collections.abc import Callable

CLONE_NEWNET = 0x40000000

#: Variables a job may see. Everything else is dropped, and so is anything
#: whose name looks like a credential even if it is listed here.
ENV_ALLOW = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TERM",
    "TRITON_INTERPRET",
    "TRITON_CACHE_DIR",
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MALLOC_PERTURB_",  # the workers' fill of fresh memory (``local.worker_env``)
    "PYTHONHASHSEED",
    "PYTHONPATH",
    "VIRTUAL_ENV",
)
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)


def scrubbed_env(env: dict[str, str], extra: dict[str, str] | None = None) -> dict[str, str]:
    """The allow-listed subset of ``env`` with no credential-like names."""
    kept = {k: v for k, v in env.items() if k in ENV_ALLOW and not SECRET_NAME.search(k)}
    kept.update(extra or {})
    return {k: v for k, v in kept.items() if not SECRET_NAME.search(k)}


PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux only)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def processes_of(uid: int) -> list[int]:
    """Live processes (not zombies) owned by ``uid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def kill_uid(
    uid: int,
    wait_s: float = 1.0,
    reap: Callable[[], None] | None = None,
    spare: frozenset[int] = frozenset(),
) -> list[int]:
    """SIGKILL every process of ``uid`` until none is left (or ``wait_s`` passed);
    returns those still alive. A sandbox uid belongs to one worker, so every process of
    it is that worker's job or what the job started. ``reap``: the worker reaps its
    orphans (it is their subreaper) after each round. ``spare``: processes left alone
    (the worker's warm runner between its jobs)."""
    deadline = time.monotonic() + wait_s
    while True:
        pids = [pid for pid in processes_of(uid) if pid not in spare]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if reap is not None:
            reap()
        if not pids or time.monotonic() >= deadline:
            return pids
        time.sleep(0.01)


def become_subreaper() -> None:
    """Orphans of our children are reparented to us, so we can reap them."""
    PR_SET_CHILD_SUBREAPER = 36
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def cut_network() -> bool:
    """Move this process into a fresh network namespace (no interfaces up)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare(CLONE_NEWNET) == 0
    except (OSError, AttributeError):
        return False


def _vm_size_bytes() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def address_space_after(memory_mb: int) -> int:
    """An address-space limit ``memory_mb`` above what this process maps now."""
    return _vm_size_bytes() + memory_mb * 1024 * 1024


def cpu_limit(cpu_s: float) -> None:
    """End this process (SIGPROF, its default action) once it has used ``cpu_s`` more CPU
    seconds, all its threads together: to the tick, where RLIMIT_CPU counts whole seconds.
    ``cpu_s`` 0 turns the clock off."""
    signal.signal(signal.SIGPROF, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_PROF, max(0.0, cpu_s))


def apply_limits(memory_mb: int | None, cpu_s: float, output_limit_bytes: int) -> None:
    """Address space (on top of what the warm worker already maps), CPU time, file size.

    ``memory_mb`` None sets no address-space limit: a CUDA context reserves far
    more virtual memory than it uses, so compiled mode cannot be bounded that way.
    """
    if memory_mb is not None:
        address_space = address_space_after(memory_mb)
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    cpu_limit(cpu_s)
    cpu = math.ceil(cpu_s) + 1  # the kernel's own, in whole seconds: a backstop
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (output_limit_bytes, output_limit_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Python ignores SIGXFSZ; restore the default so runaway output ends the
    # child with a signal the worker reports as "output exceeded".
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)


def enter_workdir(workdir: str, env: dict[str, str]) -> None:
    """Make ``workdir`` the cwd, HOME and TMPDIR, and replace the environment."""
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update(env)
    os.environ["HOME"] = workdir
    os.environ["TMPDIR"] = workdir
    if os.getuid() >= SANDBOX_UID_BASE:  # the hardened sandbox's own uid (name_user)
        os.environ["USER"] = os.environ["LOGNAME"] = SANDBOX_USER
    # Triton reads its home at import time (the worker's); point it here.
    os.environ["TRITON_HOME"] = workdir
    os.environ["TRITON_CACHE_DIR"] = os.path.join(workdir, ".triton", "cache")
    import tempfile

    tempfile.tempdir = workdir


def redirect_output(path: str) -> None:
    """Send fd 1 and 2 to ``path`` (capped by RLIMIT_FSIZE)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


# -- private filesystem and an unprivileged user ------------------------------
#
# As root (sessions and CI run as root) a child can do more: it gets its own
# mount namespace where /tmp, /var/tmp, /run/lock and /dev/shm are fresh tmpfs
# and the real home is an empty tmpfs (the Python installation and this
# package are bound back read-only where they lie under a hidden place), then
# it drops to an unprivileged uid of its own. From then on it cannot write
# outside its fresh /tmp and its view of the project, read the user's home,
# signal the user's processes, or fork without limit (RLIMIT_NPROC binds every
# uid but root's).
#
# The project (project mode) is seen through a writable view: an overlay whose
# lower layer is the project (bound read-only first) and whose upper layer lies on
# the private /tmp, so tests that write beside themselves (a conftest's results
# file) run as under plain pytest, and what they write dies with the sandbox. The
# view's directories and files but its sources belong to the sandbox's uid
# (``metacopy=on``: a change of owner copies no data up). Where the overlay is refused, a scratch copy on the private
# /tmp is bound over the project; where that fails too, the project stays
# read-only and the view's state says why (``project_views``). A warm runner
# serves many jobs in one namespace: before each job after its first, the worker
# lays a fresh view over the old one from outside (``refresh_views``).

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT = 1, 2, 4, 32
MNT_DETACH = 2
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/run/lock", "/dev/shm")
#: A worker's children run as SANDBOX_UID_BASE + the worker's pid: unique among live
#: workers of every pool on the machine, so process limits and the sweep of
#: leftovers never touch another worker's job.
SANDBOX_UID_BASE = 1_500_000_000


def sandbox_uid(worker_pid: int) -> int:
    return SANDBOX_UID_BASE + worker_pid


#: The group of every warm runner that shares the machine's Triton cache (compiled mode):
#: the cache directory is root's, of this group, mode 2770, so no other local user can
#: read or plant a compiled kernel in it.
SHARED_CACHE_GID = SANDBOX_UID_BASE - 1


def shared_triton_cache() -> tuple[str | None, str]:
    """The Triton cache a pool's warm runners share, made if missing: (path, "") or
    (None, why it is not shared). As root: ``<tmp>/mutant-gate-triton``, root's, group
    ``SHARED_CACHE_GID``, mode 2770 (new directories inherit the group); else
    ``<tmp>/mutant-gate-triton-UID``, the user's alone (0700). A path that exists as
    anything else (a link, another owner) is not used."""
    euid = os.geteuid()
    name = "mutant-gate-triton" if euid == 0 else f"mutant-gate-triton-{euid}"
    path = os.path.join(tempfile.gettempdir(), name)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        return None, f"cannot make {path}: {exc.strerror}"
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != euid:
        return None, f"{path} is not a directory of this user"
    if euid == 0:
        os.chown(path, 0, SHARED_CACHE_GID)
        os.chmod(path, 0o2770)
    elif stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path, ""


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    if _libc().mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _keep_paths(extra: tuple[str, ...] = ()) -> list[str]:
    """Directories the child still needs: the interpreter, sys.path, this package."""
    import sys

    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, *extra}
    candidates.update(p for p in sys.path if p and os.path.isabs(p))
    candidates.update(_package_paths())
    kept = sorted({os.path.realpath(p) for p in candidates if os.path.isdir(p)})
    # Drop paths inside another kept path: binding the outer one covers them.
    return [p for i, p in enumerate(kept) if not any(_under(p, q) for q in kept[:i])]


def _package_paths() -> set[str]:
    """The directories of this package's imported (sub)packages."""
    import sys

    found: set[str] = set()
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == "mutant_gate":
            found.update(p for p in getattr(module, "__path__", None) or () if isinstance(p, str))
    return found


def _real_dirs(paths: tuple[str, ...]) -> tuple[str, ...]:
    """The real paths of those of ``paths`` that are directories, in order."""
    return tuple(os.path.realpath(p) for p in paths if os.path.isdir(p))


def private_filesystem(
    home: str,
    tmp_size_mb: int = 1024,
    project: tuple[str, ...] = (),
    shared: tuple[str, ...] = (),
) -> str:
    """Hide scratch dirs and ``home`` behind fresh tmpfs; return the new work directory.

    ``project`` directories (project mode) stay visible wherever they lie, read-only
    (``project_views`` then lays a writable view over them); ``shared`` ones (the warm runners' Triton cache) stay where they are, writable as
    their permissions say. Raises OSError where the OS refuses (not root, no mount
    namespaces).
    """
    _private_mount_namespace()
    hidden = [d for d in (*SCRATCH_DIRS, home) if d and os.path.isdir(d) and d != "/"]
    project = _real_dirs(project)
    shared = _real_dirs(shared)
    keep = [p for p in _keep_paths(project + shared) if any(_under(p, h) for h in hidden)]
    # Hold each kept directory open so it can be bound back once its parent is covered.
    held = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in keep}
    try:
        _cover_with_tmpfs(hidden, tmp_size_mb)
        for path, fd in held.items():
            os.makedirs(path, mode=0o755, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
        for path in project:  # the user's project: visible, never writable
            _mount(path, path, None, MS_BIND | MS_REC, None)
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
    finally:
        for fd in held.values():
            os.close(fd)
    workdir = "/tmp/mutant-gate-job"
    os.mkdir(workdir, 0o700)
    return workdir


def _private_mount_namespace() -> None:
    """Moves this process into a mount namespace of its own, whose mounts reach no other."""
    if _libc().unshare(CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNS): {os.strerror(err)}")
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)


def _cover_with_tmpfs(hidden: list[str], tmp_size_mb: int) -> None:
    """A fresh tmpfs over each of ``hidden``: /tmp of ``tmp_size_mb``, the others 64 MB."""
    for target in hidden:
        mode = "1777" if target in SCRATCH_DIRS else "0755"
        size = tmp_size_mb if target == "/tmp" else 64
        _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size}m,mode={mode}")


#: Where a sandbox's views of the project keep what its jobs write (on the private /tmp)
VIEW_ROOT = "/tmp/.mutant-gate-view"
#: How a view came to be, as its state says: an overlay, a scratch copy, or read-only
OVERLAY, COPY, READ_ONLY = "overlay", "copy", "read-only"
#: Directories of the project a view does not hand to the sandbox's uid (they stay
#: readable, as they are): hidden ones (``.git``, ``.venv``) and installed packages
VIEW_SKIP = ("site-packages", "node_modules")
#: Files a view leaves to their owner: sources, which tests read and do not write in
#: place (a job may still replace or remove them: their directories are its own). Each
#: change of owner costs a copy-up of the file's metadata, about 0.07 ms: handing over
#: a real library's 830 sources took 59 ms of a job, its 60 directories and 51 other
#: files 20 ms.
VIEW_KEEP_SUFFIXES = (".py", ".pyc", ".pyi", ".so", ".c", ".cc", ".cpp", ".h", ".hpp", ".cu")
#: Entries of the project handed to the sandbox's uid at most (a view of a larger tree
#: leaves the rest as it is)
VIEW_ENTRIES = 200_000


def outermost(paths: tuple[str, ...]) -> list[str]:
    """The directories of ``paths`` not inside another one of them (a view of the
    outer one shows the inner one), in a stable order."""
    real = sorted({os.path.realpath(p) for p in paths if os.path.isdir(p)})
    return [p for i, p in enumerate(real) if not any(_under(p, q) for q in real[:i])]


def project_views(paths: tuple[str, ...], owner: int) -> str:
    """Lay a fresh writable view over each project directory of ``paths`` (visible
    read-only already: ``private_filesystem``), its entries belonging to ``owner``; how
    it went: ``overlay``, ``copy``, or ``read-only: why`` (the first that is not an
    overlay, where views differ)."""
    said = [
        _view(path, os.path.join(VIEW_ROOT, str(n)), owner)
        for n, path in enumerate(outermost(paths))
    ]
    return next((s for s in said if s != OVERLAY), OVERLAY) if said else ""


def _view(path: str, base: str, owner: int) -> str:
    """One view over ``path``, its layers under ``base``: an overlay (no data copied up
    on a change of owner where the kernel allows; else copied), else a scratch copy,
    else none (``read-only: why``)."""
    os.makedirs(VIEW_ROOT, mode=0o700, exist_ok=True)
    os.mkdir(base, 0o700)
    upper, work = os.path.join(base, "upper"), os.path.join(base, "work")
    refused = ""
    for extra in (",metacopy=on", ""):
        os.mkdir(upper, 0o755)
        os.mkdir(work, 0o700)
        options = f"lowerdir={path},upperdir={upper},workdir={work}{extra}"
        try:
            _mount("overlay", path, "overlay", MS_NOSUID | MS_NODEV, options)
        except OSError as exc:
            refused = refused or str(exc)
            shutil.rmtree(upper, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)
            continue
        hand_over(path, owner)
        return OVERLAY
    copy = os.path.join(base, "copy")
    try:
        shutil.copytree(path, copy, symlinks=True)
        hand_over(copy, owner)
        _mount(copy, path, None, MS_BIND | MS_REC, None)
    except (OSError, shutil.Error) as exc:
        shutil.rmtree(copy, ignore_errors=True)
        return f"{READ_ONLY}: overlay refused ({refused}); no scratch copy ({exc})"
    return COPY


def hand_over(path: str, owner: int) -> int:
    """Make ``path``'s directories and files ``owner``'s, links too (not what they point
    to), but for hidden directories and installed packages (``VIEW_SKIP``) and sources
    (``VIEW_KEEP_SUFFIXES``), at most ``VIEW_ENTRIES``; how many."""
    done = 0
    for folder, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in VIEW_SKIP]
        files = [f for f in files if not f.endswith(VIEW_KEEP_SUFFIXES)]
        for name in (None, *files):
            entry = folder if name is None else os.path.join(folder, name)
            if done >= VIEW_ENTRIES:
                return done
            try:
                os.chown(entry, owner, owner, follow_symlinks=False)
            except OSError:
                continue
            done += 1
    return done


def refresh_views(pid: int, paths: tuple[str, ...], owner: int) -> str:
    """In process ``pid``'s mount namespace (a warm runner's, between its jobs), take
    each view of ``paths`` away and lay a fresh one over the project: what one job
    wrote never reaches the next. Runs in a forked child (joining a namespace takes a
    process of one thread); "" when done, else why not."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - measured through the warm runner's tests
        code = 1
        try:
            os.close(read)
            _lay_fresh_views(pid, paths, owner)
            code = 0
        except BaseException:  # noqa: BLE001 - the worker reads why
            os.write(write, traceback.format_exc()[-2000:].encode())
        finally:
            os._exit(code)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(child, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return ""
    why = b"".join(chunks).decode("utf-8", "replace").strip().splitlines()
    return why[-1] if why else f"the view's refresh ended with status {status}"


def _lay_fresh_views(pid: int, paths: tuple[str, ...], owner: int) -> None:
    """In a child of one thread: joins process ``pid``'s mount namespace, takes each view
    of ``paths`` away and lays a fresh one; OSError where one fails."""
    fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
    if _libc().setns(fd, CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")
    for n, path in enumerate(outermost(paths)):
        if _libc().umount2(path.encode(), MNT_DETACH) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"umount {path}: {os.strerror(err)}")
        base = os.path.join(VIEW_ROOT, str(n))
        shutil.rmtree(base, ignore_errors=True)
        said = _view(path, base, owner)
        if said not in (OVERLAY, COPY):
            raise OSError(said)


#: The name a sandbox uid goes by (libraries ask who runs them: ``getpass.getuser()``,
#: ``pwd.getpwuid(os.getuid())``, and fail on a uid with no name).
SANDBOX_USER = "mutant-gate"


def name_user(uid: int) -> None:
    """In the private mount namespace: /etc/passwd and /etc/group as the host's plus an
    entry for ``uid`` (bound over the originals, for this sandbox alone)."""
    for path, entry in (
        ("/etc/passwd", f"{SANDBOX_USER}:x:{uid}:{uid}:mutant-gate sandbox:/tmp:/usr/sbin/nologin"),
        ("/etc/group", f"{SANDBOX_USER}:x:{uid}:"),
    ):
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError:
            text = ""
        copy = os.path.join("/tmp", "." + os.path.basename(path))
        with open(copy, "w", encoding="utf-8") as fh:
            fh.write(text.rstrip("\n") + ("\n" if text else "") + entry + "\n")
        os.chmod(copy, 0o644)
        if os.path.exists(path):
            _mount(copy, path, None, MS_BIND, None)


def drop_privileges(uid: int, nproc: int, groups: tuple[int, ...] = ()) -> None:
    """Become ``uid`` (no capabilities, no new privileges) with at most ``nproc`` processes,
    in the supplementary ``groups`` alone."""
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    os.setgroups(list(groups))
    os.setgid(uid)
    os.setuid(uid)
    PR_SET_NO_NEW_PRIVS = 38
    _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    # A change of credentials clears the parent-death signal: arm it again, so the
    # job still dies with its worker.
    die_with_parent()
