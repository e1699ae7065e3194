"""Where a snapshot no class reads ends inside a keyed-state header (``keyed_header._Ends``): the
indexed search finds exactly the positions a byte-by-byte probe of the grammar accepts, and its
work is bounded by the candidates it checks, never by the bytes it skips.

The probes below are the specification: the parser's earlier search ran them at every byte
after an open snapshot, which decoded a string at each position (quadratic on long valid
modified UTF-8) and made the fuzzer's ``keyed-header`` family cost ~10 ms an input."""

from __future__ import annotations

import random

import pytest
from savepoint.flink.flink_cases import SAVEPOINTS

from statemorph import serializers
from statemorph.errors import FlinkSavepointError, StateFormatError
from statemorph.io import DataInputDeserializer, DataOutputSerializer, is_modified_utf8
from statemorph.savepoint.flink import FlinkSavepoint, parse_keyed_header, write_keyed_header
from statemorph.savepoint.flink.envelope import Snapshot, _class_name_at, _class_name_starts, snapshot_from_envelope
from statemorph.savepoint.flink.keyed_header import (
    ENVELOPE_VERSION,
    KEY_VALUE,
    MAX_END_CANDIDATES,
    MAX_OPTIONS,
    MAX_SERIALIZERS,
    SERIALIZER_KEYS,
    VALUE_SERIALIZER,
    KeyedHeader,
    StateMetaInfo,
    _Ends,
    _Parser,
)
from statemorph.typeutils import write_serializer_snapshot

UNKNOWN = "com.example.UnknownSerializer$UnknownSnapshot"  # no class reads it: its end is searched


# -- the specification: a probe at one position ---------------------------------------------------
def _key_probe(data: bytes, end: int, e: int) -> bool:
    try:
        c = DataInputDeserializer(data, e, end - e)
        return c.read_utf() in SERIALIZER_KEYS and c.read_int() == ENVELOPE_VERSION
    except (StateFormatError, ValueError):
        return False


def _state_probe(data: bytes, end: int, e: int) -> bool:
    try:
        c = DataInputDeserializer(data, e, end - e)
        c.read_utf()
        if c.read_int() not in (0, 3, 4):
            return False
        n_opt = c.read_int()
        if not 0 <= n_opt <= MAX_OPTIONS:
            return False
        for _ in range(2 * n_opt):
            c.read_utf()
        if not 1 <= c.read_int() <= MAX_SERIALIZERS:
            return False
        return c.read_utf() in SERIALIZER_KEYS and c.read_int() == ENVELOPE_VERSION
    except (StateFormatError, ValueError):
        return False


def _count_probe(data: bytes, end: int, e: int) -> bool:
    if e + 2 == end:
        return data[e : e + 2] == b"\x00\x00"
    return e + 2 <= end and data[e] < 0x80 and _state_probe(data, end, e + 2)


def _real_headers() -> list[bytes]:
    out: dict[bytes, None] = {}
    for name in ("events-hashmap-p1", "kinds-rocksdb-p2-rowkey"):
        sp = FlinkSavepoint(SAVEPOINTS / name / "savepoint")
        for op in sp.operators:
            for _, stream in sp.keyed_streams(op):
                out[stream.source.read_at(0, stream.header_end, "header")] = None
    return list(out)


def _variants(head: bytes, seed: int) -> list[bytes]:
    """The header, and copies with signatures planted and destroyed: pieces of the header moved
    elsewhere, bytes overwritten, and a serializer key in the overlong (but accepted) form."""
    r = random.Random(seed)
    out = [head]
    for _ in range(2):
        d = bytearray(head)
        for _ in range(6):
            a = r.randrange(len(d) - 64)
            piece = bytes(d[a : a + r.randrange(8, 64)])
            at = r.randrange(len(d))
            d[at:at] = piece
            d[r.randrange(len(d))] = r.randrange(256)
        overlong = b"\x00\x11" + b"\xc1\x96" + b"ALUE_SERIALIZER" + ENVELOPE_VERSION.to_bytes(4, "big")  # 'V' as C1 96
        at = r.randrange(len(d))
        d[at:at] = overlong
        out.append(bytes(d))
    return out


@pytest.mark.parametrize("seed", range(2))
def test_indexed_ends_are_exactly_the_positions_a_probe_accepts(seed: int) -> None:
    for head in _real_headers():
        for data in _variants(head, seed):
            end = len(data)
            ends = _Ends(data, end, "t")
            assert list(ends.serializer_key(0)) == [e for e in range(end + 1) if _key_probe(data, end, e)]
            ends = _Ends(data, end, "t")
            assert list(ends.state(0)) == [e for e in range(end + 1) if _state_probe(data, end, e)]
            ends = _Ends(data, end, "t")
            assert list(ends.count_then_state(0)) == [e for e in range(end + 1) if _count_probe(data, end, e)]
            assert _class_name_starts(data) == [e for e in range(end) if _class_name_at(data, e)]


def test_modified_utf8_check_is_the_decoder() -> None:
    from statemorph.io import decode_modified_utf8

    r = random.Random(7)
    alphabet = [
        b"a",
        b"\x00",
        b"\x7f",
        b"\x80",
        b"\xbf",
        b"\xc0\x80",
        b"\xc1\x96",
        b"\xdf",
        b"\xe0\x80\x80",
        b"\xef",
        b"\xf0",
        b"\xff",
        b"\xed\xa0\x80",
    ]
    for _ in range(3000):
        s = b"".join(r.choice(alphabet) for _ in range(r.randrange(6)))
        try:
            decode_modified_utf8(s)
            ok = True
        except StateFormatError:
            ok = False
        assert is_modified_utf8(s) == ok, s


# -- the bound: work counted in candidates checked --------------------------------------------------
def _header(payload: bytes, second_state: bool, two_serializers: bool = False) -> bytes:
    """A v6 header whose first state's value serializer is an unknown class with ``payload``,
    followed by a second state, another serializer of the same state, or the header's end."""
    key = snapshot_from_envelope(write_serializer_snapshot(serializers.LongSerializer().snapshot_configuration()))
    raw = DataOutputSerializer()
    raw.write_utf(UNKNOWN)
    raw.write_int(1)
    raw.write(payload)
    unknown = Snapshot(UNKNOWN, 1, raw.get_copy_of_buffer())
    sers = [(VALUE_SERIALIZER, unknown)] + ([("NAMESPACE_SERIALIZER", key)] if two_serializers else [])
    states = [StateMetaInfo("first", KEY_VALUE, [("KEYED_STATE_TYPE", "VALUE")], sers)]
    if second_state:
        states.append(StateMetaInfo("second", KEY_VALUE, [("KEYED_STATE_TYPE", "VALUE")], [(VALUE_SERIALIZER, key)]))
    return write_keyed_header(KeyedHeader(6, False, key, states))


def _parse(data: bytes) -> tuple[KeyedHeader, int]:
    p = _Parser(data, len(data), "t", None)
    return p.header(), p.ends.tried


@pytest.mark.parametrize(
    "second_state, two_serializers",
    [(True, False), (False, True), (False, False)],
    ids=["then-state", "then-key", "then-end"],
)
def test_skipping_a_long_payload_checks_a_handful_of_candidates(second_state: bool, two_serializers: bool) -> None:
    """100 KB of valid two-byte modified UTF-8 inside the unknown snapshot, closed by a byte no
    string may hold (so no state name can start inside it): a probe at every byte would decode a
    ~49 KB string at each of them (the earlier search had not finished after 300 s); the index
    checks at most two candidates whatever the payload's length, and the header reads back byte
    for byte."""
    tried = []
    for size in (1_000, 100_000):
        payload = b"\xc2\x80" * (size // 2) + b"\xff"
        data = _header(payload, second_state, two_serializers)
        h, n = _parse(data)
        assert write_keyed_header(h) == data
        assert h.states[0].serializers[0][1].raw.endswith(payload)
        tried.append(n)
    assert max(tried) <= 2, tried


@pytest.mark.parametrize(
    "filler", [b"\x00", b"\x00\x10VALUE_SERIALIZEX\x00\x00\x00\x02"], ids=["zeros", "key-lookalikes"]
)
def test_pathological_candidates_end_in_a_typed_error_after_the_cap(filler: bytes) -> None:
    """Zeros look like state meta infos up to the serializer count, and ``VALUE_SERIALIZEX``
    like a serializer key up to its last letter: each passes the C filter and fails the full
    check. Past MAX_END_CANDIDATES of them the header is refused, typed, naming the cap."""
    data = _header(
        filler * (MAX_END_CANDIDATES + 500), second_state=filler == b"\x00", two_serializers=filler != b"\x00"
    )
    p = _Parser(data, len(data), "t", None)
    with pytest.raises(FlinkSavepointError, match=f"more than {MAX_END_CANDIDATES} candidate ends"):
        p.header()
    assert p.ends.tried == MAX_END_CANDIDATES + 1
    with pytest.raises(FlinkSavepointError, match="keyed-state header"):
        parse_keyed_header(data, len(data), "t")


def test_real_headers_need_no_search_at_all() -> None:
    for head in _real_headers():
        h, tried = _parse(head)
        assert write_keyed_header(h) == head and tried == 0
