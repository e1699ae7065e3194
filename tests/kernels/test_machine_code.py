"""RowData migrate and decode through machine code (``statemorph.kernels.jit``) against the
compiled kernels it stands in for: the same bytes, offsets, arrays, bad entries and stopping points
(a full output buffer included), over random schemas, evolutions, corrupted entries and odd but
valid layouts. And a guard: where ``llvmlite`` is installed (it is in the test environment) a plan
must get machine code, so a silent fallback to the interpreter fails here rather than only in the
benchmarks."""

from __future__ import annotations

import decimal
import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from bulk.rows import ARROW_LEAVES, REMAP_ONLY_LEAVES
from bulk.rows import arrow_rows as _arrow_rows  # names the tests use (hypothesis seeds from their source)
from bulk.rows import ref_bytes as _ref_bytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import evolve, typed_rows

from statemorph import arrow, bulk, kernels, serializers
from statemorph.kernels import abi, jit, plans
from statemorph.migration import plan_row_migration

pytestmark = pytest.mark.skipif(not kernels.native_available(), reason="compiled kernels not built")

EVENTS_OLD = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
EVENTS_NEW = ("ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, "
              "`timestamp` BIGINT, appVersion STRING, sessionId BIGINT>>")


def _program(old: Any, new: Any) -> np.ndarray:
    so, sn = serializers.RowDataSerializer(old), serializers.RowDataSerializer(new)
    return plans.compile_migration_program(plan_row_migration(so.row_type, sn.row_type)).matrix


def _run(matrix: np.ndarray, arr: pa.Array, cap: int, code: int) -> list[Any]:
    """Drive the compiled ``migrate_run`` the way arrow.py does (resume after a bad entry, stop
    when the buffer is full) and record every step and the bytes written."""
    k = kernels.tier("native")
    offsets, data, validity, offset, wide = bulk.inputs.binary_input(arr)
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


def _maybe_corrupt(data: st.DataObject, b: bytes) -> bytes:
    """One entry in four corrupted: a byte replaced, or the entry cut."""
    if data.draw(st.integers(0, 3)):
        return b
    ba = bytearray(b)
    if data.draw(st.booleans()):
        ba[data.draw(st.integers(0, len(ba) - 1))] = data.draw(st.integers(0, 255))
        return bytes(ba)
    return bytes(ba[:data.draw(st.integers(0, len(ba)))])


def test_machine_code_is_built_where_llvmlite_is_installed() -> None:
    if os.environ.get("STATEMORPH_JIT", "1").strip() == "0":
        pytest.skip("machine code switched off")
    assert jit.enabled(), "llvmlite is part of the test environment: machine code must be available"
    assert jit.plan_code(_program(EVENTS_OLD, EVENTS_NEW)) is not None
    assert jit.decode_code(plans.compile_row_program(serializers.RowDataSerializer(EVENTS_OLD).row_type).matrix) \
        is not None


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
        assert matrix[0][abi.COL_FLAGS] & abi.FLAG_VERBATIM
        return
    blobs = []
    for b in _ref_bytes(serializers.RowDataSerializer(old_t), rows):
        if b is not None:  # machine code takes plain input only: no null entries
            blobs.append(_maybe_corrupt(data, b))
    arr = pa.array(blobs, type=pa.binary())
    roomy = 2 * sum(len(b) for b in blobs) + 64 * len(blobs) + 64
    cap = data.draw(st.sampled_from([roomy, data.draw(st.integers(0, roomy))]))
    assert _run(matrix, arr, cap, code.address) == _run(matrix, arr, cap, 0)


def test_events_through_the_bulk_api_equal_with_and_without_machine_code(monkeypatch: pytest.MonkeyPatch) -> None:
    so, sn = serializers.RowDataSerializer(EVENTS_OLD), serializers.RowDataSerializer(EVENTS_NEW)
    rows = [(i, None if i % 7 == 0 else (i * 3, i * 1000, "dev" * (i % 5) + "é" * (i % 3 == 0)))
            for i in range(3000)]
    arr = pa.array([so.to_bytes(r) for r in rows], pa.binary())
    monkeypatch.setattr(bulk.tiers, "MACHINE_CODE_MIN", 0)
    with_code = arrow.migrate(arr, so.snapshot_configuration(), sn, threads=2)
    monkeypatch.setenv("STATEMORPH_JIT", "0")
    assert arrow.migrate(arr, so.snapshot_configuration(), sn, threads=2).equals(with_code)


@st.composite
def odd_layouts(draw: Any) -> bytes:
    """Valid ``ROW<a INT, s STRING, t STRING, r ROW<x STRING>>`` entries that no Flink writer
    produces: gaps between var parts, s and t sharing one var part, unpadded parts, an inline s
    with a stale var part behind it, padding inside the nested row."""
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


def _both(fn: Any, arr: pa.Array, s: Any) -> list[Any]:
    """``fn`` (``bulk.encode`` / ``decode``) with and without machine code, reporting bad rows:
    the results side by side."""
    out = []
    for flag in ("1", "0"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(bulk.tiers, "MACHINE_CODE_MIN", 0)
            mp.setenv("STATEMORPH_JIT", flag)
            got, errs = fn(arr, s, on_error="null")
        out.append((got, [(e.row, e.field_path, type(e).__name__) for e in errs]))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_decode_machine_code_equals_the_kernel(data: st.DataObject) -> None:
    if not jit.enabled():
        pytest.skip("no llvmlite")
    t, rows = data.draw(typed_rows(ARROW_LEAVES))
    s = serializers.RowDataSerializer(t)
    assert jit.decode_code(plans.compile_row_program(t).matrix) is not None
    blobs = []
    for b in _ref_bytes(s, rows):
        if b is not None:  # machine code takes plain input only: no null entries
            blobs.append(_maybe_corrupt(data, b))
    (with_code, errs), (without, errs0) = _both(bulk.decode, pa.array(blobs, pa.binary()), s)
    assert errs == errs0
    assert with_code.equals(without)
    assert with_code.to_pylist() == without.to_pylist()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blobs=st.lists(odd_layouts(), min_size=1, max_size=12))
def test_decode_machine_code_on_odd_layouts(blobs: list[bytes]) -> None:
    if not jit.enabled():
        pytest.skip("no llvmlite")
    s = serializers.RowDataSerializer("ROW<a INT, s STRING, t STRING, r ROW<x STRING>>")
    (with_code, errs), (without, errs0) = _both(bulk.decode, pa.array(blobs, pa.binary()), s)
    assert errs == errs0 == []
    assert with_code.equals(without)


@pytest.mark.parametrize("threads", [1, 2])
def test_decode_machine_code_with_string_buffers_that_must_grow(threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Starved string buffers: the machine code hands entries back when a column is full, the walk
    grows it; the result equals the kernel's alone."""
    s = serializers.RowDataSerializer(EVENTS_OLD)
    rows = [(i, None if i % 7 == 0 else (i * 3, i * 1000, "dev-" * (i % 9) + "é" * (i % 3 == 0)))
            for i in range(3000)]
    arr = pa.array([s.to_bytes(r) for r in rows], pa.binary())
    monkeypatch.setattr(bulk.inputs, "input_spans", lambda *a: (lambda s, e: 0))
    monkeypatch.setattr(bulk.tiers, "MACHINE_CODE_MIN", 0)
    with_code = arrow.decode(arr, s, threads=threads)
    monkeypatch.setenv("STATEMORPH_JIT", "0")
    assert arrow.decode(arr, s, threads=threads).equals(with_code)
    assert with_code.to_pylist()[:3] == [
        {"eventId": 0, "metadata": None},
        {"eventId": 1, "metadata": {"userId": 3, "timestamp": 1000, "deviceType": "dev-"}},
        {"eventId": 2, "metadata": {"userId": 6, "timestamp": 2000, "deviceType": "dev-dev-"}}]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_encode_machine_code_equals_the_kernel(data: st.DataObject) -> None:
    if not jit.enabled():
        pytest.skip("no llvmlite")
    t, rows = data.draw(typed_rows(ARROW_LEAVES))
    s = serializers.RowDataSerializer(t)
    assert jit.encode_code(plans.compile_row_program(t).matrix) is not None
    arr = _arrow_rows(t, rows)
    arr = arr.slice(data.draw(st.integers(0, len(arr))))
    (with_code, errs), (without, errs0) = _both(bulk.encode, arr, s)
    assert errs == errs0 == []
    assert with_code.equals(without)
    assert with_code.to_pylist() == _ref_bytes(s, rows[len(rows) - len(arr):])


def test_encode_machine_code_reports_like_the_kernel() -> None:
    """NOT NULL fields holding nulls, at the top and nested: the machine code hands those entries
    to the walk, which reports them as always."""
    if not jit.enabled():
        pytest.skip("no llvmlite")
    s = serializers.RowDataSerializer("ROW<a INT NOT NULL, d DECIMAL(4, 1), r ROW<x STRING NOT NULL>>")
    values = [{"a": 1, "d": decimal.Decimal("12.5"), "r": {"x": "ok"}},
              {"a": None, "d": None, "r": None},
              {"a": 3, "d": decimal.Decimal("-0.5"), "r": None},
              {"a": 4, "d": None, "r": {"x": None}},
              {"a": 5, "d": decimal.Decimal("-999.9"), "r": {"x": "a longer string value"}}]
    arr = pa.array(values, type=pa.struct([("a", pa.int32()), ("d", pa.decimal128(4, 1)),
                                           ("r", pa.struct([("x", pa.string())]))]))
    (with_code, errs), (without, errs0) = _both(bulk.encode, arr, s)
    assert errs == errs0
    assert [row for row, _, _ in errs] == [1, 3]
    assert with_code.equals(without)


def test_plans_compile_concurrently(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads compiling different plans at once (the local engine migrates states in parallel):
    LLVM builds one at a time, every thread gets working code."""
    if not jit.enabled():
        pytest.skip("no llvmlite")
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(bulk.tiers, "MACHINE_CODE_MIN", 0)
    cases = []
    for width in range(40, 48):
        s = serializers.RowDataSerializer("ROW<" + ", ".join(f"f{j} BIGINT" for j in range(width)) + ", s STRING>")
        rows = [(*range(width), f"v{i}") for i in range(50)]
        cases.append((s, pa.array([s.to_bytes(r) for r in rows], pa.binary()), rows))

    def decode(case: tuple[Any, pa.Array, list[Any]]) -> Any:
        s, arr, _ = case
        assert jit.decode_code(plans.compile_row_program(s.row_type).matrix) is not None
        return arrow.decode(arr, s)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(decode, cases))
    for (_, _, rows), got in zip(cases, results, strict=True):
        assert [tuple(r.values()) for r in got.to_pylist()] == rows


def test_threads_reaching_one_new_plan_compile_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers that meet a plan at the same moment (the first batches of a parallel run) build its
    machine code once: the others wait for it instead of compiling it again."""
    if not jit.enabled():
        pytest.skip("no llvmlite")
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    builds = []
    real_build = jit._build

    def slow_build(ir: str) -> Any:
        builds.append(ir)
        time.sleep(0.05)  # every thread is inside the lookup before the first build ends
        return real_build(ir)

    monkeypatch.setattr(jit, "_build", slow_build)
    s = serializers.RowDataSerializer("ROW<" + ", ".join(f"g{j} INT" for j in range(37)) + ", t STRING>")
    matrix = plans.compile_row_program(s.row_type).matrix
    start = threading.Barrier(4)

    def compile_once(_: int) -> Any:
        start.wait()
        return jit.decode_code(matrix)

    with ThreadPoolExecutor(max_workers=4) as pool:
        codes = list(pool.map(compile_once, range(4)))
    assert len(builds) == 1
    assert all(c is codes[0] and c is not None for c in codes)
