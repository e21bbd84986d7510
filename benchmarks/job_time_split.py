"""Where a run's job time went, read from its result cache: by the job's outcome (killed by a
failing case, survived, crashed...), its jobs, the test cases they ran, their wall seconds,
the seconds spent importing the project in a fresh warm runner, the seconds inside cases and
the seconds Triton spent compiling (compiled mode; by compiler stage below the table); then
the runners retired after a job, by reason.

Usage: python benchmarks/job_time_split.py CACHE_DIR [CACHE_DIR ...]
(a directory ``--cache-dir`` wrote; a ``.tgz`` of one is unpacked to a temporary folder).
"""

from __future__ import annotations

import json
import sys
import tarfile
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import NamedTuple


class Split(NamedTuple):
    #: per status: [jobs, cases, wall s, imports s, in-case s, compiles, compile s]
    rows: dict[str, list[float]]
    #: runners retired after a job, by reason
    retired: Counter
    #: compile seconds by compiler stage, over all jobs
    stages: Counter
    #: the three longest jobs: (wall s, cases, compiles, compile s)
    longest: list[tuple[float, int, int, float]]
    #: compiles that took an earlier binary of the same IR (``harness/same_ir.py``)
    reused: int


def _cache_dir(path: str) -> str:
    if not path.endswith((".tgz", ".tar.gz")):
        return path
    where = tempfile.mkdtemp(prefix="job-time-split-")
    with tarfile.open(path) as tar:
        tar.extractall(where, filter="data")
    (inner,) = [p for p in Path(where).iterdir() if p.is_dir()]
    return str(inner)


def split(cache_dir: str) -> Split:
    """The cache's job results added up (``Split``)."""
    import diskcache

    rows: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0, 0.0, 0.0, 0, 0.0])
    retired: Counter = Counter()
    stages: Counter = Counter()
    longest: list[tuple[float, int, int, float]] = []
    reused = 0
    with diskcache.Cache(cache_dir) as cache:
        for key in cache.iterkeys():
            if not str(key).startswith("job"):
                continue
            result = json.loads(cache[key])
            extra = result.get("extra") or {}
            outcomes = result.get("outcomes") or []
            row = rows[result["status"]]
            row[0] += 1
            row[1] += len(outcomes)
            row[2] += result.get("duration_s", 0.0)
            row[3] += (extra.get("imports") or {}).get("wall_s", 0.0)
            row[4] += sum(o.get("duration_s", 0.0) for o in outcomes)
            compiled = extra.get("compiles") or {}
            row[5] += compiled.get("count", 0)
            row[6] += compiled.get("seconds", 0.0)
            stages.update(compiled.get("stages") or {})
            reused += compiled.get("same_ir", 0)
            longest.append(
                (
                    result.get("duration_s", 0.0),
                    len(outcomes),
                    compiled.get("count", 0),
                    compiled.get("seconds", 0.0),
                )
            )
            why = (extra.get("runner") or {}).get("retired")
            if why:
                retired[" ".join(str(why).split()[:4])] += 1
    return Split(rows, retired, stages, sorted(longest, reverse=True)[:3], reused)


def main() -> None:
    for path in sys.argv[1:]:
        rows, retired, stages, longest, reused = split(_cache_dir(path))
        total = sum(r[2] for r in rows.values()) or 1.0
        print(f"{path}:")
        for status, (jobs, cases, wall, imports, inside, n, compiling) in sorted(rows.items()):
            print(
                f"  {status:>8}: {jobs:5.0f} jobs, {cases:6.0f} cases, wall {wall:8.0f} s "
                f"({wall / total:4.0%}), imports {imports:6.0f} s, in cases {inside:7.0f} s, "
                f"{n:5.0f} compiles {compiling:7.0f} s ({compiling / max(wall, 1e-9):4.0%})"
            )
        print("  compile s by stage: " + ", ".join(f"{k} {v:.0f}" for k, v in stages.items()))
        print(f"  compiles that took an earlier binary of the same IR: {reused}")
        print(f"  runners retired: {dict(retired)}")
        for wall, cases, n, compiling in longest:
            print(f"  a longest job: {wall:.0f} s, {cases} cases, {n} compiles {compiling:.0f} s")


if __name__ == "__main__":
    main()
