"""Code that runs inside a sandbox (stdlib, numpy, torch and triton only)."""

#: Part of every trace-using job's inputs (``checks/harness_jobs.harness_job``): bump when
#: traces or their use change. Kept here, not in ``trace.py``, so that the tool reads it
#: without importing numpy (a cached rerun with survivors builds such jobs).
TRACE_VERSION = 1
