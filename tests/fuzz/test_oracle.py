"""The oracle itself: each kind of finding is recognised (so a clean fuzz run means something),
inputs are a pure function of (family, index), and a run counts distinct inputs apart from
repeats."""

from __future__ import annotations

import time

import pytest

from statemorph.errors import MalformedDataError

from . import engine
from .engine import PeakRss, Stats, distinct_inputs, input_for, judge, measured, run_worker
from .families import FAMILIES, Disagreement, Family, Target

pytestmark = pytest.mark.fuzz


def _family(check) -> Family:  # type: ignore[no-untyped-def]
    return Family("oracle", "one check", [Target("t", b"\x00\x00\x00\x04abcd", check)])


def _raise(exc: BaseException):  # type: ignore[no-untyped-def]
    def check(data: bytes) -> str:
        raise exc
    return check


@pytest.mark.parametrize("exc,outcome,kind", [
    (MalformedDataError("bad length"), "error:MalformedDataError", None),
    (KeyError("x"), "untyped", "untyped"),
    (OverflowError("too big"), "untyped", "untyped"),
    (RecursionError("deep"), "untyped", "untyped"),
    (MemoryError(), "memory", "memory"),
    (Disagreement("tiers differ"), "disagree", "disagree"),
])
def test_each_outcome_is_recognised(exc: BaseException, outcome: str, kind: str | None) -> None:
    got, found, message = judge(_family(_raise(exc)), "t", b"")
    assert (got, found) == (outcome, kind), message


def test_an_untyped_error_names_its_place() -> None:
    _, _, message = judge(_family(lambda d: {}["missing"]), "t", b"")
    assert message.startswith("KeyError at test_oracle.py:")


def test_a_blocked_input_is_a_hang() -> None:
    def blocked(data: bytes) -> str:
        time.sleep(30)
        return "ok"

    outcome, kind, message = judge(_family(blocked), "t", b"", hang_seconds=5, blocked_seconds=0.2)
    assert (outcome, kind) == ("hang", "hang")
    assert message == "no result after 0.2 s of wall-clock time"


def test_an_input_that_spins_is_a_hang_by_its_cpu_time() -> None:
    def spins(data: bytes) -> str:
        while True:
            pass

    outcome, kind, message = judge(_family(spins), "t", b"", hang_seconds=0.2, blocked_seconds=60)
    assert (outcome, kind) == ("hang", "hang")
    assert message == "no result after 0.2 s of CPU time"


def test_an_input_waiting_its_turn_for_a_cpu_is_not_a_hang() -> None:
    """A worker starved of CPU by other jobs (``nice -n 19`` at load 7) takes wall-clock seconds
    for an input of milliseconds: its CPU time, not its wall time, decides (a wall-clock alarm
    took three such inputs for hangs in a million-input run)."""
    def waits(data: bytes) -> str:
        time.sleep(0.5)  # wall time passes, little CPU is used: as when the worker waits its turn
        return "ok"

    assert judge(_family(waits), "t", b"", hang_seconds=0.2, blocked_seconds=60)[:2] == ("ok", None)


def test_an_input_that_takes_memory_is_an_rss_finding() -> None:
    """Memory an input takes and uses (written, so resident) beyond the bound is a finding, though
    no MemoryError was raised; below it, the input's outcome stands."""
    def hungry(data: bytes) -> str:
        held = b"\x01" * (96 << 20)
        return "ok" if held else "never"

    with PeakRss() as rss:
        if not rss.works:
            pytest.skip("needs Linux /proc (VmHWM, clear_refs)")
        outcome, kind, message, grew = measured(_family(hungry), "t", b"", rss, bound_mib=64)
        assert (outcome, kind) == ("ok", "rss") and grew > 90, message
        assert measured(_family(hungry), "t", b"", rss, bound_mib=256)[:2] == ("ok", None)


def test_inputs_are_reproducible_from_their_index() -> None:
    fam = FAMILIES["per-value"]()
    first = [input_for(fam, i) for i in range(50)]
    assert first == [input_for(fam, i) for i in range(50)]
    assert len({data for _, data, _ in first}) > 40  # and varied
    assert any(data != fam.target(t).seed for t, data, _ in first)


def test_a_tiled_stream_reads_as_its_bytes_laid_out() -> None:
    """The ``sparse-and-bomb`` inputs' stream (head, a unit repeated, tail), read at any offset,
    as bytes or into a buffer, is those bytes laid out whole."""
    import random

    import numpy as np
    from savepoint.flink.hostile_sizes import TiledStream

    r = random.Random(5)
    for _ in range(2000):
        head, tail = r.randbytes(r.randint(0, 20)), r.randbytes(r.randint(0, 20))
        unit = r.randbytes(r.choice([0, 1, 3, 16]))
        stream = TiledStream(head, unit, tail, r.randint(0, 300))
        body = stream.size - len(head) - len(tail)
        whole = head + (unit * (body // max(1, len(unit)) + 1) if unit else bytes(body))[:body] + tail
        offset = r.randint(0, stream.size)
        n = r.randint(0, stream.size - offset)
        into = np.full(n, 0xAA, np.uint8)
        stream.read_into(offset, into.data, "t")
        assert stream.read_at(offset, n, "t") == into.tobytes() == whole[offset:offset + n]


def _repeating(outputs: int, finding_at: bytes | None = None) -> Family:
    """A family whose inputs are one of ``outputs`` byte strings (so most repeat); the check
    finds a disagreement on ``finding_at``."""
    def check(data: bytes) -> str:
        if data == finding_at:
            raise Disagreement("planted")
        return "ok"

    return Family("repeating", "a few inputs, repeated", [Target("t", b"", check)],
                  mutator=lambda seed, r: (bytes([r.randrange(outputs)]), "pick"))


def _worker_stats(monkeypatch: pytest.MonkeyPatch, fam: Family, count: int) -> Stats:
    monkeypatch.setitem(FAMILIES, fam.name, lambda: fam)
    (stats,) = run_worker([fam.name], 0, count, 0.0, None, limit_memory=False)
    return stats


def test_a_run_counts_distinct_inputs_apart_from_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of 200 inputs drawn from 5 byte strings says 5 distinct and 195 repeats (its outcomes
    still count every input), as many distinct as the inputs generated alone; a repeated finding
    is judged, and found, again."""
    fam = _repeating(5, finding_at=b"\x03")
    stats = _worker_stats(monkeypatch, fam, 200)
    assert (stats.inputs, stats.distinct, stats.repeats, stats.unchecked) == (200, 5, 195, 0)
    assert sum(stats.outcomes.values()) == 200
    assert stats.distinct == distinct_inputs(fam, 0, 200)
    assert len(stats.findings) == stats.outcomes["disagree"] > 1
    assert stats.to_json()["distinct"] == 5


def test_inputs_past_the_memo_are_unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the digests a worker remembers, an unseen input may repeat one it forgot: counted
    as unchecked, never as distinct."""
    monkeypatch.setattr(engine, "MEMO_INPUTS", 3)
    stats = _worker_stats(monkeypatch, _repeating(50), 400)
    assert stats.distinct == 3 and stats.unchecked > 0
    assert stats.distinct + stats.repeats + stats.unchecked == stats.inputs == 400
