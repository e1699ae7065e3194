"""``bulk.chunks.PlacedInOrder``: pieces handed over in any order by several threads land at
their places, each written once, by the worker of a piece no later than it."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from statemorph.bulk.chunks import PlacedInOrder, ordered_map
from statemorph.errors import OutputError


def test_pieces_put_in_any_order_land_at_their_places() -> None:
    rng = random.Random(3)
    pieces = [[bytes([i % 251]) * rng.randint(0, 50) for _ in range(rng.randint(0, 3))] for i in range(300)]
    out = bytearray(7 + sum(len(b) for p in pieces for b in p))
    written: list[tuple[int, int]] = []
    lock = threading.Lock()

    def write_at(offset: int, data: Any) -> None:
        with lock:
            written.append((offset, len(data)))
        out[offset:offset + len(data)] = data

    placed = PlacedInOrder(write_at, 7)
    order = list(range(len(pieces)))
    rng.shuffle(order)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: placed.put(i, pieces[i]), order))
    assert bytes(out[7:]) == b"".join(b for p in pieces for b in p)
    assert sorted(written) == sorted(set(written)) and all(n for _, n in written)  # each once, none empty


def test_a_piece_is_in_the_file_when_the_ordered_map_returns_it() -> None:
    out = bytearray(1000)
    done = 0

    def write_at(offset: int, data: Any) -> None:
        out[offset:offset + len(data)] = data

    placed = PlacedInOrder(write_at, 0)

    def work(i: int) -> int:
        if i % 3 == 0:
            threading.Event().wait(0.002)  # later pieces finish first
        placed.put(i, [bytes([i + 1]) * 10])
        return i

    for i in ordered_map(work, range(100), 4):
        done = i
        assert bytes(out[:10 * (i + 1)]) == b"".join(bytes([j + 1]) * 10 for j in range(i + 1))
    assert done == 99


def test_a_write_error_is_raised_by_the_put_that_wrote() -> None:
    def write_at(offset: int, data: Any) -> None:
        raise OutputError(f"cannot write at {offset}")

    placed = PlacedInOrder(write_at, 5)
    placed.put(1, [b"later"])  # waits for piece 0: nothing written yet
    with pytest.raises(OutputError, match="at 5"):
        placed.put(0, [b"first"])
