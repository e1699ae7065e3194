"""The fuzz families of issue 24: ``handle-reuse`` and ``containment``.

Their inputs are not bit-level mutations: each is the ``_metadata`` of a real Flink savepoint
(or the ``flink/_metadata`` skeleton kept in its Parquet form) with its handles edited as an
attacker would: a file handle copied into another slot, an operator-state handle pointed at a
keyed-state file, a subtask or an operator duplicated, a key-group range moved, a file named by a
relative path with ``..``, an absolute path, a symlink (inside or leading out), a hard link, a
directory. Input *i* is still a pure function of the family and *i* (:func:`mutator`).

Each input runs in a fresh scene (:func:`_scene`): a directory ``R/a/b/c`` holding a copy of the
savepoint, with, next to every state file ``f``, ``in-f`` (a symlink to ``f``), ``alias-f`` (a
hard link to ``f``) and ``out-f`` (a symlink to a copy of ``f`` outside the savepoint, in
``R/a/b/c/outside``), and a directory ``sub``. The oracle:

- the verbs (``inspect`` counting every entry, ``convert`` to the Parquet form, for ``events``
  savepoints ``migrate``; for a skeleton, ``convert`` back to Flink) either succeed with the same
  results as on the unedited savepoint (entries per state, rows per table, values migrated), or
  refuse with a :class:`~statemorph.errors.StatemorphError` whose exit status is 4;
- nothing is written outside the verb's output: the scene's listing (names, kinds, sizes, from
  ``R`` down, so ``../../..`` is seen) is unchanged after a refusal, and only the output was added
  after a success; nothing appears at :data:`PLANTED`, the absolute path the inputs aim at.

Anything else is a :class:`~fuzz.families.Disagreement` (a finding).
"""

from __future__ import annotations

import atexit
import copy
import functools
import hashlib
import json
import os
import random
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from savepoint.flink.flink_cases import EVOLVED_EVENTS
from savepoint.hostile_metadata import SAVEPOINTS

from statemorph import serializers as S
from statemorph.engine import migrate_savepoint
from statemorph.engine.convert import flink_to_parquet, parquet_to_flink
from statemorph.errors import ExitCode, StatemorphError
from statemorph.savepoint.flink import (
    ByteStreamHandle,
    FileHandle,
    FlinkSavepoint,
    KeyGroupsHandle,
    OperatorStreamHandle,
    RelativeFileHandle,
    parse_metadata,
    serialize_metadata,
)
from statemorph.savepoint.flink.metadata import CheckpointMetadata
from statemorph.state import ValueStateDescriptor

from .families import Disagreement
from .mutate import HOSTILE_I32

SEEDS = tuple(sorted(p.parent.parent.name for p in SAVEPOINTS.glob("*/savepoint/_metadata")))
"""Every committed Flink savepoint: RocksDB and heap, Flink 2.3 and 1.20, one and two subtasks,
keyed state in files (Snappy) and inline, operator state, DataStream, SQL (aggregates, joins,
windows) and Kryo jobs; each is a seed of ``handle-reuse`` and ``containment``, and its Parquet
form's skeleton one of ``containment``."""
PLANTED = Path(tempfile.gettempdir()) / "statemorph-fuzz-planted"
"""An absolute path the containment inputs name: nothing may ever appear there."""


# -- scenes ----------------------------------------------------------------------------------------

@functools.cache
def _base() -> Path:
    root = "/dev/shm" if os.path.isdir("/dev/shm") else None  # tmpfs: fsyncs cost nothing
    base = Path(tempfile.mkdtemp(prefix="statemorph-fuzz-trust-", dir=root))
    atexit.register(shutil.rmtree, base, True)
    return base


def _state_files(seed: Path) -> list[str]:
    return sorted(p.name for p in seed.iterdir() if p.name != "_metadata")


def _scene(seed: Path, metadata: bytes) -> tuple[Path, Path]:
    """``(R, P)``: a fresh root and, three levels below it, the parent holding ``sp`` (see the
    module docstring)."""
    root = Path(tempfile.mkdtemp(dir=_base()))
    parent = root / "a" / "b" / "c"
    sp, outside = parent / "sp", parent / "outside"
    (sp / "sub").mkdir(parents=True)
    outside.mkdir()
    for f in _state_files(seed):
        shutil.copyfile(seed / f, sp / f)
        shutil.copyfile(seed / f, outside / f)
        os.link(sp / f, sp / f"alias-{f}")
        os.symlink(f, sp / f"in-{f}")
        os.symlink(outside / f, sp / f"out-{f}")
    (sp / "_metadata").write_bytes(metadata)
    return root, parent


def _listing(root: Path) -> dict[str, tuple[str, int]]:
    """Every entry under ``root`` (symlinks not followed) by its path relative to ``root``: its
    kind and, for a file, its size."""
    out: dict[str, tuple[str, int]] = {}

    def walk(path: str, rel: str) -> None:
        with os.scandir(path) as it:
            for e in it:
                st = e.stat(follow_symlinks=False)
                name = rel + e.name
                if stat.S_ISDIR(st.st_mode):
                    out[name] = ("dir", 0)
                    walk(e.path, name + "/")
                else:
                    out[name] = ("link", 0) if stat.S_ISLNK(st.st_mode) else ("file", st.st_size)

    walk(str(root), "")
    return out


# -- the verbs and their results ---------------------------------------------------------------------

def _entries(path: Path) -> dict[str, int]:
    info = FlinkSavepoint(path).inspect()
    return {f"{op.uid or op.uid_hash}/{s.name}": s.entries for op in info.operators for s in op.states}


def _flink_results(sp: Path, parent: Path) -> dict[str, Any]:
    """inspect, convert to the Parquet form and (events savepoints) migrate, under ``parent``."""
    out: dict[str, Any] = {"entries": _entries(sp)}
    out["rows"] = flink_to_parquet(sp, parent / "out").states
    if "events-state/events" in out["entries"]:
        new = ValueStateDescriptor("events", S.RowDataSerializer(EVOLVED_EVENTS))
        report = migrate_savepoint(sp, parent / "v2", {"events-state": [new]}, threads=1)
        out["migrated"] = report.migrated
        out["after"] = _entries(parent / "v2")
    return out


def _run(root: Path, parent: Path, verbs: Callable[[], dict[str, Any]], outputs: tuple[str, ...],
         expected: dict[str, Any] | None) -> str:
    """The oracle around ``verbs``: results equal to ``expected`` (None: the unedited seed's run),
    or a refusal with exit status 4; nothing written but ``outputs``."""
    before = _listing(root)
    try:
        got = verbs()
    except StatemorphError as e:
        if e.exit_code != ExitCode.DAMAGED_SAVEPOINT:
            raise Disagreement(f"refused with exit status {int(e.exit_code)}, not 4: {type(e).__name__}: {e}") from e
        after = _listing(root)
        if after != before:
            raise Disagreement(f"a refused run changed the scene: {sorted(set(after.items()) ^ set(before.items()))}"
                               ) from e
        _no_plant()
        raise
    rest = before.copy()
    after = _listing(root)
    for name in outputs:
        after = {k: v for k, v in after.items() if not (k == name or k.startswith(name + "/"))}
        rest = {k: v for k, v in rest.items() if not (k == name or k.startswith(name + "/"))}
    if after != rest:
        raise Disagreement(f"a run wrote outside its output: {sorted(set(after.items()) ^ set(rest.items()))}")
    _no_plant()
    if expected is not None and got != expected:
        raise Disagreement(f"an edited savepoint read differently: {got} != {expected}")
    return "ok"


def _no_plant() -> None:
    if os.path.lexists(PLANTED):
        shutil.rmtree(PLANTED, ignore_errors=True)
        raise Disagreement(f"{PLANTED} appeared")


def _outputs(parent: Path, root: Path, *names: str) -> tuple[str, ...]:
    rel = parent.relative_to(root)
    return tuple(str(rel / n) for n in names)


@functools.cache
def _expected_flink(name: str) -> dict[str, Any]:
    seed = SAVEPOINTS / name / "savepoint"
    root, parent = _scene(seed, (seed / "_metadata").read_bytes())
    try:
        return _flink_results(parent / "sp", parent)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def check_flink(name: str, data: bytes) -> str:
    """The edited ``_metadata`` ``data`` of savepoint ``name`` through inspect, convert and migrate."""
    seed = SAVEPOINTS / name / "savepoint"
    expected = _expected_flink(name)
    root, parent = _scene(seed, data)
    try:
        return _run(root, parent, lambda: _flink_results(parent / "sp", parent),
                    _outputs(parent, root, "out", "v2"), expected)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@functools.cache
def _parquet_form(name: str) -> Path:
    """The Parquet form of savepoint ``name``, converted once per process."""
    out = _base() / f"parquet-{name}"
    flink_to_parquet(SAVEPOINTS / name / "savepoint", out)
    return out


def _skeleton_seed(name: str) -> bytes:
    doc = json.loads((_parquet_form(name) / "_metadata.json").read_text(encoding="utf-8"))
    return (_parquet_form(name) / doc["flink"]["metadata"]["path"]).read_bytes()


def check_skeleton(name: str, data: bytes) -> str:
    """The edited skeleton ``data`` of savepoint ``name``'s Parquet form through ``convert`` back
    to Flink: the same entries as the source, or a refusal writing nothing."""
    seed = SAVEPOINTS / name / "savepoint"
    expected = {"entries": _expected_flink(name)["entries"]}
    root, parent = _scene(seed, (seed / "_metadata").read_bytes())
    try:
        pq_dir = parent / "pq"
        shutil.copytree(_parquet_form(name), pq_dir)
        doc = json.loads((pq_dir / "_metadata.json").read_text(encoding="utf-8"))
        entry = doc["flink"]["metadata"]
        (pq_dir / entry["path"]).write_bytes(data)
        entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
        (pq_dir / "_metadata.json").write_text(json.dumps(doc), encoding="utf-8")

        def verbs() -> dict[str, Any]:
            parquet_to_flink(pq_dir, parent / "back")
            return {"entries": _entries(parent / "back")}

        return _run(root, parent, verbs, _outputs(parent, root, "back"), expected)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- the edits ----------------------------------------------------------------------------------------
# Each edit takes a parsed ``_metadata`` and changes it as an attacker would; an input stacks 1 to
# 12 of them, drawn with their parameters from the input's own random generator, so that nearly
# every input differs from every other (docs/reliability.md, "Distinct inputs").

Slot = tuple[Any, str]  # (subtask, handle attribute)
SUBTASK_HANDLES = ("managed_operator", "raw_operator", "managed_keyed", "raw_keyed")
Edit = Callable[[CheckpointMetadata, random.Random], None]


def _slots(meta: CheckpointMetadata) -> list[Slot]:
    return [(st, k) for op in meta.operators for st in op.subtasks or [] for k in SUBTASK_HANDLES
            if getattr(st, k) is not None]


def _keyed(meta: CheckpointMetadata) -> list[tuple[Any, Any]]:
    return [(op, st) for op in meta.operators for st in op.subtasks or [] if st.managed_keyed is not None]


def _with_subtasks(meta: CheckpointMetadata) -> list[Any]:
    return [op for op in meta.operators if op.subtasks]


def _operator_handles(meta: CheckpointMetadata) -> list[OperatorStreamHandle]:
    return [getattr(st, k) for st, k in _slots(meta) if not k.endswith("keyed")]


def _copy_delegate(meta: CheckpointMetadata, r: random.Random) -> None:
    slots = _slots(meta)
    (a, ka), (b, kb) = r.choice(slots), r.choice(slots)
    getattr(b, kb).delegate = copy.deepcopy(getattr(a, ka).delegate)


def _share_delegate(meta: CheckpointMetadata, r: random.Random) -> None:
    """Several handles at once (across operators, subtasks, keyed and operator state) read one stream."""
    slots = _slots(meta)
    a, ka = r.choice(slots)
    for b, kb in r.sample(slots, r.randint(1, len(slots))):
        getattr(b, kb).delegate = copy.deepcopy(getattr(a, ka).delegate)


def _swap_delegate(meta: CheckpointMetadata, r: random.Random) -> None:
    """Two handles of one operator exchange streams (across operators, inline state would make a
    valid savepoint that reads differently, not a reused one)."""
    op = r.choice(_with_subtasks(meta))
    slots = [(st, k) for st in op.subtasks for k in SUBTASK_HANDLES if getattr(st, k) is not None]
    if len(slots) > 1:
        (a, ka), (b, kb) = r.sample(slots, 2)
        ha, hb = getattr(a, ka), getattr(b, kb)
        ha.delegate, hb.delegate = hb.delegate, ha.delegate


def _operator_to_keyed(meta: CheckpointMetadata, r: random.Random) -> None:
    ops = [(st, k) for st, k in _slots(meta) if not k.endswith("keyed")]
    if ops and _keyed(meta):
        st, k = r.choice(ops)
        getattr(st, k).delegate = copy.deepcopy(r.choice(_keyed(meta))[1].managed_keyed.delegate)


def _raw_keyed_copy(meta: CheckpointMetadata, r: random.Random) -> None:
    if _keyed(meta):
        _, st = r.choice(_keyed(meta))
        st.raw_keyed = copy.deepcopy(st.managed_keyed)


def _reads_a_file(subtasks: list[Any]) -> bool:
    """Whether a handle of ``subtasks`` names a file: a copy of them that claims another place
    uses that file twice. A copy of inline state is new state (a valid savepoint that reads
    differently), so it keeps its place, where it is a subtask or an operator twice."""
    return any(isinstance(getattr(st, k).delegate, (FileHandle, RelativeFileHandle))
               for st in subtasks for k in SUBTASK_HANDLES if getattr(st, k) is not None)


def _subtask_dup(meta: CheckpointMetadata, r: random.Random) -> None:
    """A subtask copied (at any place) into its own operator or, when it reads a file, another
    one, where half the copies claim another index."""
    src = r.choice(_with_subtasks(meta))
    assert src.subtasks is not None
    st = copy.deepcopy(r.choice(src.subtasks))
    dst = src
    if _reads_a_file([st]):
        dst = r.choice(_with_subtasks(meta))
        if r.random() < 0.5:
            st.index = r.randint(0, dst.parallelism + 1)
    assert dst.subtasks is not None
    dst.subtasks.insert(r.randrange(len(dst.subtasks) + 1), st)


def _subtask_index(meta: CheckpointMetadata, r: random.Random) -> None:
    op = r.choice(_with_subtasks(meta))
    assert op.subtasks is not None
    # never negative: Flink writes a finished subtask as -index-1 (and nothing after it)
    r.choice(op.subtasks).index = r.choice([op.parallelism, op.parallelism - 1, 0, 1, 2,
                                            r.randint(0, 2 * op.parallelism + 2), r.choice(HOSTILE_I32) & 0x7FFFFFFF])


def _swap_index(meta: CheckpointMetadata, r: random.Random) -> None:
    op = r.choice(_with_subtasks(meta))
    assert op.subtasks is not None
    if len(op.subtasks) > 1:
        a, b = r.sample(op.subtasks, 2)
        a.index, b.index = b.index, a.index


def _swap_keyed(meta: CheckpointMetadata, r: random.Random) -> None:
    """Two subtasks of one operator exchange keyed state (across operators: a valid savepoint
    that reads differently)."""
    op = r.choice(_with_subtasks(meta))
    ks = [st for st in op.subtasks if st.managed_keyed is not None]
    if len(ks) > 1:
        a, b = r.sample(ks, 2)
        a.managed_keyed, b.managed_keyed = b.managed_keyed, a.managed_keyed


def _operator_dup(meta: CheckpointMetadata, r: random.Random) -> None:
    """An operator copied; when it reads a file, half the copies get an id and uid of their own,
    so that only their handles are used twice."""
    op = copy.deepcopy(r.choice(meta.operators))
    if _reads_a_file(op.subtasks or []) and r.random() < 0.5:
        op.operator_id = r.randbytes(len(op.operator_id))
        op.uid = f"{op.uid}-{r.randrange(1 << 20)}" if op.uid else op.uid
    meta.operators.insert(r.randrange(len(meta.operators) + 1), op)


def _operator_id(meta: CheckpointMetadata, r: random.Random) -> None:
    """An operator's id or uid set to another's (a uid only where there is one: an operator
    without a uid is only named by its id, a valid savepoint reading under another name)."""
    a, b = r.choice(meta.operators), r.choice(meta.operators)
    if not a.uid or r.random() < 0.5:  # an operator without a uid has an empty one
        b.operator_id = a.operator_id
    else:
        b.uid = a.uid


def _range_shift(meta: CheckpointMetadata, r: random.Random) -> None:
    if _keyed(meta):
        op, st = r.choice(_keyed(meta))
        h: KeyGroupsHandle = st.managed_keyed
        mp, n = op.max_parallelism, len(h.offsets)
        h.start_key_group = r.choice([0, 1, n // 2, n, 100, mp - n, mp - n + 1, mp, max(0, mp - 1),
                                      r.randint(0, mp + 1), h.start_key_group + r.choice((-1, 1))])


def _offsets_reuse(meta: CheckpointMetadata, r: random.Random) -> None:
    """Key groups of one handle (or of two) that start at the same block, swapped, or a range one
    longer than the key groups it holds, its last one another's block. Only blocks that hold
    state (offset 0 is an empty key group: pointing a group there drops its state, a valid
    savepoint; a range cut short likewise)."""
    if not _keyed(meta):
        return
    (_, a), (_, b) = r.choice(_keyed(meta)), r.choice(_keyed(meta))
    ha, hb = a.managed_keyed, b.managed_keyed
    held_a, held_b = [i for i, o in enumerate(ha.offsets) if o], [j for j, o in enumerate(hb.offsets) if o]
    if not held_a or not held_b:
        return
    i, j = r.choice(held_a), r.choice(held_b)
    what = r.randrange(3)
    if what == 0:
        ha.offsets[i] = hb.offsets[j]
    elif what == 1:
        ha.offsets[i], hb.offsets[j] = hb.offsets[j], ha.offsets[i]
    else:
        ha.offsets.append(hb.offsets[j])


def _operator_state_reuse(meta: CheckpointMetadata, r: random.Random) -> None:
    """Operator states of one name twice in a handle: a state copied (at any place), or renamed
    to a sibling's name."""
    hs = [h for h in _operator_handles(meta) if h.states]
    if not hs:
        return
    h = r.choice(hs)
    sa, sb = r.choice(h.states), r.choice(h.states)
    if sa is sb or r.random() < 0.5:
        h.states.insert(r.randrange(len(h.states) + 1), copy.deepcopy(sb))
    else:
        sa.name = sb.name


REUSE_EDITS: dict[str, Edit] = {
    "copy-delegate": _copy_delegate,
    "share-delegate": _share_delegate,
    "swap-delegate": _swap_delegate,
    "operator-to-keyed": _operator_to_keyed,
    "raw-keyed-copy": _raw_keyed_copy,
    "subtask-dup": _subtask_dup,
    "subtask-index": _subtask_index,
    "swap-index": _swap_index,
    "swap-keyed": _swap_keyed,
    "operator-dup": _operator_dup,
    "operator-id": _operator_id,
    "range-shift": _range_shift,
    "offsets-reuse": _offsets_reuse,
    "operator-state-reuse": _operator_state_reuse,
}


def _file_name(h: Any) -> str | None:
    d = h.delegate
    if isinstance(d, RelativeFileHandle):
        return d.relative_path
    if isinstance(d, FileHandle):
        return d.path.rsplit("/", 1)[-1]
    return None


UNICODE_NAMES = ("\u2025", "\uff0e\uff0e", "..\u200b", "\u202e", "e\u0301", "\u00e9", "\uff0f", "\u2215", "\ud800",
                 "\U0001f4be", "\u0085", "\u2028")
"""Look-alikes of ``..`` and ``/`` (two-dot leader, full-width), a zero-width space, a
right-to-left override, a name in NFD and NFC, a lone surrogate, characters Python splits lines on."""
MAX_PATH = 8192
"""Characters a composed path is cut to: Flink writes a path with ``writeUTF`` (at most 65,535
bytes, up to six a character in modified UTF-8)."""
SEPARATORS = ("/", "/", "/", "//", "/./", "\\", "\x00", "/../")


def _component(name: str, r: random.Random) -> str:
    """One component of a hostile path: a way up, the state file under another name (a symlink
    in, a hard link, a symlink out), a directory, a long or odd name."""
    return r.choice([
        "..", "..", ".", "", "sub", "outside", "sp", name, f"in-{name}", f"alias-{name}", f"out-{name}", "_metadata",
        r.choice("ab") * r.choice((255, 256, 1024, 4097)), name * r.randint(2, 40), r.choice(UNICODE_NAMES),
        r.choice(UNICODE_NAMES) + name, f"{name}\x00", "\x00", "%2e%2e", "~", f"{name}.", f"{name} ", f"{name}:x",
        PLANTED.name,
    ])


def _composed_path(name: str, r: random.Random) -> str:
    """1 to 7 components joined by separators, possibly absolute, possibly a URI."""
    parts = [_component(name, r) for _ in range(r.randint(1, 7))]
    if r.random() < 0.5:
        parts.append(name)  # most real attacks end at the file they aim at
    path = parts[0]
    for p in parts[1:]:
        path += r.choice(SEPARATORS) + p
    prefix = r.choice(["", "", "", "/", "//", str(PLANTED) + "/", "file:", "file:///", "s3://bucket/", "./", "../"])
    return (prefix + path)[:MAX_PATH]


def _hostile_path(name: str, r: random.Random) -> Any:
    """A handle for the file ``name`` (or, for inline state, any name) that reads the same file
    (``in-``, ``alias-``, an absolute path taken by its name), leads out, or is not a plain path:
    one of the plain cases, or a path composed of many parts (:func:`_composed_path`), in either
    form (a relative handle, or an absolute one)."""
    up = "../" * r.randint(1, 5)
    if r.random() < 0.7:
        return (RelativeFileHandle if r.random() < 0.6 else lambda p, s: FileHandle("/" + p.lstrip("/"), s))(
            _composed_path(name, r), 0)
    rel = r.choice([
        f"in-{name}", f"alias-{name}", f"out-{name}", f"{up}outside/{name}", f"{up}{name}", f"sub/../{name}",
        f"./{name}", f"{name}/", f"sub//{name}", f"/{name}", str(PLANTED / name), "sub", "..", ".", "",
        f"sub\\..\\{name}", f"{name}\x00", f"sub/{name}", "_metadata", name,
    ])
    if r.random() < 0.25:
        return FileHandle(r.choice([f"/any/where/{name}", str(PLANTED / name), "/etc/passwd", "/", f"/x/{name}/..",
                                    f"s3://bucket/entropy/{name}", f"/x/{up}{name}"]), 0)
    return RelativeFileHandle(rel, 0)


def _stream_size(h: Any) -> int:
    d = h.delegate
    if isinstance(d, (FileHandle, RelativeFileHandle)):
        return d.size
    return len(d.data) if isinstance(d, ByteStreamHandle) else 0


def _repath_slot(st: Any, k: str, r: random.Random, inline_too: bool = False) -> None:
    h = getattr(st, k)
    if isinstance(h.delegate, ByteStreamHandle) and not inline_too and r.random() < 0.7:
        return  # inline state stays inline most of the time: the file cases are the point
    new = _hostile_path(_file_name(h) or r.choice(["x", "_metadata"]), r)
    new.size = _stream_size(h) if r.random() < 0.9 else r.choice((0, 1, _stream_size(h) + 1, 1 << 40))
    h.delegate = new


def _repath(meta: CheckpointMetadata, r: random.Random) -> None:
    _repath_slot(*r.choice(_slots(meta)), r)


def _repath_many(meta: CheckpointMetadata, r: random.Random) -> None:
    """Several handles (or all) given hostile paths at once."""
    slots = _slots(meta)
    for st, k in r.sample(slots, r.randint(1, len(slots))):
        _repath_slot(st, k, r)


def _repath_shared(meta: CheckpointMetadata, r: random.Random) -> None:
    """A hostile path given to one handle, then reused by others (of any operator, subtask, kind)."""
    slots = _slots(meta)
    st, k = r.choice(slots)
    _repath_slot(st, k, r, inline_too=True)
    for b, kb in r.sample(slots, r.randint(1, len(slots))):
        getattr(b, kb).delegate = copy.deepcopy(getattr(st, k).delegate)


CONTAINMENT_EDITS: dict[str, Edit] = {
    "repath": _repath,
    "repath-many": _repath_many,
    "repath-shared": _repath_shared,
}

CONTROL_RATE = 1 / 1000
"""The share of a family's inputs that are the unedited seed, marked ``control``: the oracle's
own check that a seed reads as expected. Every other input differs from its seed."""
MAX_EDITS = 16


def mutator(edits: dict[str, Edit]) -> Callable[[bytes, random.Random], tuple[bytes, str]]:
    """A family's mutation: 1 to 12 of ``edits`` (one alone in a twentieth of the inputs: a single
    edit has few variants, soon all seen) on the parsed seed, written back as Flink bytes;
    an edit that changes nothing (a handle copied onto itself, a swap in a one-subtask operator)
    is drawn again (up to four times), so an input holds as many edits as it says, and one that
    ends as the seed (two swaps undoing each other) gets more, up to :data:`MAX_EDITS`: only a
    ``control`` input is the seed."""
    names = list(edits)

    def mutate(seed: bytes, r: random.Random) -> tuple[bytes, str]:
        if r.random() < CONTROL_RATE:
            return seed, "control"
        meta = parse_metadata(seed)
        ops: list[str] = []
        out = seed
        for _ in range(r.choice((1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 6, 6, 7, 8, 8, 10, 12, 12))):
            for _ in range(4):  # an edit that changed nothing (a swap in a one-subtask operator): another
                op = r.choice(names)
                edits[op](meta, r)
                now = serialize_metadata(meta)
                if now != out:
                    ops.append(op)
                    out = now
                    break
        while out == seed and len(ops) < MAX_EDITS:
            ops.append(r.choice(names))
            edits[ops[-1]](meta, r)
            out = serialize_metadata(meta)
        return out, "+".join(ops)

    return mutate


def seeds() -> list[tuple[str, bytes]]:
    return [(n, (SAVEPOINTS / n / "savepoint" / "_metadata").read_bytes()) for n in SEEDS
            if (SAVEPOINTS / n / "savepoint").is_dir()]


def skeleton_seeds() -> list[tuple[str, bytes]]:
    return [(n, _skeleton_seed(n)) for n in SEEDS if (SAVEPOINTS / n / "savepoint").is_dir()]


__all__ = ["CONTAINMENT_EDITS", "REUSE_EDITS", "check_flink", "check_skeleton", "mutator", "seeds",
           "skeleton_seeds"]
