"""The sandbox pools' idle workers, handed out first come, first served."""

from __future__ import annotations

import threading
import time

from mutant_gate.engine.sandbox.handoff import Handoff


def test_a_worker_put_back_goes_to_the_thread_that_waited_longest():
    """The pool's idle workers: a thread that puts its worker back and asks again at once
    (a phase of many jobs) does not take it before a thread already waiting (a job
    started ahead beside that phase); a waiter told to stop gets nothing."""
    pool: Handoff[str] = Handoff()
    pool.put("w1")
    assert pool.take(lambda: False, 0.05) == "w1"
    got: list[str | None] = []
    waiter = threading.Thread(target=lambda: got.append(pool.take(lambda: False, 0.05)))
    waiter.start()
    deadline = time.monotonic() + 10
    while not pool._waiting and time.monotonic() < deadline:
        time.sleep(0.01)
    for _ in range(3):  # keeps its place in line across its polls
        time.sleep(0.06)
    again: list[str | None] = []

    def put_back_and_ask_again() -> None:
        pool.put("w1")
        again.append(pool.take(lambda: False, 0.05))

    busy = threading.Thread(target=put_back_and_ask_again)
    busy.start()  # asks right after putting back: the waiter has it, this one waits
    waiter.join(10)
    assert got == ["w1"]
    time.sleep(0.2)
    assert again == [] and pool.idle() == []
    pool.put("w1")
    busy.join(10)
    assert again == ["w1"]
    stop = threading.Event()
    late: list[str | None] = []
    stopped = threading.Thread(target=lambda: late.append(pool.take(stop.is_set, 0.05)))
    stopped.start()
    stop.set()
    stopped.join(10)
    assert late == [None] and pool._waiting == type(pool._waiting)()
