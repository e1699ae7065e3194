"""``bulk.chunks.prefetched``: the rewriter's producer thread (the slices of large key groups are
read and decompressed ahead of the workers). It must keep order, bound how far it runs ahead,
raise the producer's error in its place, and stop its thread when the caller stops early."""

from __future__ import annotations

import threading
import time

import pytest

from statemorph.bulk.chunks import prefetched


def test_items_arrive_in_order_and_the_producer_runs_at_most_depth_ahead() -> None:
    made: list[int] = []

    def items():  # type: ignore[no-untyped-def]
        for i in range(50):
            made.append(i)
            yield i

    it = prefetched(items(), 3)
    assert next(it) == 0
    time.sleep(0.2)
    assert len(made) <= 1 + 3 + 1  # the one taken, a full queue, one waiting to be put
    assert [0, *it] == list(range(50))


def test_the_producers_error_is_raised_in_its_place() -> None:
    def items():  # type: ignore[no-untyped-def]
        yield 1
        yield 2
        raise ValueError("slice 3 is damaged")

    it = prefetched(items(), 2)
    assert next(it) == 1 and next(it) == 2
    with pytest.raises(ValueError, match="slice 3 is damaged"):
        next(it)


def test_closing_early_stops_the_producer_thread() -> None:
    def items():  # type: ignore[no-untyped-def]
        i = 0
        while True:
            yield i
            i += 1

    before = threading.active_count()
    it = prefetched(items(), 2)
    assert next(it) == 0
    it.close()
    assert threading.active_count() == before
