"""State API semantics on both backends, Flink's RocksDB key layout, and a model-based property test."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemorph.errors import SerializationError, StateMigrationError
from statemorph.serializers import IntSerializer, LongSerializer, StringSerializer
from statemorph.state import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
    VoidNamespace,
    VoidNamespaceSerializer,
)
from statemorph.state.rocksdb import write_variable_int_bytes
from statemorph.typeutils import write_versioned_snapshot

BACKENDS = [HashMapStateBackend, EmbeddedRocksDBStateBackend]


@pytest.fixture(params=BACKENDS, ids=["heap", "rocksdb"])
def backend(request):
    b = request.param(StringSerializer(), 128)
    yield b
    b.close()


def test_value_state(backend):
    v = backend.get_state(ValueStateDescriptor("v", LongSerializer()))
    backend.set_current_key("a")
    assert v.value() is None
    v.update(5)
    backend.set_current_key("b")
    assert v.value() is None
    v.update(-7)
    backend.set_current_key("a")
    assert v.value() == 5
    v.update(None)
    assert v.value() is None
    backend.set_current_key("b")
    v.clear()
    assert v.value() is None


def test_list_state(backend):
    lst = backend.get_state(ListStateDescriptor("l", StringSerializer()))
    backend.set_current_key("k")
    assert lst.get() == []
    lst.add("x")
    lst.add_all(["", "y,z"])  # a ',' inside an element is not confused with the delimiter
    assert lst.get() == ["x", "", "y,z"]
    lst.add_all([])
    assert lst.get() == ["x", "", "y,z"]
    lst.update(["only"])
    assert lst.get() == ["only"]
    with pytest.raises(SerializationError, match="None"):
        lst.add(None)
    with pytest.raises(SerializationError):
        lst.add_all(["a", None])
    assert lst.get() == ["only"]
    lst.update([])
    assert lst.get() == []


def test_map_state(backend):
    m = backend.get_state(MapStateDescriptor("m", IntSerializer(), StringSerializer()))
    backend.set_current_key("k")
    assert m.is_empty() and m.items() == [] and m.get(1) is None
    m.put(1, "one")
    m.put_all({2: "two", 3: None})
    assert m.get(1) == "one" and m.get(3) is None
    assert m.contains(3) and 3 in m and not m.contains(4)
    assert sorted(m.keys()) == [1, 2, 3]
    assert sorted(m.items(), key=lambda kv: kv[0]) == [(1, "one"), (2, "two"), (3, None)]
    m.remove(2)
    m.remove(99)
    assert sorted(m.keys()) == [1, 3] and not m.is_empty()
    backend.set_current_key("other")
    assert m.is_empty()
    m.put(1, "x")
    backend.set_current_key("k")
    m.clear()
    assert m.is_empty()
    backend.set_current_key("other")
    assert m.items() == [(1, "x")]


def test_namespaces_separate_entries(backend):
    v = backend.get_state(ValueStateDescriptor("w", IntSerializer()), namespace_serializer=LongSerializer())
    backend.set_current_key("k")
    v.set_current_namespace(1)
    v.update(10)
    v.set_current_namespace(2)
    assert v.value() is None
    v.update(20)
    v.set_current_namespace(1)
    assert v.value() == 10


def test_no_current_key_and_key_range(backend):
    v = backend.get_state(ValueStateDescriptor("v", IntSerializer()))
    with pytest.raises(ValueError, match="set_current_key"):
        v.value()
    with pytest.raises(ValueError):
        backend.set_current_key(None)
    sub = type(backend)(StringSerializer(), 128, key_group_range=(0, 63))
    try:
        sub.set_current_key("user-1")  # key group 121 in Flink
        pytest.fail("key outside the range was accepted")
    except ValueError as e:
        assert "121" in str(e)
    finally:
        sub.close()
    backend.set_current_key("user-1")
    assert backend.current_key_group == 121


def test_reregistering_with_incompatible_serializer_fails_and_keeps_state(backend):
    v = backend.get_state(ValueStateDescriptor("v", IntSerializer()))
    backend.set_current_key("k")
    v.update(3)
    with pytest.raises(StateMigrationError, match="'v'"):
        backend.get_state(ValueStateDescriptor("v", StringSerializer()))
    with pytest.raises(StateMigrationError, match="list"):
        backend.get_state(ListStateDescriptor("v", IntSerializer()))
    assert backend.get_state(ValueStateDescriptor("v", IntSerializer())).value() == 3


def test_void_namespace_serializer():
    s = VoidNamespaceSerializer()
    assert s.to_bytes(VoidNamespace) == b"\x00"
    assert s.from_bytes(b"\x00") is VoidNamespace
    # the snapshot bytes of Flink 2.3 (writeVersionedSnapshot of VoidNamespaceSerializerSnapshot)
    assert write_versioned_snapshot(s.snapshot_configuration()).hex() == (
        "0056" + b"org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot".hex()
        + "00000003")


def _table(backend, desc, ns=None):
    backend.get_state(desc, namespace_serializer=ns)
    return backend._handles[desc.name].table


def test_rocksdb_composite_keys_match_flink():
    # SerializedCompositeKeyBuilder output printed by Flink 2.3
    b = EmbeddedRocksDBStateBackend(StringSerializer(), 128)
    try:
        key = StringSerializer().to_bytes("user-1")
        t = _table(b, ValueStateDescriptor("v", IntSerializer()))
        assert t.composite((5, key, b"\x00")).hex() == "0507757365722d3100"
        assert (t.composite((5, key, b"\x00")) + IntSerializer().to_bytes(77)).hex() == "0507757365722d31000000004d"
    finally:
        b.close()
    b = EmbeddedRocksDBStateBackend(StringSerializer(), 1000)
    try:
        t = _table(b, ValueStateDescriptor("w", IntSerializer()), ns=StringSerializer())
        ck = t.composite((300, key, StringSerializer().to_bytes("ns")))
        assert ck.hex() == "012c07757365722d3107036e7303"  # ambiguous: lengths appended
        assert t.split(ck) == ((300, key, StringSerializer().to_bytes("ns")), b"")
    finally:
        b.close()


def test_rocksdb_value_layouts():
    b = EmbeddedRocksDBStateBackend(IntSerializer(), 128)
    try:
        lst = b.get_state(ListStateDescriptor("l", IntSerializer()))
        m = b.get_state(MapStateDescriptor("m", IntSerializer(), IntSerializer()))
        b.set_current_key(1)
        lst.add_all([1, 2])
        m.put(9, None)
        m.put(8, 3)
        (k, v), = b._handles["l"].table.cf.items()
        assert k == bytes([b.current_key_group]) + b"\x00\x00\x00\x01\x00"
        assert v == bytes.fromhex("00000001" "2c" "00000002")  # ListDelimitedSerializer
        vals = dict(b._handles["m"].table.cf.items())
        assert vals[k + b"\x00\x00\x00\x09"] == b"\x01"  # null map value: isNull = true
        assert vals[k + b"\x00\x00\x00\x08"] == b"\x00\x00\x00\x00\x03"
    finally:
        b.close()


@pytest.mark.parametrize("v", [0, 1, 255, 256, 65535, 1 << 24])
def test_variable_int_bytes(v):
    enc = write_variable_int_bytes(v)
    assert int.from_bytes(enc, "little") == v
    assert len(enc) == max(1, (v.bit_length() + 7) // 8)


OPS = st.lists(
    st.tuples(
        st.sampled_from(["k1", "k2", "é", ""]),
        st.sampled_from(["set", "clear", "add", "ladd", "lupd", "put", "rm", "mclear"]),
        st.integers(-3, 3),
        st.one_of(st.none(), st.text(max_size=4)),
    ),
    max_size=40,
)


@settings(max_examples=25, deadline=None)
@given(OPS)
def test_backends_agree_with_a_dict_model(ops):
    """Random operations give the same observable state on both backends as on plain dicts."""
    model: dict = {}
    results = []
    for cls in BACKENDS:
        b = cls(StringSerializer(), 128)
        try:
            v = b.get_state(ValueStateDescriptor("v", IntSerializer()))
            lst = b.get_state(ListStateDescriptor("l", StringSerializer()))
            m = b.get_state(MapStateDescriptor("m", IntSerializer(), StringSerializer()))
            model = {}
            for key, op, n, s in ops:
                b.set_current_key(key)
                mv = model.setdefault(key, {"v": None, "l": [], "m": {}})
                if op == "set":
                    v.update(n)
                    mv["v"] = n
                elif op == "clear":
                    v.clear()
                    lst.clear()
                    mv["v"], mv["l"] = None, []
                elif op == "add" and s is not None:
                    lst.add(s)
                    mv["l"].append(s)
                elif op == "ladd":
                    lst.add_all([str(n)] * abs(n))
                    mv["l"] += [str(n)] * abs(n)
                elif op == "lupd":
                    lst.update([str(n)] * abs(n))
                    mv["l"] = [str(n)] * abs(n)
                elif op == "put":
                    m.put(n, s)
                    mv["m"][n] = s
                elif op == "rm":
                    m.remove(n)
                    mv["m"].pop(n, None)
                elif op == "mclear":
                    m.clear()
                    mv["m"] = {}
            seen = {}
            for key in model:
                b.set_current_key(key)
                seen[key] = {"v": v.value(), "l": lst.get(), "m": dict(m.items())}
            results.append(seen)
        finally:
            b.close()
    assert results[0] == results[1] == model


def test_rocksdb_list_bytes_match_flink_list_delimited_serializer():
    # ListDelimitedSerializer.serializeList(["a", "", "b,c"], StringSerializer) in Flink 2.3
    b = EmbeddedRocksDBStateBackend(IntSerializer(), 128)
    try:
        lst = b.get_state(ListStateDescriptor("l", StringSerializer()))
        b.set_current_key(1)
        lst.add("a")
        lst.add_all(["", "b,c"])
        (_, v), = b._handles["l"].table.cf.items()
        assert v.hex() == "02612c012c04622c63"
        assert lst.get() == ["a", "", "b,c"]
    finally:
        b.close()


def test_registering_the_same_descriptor_again_is_free(backend):
    d = ValueStateDescriptor("v", IntSerializer())
    v = backend.get_state(d)
    backend.set_current_key("k")
    v.update(1)
    table = backend._handles["v"].table
    again = backend.get_state(ValueStateDescriptor("v", IntSerializer()))
    assert backend._handles["v"].table is table and again.value() == 1
