"""Where a run's job time went, read from its result cache: by the job's outcome (killed by a
failing case, survived, crashed...), its jobs, the test cases they ran, their wall seconds,
the seconds spent importing the project in a fresh warm runner, and the seconds inside cases;
then the runners retired after a job, by reason.

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


def _cache_dir(path: str) -> str:
    if not path.endswith((".tgz", ".tar.gz")):
        return path
    where = tempfile.mkdtemp(prefix="job-time-split-")
    with tarfile.open(path) as tar:
        tar.extractall(where, filter="data")
    (inner,) = [p for p in Path(where).iterdir() if p.is_dir()]
    return str(inner)


def split(cache_dir: str) -> tuple[dict[str, list[float]], Counter]:
    """Per status: [jobs, cases, wall s, imports s, in-case s]; and retirements by reason."""
    import diskcache

    rows: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0, 0.0, 0.0])
    retired: Counter = Counter()
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
            why = (extra.get("runner") or {}).get("retired")
            if why:
                retired[" ".join(str(why).split()[:4])] += 1
    return rows, retired


def main() -> None:
    for path in sys.argv[1:]:
        rows, retired = split(_cache_dir(path))
        total = sum(r[2] for r in rows.values()) or 1.0
        print(f"{path}:")
        for status, (jobs, cases, wall, imports, inside) in sorted(rows.items()):
            print(
                f"  {status:>8}: {jobs:5.0f} jobs, {cases:6.0f} cases, wall {wall:8.0f} s "
                f"({wall / total:4.0%}), imports {imports:6.0f} s, in cases {inside:7.0f} s"
            )
        print(f"  runners retired: {dict(retired)}")


if __name__ == "__main__":
    main()
