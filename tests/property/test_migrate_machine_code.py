"""RowData migrate through a plan's machine code (``statemorph._native.jit``) against the compiled
interpreter it stands in for: the same bytes, offsets, bad entries and stopping points (a full
output buffer included), over random schemas, evolutions and corrupted entries. And a guard: where
``llvmlite`` is installed (it is in the test environment) a plan must get machine code, so a
silent fallback to the interpreter fails here rather than only in the benchmarks."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_native_equivalence import ARROW_LEAVES, REMAP_ONLY_LEAVES, _ref_bytes, evolve, typed_rows

from statemorph import _native, arrow, serializers
from statemorph._native import jit
from statemorph.migration import plan_row_migration
from statemorph.serializers import _batch as B

pytestmark = pytest.mark.skipif(not _native.native_available(), reason="compiled kernels not built")

EVENTS_OLD = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
EVENTS_NEW = ("ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, "
              "`timestamp` BIGINT, appVersion STRING, sessionId BIGINT>>")


def _program(old: Any, new: Any) -> np.ndarray:
    so, sn = serializers.RowDataSerializer(old), serializers.RowDataSerializer(new)
    return B.compile_migration_program(plan_row_migration(so.row_type, sn.row_type)).matrix


def _run(matrix: np.ndarray, arr: pa.Array, cap: int, code: int) -> list[Any]:
    """Drive the compiled ``migrate_run`` the way arrow.py does (resume after a bad entry, stop
    when the buffer is full) and record every step and the bytes written."""
    k = _native.tier("native")
    offsets, data, validity, offset, wide = arrow._binary_input(arr)
    out_off = np.zeros(len(arr) + 1, dtype=np.int32)
    out = np.full(cap, 0xAB, dtype=np.uint8)
    steps: list[Any] = []
    i = pos = 0
    while i < len(arr):
        nxt, pos, status = k.migrate_run(matrix, offsets, data, validity, offset, wide, i, len(arr), out_off, out,
                                         pos, code)
        steps.append((nxt, pos, status))
        if status:
            i = nxt + 1
        elif nxt < len(arr):
            break
        else:
            i = nxt
    return [steps, out_off.tolist(), bytes(out[:pos])]


def test_machine_code_is_built_where_llvmlite_is_installed() -> None:
    if os.environ.get("STATEMORPH_JIT", "1").strip() == "0":
        pytest.skip("machine code switched off")
    assert jit.enabled(), "llvmlite is part of the test environment: machine code must be available"
    assert jit.plan_code(_program(EVENTS_OLD, EVENTS_NEW)) is not None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_machine_code_equals_interpreter(data: st.DataObject) -> None:
    if not jit.enabled():
        pytest.skip("no llvmlite")
    leaves = ARROW_LEAVES + REMAP_ONLY_LEAVES
    old_t, rows = data.draw(typed_rows(leaves))
    new_t = data.draw(evolve(old_t, leaves))
    matrix = _program(old_t, new_t)
    code = jit.plan_code(matrix)
    if code is None:  # an identity plan copies entries verbatim: nothing to compile
        assert matrix[0][B.C_FLAGS] & B.F_VERBATIM
        return
    blobs = []
    for b in _ref_bytes(serializers.RowDataSerializer(old_t), rows):
        if b is None:
            continue  # machine code takes plain input only: no null entries
        if data.draw(st.integers(0, 3)) == 0:  # corrupt: one byte replaced, or cut
            ba = bytearray(b)
            if data.draw(st.booleans()):
                ba[data.draw(st.integers(0, len(ba) - 1))] = data.draw(st.integers(0, 255))
            else:
                ba = ba[:data.draw(st.integers(0, len(ba)))]
            b = bytes(ba)
        blobs.append(b)
    arr = pa.array(blobs, type=pa.binary())
    roomy = 2 * sum(len(b) for b in blobs) + 64 * len(blobs) + 64
    cap = data.draw(st.sampled_from([roomy, data.draw(st.integers(0, roomy))]))
    assert _run(matrix, arr, cap, code.address) == _run(matrix, arr, cap, 0)


def test_events_through_the_bulk_api_equal_with_and_without_machine_code(monkeypatch: pytest.MonkeyPatch) -> None:
    so, sn = serializers.RowDataSerializer(EVENTS_OLD), serializers.RowDataSerializer(EVENTS_NEW)
    rows = [(i, None if i % 7 == 0 else (i * 3, i * 1000, "dev" * (i % 5) + "é" * (i % 3 == 0)))
            for i in range(3000)]
    arr = pa.array([so.to_bytes(r) for r in rows], pa.binary())
    monkeypatch.setattr(arrow, "_MACHINE_CODE_MIN", 0)
    with_code = arrow.migrate(arr, so.snapshot_configuration(), sn, threads=2)
    monkeypatch.setenv("STATEMORPH_JIT", "0")
    assert arrow.migrate(arr, so.snapshot_configuration(), sn, threads=2).equals(with_code)


@st.composite
def odd_layouts(draw: Any) -> bytes:
    """Valid ``ROW<a INT, s STRING, t STRING, r ROW<x STRING>>`` entries that no Flink writer
    produces: gaps between var parts, s and t sharing one var part, unpadded parts, an inline s
    with a stale var part behind it, padding inside the nested row. The machine code must write what the interpreter writes."""
    ofixed = 8 + 8 * 4
    s_val, t_val, x_val = (draw(st.text(max_size=20).map(str.encode)) for _ in range(3))
    body = bytearray()
    spans: list[tuple[int, int]] = []
    for v in (s_val, t_val):
        if spans and draw(st.booleans()):  # the same var part as s
            spans.append(spans[0])
            continue
        body += bytes(draw(st.integers(0, 9)))  # a gap
        spans.append((ofixed + len(body), len(v)))
        body += v
    body += bytes(draw(st.integers(0, 3)))
    nested_at = ofixed + len(body)
    nested = bytearray((0).to_bytes(8, "little"))
    if len(x_val) > 7 or draw(st.booleans()):
        nested += ((16 << 32) | len(x_val)).to_bytes(8, "little") + x_val
    else:
        nested += _inline(x_val)
    nested += bytes(draw(st.integers(0, 8)))
    body += nested
    slots = [(draw(st.integers(0, (1 << 32) - 1))).to_bytes(8, "little")]
    for off, n in spans:
        slots.append(((off << 32) | n).to_bytes(8, "little"))
    if len(s_val) <= 7 and spans[1] != spans[0] and draw(st.booleans()):
        slots[1] = _inline(s_val)  # s inline; its var part stays behind as junk
    slots.append(((nested_at << 32) | len(nested)).to_bytes(8, "little"))
    row = (0).to_bytes(8, "little") + b"".join(slots) + bytes(body)
    return len(row).to_bytes(4, "big") + row


def _inline(v: bytes) -> bytes:
    """A slot holding ``v`` (at most 7 bytes) inline: the bytes, then 0x80 | length."""
    return (int.from_bytes(v.ljust(7, b"\0"), "little") | ((0x80 | len(v)) << 56)).to_bytes(8, "little")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(odd_layouts(), min_size=1, max_size=12))
def test_machine_code_equals_interpreter_on_odd_layouts(blobs: list[bytes]) -> None:
    if not jit.enabled():
        pytest.skip("no llvmlite")
    old = "ROW<a INT, s STRING, t STRING, r ROW<x STRING>>"
    new = "ROW<r ROW<y BIGINT, x STRING>, t STRING, z STRING, a INT, s STRING>"
    matrix = _program(old, new)
    code = jit.plan_code(matrix)
    assert code is not None
    arr = pa.array(blobs, type=pa.binary())
    roomy = 4 * sum(len(b) for b in blobs) + 64 * len(blobs)
    got = _run(matrix, arr, roomy, code.address)
    assert got == _run(matrix, arr, roomy, 0)
    assert all(status == 0 for _, _, status in got[0])  # odd, but valid
