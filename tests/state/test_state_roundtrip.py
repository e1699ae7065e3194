"""Property: any state content survives savepoint → restore on every backend pair, and both
backends write the same rows for the same content."""

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from statemorph.savepoint import read_state_table
from statemorph.serializers import LongSerializer, StringSerializer
from statemorph.state import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)

KEYS = st.text(max_size=6)
LONGS = st.integers(-(2**63), 2**63 - 1)
CONTENT = st.dictionaries(
    KEYS,
    st.tuples(
        st.one_of(st.none(), LONGS),
        st.lists(st.text(max_size=5), max_size=4),
        st.dictionaries(LONGS, st.one_of(st.none(), st.text(max_size=5)), max_size=4),
    ),
    max_size=12,
)
DESCS = [ValueStateDescriptor("v", LongSerializer()), ListStateDescriptor("l", StringSerializer()),
         MapStateDescriptor("m", LongSerializer(), StringSerializer())]


def fill(backend, content):
    v, lst, m = (backend.get_state(d) for d in DESCS)
    for key, (value, items, mapping) in content.items():
        backend.set_current_key(key)
        v.update(value)
        lst.update(items)
        m.put_all(mapping)


def read_all(backend, content):
    v, lst, m = (backend.get_state(d) for d in DESCS)
    out = {}
    for key in content:
        backend.set_current_key(key)
        out[key] = (v.value(), lst.get(), dict(m.items()))
    return out


@settings(max_examples=10, deadline=None)
@given(CONTENT, st.sampled_from([128, 4096]))
def test_savepoint_restore_roundtrip(content, max_par):
    with tempfile.TemporaryDirectory() as d:
        tables = []
        for i, src in enumerate((HashMapStateBackend, EmbeddedRocksDBStateBackend)):
            b = src(StringSerializer(), max_par)
            fill(b, content)
            sp = Path(d) / f"sp{i}"
            b.savepoint(sp)
            b.close()
            tables.append({d.name: read_state_table(sp, d.name) for d in DESCS})
            for dst in (HashMapStateBackend, EmbeddedRocksDBStateBackend):
                with dst.restore(sp) as r:
                    assert read_all(r, content) == content
        for name in ("v", "l", "m"):
            assert tables[0][name].equals(tables[1][name])
