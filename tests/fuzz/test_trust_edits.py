"""The structured edits of ``handle-reuse`` (tests/fuzz/trust.py) make only savepoints that must
be refused or read the same: an edit that copies a stream to another handle copies only one that
names a file (a stream read twice). A copy of inline state is new state, a valid savepoint that
reads differently, which the oracle calls a disagreement: inputs 35641, 36299 and 62297 of the
first million-input run (commit ``fecf9ab``) did that."""

from __future__ import annotations

import copy
import random

import pytest

from statemorph.savepoint.flink import FileHandle, RelativeFileHandle, parse_metadata

from . import trust
from .engine import input_for, judge
from .families import FAMILIES

pytestmark = pytest.mark.fuzz
COPYING = ("copy-delegate", "share-delegate", "operator-to-keyed")


def _delegates(meta: object) -> list[object]:
    return [getattr(st, k).delegate for _, st, k in trust._slots(meta)]  # type: ignore[arg-type]


@pytest.mark.parametrize("edit", COPYING)
def test_a_copied_stream_is_a_file(edit: str) -> None:
    """Every delegate an edit puts in a handle names a file, on every seed (inline ones among them)."""
    copied = 0
    for name, seed in trust.seeds():
        for n in range(40):
            meta = parse_metadata(seed)
            before = copy.deepcopy(_delegates(meta))
            trust.REUSE_EDITS[edit](meta, random.Random(f"{name}/{n}"))
            for old, new in zip(before, _delegates(meta), strict=True):
                if new != old:
                    assert isinstance(new, (FileHandle, RelativeFileHandle)), (name, n, new)
                    copied += 1
    assert copied  # the edit still copies file streams


def test_the_first_long_runs_disagreements_are_gone() -> None:
    fam = FAMILIES["handle-reuse"]()
    for index in (35641, 36299, 62297):
        target, data, _ = input_for(fam, index)
        outcome, kind, message = judge(fam, target, data)
        assert kind is None, (index, outcome, message[:300])
