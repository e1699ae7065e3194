"""The decoder families under fuzz: for each, the valid seed inputs (real Flink bytes wherever
they exist) and the check one mutated input goes through.

A check calls the decoder(s) and returns the outcome label (``ok`` or ``error:<Class>``). A
typed :class:`~statemorph.errors.StatemorphError` ends the check with its class as the label;
any other exception escapes and is a finding. Where two paths read the same bytes (the kernel
tiers, bulk against per-value), the check compares them and raises :class:`Disagreement`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from bulk.fuzz_cases import CASES as BULK_CASES
from bulk.fuzz_cases import MIGRATIONS as BULK_MIGRATIONS
from bulk.fuzz_cases import (
    PER_VALUE_MIGRATIONS,
    RANGE_ONLY,
    beyond_arrow_nanos,
    compact_rows,
    has_lone_surrogate,
    nested_rows,
    reencoded,
    without_row_kind,
)
from savepoint.flink.format_helpers import scanned_entries
from savepoint.flink.hostile_sizes import ZERO_CHUNK, TiledStream
from snapshots.specs import World
from tiers import on_tiers

from statemorph import bulk, kernels
from statemorph import serializers as S
from statemorph.errors import StatemorphError
from statemorph.io import DataInputDeserializer
from statemorph.javaser import read_logical_type, read_stream
from statemorph.javaser.classes import flink_policy
from statemorph.migration import migrate_bytes
from statemorph.row import Row, RowKind
from statemorph.savepoint.flink import (
    ByteStreamHandle,
    FileHandle,
    RelativeFileHandle,
    decompress_key_group,
    parse_key_group,
    parse_keyed_header,
)
from statemorph.savepoint.flink import parse_metadata as parse_flink_metadata
from statemorph.savepoint.flink.files import InlineStream
from statemorph.savepoint.flink.key_group_scan import scan_key_group, scan_slices, scanned_groups
from statemorph.savepoint.flink.keyed_blocks import KeyGroupExtent, key_group_extents
from statemorph.savepoint.flink.snappy import STREAM_IDENTIFIER, compress_key_group
from statemorph.savepoint.parquet.format import parse_metadata as parse_parquet_metadata
from statemorph.typeutils import read_serializer_snapshot, read_versioned_snapshot

TESTS = Path(__file__).resolve().parents[1]
GOLDEN = TESTS / "data" / "golden"
SAVEPOINTS = TESTS / "data" / "flink_savepoints"

# Known differences between paths that are not fixed yet, counted under their own ``known:<name>``
# outcome (so a run shows how often they happen while every other difference stays a finding).
# Empty: the bulk and per-value paths agree on every input; what Arrow cannot hold is the
# documented outcome ``error:unrepresentable`` (docs/bulk.md, "What Arrow cannot hold").
KNOWN: dict[str, str] = {}


def unrepresentable(value: Any, top: bool = True) -> bool:
    """A value that from_bytes reads and Arrow cannot hold, which bulk decode refuses with an
    UnrepresentableValueError naming the path: a MAP / MULTISET with a null key, or a nested row
    whose RowKind is not INSERT (the top-level row's kind is left out, as documented)."""
    if isinstance(value, Row) and not top and value.kind is not RowKind.INSERT:
        return True
    if isinstance(value, dict):
        return None in value or any(unrepresentable(k, False) or unrepresentable(v, False)
                                    for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(unrepresentable(v, False) for v in value)
    return False


class Disagreement(AssertionError):
    """Two paths that read the same bytes gave different results (values, or error classes)."""


@dataclasses.dataclass
class Target:
    """One seed input and the check its mutations go through."""

    name: str
    seed: bytes
    check: Callable[[bytes], str]


@dataclasses.dataclass
class Family:
    name: str
    what: str
    targets: list[Target]
    json_aware: bool = False
    mutator: Callable[[bytes, random.Random], tuple[bytes, str]] | None = None
    """A family's own mutation of a seed (structured edits); None: the byte-level ones of :mod:`.mutate`."""

    @functools.cached_property
    def pool(self) -> list[bytes]:
        return [t.seed for t in self.targets]

    def target(self, name: str) -> Target:
        for t in self.targets:
            if t.name == name:
                return t
        raise KeyError(f"{self.name}: no target {name!r}")


def label(exc: BaseException | None) -> str:
    return "ok" if exc is None else f"error:{type(exc).__name__}"


def attempt(fn: Callable[[], Any]) -> tuple[Any, StatemorphError | None]:
    """``(result, None)`` or ``(None, typed error)``; any other exception propagates (a finding)."""
    try:
        return fn(), None
    except StatemorphError as e:
        return None, e


def _lines(name: str) -> list[dict[str, Any]]:
    text = (GOLDEN / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# ------------------------------------------------------------------------------------- snapshots

def _check_snapshot(read: Callable[[bytes], Any], data: bytes) -> str:
    snap = read(data)
    snap.restore_serializer()  # a snapshot that reads must restore, or fail typed
    return "ok"


def snapshots() -> Family:
    targets = []
    for line in _lines("snapshots.jsonl") + _lines("flink_rowdata.jsonl"):
        if "snapshot_hex" in line:
            targets.append(Target(f"{line['case']}#versioned", bytes.fromhex(line["snapshot_hex"]),
                                  functools.partial(_check_snapshot, read_versioned_snapshot)))
            targets.append(Target(f"{line['case']}#envelope", bytes.fromhex(line["envelope_hex"]),
                                  functools.partial(_check_snapshot, read_serializer_snapshot)))
    return Family("snapshots", "read_versioned_snapshot / read_serializer_snapshot (+ restore_serializer) over "
                  "the golden snapshot vectors", targets)


# ------------------------------------------------------------------------------------- per value

def per_value() -> Family:
    world = World()
    targets = []
    for f in ("datastream.jsonl", "rowdata.jsonl", "avro.jsonl"):
        for line in _lines(f):
            ser = world.serializer(line["serializer"])

            def check(data: bytes, ser: Any = ser) -> str:
                ser.from_bytes(data)
                return "ok"

            targets.append(Target(line["case"], bytes.fromhex(line["hex"]), check))
    return Family("per-value", "serializers' from_bytes over the golden value vectors", targets)


# ------------------------------------------------------------------------------------------ bulk

def _paths(fn: Callable[[], Any]) -> dict[str, tuple[Any, StatemorphError | None]]:
    """``fn`` on every kernel path: the Python twin, the compiled tier, and the compiled tier with
    machine code for every chunk (the JIT, when llvmlite is there)."""
    def both() -> dict[str, tuple[Any, StatemorphError | None]]:
        out = {kernels.KERNELS.name: attempt(fn)}
        if kernels.KERNELS.name == "native":
            saved = bulk.tiers.MACHINE_CODE_MIN
            bulk.tiers.MACHINE_CODE_MIN = 0
            try:
                out["native-jit"] = attempt(fn)
            finally:
                bulk.tiers.MACHINE_CODE_MIN = saved
        return out

    merged: dict[str, tuple[Any, StatemorphError | None]] = {}
    for results in on_tiers(both).values():
        merged.update(results)
    return merged


def _collected(result: Any) -> tuple[list[Any], list[tuple[int, str]]]:
    arr, errors = result
    return arr, [(e.row, type(e).__name__) for e in errors]


def _same_on_every_path(results: dict[str, tuple[Any, StatemorphError | None]], show: Callable[[Any], Any]) -> Any:
    """The paths agree (same rejected rows and error classes, same values); returns one result."""
    seen = {k: (label(e), None if e is not None else show(r)) for k, (r, e) in results.items()}
    first = next(iter(seen.values()))
    if any(v != first for v in seen.values()):
        raise Disagreement(f"kernel paths disagree: {seen}")
    return next(iter(results.values()))


def _shown(arr: Any) -> str:
    """An Arrow array as text (to_pylist would fail on DATE values Python's datetime cannot hold,
    which the bulk tier keeps; NaNs compare equal as text)."""
    return str(arr.to_string(window=1 << 20, container_window=1 << 20))


def _column(good: list[bytes], data: bytes) -> pa.Array:
    """The mutated entry at row 1 between valid ones and a null: each row must be judged alone."""
    return pa.array([good[0], data, None, good[-1]], type=pa.binary())


def _check_decode(ser: Any, good: list[bytes], data: bytes) -> str:
    col = _column(good, data)
    results = _paths(lambda: bulk.decode(col, ser, on_error="null"))

    def show(r: Any) -> Any:
        arr, errs = _collected(r)
        return _shown(arr), errs

    result, err = _same_on_every_path(results, show)
    if err is not None:
        raise err
    arr, errs = _collected(result)
    if any(row != 1 for row, _ in errs):
        raise Disagreement(f"valid rows rejected: {errs}")
    ref, ref_err = attempt(lambda: ser.from_bytes(data))
    bulk_rejects = bool(errs)
    if ref_err is not None:
        if RANGE_ONLY.search(str(ref_err)):
            return "error:range" if bulk_rejects else "ok:range"
        if not bulk_rejects:
            raise Disagreement(f"bulk decode accepts what from_bytes rejects ({ref_err})")
        return f"error:{errs[0][1]}"
    either = has_lone_surrogate(ref) or beyond_arrow_nanos(ref) or reencoded(ser, ref) is None
    if bulk_rejects:
        if either or (errs[0][1] == "UnrepresentableValueError" and unrepresentable(ref)):
            return "error:unrepresentable"
        raise Disagreement(f"bulk decode rejects what from_bytes reads ({errs}) as {ref!r}")
    if unrepresentable(ref):
        raise Disagreement(f"bulk decode accepts a value Arrow cannot hold (it must refuse it): {ref!r}")
    if either:
        return "ok:unrepresentable"
    again = without_row_kind(ser, bulk.encode(arr.slice(1, 1), ser, on_error="null").values.to_pylist())
    expected = without_row_kind(ser, [reencoded(ser, ref)])
    if again != expected:
        if repr(ser.from_bytes(again[0])) == repr(ser.from_bytes(expected[0])):
            # the same values, other bytes: a signalling NaN in a FLOAT / DOUBLE field, which the
            # reference quiets (float32 -> Python float) and the bulk path keeps bit for bit
            return "ok:nan-bits"
        raise Disagreement(f"bulk decode and from_bytes read different values: {arr.slice(1, 1).to_pylist()!r} "
                           f"vs {ref!r}")
    return "ok"


def bulk_decode() -> Family:
    targets = []
    for name, (ser, values) in BULK_CASES.items():
        good = [ser.to_bytes(v) for v in values]
        for i, seed in enumerate(good):
            targets.append(Target(f"{name}/{i}", seed, functools.partial(_check_decode, ser, good)))
    return Family("bulk-decode", "statemorph.arrow.decode on every kernel path vs from_bytes", targets)


def _check_migrate(snap: Any, new: Any, good: list[bytes], data: bytes) -> str:
    col = _column(good, data)
    results = _paths(lambda: bulk.migrate(col, snap, new, on_error="null"))

    def show(r: Any) -> Any:
        arr, errs = _collected(r)
        return arr.to_pylist(), errs

    result, err = _same_on_every_path(results, show)
    if err is not None:
        raise err
    arr, errs = _collected(result)
    if any(row != 1 for row, _ in errs):
        raise Disagreement(f"valid rows rejected: {errs}")
    ref, ref_err = attempt(lambda: migrate_bytes(snap, new, data))
    if ref_err is not None:
        if RANGE_ONLY.search(str(ref_err)):
            return "error:range" if errs else "ok:range"
        if not errs:
            raise Disagreement(f"bulk migrate accepts what migrate_bytes rejects ({ref_err})")
        return f"error:{errs[0][1]}"
    if errs:
        raise Disagreement(f"bulk migrate rejects what migrate_bytes migrates ({errs})")
    got = arr.to_pylist()[1]
    if got != ref:
        # the Row remap copies field bytes as they are where the per-value path rewrites them
        # canonically: the values must still be the same
        mine, theirs = attempt(lambda: repr(new.from_bytes(got))), attempt(lambda: repr(new.from_bytes(ref)))
        if mine != theirs or mine[1] is not None:
            raise Disagreement(f"bulk migrate and migrate_bytes wrote different values: {got.hex()} vs {ref.hex()}")
    return "ok"


def bulk_migrate() -> Family:
    targets = []
    pairs: list[tuple[str, Any, Any, list[bytes]]] = []
    for name, (old_t, new_t) in BULK_MIGRATIONS.items():
        old, new = S.RowDataSerializer(old_t), S.RowDataSerializer(new_t)
        rows = compact_rows() if name.startswith("compact") else nested_rows()
        pairs.append((name, old, new, [old.to_bytes(r) for r in rows]))
    for name, (old, new, values) in PER_VALUE_MIGRATIONS.items():
        pairs.append((name, old, new, [old.to_bytes(v) for v in values]))
    by_pair: dict[tuple[str, str], list[bytes]] = {}
    for line in _lines("migration.jsonl"):
        if line["result"] != "INCOMPATIBLE":
            by_pair.setdefault((line["old"], line["new"]), []).append(bytes.fromhex(line["old_hex"]))
    for (old_spec, new_spec), good in by_pair.items():
        pairs.append((f"golden:{old_spec}->{new_spec}", World().serializer(old_spec),
                      World().serializer(new_spec), good))  # old and new worlds: a class may differ
    for name, old, new, good in pairs:
        snap = old.snapshot_configuration()
        for i, seed in enumerate(good):
            targets.append(Target(f"{name}/{i}", seed, functools.partial(_check_migrate, snap, new, good)))
    return Family("bulk-migrate", "statemorph.arrow.migrate on every kernel path vs migrate_bytes", targets)


# --------------------------------------------------------------------------- Java serialization

def _read_logical(data: bytes) -> str:
    read_logical_type(DataInputDeserializer(data))
    return "ok"


def _read_stream(data: bytes) -> str:
    read_stream(DataInputDeserializer(data), flink_policy)
    return "ok"


def javaser() -> Family:
    targets = []
    for line in _lines("flink_rowdata.jsonl"):
        if "logical_type" in line:
            targets.append(Target(line["case"], bytes.fromhex(line["javaser_hex"]), _read_logical))
        elif "internal_serializer" in line:
            targets.append(Target(line["case"], bytes.fromhex(line["javaser_hex"]), _read_stream))
    return Family("javaser", "statemorph.javaser read_logical_type / read_stream (whitelist) over Flink's streams",
                  targets)


# ---------------------------------------------------------------------------------- Flink savepoints

def _savepoint_dirs() -> list[Path]:
    return sorted(p.parent for p in SAVEPOINTS.glob("*/savepoint/_metadata"))


def _check_flink_metadata(data: bytes) -> str:
    meta = parse_flink_metadata(data)
    return f"ok:v{meta.version}"


def flink_metadata() -> Family:
    targets = [Target(d.parent.name, (d / "_metadata").read_bytes(), _check_flink_metadata) for d in _savepoint_dirs()]
    return Family("flink-metadata", "statemorph.savepoint.flink.parse_metadata over the real savepoints' _metadata",
                  targets)


@functools.cache
def _keyed_streams() -> list[tuple[str, bytes, Any]]:
    """Every managed keyed-state stream of the real savepoints: (name, bytes, handle)."""
    out = []
    for d in _savepoint_dirs():
        meta = parse_flink_metadata((d / "_metadata").read_bytes())
        for op in meta.operators:
            for st in op.subtasks or []:
                h = st.managed_keyed
                if h is None:
                    continue
                dlg = h.delegate
                if isinstance(dlg, ByteStreamHandle):
                    data = dlg.data
                elif isinstance(dlg, RelativeFileHandle):
                    data = (d / dlg.relative_path).read_bytes()
                elif isinstance(dlg, FileHandle):
                    data = (d / Path(dlg.path).name).read_bytes()
                else:
                    continue
                out.append((f"{d.parent.name}/{op.uid_hash}/{st.index}", data, h))
    return out


def _check_header(data: bytes) -> str:
    h = parse_keyed_header(data, len(data), "fuzz")
    return f"ok:{len(h.states)}-states"


def keyed_header() -> Family:
    targets = []
    for name, data, h in _keyed_streams():
        header_end, _ = key_group_extents(h, len(data), name)
        targets.append(Target(name, data[:header_end], _check_header))
    return Family("keyed-header", "parse_keyed_header over the real keyed-state headers", targets)


KEY_GROUP_SLICES = (64, 700)
"""Slice sizes the sliced scan runs with (the rewriter's is 1 MiB; small ones cut the seeds)."""


def _entries_read(n_states: int, raw: bytes) -> list[tuple[int, bytes]]:
    runs, _ = parse_key_group(raw, n_states, "fuzz", exact_end=True)
    return [(run.state_id, v) for run in runs for v in run.values]


def _outcome(fn: Callable[[], list[tuple[int, bytes]]]) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except StatemorphError as e:
        return "error", type(e).__name__


def _check_key_group_paths(n_states: int, compressed: bool, data: bytes) -> str:
    """The per-entry reader, the block scan of the whole group and the sliced scan (what the
    rewriter runs for a large group) must give the same entries or the same error class."""
    def read() -> list[tuple[int, bytes]]:
        return _entries_read(n_states, decompress_key_group(data, "fuzz") if compressed else data)

    def whole() -> list[tuple[int, bytes]]:
        raw = decompress_key_group(data, "fuzz") if compressed else data
        return scanned_entries([scan_key_group(0, raw, n_states, "fuzz")])

    def sliced(size: int) -> Callable[[], list[tuple[int, bytes]]]:
        return lambda: scanned_entries(list(scan_slices(InlineStream(data, "fuzz"), KeyGroupExtent(0, 0, len(data)),
                                                         compressed, n_states, "fuzz", size)))

    want = _outcome(read)
    for name, path in [("whole scan", whole)] + [(f"slices of {n}", sliced(n)) for n in KEY_GROUP_SLICES]:
        got = _outcome(path)
        if got != want:
            raise Disagreement(f"the {name} gives {_brief(got)} where the entry reader gives {_brief(want)}")
    if want[0] == "error":
        read()  # refused on every path: raise the entry reader's error for the tally
    return "ok"


def _brief(outcome: tuple[str, Any]) -> str:
    return f"{len(outcome[1])} entries" if outcome[0] == "ok" else outcome[1]


def key_groups() -> Family:
    """Key-group blocks (uncompressed, and Snappy-framed ones through decompress_key_group);
    at most 8 blocks per stream keep the seeds varied without repeating one layout."""
    targets = []
    for name, data, h in _keyed_streams():
        header_end, extents = key_group_extents(h, len(data), name)
        header = parse_keyed_header(data[:header_end], header_end, name)
        n = len(header.states)
        step = max(1, len(extents) // 8)
        for ext in extents[::step][:8]:
            block = data[ext.offset:ext.end]
            if header.compressed:
                targets.append(Target(f"{name}/kg{ext.key_group}/snappy", block,
                                      functools.partial(_check_key_group_paths, n, True)))
                block = decompress_key_group(block, name)
            targets.append(Target(f"{name}/kg{ext.key_group}", block,
                                  functools.partial(_check_key_group_paths, n, False)))
    return Family("key-groups", "key-group blocks (Snappy-framed too): the entry reader, the whole-group scan "
                  "and the sliced scan agree", targets)


SIZED_FRAME = struct.Struct(">QBHH")
"""A ``sparse-and-bomb`` input: the key group's stored size, flags (bit 0: Snappy-compressed),
the lengths of its head and tail; then the head, the tail, and the unit repeated between them."""
SIZED_MAX = {False: 1 << 40, True: 64 << 20}
"""The largest stored size an input may claim: a 1 TiB sparse key group, 64 MiB of Snappy chunks
(1.4 GiB of zeros once decompressed); either, held whole, breaks the worker's address-space
bound (1 GiB above its start). A terabyte is a million pieces of a slice: a cut that made an
object per piece before reading (up to commit ``aa114b4``) took 3 GB for them, a ``memory``
finding here (the family clamped claims to 4 GiB then, and missed it)."""
SIZED_STATES = 16
SIZED_READ = 4 << 20
"""An input whose first 4 MiB (four slices) scan as valid entries is not read further: gigabytes
of valid entries would only take time, and every slice is like the ones before (the input
repeats one unit). An entry larger than that is still read whole: the limit is checked after
each slice."""
_ENTRY = b"\x00\x00\x00\x01\x01\x00\x00\x00\x07" + bytes(7)  # 16 bytes: 4096 of them fill a Snappy chunk
_LAST = b"\x00\x00\x00\x01\x81\x00\x00\x00\x07" + bytes(7) + b"\xff\xff"  # the run's last entry, the end mark


def _sized(size: int, compressed: bool, head: bytes, unit: bytes, tail: bytes) -> bytes:
    return SIZED_FRAME.pack(size, int(compressed), len(head), len(tail)) + head + tail + unit


def _chunks(raw: bytes) -> bytes:
    """``raw`` as Snappy frame chunks, without the stream identifier."""
    return compress_key_group(raw)[len(STREAM_IDENTIFIER):]


def _check_sized_key_group(data: bytes) -> str:
    """One key group of the claimed size, read as ``inspect`` counts it and as ``convert`` turns
    it into rows (:func:`scanned_groups`, the readers' one path): entries, or a typed error, and
    never an allocation near the claim."""
    frame = data[:SIZED_FRAME.size].ljust(SIZED_FRAME.size, b"\0")
    size, flags, head_len, tail_len = SIZED_FRAME.unpack(frame)
    body = data[SIZED_FRAME.size:]
    head, tail = body[:head_len], body[head_len:head_len + tail_len]
    unit = body[head_len + tail_len:]
    compressed = bool(flags & 1)
    source = TiledStream(head, unit, tail, min(size, SIZED_MAX[compressed]), "fuzz")
    if source.size == 0:
        return "ok:empty"
    entries = rows = scanned = 0
    for group in scanned_groups(source, [KeyGroupExtent(0, 0, source.size)], compressed, SIZED_STATES, "fuzz"):
        entries += sum(n for _, n, _ in group.run_totals())
        rows += sum(len(run.keys) for run in group.runs())
        if rows != entries:
            raise Disagreement(f"inspect counts {entries} entries where the rows are {rows}")
        scanned += memoryview(group.buf).nbytes
        if scanned > SIZED_READ:  # still valid: the slices go on as they started (speed is not under test)
            return "ok:first-slices"
    return "ok"


def sparse_and_bomb() -> Family:
    """Key groups that claim hostile sizes: real key groups followed by gigabytes of zeros (a
    sparse file), Snappy chunks of zeros (64 MiB stored, 1.4 GiB decompressed), and valid key
    groups larger than a slice, raw and compressed."""
    targets = []
    for name, data, h in _keyed_streams():
        header_end, extents = key_group_extents(h, len(data), name)
        if not extents:  # a subtask without key groups (a small SQL job's idle subtask)
            continue
        compressed = parse_keyed_header(data[:header_end], header_end, name).compressed
        block = data[extents[-1].offset:extents[-1].end]
        seed = _sized(64 << 20, True, block, ZERO_CHUNK, b"") if compressed else _sized(2 << 30, False, block, b"", b"")
        targets.append(Target(f"{name}/{'bomb' if compressed else 'sparse'}", seed, _check_sized_key_group))
    fill = 96 * len(_ENTRY) << 10  # 1.5 MiB of entries: a few slices
    # the same as Snappy chunks: the state id, 24 chunks of 4,096 entries, the last entry and the end mark
    snappy_head = STREAM_IDENTIFIER + _chunks(b"\x00\x00")
    snappy_unit, snappy_tail = _chunks(_ENTRY * 4096), _chunks(_LAST)
    targets += [
        Target("sparse-zeros", _sized(2 << 30, False, b"", b"", b""), _check_sized_key_group),
        Target("bomb-zeros", _sized(64 << 20, True, STREAM_IDENTIFIER, ZERO_CHUNK, b""), _check_sized_key_group),
        Target("large-valid", _sized(2 + fill + len(_LAST), False, b"\x00\x00", _ENTRY, _LAST),
               _check_sized_key_group),
        Target("large-valid/snappy", _sized(len(snappy_head) + 24 * len(snappy_unit) + len(snappy_tail), True,
                                            snappy_head, snappy_unit, snappy_tail), _check_sized_key_group),
    ]
    return Family("sparse-and-bomb", "inspect's counts and convert's rows (scanned_groups) on key groups claiming "
                  "gigabytes: sparse zeros, Snappy chunks of zeros, valid groups larger than a slice", targets)


# --------------------------------------------------------------------------------- Parquet form

@functools.cache
def _parquet_metadata_seeds() -> list[tuple[str, bytes]]:
    """The metadata of a savepoint the heap backend writes (value, list and map state)."""
    from statemorph.state import HashMapStateBackend, ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

    b = HashMapStateBackend(key_serializer=S.StringSerializer(), max_parallelism=128)
    v = b.get_state(ValueStateDescriptor("events", S.RowDataSerializer("ROW<id BIGINT, name STRING>")))
    li = b.get_state(ListStateDescriptor("recent", S.LongSerializer()))
    m = b.get_state(MapStateDescriptor("totals", S.StringSerializer(), S.LongSerializer()))
    for i in range(20):
        b.set_current_key(f"user-{i}")
        v.update((i, f"n{i}"))
        li.add(i)
        m.put(f"k{i % 3}", i)
    with tempfile.TemporaryDirectory() as tmp:
        path = b.savepoint(Path(tmp) / "sp")
        data = (Path(path) / "_metadata.json").read_bytes()
    obj = json.loads(data)
    one = dict(obj, states=obj["states"][:1])
    return [("heap-3-states", data), ("heap-1-state", json.dumps(one).encode())]


def _check_parquet_metadata(data: bytes) -> str:
    meta = parse_parquet_metadata(data)
    meta.key_snapshot().restore_serializer()
    for st in meta.states.values():
        roles = ("key_serializer", "namespace_serializer", "value_serializer")
        for role in roles + (("user_key_serializer",) if st.user_key_serializer is not None else ()):
            st.snapshot(role).restore_serializer()
    return "ok"


def parquet_metadata() -> Family:
    targets = [Target(n, d, _check_parquet_metadata) for n, d in _parquet_metadata_seeds()]
    return Family("parquet-metadata", "statemorph.savepoint.parquet.format.parse_metadata (+ its snapshots)",
                  targets, json_aware=True)


# --------------------------------------------------------------------- handles and paths (issue 24)

def handle_reuse() -> Family:
    from . import trust

    return Family("handle-reuse", "Flink _metadata with handles, subtasks, operators and key-group ranges used twice "
                  "or moved: inspect, convert and migrate refuse (exit 4, nothing written) or read the same",
                  [Target(n, d, functools.partial(trust.check_flink, n)) for n, d in trust.seeds()],
                  mutator=trust.mutator(trust.REUSE_EDITS))


def containment() -> Family:
    from . import trust

    return Family("containment", "file handles of a Flink _metadata and of the Parquet form's kept skeleton naming "
                  "paths with '..', absolute paths, symlinks in and out, hard links: refused (exit 4, nothing written "
                  "anywhere) or read the same",
                  [Target(n, d, functools.partial(trust.check_flink, n)) for n, d in trust.seeds()]
                  + [Target(f"{n}#skeleton", d, functools.partial(trust.check_skeleton, n))
                     for n, d in trust.skeleton_seeds()],
                  mutator=trust.mutator(trust.CONTAINMENT_EDITS))


FAMILIES: dict[str, Callable[[], Family]] = {
    "snapshots": snapshots,
    "per-value": per_value,
    "bulk-decode": bulk_decode,
    "bulk-migrate": bulk_migrate,
    "javaser": javaser,
    "flink-metadata": flink_metadata,
    "keyed-header": keyed_header,
    "key-groups": key_groups,
    "parquet-metadata": parquet_metadata,
    "sparse-and-bomb": sparse_and_bomb,
    "handle-reuse": handle_reuse,
    "containment": containment,
}

__all__ = ["FAMILIES", "KNOWN", "Disagreement", "Family", "Target"]
