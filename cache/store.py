"""The content-addressed store behind resumable runs and offline replay.

Job results are stored under the job's cache key as soon as they arrive, so a
run killed at any moment resumes without repeating finished work. An entry that
cannot be read is a miss, never a crash; a write that fails is counted and the
run goes on.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import diskcache

DEFAULT_DIR = ".mutant-gate"
RESULT_PREFIX = "job:"
RUN_PREFIX = "run:"
REPLY_PREFIX = "llm:"
#: a kernel file's parsed form and mutants (engine/load_memo.py): derived data, cleared
#: with the job results and not counted
LOAD_PREFIX = "load:"
#: key prefix -> the kind ``counts`` and ``clear`` name
KINDS = {RUN_PREFIX: "runs", RESULT_PREFIX: "results", REPLY_PREFIX: "replies"}


class CacheUnavailable(Exception):
    """The cache cannot be opened.

    ``fatal`` when the path itself is wrong (not a directory, no permission):
    that is bad input. Otherwise (disk full, a damaged database) a run can go
    on without the cache, saying so.
    """

    def __init__(self, message: str, fatal: bool) -> None:
        super().__init__(message)
        self.fatal = fatal


class Store:
    def __init__(self, directory: str = DEFAULT_DIR) -> None:
        self.directory = os.path.abspath(directory)
        #: Writes that failed (disk full...): the run goes on; the CLI says how many.
        self.write_failures: list[str] = []
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as exc:
            raise CacheUnavailable(
                f"cannot use cache directory {self.directory}: {exc.strerror}", fatal=True
            ) from None
        try:
            self._cache = diskcache.Cache(self.directory)
        except (OSError, diskcache.core.sqlite3.Error) as exc:
            raise CacheUnavailable(f"cache {self.directory} unusable: {exc}", fatal=False) from None

    # -- job results -------------------------------------------------------
    def get_result(self, key: str, parse: Callable[[dict], Any]) -> Any | None:
        """The stored result for ``key`` parsed by ``parse``, or None (missing or unreadable)."""
        try:
            raw = self._cache.get(RESULT_PREFIX + key)
            if raw is None:
                return None
            return parse(json.loads(raw))
        except Exception:  # noqa: BLE001 - a corrupt entry is a miss
            return None

    def put_result(self, key: str, data: dict) -> None:
        self._put(RESULT_PREFIX + key, json.dumps(data, sort_keys=True))

    # -- model replies -----------------------------------------------------
    def get_reply(self, key: str) -> dict | None:
        """A model reply stored under its request's content hash, or None."""
        return self._get_dict(REPLY_PREFIX + key)

    def put_reply(self, key: str, data: dict) -> None:
        self._put(REPLY_PREFIX + key, json.dumps(data, sort_keys=True))

    # -- loaded kernel files ---------------------------------------------------
    def get_load(self, key: str) -> dict | None:
        return self._get_dict(LOAD_PREFIX + key)

    def put_load(self, key: str, data: dict) -> None:
        self._put(LOAD_PREFIX + key, json.dumps(data))

    # -- run records ---------------------------------------------------------
    def put_run(self, run_id: str, record: dict) -> None:
        record = {**record, "saved_at": time.time()}
        self._put(RUN_PREFIX + run_id, json.dumps(record, sort_keys=True))

    def get_run(self, run_id: str) -> dict | None:
        try:
            raw = self._cache.get(RUN_PREFIX + run_id)
            return None if raw is None else json.loads(raw)
        except Exception:  # noqa: BLE001
            return None

    def delete_run(self, run_id: str) -> bool:
        """Remove one run record (its job results and model replies stay: other runs
        share them); whether it was there."""
        return bool(self._cache.delete(RUN_PREFIX + run_id))

    def list_runs(self) -> list[str]:
        try:
            return sorted(
                k[len(RUN_PREFIX) :]
                for k in self._cache.iterkeys()
                if str(k).startswith(RUN_PREFIX)
            )
        except Exception:  # noqa: BLE001
            return []

    def counts(self) -> dict[str, int]:
        """Entries per kind: ``runs``, ``results`` (job results), ``replies`` (model)."""
        found = dict.fromkeys(KINDS.values(), 0)
        for key in self._cache.iterkeys():
            for prefix, kind in KINDS.items():
                if str(key).startswith(prefix):
                    found[kind] += 1
        return found

    def clear(self, kinds: tuple[str, ...] = ("runs", "results", "replies")) -> dict[str, int]:
        """Remove every entry of the given kinds; returns how many of each went."""
        prefixes = tuple(p for p, kind in KINDS.items() if kind in kinds)
        gone = dict.fromkeys(kinds, 0)
        for key in list(self._cache.iterkeys()):
            if str(key).startswith(prefixes) and self._cache.delete(key):
                gone[KINDS[next(p for p in prefixes if str(key).startswith(p))]] += 1
            elif "results" in kinds and str(key).startswith(LOAD_PREFIX):
                self._cache.delete(key)
        return gone

    def _get_dict(self, key: str) -> dict | None:
        """The JSON object stored under ``key``, or None (missing, corrupt, not an object)."""
        try:
            raw = self._cache.get(key)
            data = None if raw is None else json.loads(raw)
            return data if isinstance(data, dict) else None
        except Exception:  # noqa: BLE001 - a corrupt entry is a miss
            return None

    def _put(self, key: str, value: str) -> None:
        try:
            self._cache.set(key, value)
        except Exception as exc:  # noqa: BLE001 - a cache that cannot write must not stop a run
            self.write_failures.append(str(exc))

    def close(self) -> None:
        self._cache.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
