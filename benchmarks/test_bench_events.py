"""Events workload: encode, decode and migrate 2,000,000 entries with the compiled kernels, next to
the reference tier (per-value serializers, on a subsample), fastavro schema resolution on the same
data, Flink's own JVM RowDataSerializer (benchmarks/jvm, when java and the Flink jars exist) and a
memcpy of the same bytes (the floor). Numbers are reported, never asserted."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from statemorph import arrow, bulk, kernels
from statemorph.migration import migrate_bytes

from .conftest import Events, record, record_external

SUBSAMPLE = 20_000
HERE = Path(__file__).parent


def _flink_jars() -> Path:
    """The Flink 2.3 jars: $FLINK_LIB, else the throwaway venvs ci/flink/setup.sh uses."""
    if os.environ.get("FLINK_LIB"):
        return Path(os.environ["FLINK_LIB"])
    for venv in (Path("/tmp/flinkvenv"), HERE.parent / "ci" / "flink" / "build" / "flinkvenv"):
        lib = venv / "lib" / "python3.11" / "site-packages" / "pyflink" / "lib"
        if lib.is_dir():
            return lib
    return Path("/nonexistent")


JARS = _flink_jars()


# ---------------------------------------------------------------------------------- compiled tier
@pytest.mark.parametrize("threads", [1, 2])
def test_encode_native(benchmark: Any, events: Events, threads: int) -> None:
    out = benchmark.pedantic(arrow.encode, args=(events.struct, events.so), kwargs={"threads": threads},
                             rounds=5, iterations=1, warmup_rounds=1)
    assert len(out) == events.n
    record(f"encode native threads={threads}", benchmark, events.n, tier=kernels.TIER)


@pytest.mark.parametrize("threads", [1, 2])
def test_decode_native(benchmark: Any, events: Events, threads: int) -> None:
    out = benchmark.pedantic(arrow.decode, args=(events.old_bytes, events.so), kwargs={"threads": threads},
                             rounds=5, iterations=1, warmup_rounds=1)
    assert len(out) == events.n
    record(f"decode native threads={threads}", benchmark, events.n, tier=kernels.TIER)


@pytest.mark.parametrize("threads", [1, 2])
def test_migrate_native(benchmark: Any, events: Events, threads: int) -> None:
    out = benchmark.pedantic(arrow.migrate, args=(events.old_bytes, events.snapshot, events.sn),
                             kwargs={"threads": threads}, rounds=5, iterations=1, warmup_rounds=1)
    assert len(out) == events.n
    mb = events.old_bytes.buffers()[2].size / 1e6
    record(f"migrate native threads={threads}", benchmark, events.n, tier=kernels.TIER, input_MB=round(mb, 1))


@pytest.mark.parametrize("op", ["encode", "decode", "migrate"])
def test_native_interpreter(benchmark: Any, events: Events, op: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled kernels walking the program, without the row type's / plan's machine code
    (``STATEMORPH_JIT=0``, or ``llvmlite`` not installed), one thread."""
    monkeypatch.setenv("STATEMORPH_JIT", "0")
    fn, args = {"encode": (arrow.encode, (events.struct, events.so)),
                "decode": (arrow.decode, (events.old_bytes, events.so)),
                "migrate": (arrow.migrate, (events.old_bytes, events.snapshot, events.sn))}[op]
    out = benchmark.pedantic(fn, args=args, rounds=5, iterations=1, warmup_rounds=1)
    assert len(out) == events.n
    record(f"{op} native interpreter (no machine code) threads=1", benchmark, events.n, tier=kernels.TIER)


def test_memcpy_floor(benchmark: Any, events: Events) -> None:
    """Copy the same entry bytes (data + offsets buffers) into fresh numpy arrays: what any migrate
    must at least do, page faults of the new memory included (a plain ``memcpy``)."""
    data = np.frombuffer(events.old_bytes.buffers()[2], dtype=np.uint8)
    offs = np.frombuffer(events.old_bytes.buffers()[1], dtype=np.uint8)

    def copy() -> tuple[np.ndarray, np.ndarray]:
        return data.copy(), offs.copy()

    benchmark.pedantic(copy, rounds=10, iterations=1, warmup_rounds=1)
    record("memcpy floor", benchmark, events.n)


def test_memcpy_floor_pooled(benchmark: Any, events: Events) -> None:
    """The same copy into buffers from Arrow's memory pool, as ``arrow.migrate`` allocates its
    output: freed pages are reused between rounds, so no page faults (the stricter floor)."""
    data = np.frombuffer(events.old_bytes.buffers()[2], dtype=np.uint8)
    offs = np.frombuffer(events.old_bytes.buffers()[1], dtype=np.uint8)

    def copy() -> tuple[pa.Buffer, pa.Buffer]:
        out_d, out_o = pa.allocate_buffer(len(data)), pa.allocate_buffer(len(offs))
        np.frombuffer(out_d, dtype=np.uint8)[:] = data
        np.frombuffer(out_o, dtype=np.uint8)[:] = offs
        return out_d, out_o

    benchmark.pedantic(copy, rounds=10, iterations=1, warmup_rounds=1)
    record("memcpy floor (pooled output)", benchmark, events.n)


def test_decode_output_floor(benchmark: Any, events: Events) -> None:
    """Allocate the Arrow columns a decode of these entries returns (every buffer, same sizes, as
    ``np.zeros``) and touch each of their pages once: what any decode into fresh columns pays
    before it writes a value (page faults and the OS zeroing the new memory)."""
    sizes: list[int] = []

    def walk(a: pa.Array) -> None:
        sizes.extend(b.size for b in a.buffers() if b is not None)

    walk(arrow.decode(events.old_bytes.slice(0, 1), events.so))  # the buffer layout ...
    per_entry = sum(sizes)
    sizes.clear()
    decoded = arrow.decode(events.old_bytes, events.so)
    walk(decoded)  # ... and the real sizes
    del decoded

    def touch() -> list[np.ndarray]:
        out = [np.zeros(z, dtype=np.uint8) for z in sizes]
        for a in out:
            a[::4096] = 1
        return out

    benchmark.pedantic(touch, rounds=5, iterations=1, warmup_rounds=1)
    record("decode output floor (fresh columns, touched)", benchmark, events.n, MB=round(sum(sizes) / 1e6, 1),
           one_entry_bytes=per_entry)


PEAK_CHILD = """
import sys, numpy as np, pyarrow as pa, pyarrow.ipc as ipc
from statemorph import arrow, serializers
def kib(field):
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(field))
old, new, path, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
src = ipc.open_file(pa.memory_map(path)).read_all().column(0).chunk(0)   # zero-copy
so, sn = serializers.RowDataSerializer(old), serializers.RowDataSerializer(new)
snap = so.snapshot_configuration()
warm = kib("VmRSS")
arrow.migrate(src.slice(0, 10000), snap, sn)         # warm up imports and the plan's machine code
warm = kib("VmRSS") - warm                           # (LLVM: once per process, whatever N)
for b in src.buffers():
    if b is not None:
        np.frombuffer(b, dtype=np.uint8).sum()        # fault the whole (memory-mapped) input in
open("/proc/self/clear_refs", "w").write("5")        # reset the peak-RSS mark (VmHWM)
before = kib("VmRSS")
out = arrow.migrate(src, snap, sn, threads=threads)
print((kib("VmHWM") - before) * 1024, sum(b.size for b in out.buffers() if b is not None), warm * 1024)
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_migrate_peak_memory(benchmark: Any, events: Events, threads: int) -> None:
    """Peak memory a migrate adds, in a fresh process (peak RSS before and after, the input
    memory-mapped and already resident), next to the bytes of the output it produces. A warm-up
    migrate of 10,000 entries first loads the imports and compiles the plan's machine code (LLVM
    stays resident: a per-process constant, reported as ``warm_up_rss_MB``)."""
    import sys

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "old.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, pa.schema([("v", pa.binary())])) as w:
            w.write_table(pa.table({"v": events.old_bytes}))
        from .conftest import NEW, OLD

        def run() -> tuple[int, ...]:
            r = subprocess.run([sys.executable, "-c", PEAK_CHILD, OLD, NEW, str(path), str(threads)],
                               check=True, capture_output=True, text=True)
            return tuple(int(v) for v in r.stdout.split())

        grown, out_bytes, warm = benchmark.pedantic(run, rounds=1, iterations=1)
    record(f"migrate peak memory threads={threads}", benchmark, events.n, output_MB=round(out_bytes / 1e6, 1),
           peak_rss_growth_MB=round(grown / 1e6, 1), extra_over_output_MB=round((grown - out_bytes) / 1e6, 1),
           warm_up_rss_MB=round(warm / 1e6, 1))


# ---------------------------------------------------------------------------------- reference tier
def test_encode_reference(benchmark: Any, events: Events) -> None:
    values = [(r["eventId"], tuple(r["metadata"].values())) for r in events.struct.slice(0, SUBSAMPLE).to_pylist()]
    benchmark.pedantic(lambda: [events.so.to_bytes(v) for v in values], rounds=3, iterations=1)
    record("encode reference (per value)", benchmark, SUBSAMPLE)


def test_decode_reference(benchmark: Any, events: Events) -> None:
    blobs = events.old_bytes.slice(0, SUBSAMPLE).to_pylist()
    benchmark.pedantic(lambda: [events.so.from_bytes(b) for b in blobs], rounds=3, iterations=1)
    record("decode reference (per value)", benchmark, SUBSAMPLE)


def test_migrate_reference(benchmark: Any, events: Events) -> None:
    blobs = events.old_bytes.slice(0, SUBSAMPLE).to_pylist()
    benchmark.pedantic(lambda: [migrate_bytes(events.snapshot, events.sn, b) for b in blobs], rounds=3, iterations=1)
    record("migrate reference (per value)", benchmark, SUBSAMPLE)


def test_migrate_python_kernel_tier(benchmark: Any, events: Events, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same bulk API on the Python kernel twins (``STATEMORPH_NATIVE=0``)."""
    monkeypatch.setattr(kernels, "KERNELS", kernels.tier("python"))
    sub = events.old_bytes.slice(0, SUBSAMPLE)
    benchmark.pedantic(arrow.migrate, args=(sub, events.snapshot, events.sn), rounds=3, iterations=1)
    record("migrate python kernel tier", benchmark, SUBSAMPLE)


# ---------------------------------------------------------------------------------- fastavro
AVRO_OLD = {
    "type": "record", "name": "Event", "fields": [
        {"name": "eventId", "type": "long"},
        {"name": "metadata", "type": {"type": "record", "name": "Meta", "fields": [
            {"name": "userId", "type": "int"}, {"name": "timestamp", "type": "long"},
            {"name": "deviceType", "type": "string"}]}}]}
AVRO_NEW = {
    "type": "record", "name": "Event", "fields": [
        {"name": "eventId", "type": "long"},
        {"name": "metadata", "type": {"type": "record", "name": "Meta", "fields": [
            {"name": "deviceType", "type": "string"},
            {"name": "location", "type": ["null", "string"], "default": None},
            {"name": "userId", "type": "int"}, {"name": "timestamp", "type": "long"},
            {"name": "appVersion", "type": ["null", "string"], "default": None},
            {"name": "sessionId", "type": ["null", "long"], "default": None}]}}]}


def test_fastavro_schema_resolution(benchmark: Any, events: Events) -> None:
    """fastavro reading old-schema Avro records with the new reader schema (decode + resolve only;
    it does not even write the new bytes, so it is a generous comparison)."""
    fastavro = pytest.importorskip("fastavro")
    writer = fastavro.parse_schema(AVRO_OLD)
    reader = fastavro.parse_schema(AVRO_NEW)
    n = 200_000
    blobs = []
    for r in events.struct.slice(0, n).to_pylist():
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, writer, r)
        blobs.append(buf.getvalue())

    def run() -> int:
        count = 0
        for b in blobs:
            fastavro.schemaless_reader(io.BytesIO(b), writer, reader)
            count += 1
        return count

    benchmark.pedantic(run, rounds=3, iterations=1)
    record("fastavro resolve (decode only)", benchmark, n)


# ---------------------------------------------------------------------------------- Flink JVM
@pytest.mark.skipif(shutil.which("java") is None or shutil.which("javac") is None or not JARS.is_dir(),
                    reason="java or the Flink 2.3 jars are not available")
def test_flink_jvm_rowdata(benchmark: Any, events: Events) -> None:
    """Flink's RowDataSerializer in the JVM over the same entries (warm-up inside the harness); its
    migrate (old serializer, a by-name remap with Flink's field getters, new serializer) must write
    exactly the bytes statemorph's migrate writes."""
    import json

    n = min(events.n, int(os.environ.get("STATEMORPH_BENCH_JVM_N", str(events.n))))
    cp = ":".join(str(p) for p in sorted(JARS.glob("*.jar")))
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["javac", "-d", tmp, "-cp", cp, str(HERE / "jvm" / "EventsBench.java")], check=True)
        sub = events.old_bytes.slice(0, n)
        offs = np.frombuffer(sub.buffers()[1], dtype=np.int32)[sub.offset:sub.offset + n + 1]
        start, end = int(offs[0]), int(offs[-1])
        data_file = Path(tmp) / "events.bin"
        data_file.write_bytes(sub.buffers()[2].to_pybytes()[start:end])

        migrated_file = Path(tmp) / "migrated.bin"

        def run() -> dict[str, Any]:
            r = subprocess.run(["java", "-Xmx3g", "-cp", f"{cp}:{tmp}", "EventsBench", str(data_file), str(n),
                                "3", "3", str(migrated_file)], check=True, capture_output=True, text=True, timeout=1800)
            return json.loads(r.stdout.strip().splitlines()[-1])

        result = benchmark.pedantic(run, rounds=1, iterations=1)
        ours = arrow.migrate(sub, events.snapshot, events.sn)
        ours_offs = np.frombuffer(ours.buffers()[1], dtype=np.int32)[ours.offset:ours.offset + n + 1]
        assert migrated_file.read_bytes() == ours.buffers()[2].to_pybytes()[int(ours_offs[0]):int(ours_offs[-1])]
    record_external("flink jvm serialize", result["serialize_per_s"], n)
    record_external("flink jvm deserialize (+ read fields)", result["deserialize_per_s"], n)
    record_external("flink jvm migrate", result["migrate_per_s"], n)
    benchmark.extra_info.update(result)


# ---------------------------------------------------------------------------------- flink-core Row
def _core_events() -> Any:
    """The Events row as a flink-core ``Row`` (``RowSerializer``, DataStream formats)."""
    from statemorph import serializers
    from statemorph.serializers.tuples import RowSerializer

    meta = RowSerializer([serializers.IntSerializer(), serializers.LongSerializer(), serializers.StringSerializer()],
                         field_names=["userId", "timestamp", "deviceType"])
    return RowSerializer([serializers.LongSerializer(), meta], field_names=["eventId", "metadata"])


@pytest.fixture(scope="module")
def core_bytes(events: Events) -> pa.BinaryArray:
    return arrow.encode(events.struct, _core_events())


@pytest.mark.parametrize("threads", [1, 2])
def test_core_row_encode_native(benchmark: Any, events: Events, threads: int) -> None:
    out = benchmark.pedantic(arrow.encode, args=(events.struct, _core_events()), kwargs={"threads": threads},
                             rounds=5, iterations=1, warmup_rounds=1)
    assert len(out) == events.n
    record(f"core Row encode native threads={threads}", benchmark, events.n, tier=kernels.TIER)


@pytest.mark.parametrize("threads", [1, 2])
def test_core_row_decode_native(benchmark: Any, events: Events, core_bytes: pa.BinaryArray, threads: int) -> None:
    out = benchmark.pedantic(arrow.decode, args=(core_bytes, _core_events()), kwargs={"threads": threads},
                             rounds=5, iterations=1, warmup_rounds=1)
    assert len(out) == events.n
    record(f"core Row decode native threads={threads}", benchmark, events.n, tier=kernels.TIER)


def test_core_row_encode_per_value(benchmark: Any, events: Events, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``arrow.encode`` did for a flink-core Row before the kernel: the per-value path."""
    sub, ser = events.struct.slice(0, SUBSAMPLE), _core_events()
    errors = bulk.row_errors.RowErrors("raise", "encode", None)
    benchmark.pedantic(lambda: bulk.encoder.encode_per_value(sub, ser, errors, 0), rounds=3, iterations=1)
    record("core Row encode per value", benchmark, SUBSAMPLE)


def test_core_row_decode_per_value(benchmark: Any, core_bytes: pa.BinaryArray) -> None:
    """What ``arrow.decode`` did for a flink-core Row before the kernel: the per-value path."""
    sub, ser = core_bytes.slice(0, SUBSAMPLE), _core_events()
    errors = bulk.row_errors.RowErrors("raise", "decode", None)
    benchmark.pedantic(lambda: bulk.decoder.decode_per_value(sub, ser, errors, 0), rounds=3, iterations=1)
    record("core Row decode per value", benchmark, SUBSAMPLE)


# ---------------------------------------------------------------------------------- POJO
def _pojo_evolution() -> tuple[Any, Any]:
    """The Events row as POJOs (``p.Event{eventId, metadata: p.Meta{deviceType, timestamp, userId}}``)
    and an evolution: ``Event`` gains ``version``, ``Meta`` loses ``timestamp`` and gains ``region``."""
    from statemorph import serializers as S
    from statemorph.serializers.pojo import PojoSerializer

    meta = PojoSerializer(None, {"userId": S.IntSerializer(), "timestamp": S.LongSerializer(),
                                 "deviceType": S.StringSerializer()}, java_class_name="p.Meta")
    meta2 = PojoSerializer(None, {"userId": S.IntSerializer(), "region": S.StringSerializer(),
                                  "deviceType": S.StringSerializer()}, java_class_name="p.Meta")
    old = PojoSerializer(None, {"eventId": S.LongSerializer(), "metadata": meta}, java_class_name="p.Event")
    new = PojoSerializer(None, {"eventId": S.LongSerializer(), "metadata": meta2, "version": S.IntSerializer()},
                         java_class_name="p.Event")
    return old, new


@pytest.fixture(scope="module")
def pojo_bytes(events: Events) -> pa.Array:
    """``events.n`` POJO entries: a per-value encoded subsample, repeated (encoding millions of POJOs
    per value would dominate the run)."""
    old, _ = _pojo_evolution()
    sub = events.struct.slice(0, SUBSAMPLE).to_pylist()
    part = pa.array([old.to_bytes(v) for v in sub], type=pa.binary())
    return pa.concat_arrays([part] * (events.n // SUBSAMPLE)).slice(0, events.n)


@pytest.mark.parametrize("threads", [1, 2])
def test_pojo_migrate_native(benchmark: Any, pojo_bytes: pa.Array, threads: int) -> None:
    old, new = _pojo_evolution()
    out = benchmark.pedantic(arrow.migrate, args=(pojo_bytes, old.snapshot_configuration(), new),
                             kwargs={"threads": threads}, rounds=5, iterations=1, warmup_rounds=1)
    assert len(out) == len(pojo_bytes)
    record(f"POJO migrate native threads={threads}", benchmark, len(pojo_bytes), tier=kernels.TIER)


def test_pojo_migrate_per_value(benchmark: Any, pojo_bytes: pa.Array) -> None:
    """What ``arrow.migrate`` did for POJO state before the kernel: the per-value path."""
    old, new = _pojo_evolution()
    snap = old.snapshot_configuration()
    sub, compat = pojo_bytes.slice(0, SUBSAMPLE), snap.resolve_schema_compatibility(new)
    benchmark.pedantic(lambda: bulk.migrator.migrate_per_value(sub, snap, new, compat,
                                                               bulk.row_errors.RowErrors("raise", "migrate", None), 0),
                       rounds=3, iterations=1)
    record("POJO migrate per value", benchmark, SUBSAMPLE)


# ---------------------------------------------------------------------------------- Avro
def _avro_serializers() -> tuple[Any, Any]:
    """The Events record as Avro state (``AvroSerializer``), old and new schema as in the RowData
    case: ``Meta`` reordered, gains ``location`` / ``appVersion`` / ``sessionId`` (nullable, null)."""
    from statemorph.serializers import AvroSerializer

    return AvroSerializer(AVRO_OLD), AvroSerializer(AVRO_NEW)


@pytest.fixture(scope="module")
def avro_bytes(events: Events) -> pa.Array:
    """``events.n`` entries as Flink stores Avro (docs/formats.md §2.11: no header, i64 / i32 BE,
    i32 BE length ‖ UTF-8), built with numpy (per value would dominate the run) and checked against
    the per-value serializer on a sample."""
    n = events.n
    meta = events.struct.field("metadata")
    dev = meta.field("deviceType")
    dev_off = np.frombuffer(dev.buffers()[1], dtype=np.int32)[dev.offset:dev.offset + n + 1].astype(np.int64)
    dev_len = np.diff(dev_off)
    offs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(24 + dev_len, out=offs[1:])
    data = np.empty(int(offs[-1]), dtype=np.uint8)
    for at, col, width in ((0, events.struct.field("eventId"), 8), (8, meta.field("userId"), 4),
                           (12, meta.field("timestamp"), 8), (20, pa.array(dev_len), 4)):
        raw = col.to_numpy().astype(f">i{width}").view(np.uint8).reshape(n, width)
        data[(offs[:-1] + at)[:, None] + np.arange(width)] = raw
    text = np.frombuffer(dev.buffers()[2], dtype=np.uint8)[dev_off[0]:dev_off[-1]]
    data[np.repeat(offs[:-1] + 24 - dev_off[:-1], dev_len) + np.arange(dev_off[0], dev_off[-1])] = text
    out = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offs.astype(np.int32)), pa.py_buffer(data)])
    old, _ = _avro_serializers()
    sample = events.struct.slice(0, 100).to_pylist()
    assert out.slice(0, 100).to_pylist() == [old.to_bytes(r) for r in sample]
    return out


@pytest.mark.parametrize("threads", [1, 2])
def test_avro_migrate_native(benchmark: Any, avro_bytes: pa.Array, threads: int) -> None:
    old, new = _avro_serializers()
    out = benchmark.pedantic(arrow.migrate, args=(avro_bytes, old.snapshot_configuration(), new),
                             kwargs={"threads": threads}, rounds=5, iterations=1, warmup_rounds=1)
    assert len(out) == len(avro_bytes)
    record(f"Avro migrate native threads={threads}", benchmark, len(avro_bytes), tier=kernels.TIER)


def test_avro_migrate_python_kernel_tier(benchmark: Any, avro_bytes: pa.Array,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The same bulk API on the Python twin of the Avro kernel (``STATEMORPH_NATIVE=0``)."""
    monkeypatch.setattr(kernels, "KERNELS", kernels.tier("python"))
    old, new = _avro_serializers()
    sub = avro_bytes.slice(0, SUBSAMPLE)
    benchmark.pedantic(arrow.migrate, args=(sub, old.snapshot_configuration(), new), rounds=3, iterations=1)
    record("Avro migrate python kernel tier", benchmark, SUBSAMPLE)


def test_avro_migrate_per_value(benchmark: Any, avro_bytes: pa.Array) -> None:
    """What ``arrow.migrate`` did for Avro state before the kernel: the per-value path."""
    old, new = _avro_serializers()
    snap = old.snapshot_configuration()
    sub, compat = avro_bytes.slice(0, SUBSAMPLE), snap.resolve_schema_compatibility(new)
    benchmark.pedantic(lambda: bulk.migrator.migrate_per_value(sub, snap, new, compat,
                                                               bulk.row_errors.RowErrors("raise", "migrate", None), 0),
                       rounds=3, iterations=1)
    record("Avro migrate per value", benchmark, SUBSAMPLE)
