"""What a forked sandbox child does to itself before it runs any job code.

Each step is best effort where the OS may refuse (namespaces need root or user
namespaces) and reports whether it took, so the report can say so.
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
import signal

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


def apply_limits(memory_mb: int, cpu_s: float, output_limit_bytes: int) -> None:
    """Address space (on top of what the warm worker already maps), CPU time, file size."""
    address_space = _vm_size_bytes() + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    cpu = int(cpu_s) + 1
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
    import tempfile

    tempfile.tempdir = workdir


def redirect_output(path: str) -> None:
    """Send fd 1 and 2 to ``path`` (capped by RLIMIT_FSIZE)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
