"""Idle workers handed to the threads that wait for one, first come, first served.

``queue.Queue`` is not fair: a thread that puts a worker back and asks for the next one
at once takes it again before the waiter it woke gets to run. A phase of many jobs keeps
every worker that way, and a job started ahead beside it (the probe's capture, beside
the mutant phase) waited for the whole phase instead of for the next worker. Here a
worker put back goes to the longest waiter; only when none waits does it become idle.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class _Ticket(Generic[T]):
    __slots__ = ("handed", "item")

    def __init__(self) -> None:
        self.handed = threading.Event()
        self.item: T | None = None


class Handoff(Generic[T]):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: deque[T] = deque()
        self._waiting: deque[_Ticket[T]] = deque()

    def put(self, item: T) -> None:
        """``item`` to the longest waiter, or idle when none waits."""
        with self._lock:
            if self._waiting:
                ticket = self._waiting.popleft()
                ticket.item = item
                ticket.handed.set()
                return
            self._idle.append(item)

    def take(self, stop: Callable[[], bool], poll_s: float) -> T | None:
        """An idle item, or the next one put back after the threads that asked before
        this one had theirs; None once ``stop()`` says so (asked every ``poll_s``
        seconds while waiting; the wait keeps its place in line between the asks)."""
        with self._lock:
            if self._idle:  # none waits while one is idle: ``put`` hands it over
                return self._idle.popleft()
            ticket: _Ticket[T] = _Ticket()
            self._waiting.append(ticket)
        while not ticket.handed.wait(poll_s):
            if not stop():
                continue
            with self._lock:
                if not ticket.handed.is_set():
                    self._waiting.remove(ticket)
                    return None
            break  # handed over while stopping: pass it on below
        if stop():
            self.put(ticket.item)  # type: ignore[arg-type]
            return None
        return ticket.item

    def idle(self) -> list[T]:
        """The items nobody holds now."""
        with self._lock:
            return list(self._idle)
