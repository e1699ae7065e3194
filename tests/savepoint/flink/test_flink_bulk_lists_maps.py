"""List and map state through the block kernels (``list_split``, ``kg_rebuild`` with pieces): on
random key groups mixing value, list and map states (TTL or not, list elements of a fixed length
or behind an ``i32`` length, empty lists, null map values), the bulk rewrite gives the same bytes
on both tiers and the same bytes as the per-value reference (``StateLayout.value_parts``: split
every value, migrate the user values, put them back); ``list_split`` finds exactly the elements
``StateLayout.split_list`` finds; and a corrupted list value is refused by the bulk path exactly
when the reference refuses it, with the reference's message."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import on_tiers

from statemorph import kernels
from statemorph.errors import FlinkSavepointError
from statemorph.savepoint.flink.bulk_blocks import BulkValueRewriter
from statemorph.savepoint.flink.key_group_scan import scan_key_group
from statemorph.savepoint.flink.keyed_blocks import StateRun, parse_key_group, write_key_group
from statemorph.savepoint.flink.layout import FieldCodec, StateLayout

N_STATES = 3


def _layout(kind: str, ttl: bool, element: str) -> StateLayout:
    """A state layout without a savepoint header: only what values need (kind, TTL, how list
    elements end), as ``StateLayout`` derives it from a real header."""
    layout = StateLayout.__new__(StateLayout)
    layout.kind, layout.ttl, layout.where = kind, ttl, f"state {kind}"
    codec = FieldCodec(None, f"{layout.where} list element")
    if element == "fixed":
        codec.fixed = 8  # a Long element (LongSerializer)
    else:
        codec.prefixed = True  # a RowData element (i32 length, then the row)
    layout.element_codec = codec if kind == "list" else None
    return layout


def _element(draw: Any, element: str) -> bytes:
    if element == "fixed":
        return draw(st.binary(min_size=8, max_size=8))
    body = draw(st.binary(max_size=12))
    return len(body).to_bytes(4, "big") + body


def _value(draw: Any, layout: StateLayout, element: str) -> bytes:
    ts = (lambda: draw(st.binary(min_size=8, max_size=8))) if layout.ttl else (lambda: b"")
    if layout.kind == "list":
        return b",".join(ts() + _element(draw, element) for _ in range(draw(st.integers(0, 4))))
    if layout.kind == "map":
        if draw(st.booleans()):
            return b"\x01"  # a null map value: the flag alone
        return b"\x00" + ts() + draw(st.binary(max_size=12))
    return ts() + draw(st.binary(max_size=12))


@st.composite
def groups(draw: Any) -> tuple[bytes, dict[int, StateLayout]]:
    element = draw(st.sampled_from(["fixed", "prefixed"]))
    layouts = {sid: _layout(draw(st.sampled_from(["value", "list", "map"])), draw(st.booleans()), element)
               for sid in range(N_STATES)}
    runs = []
    for sid in draw(st.lists(st.integers(0, N_STATES - 1), min_size=1, max_size=4)):
        n = draw(st.integers(1, 5))
        keys = [bytes([draw(st.integers(0, 0x7F))]) + draw(st.binary(max_size=6)) for _ in range(n)]
        runs.append(StateRun(sid, keys, [_value(draw, layouts[sid], element) for _ in range(n)]))
    return write_key_group(runs), layouts


def _grow(values: pa.Array) -> pa.Array:
    """A stand-in migration that changes lengths: every value reversed plus its length."""
    return pa.array([v[::-1] + bytes([len(v) % 256]) for v in values.to_pylist()], pa.binary())


def _reference(buf: bytes, layouts: dict[int, StateLayout], changed: list[int]) -> bytes:
    runs, _ = parse_key_group(buf, N_STATES, "test", exact_end=True)
    out = []
    for r in runs:
        if r.state_id in changed:
            users, rebuild = layouts[r.state_id].value_parts(r.values)
            r = StateRun(r.state_id, r.keys, rebuild(_grow(pa.array(users, pa.binary())).to_pylist()))
        out.append(r)
    return write_key_group(out)


def _bulk(buf: bytes, layouts: dict[int, StateLayout], changed: list[int]) -> bytes:
    rw = BulkValueRewriter({sid: (layouts[sid], _grow) for sid in changed}, "test")
    rw.add(scan_key_group(0, buf, N_STATES, "test"))
    ((_, data),) = rw.flush()
    return bytes(data)


@settings(max_examples=200, deadline=None)
@given(groups(), st.data())
def test_bulk_lists_and_maps_equal_the_reference_on_both_tiers(group: tuple[bytes, dict[int, StateLayout]],
                                                               data: Any) -> None:
    buf, layouts = group
    changed = data.draw(st.lists(st.integers(0, N_STATES - 1), min_size=1, max_size=N_STATES, unique=True))
    results = on_tiers(lambda: _bulk(buf, layouts, changed))
    assert results["python"] == results.get("native", results["python"])
    assert results["python"] == _reference(buf, layouts, changed)


def _split(buf: bytes, layout: StateLayout) -> tuple[int, list[tuple[int, int]], list[int]]:
    """``list_split`` over every entry of a one-state group: (status, element ranges, counts)."""
    g = scan_key_group(0, buf, N_STATES, "test")
    rows = np.arange(len(g.val_pos))
    pos, end, count = (np.zeros(64, np.int64) for _ in range(3))
    codec = layout.element_codec
    assert codec is not None
    status, k, r = kernels.KERNELS.list_split(buf, g.val_pos, g.val_len, rows, 8 if layout.ttl else 0,
                                              codec.fixed if codec.fixed >= 0 else -1, pos, end, count)
    done = len(rows) if status == 0 else r
    return status, list(zip(pos[:k].tolist(), end[:k].tolist(), strict=True)), count[:done].tolist()


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["fixed", "prefixed"]), st.booleans(), st.data())
def test_list_split_finds_what_the_reference_finds_and_refuses_what_it_refuses(element: str, ttl: bool,
                                                                                data: Any) -> None:
    layout = _layout("list", ttl, element)
    values = [_value(data.draw, layout, element) for _ in range(data.draw(st.integers(1, 4)))]
    if data.draw(st.booleans()):  # corrupt one value: flip bytes and/or cut it
        i = data.draw(st.integers(0, len(values) - 1))
        v = bytearray(values[i])
        for _ in range(data.draw(st.integers(0, 2)) if v else 0):
            v[data.draw(st.integers(0, len(v) - 1))] = data.draw(st.sampled_from([0x2C, 0x00, 0xFF, 0x7F]))
        values[i] = bytes(v[: data.draw(st.integers(0, len(v)))])
    keys = [bytes([1, k]) for k in range(len(values))]
    buf = write_key_group([StateRun(0, keys, values)])
    results = on_tiers(lambda: _split(buf, layout))
    assert results["python"] == results.get("native", results["python"])
    status, ranges, counts = results["python"]
    want: list[tuple[int, int]] = []
    refused = False
    g = scan_key_group(0, buf, N_STATES, "test")
    for at, v in zip(g.val_pos.tolist(), values, strict=True):
        try:
            elements = layout.split_list(v)
        except FlinkSavepointError:
            refused = True
            break
        for e in elements:
            want.append((at, at + len(e)))
            at += len(e) + 1
    assert (status != 0) == refused
    if not refused:
        assert ranges == want and sum(counts) == len(want)
        return
    with pytest.raises(FlinkSavepointError) as bulk:
        _bulk(buf, {0: layout, 1: layout, 2: layout}, [0])
    with pytest.raises(FlinkSavepointError) as reference:
        _reference(buf, {0: layout, 1: layout, 2: layout}, [0])
    assert str(bulk.value) == str(reference.value)
