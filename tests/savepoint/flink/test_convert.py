"""``statemorph convert``: every committed real Flink savepoint goes to the Parquet form and back.

The Parquet tables are plain Parquet (pyarrow reads them without statemorph); the savepoint that
comes back holds exactly what the generating job wrote (expected.json), is byte-identical to the
source where Flink's bytes are deterministic (uncompressed RocksDB streams: same header, same
key-group order, same entry order), and real Flink restores it with the same content."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pyarrow.parquet as pq
import pytest
from savepoint.flink.format_helpers import cases, expected, hashable, read_back, spec, tree_bytes

from statemorph.engine import convert_savepoint
from statemorph.errors import SavepointError, UsageError
from statemorph.savepoint import read_metadata
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.parquet.format import METADATA_FILE

CASES = cases()
EVENT_STATES = ("events", "ttl_events")


def _round_trip(case: Path, tmp: Path) -> tuple[Path, Path]:
    pq_dir, back = tmp / f"{case.name}-parquet", tmp / f"{case.name}-flink"
    convert_savepoint(case / "savepoint", pq_dir)
    convert_savepoint(pq_dir, back)
    return pq_dir, back


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_round_trip_keeps_every_entry(case: Path, tmp_path: Path) -> None:
    before = tree_bytes(case / "savepoint")
    pq_dir, back = _round_trip(case, tmp_path)
    assert tree_bytes(case / "savepoint") == before  # the source is only read
    assert read_back(case, FlinkSavepoint(back)) == expected(case)
    s = spec(case)
    if s["backend"] == "rocksdb" and not s["compression"]:
        assert tree_bytes(back) == before, "uncompressed RocksDB streams come back byte for byte"
    else:  # heap backends order state runs by hash; Snappy framing may differ: same streams, same metadata shape
        src, new = FlinkSavepoint(case / "savepoint"), FlinkSavepoint(back)
        for a, b in zip(src.operators, new.operators, strict=True):
            assert (a.uid, a.uid_hash, a.parallelism, a.max_parallelism) == (b.uid, b.uid_hash, b.parallelism,
                                                                            b.max_parallelism)
            for sa, sb in zip(a.subtasks or [], b.subtasks or [], strict=True):
                ka, kb = sa.managed_keyed, sb.managed_keyed
                assert (ka is None) == (kb is None)
                if ka is not None and kb is not None:
                    assert ka.key_groups == kb.key_groups and ka.code == kb.code
                    assert type(ka.delegate) is type(kb.delegate)
                    assert [o == 0 for o in ka.offsets] == [o == 0 for o in kb.offsets]
                assert sa.managed_operator == sb.managed_operator


@pytest.mark.parametrize("case", CASES[:3], ids=[c.name for c in CASES[:3]])
def test_tables_are_plain_parquet(case: Path, tmp_path: Path) -> None:
    """Without statemorph: the metadata is JSON, each listed file is Parquet with the listed rows,
    and the rows are the entries Flink stored (one per list element, TTL timestamp alongside)."""
    pq_dir = tmp_path / "pq"
    convert_savepoint(case / "savepoint", pq_dir)
    doc = json.loads((pq_dir / METADATA_FILE).read_text(encoding="utf-8"))
    assert doc["format_version"] == 2 and doc["flink"]["metadata"]["path"] == "flink/_metadata"
    sp = FlinkSavepoint(case / "savepoint")
    for st in doc["states"]:
        op, name = st["operator"], st["name"][len(st["operator"]) + 1:]
        tables = [pq.read_table(pq_dir / f["path"]) for f in st["files"]]
        assert sum(t.num_rows for t in tables) == st["rows"]
        want = [r for b in sp.iter_state_batches(op, name) for r in b.to_pylist()]
        got = [r for t in tables for r in t.to_pylist()]
        assert got == want, st["name"]
        if st.get("ttl"):
            assert all(t.schema.field("ttl_timestamp").type == "int64" for t in tables)
        if st.get("flink_kind") == "timers":
            assert all(t.schema.names == ["key_group", "timestamp", "key", "namespace"] for t in tables)
    md = read_metadata(pq_dir)
    assert md.flink is not None and md.flink.headers


def test_parquet_without_flink_parts_does_not_convert_back(tmp_path: Path) -> None:
    from statemorph.savepoint import SavepointWriter
    from statemorph.serializers import IntSerializer, LongSerializer

    plain = tmp_path / "plain"
    with SavepointWriter(plain, max_parallelism=128, key_serializer=IntSerializer()) as w:
        w.write_state("count", "value", value_serializer=LongSerializer())
    assert read_metadata(plain).format_version == 1  # plain savepoints stay readable by older releases
    with pytest.raises(UsageError, match="not converted from a Flink savepoint"):
        convert_savepoint(plain, tmp_path / "back")
    assert not (tmp_path / "back").exists()


def test_damaged_header_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    pq_dir = tmp_path / "pq"
    convert_savepoint(CASES[0] / "savepoint", pq_dir)
    header = next((pq_dir / "flink" / "keyed").rglob("*.header"))
    data = bytearray(header.read_bytes())
    data[-1] ^= 0xFF
    header.write_bytes(bytes(data))
    with pytest.raises(SavepointError, match="sha256"):
        convert_savepoint(pq_dir, tmp_path / "back")
    assert not (tmp_path / "back").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["pq"]


def test_version_1_metadata_cannot_claim_flink_fields(tmp_path: Path) -> None:
    from statemorph.savepoint.parquet.format import parse_metadata

    pq_dir = tmp_path / "pq"
    convert_savepoint(CASES[0] / "savepoint", pq_dir)
    doc = json.loads((pq_dir / METADATA_FILE).read_text(encoding="utf-8"))
    doc["format_version"] = 1
    with pytest.raises(SavepointError, match="format version 2"):
        parse_metadata(json.dumps(doc).encode())


def test_cli_convert_both_ways(tmp_path: Path) -> None:
    case = CASES[0]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "statemorph", "convert", *args], capture_output=True, text=True,
                              timeout=300)

    there = run(str(case / "savepoint"), "--out", str(tmp_path / "pq"), "--json")
    assert there.returncode == 0, there.stderr
    doc = json.loads(there.stdout)
    assert doc["direction"] == "flink-to-parquet" and doc["exit_status"] == 0
    assert sum(s["rows"] for s in doc["states"]) > 0
    back = run(str(tmp_path / "pq"), "--out", str(tmp_path / "back"))
    assert back.returncode == 0, back.stderr
    assert "parquet-to-flink" in back.stdout
    again = run(str(tmp_path / "pq"), "--out", str(tmp_path / "back"))
    assert again.returncode == 2 and "already exists" in again.stderr
    assert read_back(case, FlinkSavepoint(tmp_path / "back")) == expected(case)


@pytest.mark.java
def test_round_tripped_savepoints_restore_in_real_flink(real_flink: ModuleType, tmp_path: Path) -> None:
    items = [(_round_trip(case, tmp_path)[1], case / "spec.json") for case in CASES]
    results = real_flink.restore(items)  # one JVM for every case
    for case, result in zip(CASES, results, strict=True):
        assert result.ok, f"{case.name}: Flink refused the round trip: {result.exception}: {result.message}"
        got = {(hashable(e["key"]), e["state"]): e["value"] for e in result.entries}
        assert got == expected(case), case.name


def _migrate_parquet(case: Path, tmp: Path, engine: str) -> Path:
    """Convert, migrate the events state in the Parquet form (the CLI), convert back."""
    from flink_cases import EVOLVED_EVENTS

    pq_dir, migrated, back = tmp / f"{case.name}-pq", tmp / f"{case.name}-pq-v2", tmp / f"{case.name}-v2"
    convert_savepoint(case / "savepoint", pq_dir)
    op = next(s.operator for s in read_metadata(pq_dir).states.values() if s.name.endswith("/events"))
    schema = tmp / f"{case.name}.toml"
    new = EVOLVED_EVENTS.replace(chr(34), "")
    schema.write_text("".join(f'[states."{op}/{st}"]\ntype = "{new}"\n' for st in EVENT_STATES
                              if st in spec(case)["states"]), encoding="utf-8")
    cli = [sys.executable, "-m", "statemorph"]
    check = subprocess.run([*cli, "check", str(pq_dir), "--schema", str(schema)], capture_output=True, text=True,
                           timeout=300)
    assert check.returncode == 1, (check.stdout, check.stderr)  # timers are carried, events migrate
    run = subprocess.run([*cli, "migrate", str(pq_dir), "--schema", str(schema), "--out", str(migrated),
                          "--engine", engine], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert read_metadata(migrated).flink is not None
    convert_savepoint(migrated, back)
    return back


@pytest.mark.java
def test_migrated_in_parquet_form_restores_in_real_flink(real_flink: ModuleType, tmp_path: Path) -> None:
    """check and migrate work on the converted form (local engine); converting back puts the new
    serializer snapshot into the kept header, and Flink restores the evolved type."""
    from flink_cases import EVOLVED_EVENTS, EVOLVED_EVENTS_FIELDS, reshape

    events = [c for c in CASES if "events" in spec(c)["states"]]
    chosen = [events[0]] + [c for c in events if "ttl_events" in spec(c)["states"]][:2]
    items = [(_migrate_parquet(case, tmp_path, "local"), case / "spec.json") for case in chosen]
    results = real_flink.restore(items, events_type=EVOLVED_EVENTS)
    for case, result in zip(chosen, results, strict=True):
        assert result.ok, f"{case.name}: {result.exception}: {result.message}"
        got = {(hashable(e["key"]), e["state"]): e["value"] for e in result.entries}
        want = {(k, s): reshape(v, EVOLVED_EVENTS_FIELDS) if s in EVENT_STATES else v
                for (k, s), v in expected(case).items()}
        assert got == want, case.name


@pytest.mark.spark
def test_spark_engine_on_the_converted_form_matches_the_local_engine(tmp_path: Path) -> None:
    """``migrate --engine spark`` (local[2]) on the converted form of a savepoint with TTL state and
    timers: converted back, the Flink savepoint is byte-identical to the local engine's, which
    real Flink restores (test above)."""
    pytest.importorskip("pyspark")
    case = next(c for c in CASES if "ttl_events" in spec(c)["states"] and not spec(c)["compression"])
    (tmp_path / "local").mkdir()
    (tmp_path / "spark").mkdir()
    local = _migrate_parquet(case, tmp_path / "local", "local")
    spark = _migrate_parquet(case, tmp_path / "spark", "spark")
    assert tree_bytes(spark) == tree_bytes(local)


@pytest.mark.parametrize("path", ["../_metadata", "/etc/passwd", "state-00000/part-00000.parquet", "flink/../x"])
def test_flink_section_paths_stay_inside_flink_dir(tmp_path: Path, path: str) -> None:
    from statemorph.savepoint.parquet.format import parse_metadata

    pq_dir = tmp_path / "pq"
    convert_savepoint(CASES[0] / "savepoint", pq_dir)
    doc = json.loads((pq_dir / METADATA_FILE).read_text(encoding="utf-8"))
    doc["flink"]["metadata"]["path"] = path
    with pytest.raises(SavepointError, match="path|outside|listed twice"):
        parse_metadata(json.dumps(doc).encode())
