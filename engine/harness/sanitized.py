"""Entry point of a compiled-mode job run under NVIDIA compute-sanitizer (``--sanitize``).

CUDA's memcheck has to start the process, so a sanitized job cannot be a plain
fork of the warm worker: the forked child (already isolated) execs
``compute-sanitizer --tool memcheck ... python -m mutant_gate.engine.harness.sanitized
JOB_JSON FD``; this module runs the job's checks and writes the result, framed
like the worker's, to the inherited pipe ``FD``. memcheck's own verdict is its
exit code and report, read by the worker afterwards.
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def main(job_path: str, fd: int, isolation: str = "{}") -> None:
    """``isolation``: what the forked child did before the exec (network, filesystem, user)."""
    try:
        from mutant_gate.engine.harness.runner import run_checks
        from mutant_gate.engine.job import Job

        with open(job_path, encoding="utf-8") as fh:
            job = Job.from_json(json.load(fh))
        result = run_checks(job, os.getcwd()).to_json()
        state = json.loads(isolation)
        result["network_cut"] = bool(state.get("network_cut"))
        result.setdefault("extra", {})["isolation"] = state.get("isolation", {})
        payload = json.dumps(result)
    except BaseException:  # noqa: BLE001 - a harness failure is data
        payload = json.dumps({"status": "error", "error": traceback.format_exc()[-4000:]})
    data = memoryview(payload.encode() + b"\n")
    while data:
        data = data[os.write(fd, data) :]


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *sys.argv[3:4])
