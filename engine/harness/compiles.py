"""The Triton compiles a job makes: how many, how many its on-disk cache answered, and the
seconds they took, in all, per compiler stage and per test case.

In compiled mode a mutant's kernel is new source, so every specialisation its cases launch
is compiled afresh (the kernels it does not touch come from the runners' shared cache). How
much of a job that is decides what would make a library run faster: fewer cases, or fewer
compiles. Triton calls ``knobs.compilation.listener`` once per ``compile`` with the stages'
times (``CompileTimes``, microseconds) and whether the cache answered; ``Compiles`` listens
while a job runs, beside any listener already set. A Triton without the knob (older than
3.4) gives no record.

Runs inside the sandbox's processes; imports only the stdlib and (lazily) triton.
"""

from __future__ import annotations

from typing import Any

#: what the listener heard in this process: [fresh compiles, cache hits, seconds compiling]
_TOTAL = [0, 0, 0.0]


def mark() -> tuple[int, int, float]:
    """The running totals now: ``since(mark())`` later gives what came between."""
    return (_TOTAL[0], _TOTAL[1], _TOTAL[2])


def since(start: tuple[int, int, float]) -> dict:
    """{"compiles": n, "compile_s": s} since ``start``, or {} where nothing was compiled."""
    count = _TOTAL[0] - start[0]
    if not count:
        return {}
    return {"compiles": count, "compile_s": round(_TOTAL[2] - start[2], 4)}


def _knobs() -> Any:
    try:
        from triton import knobs
    except ImportError:  # a Triton before 3.4
        return None
    return getattr(knobs, "compilation", None)


class Compiles:
    """While entered, Triton's compiles in this process: the job's ``compiles`` section."""

    def __init__(self) -> None:
        self.stages: dict[str, float] = {}
        self._knobs: Any = None
        self._before: Any = None
        self._start = mark()
        self._reused = (0, 0.0)

    def __enter__(self) -> Compiles:
        from . import same_ir

        self._start = mark()
        self._reused = (same_ir.REUSED[0], same_ir.REUSED[1])
        self._knobs = _knobs()
        if self._knobs is not None and hasattr(self._knobs, "listener"):
            self._before = self._knobs.listener
            self._knobs.listener = self._listen
        return self

    def __exit__(self, *exc: object) -> None:
        if self._knobs is not None and self._knobs.listener == self._listen:
            self._knobs.listener = self._before

    def _listen(self, **kwargs: Any) -> None:
        if self._before is not None:
            self._before(**kwargs)
        if kwargs.get("cache_hit"):
            _TOTAL[1] += 1
            return
        times = kwargs.get("times")
        _TOTAL[0] += 1
        _TOTAL[2] += getattr(times, "total", 0) / 1e6
        for stage, micros in getattr(times, "lowering_stages", ()):
            self.stages[stage] = self.stages.get(stage, 0.0) + micros / 1e6

    def record(self) -> dict:
        """The job's ``compiles`` section, or {} where Triton compiled nothing; ``same_ir``:
        the compiles that took an earlier binary of the same IR (``same_ir.py``), and the
        seconds they spent up to its first stage."""
        from . import same_ir

        count, cached, seconds = (now - then for now, then in zip(mark(), self._start, strict=True))
        reused = same_ir.REUSED[0] - self._reused[0]
        if not (count or cached or reused):
            return {}
        return {
            "compiles": {
                "count": count,
                "cached": cached,
                "seconds": round(seconds, 4),
                "stages": {k: round(v, 4) for k, v in self.stages.items()},
                **(
                    {"same_ir": reused, "same_ir_s": round(same_ir.REUSED[1] - self._reused[1], 4)}
                    if reused
                    else {}
                ),
            }
        }
