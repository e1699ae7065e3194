"""The serial fraction of a run: how much of its time no second core could take.

Why: the per-key-group work of a rewrite runs on every worker at once, so it scales with the
cores; what runs on one thread (planning, opening and writing each stream in order, the new
``_metadata``, the carried files, the commit) does not, and bounds the speed-up on any machine
(Amdahl: with a serial fraction ``s`` of the CPU time, ``T`` threads run at most ``1 / (s + (1 - s)
/ T)`` times as fast as one). A run measures it only when asked (``migrate_flink_savepoint(...,
timings=True)``): the engine marks its parallel section and, inside it, the ordered write
(:func:`timed`); each mark costs one context-variable lookup when nobody measures.

``serial`` is the wall time outside the parallel sections plus the writes inside them; ``cpu``
the process's CPU time over the same run (every thread): their ratio is the serial fraction.
"""

from __future__ import annotations

import threading
import time
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any

PARALLEL = "parallel"
"""The stage in which workers run (the writer's thread waits on them, and writes)."""
WRITE = "write"
"""The ordered write of finished bytes (inside a parallel stage: it is the one serial part there)."""

_CLOCK: ContextVar[SerialClock | None] = ContextVar("statemorph_serial_clock", default=None)
_IN_PARALLEL: ContextVar[bool] = ContextVar("statemorph_in_parallel", default=False)
"""Set inside a parallel stage: a parallel stage within it (a stream rewritten on a thread of a
run that rewrites several at once, in a copy of the run's context) is already counted."""


class _Stage:
    __slots__ = ("clock", "name", "t0", "token")

    def __init__(self, clock: SerialClock, name: str) -> None:
        self.clock = clock
        self.name = name
        self.t0 = 0.0
        self.token: Token[bool] | None = None

    def __enter__(self) -> None:
        if self.name == PARALLEL:
            self.token = _IN_PARALLEL.set(True)
        self.t0 = time.perf_counter()

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None) -> None:
        took = time.perf_counter() - self.t0
        with self.clock.lock:  # stages end on several threads (the writes of streams rewritten at once)
            self.clock.seconds[self.name] = self.clock.seconds.get(self.name, 0.0) + took
        if self.token is not None:
            _IN_PARALLEL.reset(self.token)


class SerialClock:
    """Wall time per stage, and the run's wall and process CPU time, while it is entered (on the
    thread that entered it, and the stages that thread marks)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.wall = 0.0
        self.cpu = 0.0
        self._t0 = self._c0 = 0.0
        self._token: Token[SerialClock | None] | None = None
        self.lock = threading.Lock()

    def __enter__(self) -> SerialClock:
        self._token = _CLOCK.set(self)
        self._t0, self._c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None) -> None:
        self.wall = time.perf_counter() - self._t0
        self.cpu = time.process_time() - self._c0
        if self._token is not None:
            _CLOCK.reset(self._token)

    def stage(self, name: str) -> _Stage:
        return _Stage(self, name)

    @property
    def serial(self) -> float:
        """Wall seconds no other core could take: outside the parallel stages, and the writes."""
        return self.wall - self.seconds.get(PARALLEL, 0.0) + self.seconds.get(WRITE, 0.0)

    def to_dict(self) -> dict[str, Any]:
        """``wall_s``, ``cpu_s``, ``parallel_s`` (wall time of the parallel stages), ``write_s``,
        ``serial_s`` and ``serial_fraction`` (``serial_s / cpu_s``)."""
        return {"wall_s": round(self.wall, 4), "cpu_s": round(self.cpu, 4),
                "parallel_s": round(self.seconds.get(PARALLEL, 0.0), 4),
                "write_s": round(self.seconds.get(WRITE, 0.0), 4), "serial_s": round(self.serial, 4),
                "serial_fraction": round(self.serial / self.cpu, 4) if self.cpu > 0 else None}


def timed(stage: str) -> AbstractContextManager[Any]:
    """Time ``stage`` on the clock of the run in progress (nothing when none measures, or for a
    parallel stage inside one). Writes inside a parallel stage on several threads at once are
    each counted, as if one after the other (an upper bound of the serial time)."""
    clock = _CLOCK.get()
    if clock is None or (stage == PARALLEL and _IN_PARALLEL.get()):
        return nullcontext()
    return clock.stage(stage)


__all__ = ["PARALLEL", "WRITE", "SerialClock", "timed"]
