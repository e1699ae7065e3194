"""The fuzz families of issue 24: ``handle-reuse`` and ``containment``.

Their inputs are not bit-level mutations: each is the ``_metadata`` of a real Flink savepoint
(or the ``flink/_metadata`` skeleton kept in its Parquet form) with its handles edited as an
attacker would: a file handle copied into another slot, an operator-state handle pointed at a
keyed-state file, a subtask or an operator duplicated, a key-group range moved, a file named by a
relative path with ``..``, an absolute path, a symlink (inside or leading out), a hard link, a
directory. Input *i* is still a pure function of the family and *i* (:func:`mutator`).

Each input runs in a scene (:func:`_scene`): a directory ``R/a/b/c`` holding a copy of the
savepoint, with, next to every state file ``f``, ``in-f`` (a symlink to ``f``), ``alias-f`` (a
hard link to ``f``) and ``out-f`` (a symlink to a copy of ``f`` outside the savepoint, in
``R/a/b/c/outside``), and a directory ``sub``. A worker builds one scene per target and reuses
it (:class:`_Scenes`): an input writes its ``_metadata`` (or skeleton) into it, is judged, and
its outputs are removed; every input first checks the scene is exactly as built (names, kinds,
sizes, inodes and modification times), and a scene an input left otherwise is built again
(docs/reliability.md, "Fast paths"). The oracle:

- the verbs (``inspect`` counting every entry, ``convert`` to the Parquet form, for ``events``
  savepoints ``migrate``; for a skeleton, ``convert`` back to Flink) either succeed with the same
  results as on the unedited savepoint (entries per state, rows per table, values migrated), or
  refuse with a :class:`~statemorph.errors.StatemorphError` whose exit status is 4;
- nothing is written outside the verb's output: the scene's listing (names, kinds, sizes, inodes
  and modification times, from ``R`` down, so ``../../..`` is seen) is unchanged after a refusal,
  and only the output was added after a success; nothing appears at :data:`PLANTED`, the
  absolute path the inputs aim at.

Anything else is a :class:`~fuzz.families.Disagreement` (a finding).
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import functools
import hashlib
import json
import os
import pickle
import random
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from savepoint.flink.flink_cases import EVOLVED_EVENTS
from savepoint.hostile_metadata import SAVEPOINTS

from statemorph import io
from statemorph import serializers as S
from statemorph.engine import convert, migrate_savepoint
from statemorph.engine.convert import flink_to_parquet, parquet_to_flink
from statemorph.errors import ExitCode, StatemorphError
from statemorph.io import DataOutputSerializer
from statemorph.savepoint.flink import (
    ByteStreamHandle,
    FileHandle,
    FlinkSavepoint,
    KeyGroupsHandle,
    OperatorStreamHandle,
    RelativeFileHandle,
    assemble,
    handles,
    parse_keyed_header,
    parse_metadata,
    reader,
    serialize_metadata,
)
from statemorph.savepoint.flink.keyed_header import KeyedHeader
from statemorph.savepoint.flink.metadata import CheckpointMetadata, OperatorState, _write_operator
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


Listing = dict[str, tuple[str, int, int, int]]


def _listing(root: Path) -> Listing:
    """Every entry under ``root`` (symlinks not followed) by its path relative to ``root``: its
    kind and, for a file or a symlink, its size, inode and modification time (a file rewritten in
    place to its own size still shows; a directory's own times change as outputs come and go)."""
    out: Listing = {}

    def walk(path: str, rel: str) -> None:
        with os.scandir(path) as it:
            for e in it:
                st = e.stat(follow_symlinks=False)
                name = rel + e.name
                if stat.S_ISDIR(st.st_mode):
                    out[name] = ("dir", 0, 0, 0)
                    walk(e.path, name + "/")
                else:
                    kind = "link" if stat.S_ISLNK(st.st_mode) else "file"
                    out[name] = (kind, st.st_size if kind == "file" else 0, st.st_ino, st.st_mtime_ns)

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
         expected: dict[str, Any] | None, before: Listing | None = None) -> str:
    """The oracle around ``verbs``: results equal to ``expected`` (None: the unedited seed's run),
    or a refusal with exit status 4; nothing written but ``outputs``. ``before``: the scene's
    listing, where the caller took it."""
    before = _listing(root) if before is None else before
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
    after = _without(_listing(root), outputs)
    rest = _without(before, outputs)
    if after != rest:
        raise Disagreement(f"a run wrote outside its output: {sorted(set(after.items()) ^ set(rest.items()))}")
    _no_plant()
    if expected is not None and got != expected:
        raise Disagreement(f"an edited savepoint read differently: {got} != {expected}")
    return "ok"


def _without(listing: Listing, names: tuple[str, ...]) -> Listing:
    """``listing`` less the entries named and everything under them."""
    return {k: v for k, v in listing.items() if not any(k == n or k.startswith(n + "/") for n in names)}


def _no_plant() -> None:
    if os.path.lexists(PLANTED):
        shutil.rmtree(PLANTED, ignore_errors=True)
        raise Disagreement(f"{PLANTED} appeared")


@functools.cache
def _expected_flink(name: str) -> dict[str, Any]:
    seed = SAVEPOINTS / name / "savepoint"
    root, parent = _scene(seed, (seed / "_metadata").read_bytes())
    try:
        return _flink_results(parent / "sp", parent)
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


class _Scene:
    """The scene of one target (:func:`_scene`; with the Parquet form copied to ``pq`` for a
    skeleton target), the files an input writes into it, and its listing as built."""

    def __init__(self, name: str, skeleton: bool) -> None:
        seed = SAVEPOINTS / name / "savepoint"
        self.root, self.parent = _scene(seed, (seed / "_metadata").read_bytes())
        self.skeleton = skeleton
        rel = self.parent.relative_to(self.root)
        self.written: tuple[str, ...]
        self.outputs: tuple[str, ...]
        if skeleton:
            shutil.copytree(_parquet_form(name), self.parent / "pq")
            doc = json.loads((self.parent / "pq" / "_metadata.json").read_text(encoding="utf-8"))
            self.written = (str(rel / "pq" / "_metadata.json"), str(rel / "pq" / doc["flink"]["metadata"]["path"]))
            self.outputs = (str(rel / "back"),)
        else:
            self.written = (str(rel / "sp" / "_metadata"),)
            self.outputs = (str(rel / "out"), str(rel / "v2"))
        self.built = _without(_listing(self.root), self.written)
        self.clean = True
        """Whether the last input ended as the oracle expects (a result, or a typed refusal that
        left the scene as it was), its outputs removed."""

    def load(self, data: bytes) -> Listing:
        """Write input ``data`` into the scene; its listing after that, checked against the built one."""
        if self.skeleton:
            pq_dir = self.parent / "pq"
            doc = json.loads((pq_dir / "_metadata.json").read_text(encoding="utf-8"))
            entry = doc["flink"]["metadata"]
            (pq_dir / entry["path"]).write_bytes(data)
            entry["size"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
            (pq_dir / "_metadata.json").write_text(json.dumps(doc), encoding="utf-8")
        else:
            (self.parent / "sp" / "_metadata").write_bytes(data)
        before = _listing(self.root)
        if _without(before, self.written) != self.built:
            raise Disagreement("the scene changed after the previous input ended: "
                               f"{sorted(set(_without(before, self.written).items()) ^ set(self.built.items()))}")
        return before

    def clear(self) -> None:
        for name in self.outputs:
            if os.path.lexists(self.root / name):
                shutil.rmtree(self.root / name)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


FAST = True
"""Fast paths of the worker (docs/reliability.md, "Fast paths"): scenes kept from one input to the
next, keyed-state headers parsed once, inputs generated an operator at a time. ``full_path()``
turns them off, for the test that both give the same inputs and verdicts."""
_SCENES: dict[tuple[str, bool], _Scene] = {}


@contextlib.contextmanager
def full_path() -> Iterator[None]:
    """Every input generated, and judged in a fresh scene, as without the fast paths."""
    global FAST
    saved, FAST = FAST, False
    try:
        yield
    finally:
        FAST = saved


def _judged(name: str, skeleton: bool, data: bytes, expected: dict[str, Any],
            verbs: Callable[[Path], dict[str, Any]]) -> str:
    """Input ``data`` of target ``name`` (its skeleton, or its ``_metadata``) through ``verbs``
    (given the scene's parent) and the oracle, in the target's kept scene or a fresh one."""
    if not FAST:
        scene = _Scene(name, skeleton)
        try:
            scene.load(data)
            return _run(scene.root, scene.parent, lambda: verbs(scene.parent), scene.outputs, expected)
        finally:
            scene.remove()
    kept = _SCENES.get((name, skeleton))
    if kept is not None and kept.clean:
        scene = kept
    else:
        if kept is not None:
            kept.remove()  # an input that ended otherwise (a finding, a hang) may have left anything there
        scene = _SCENES[name, skeleton] = _Scene(name, skeleton)
    scene.clean = False
    before = scene.load(data)
    try:
        with HEADERS.kept():
            outcome = _run(scene.root, scene.parent, lambda: verbs(scene.parent), scene.outputs, expected, before)
    except StatemorphError:
        scene.clean = True  # refused, the scene checked unchanged: nothing to remove
        raise
    scene.clear()
    scene.clean = True
    return outcome


def check_flink(name: str, data: bytes) -> str:
    """The edited ``_metadata`` ``data`` of savepoint ``name`` through inspect, convert and migrate."""
    return _judged(name, False, data, _expected_flink(name), lambda parent: _flink_results(parent / "sp", parent))


def check_skeleton(name: str, data: bytes) -> str:
    """The edited skeleton ``data`` of savepoint ``name``'s Parquet form through ``convert`` back
    to Flink: the same entries as the source, or a refusal writing nothing."""
    def verbs(parent: Path) -> dict[str, Any]:
        parquet_to_flink(parent / "pq", parent / "back")
        return {"entries": _entries(parent / "back")}

    return _judged(name, True, data, {"entries": _expected_flink(name)["entries"]}, verbs)


class _HeaderMemo:
    """Keyed-state headers parsed once per worker. ``parse_keyed_header`` is a pure function of
    its bytes, end, ``where`` and registry, and these families never change a state file, so
    every input that reads parses the same few hundred headers again (two thirds of such an
    input's time). While an input is judged, the verbs' ``parse_keyed_header`` keeps each
    successful parse without a registry as a pickle and hands out a fresh unpickled copy: the
    same values and the same sharing as a parse, new objects (``convert`` back changes the header
    it gets). A refusal is parsed again each time; the ``keyed-header`` family fuzzes the
    parser itself."""

    USERS = (reader, convert, assemble)
    """The modules that call ``parse_keyed_header`` by the name they imported."""
    LIMIT = 4096

    def __init__(self) -> None:
        self.pickles: dict[tuple[bytes, int, str], bytes] = {}

    def parse(self, data: Any, header_end: int, where: str, registry: Any = None) -> KeyedHeader:
        if registry is not None:
            return parse_keyed_header(data, header_end, where, registry)
        key = (bytes(data), header_end, where)
        kept = self.pickles.get(key)
        if kept is None:
            header = parse_keyed_header(data, header_end, where)
            if len(self.pickles) >= self.LIMIT:
                self.pickles.clear()
            self.pickles[key] = pickle.dumps(header, pickle.HIGHEST_PROTOCOL)
            return header
        loaded: KeyedHeader = pickle.loads(kept)
        return loaded

    @contextlib.contextmanager
    def kept(self) -> Iterator[None]:
        for m in self.USERS:
            assert m.parse_keyed_header is parse_keyed_header, m  # the name this replaces, nothing else
            m.parse_keyed_header = self.parse  # type: ignore[attr-defined]
        try:
            yield
        finally:
            for m in self.USERS:
                m.parse_keyed_header = parse_keyed_header  # type: ignore[attr-defined]


HEADERS = _HeaderMemo()


# -- the edits ----------------------------------------------------------------------------------------
# Each edit takes a parsed ``_metadata`` and changes it as an attacker would; an input stacks 1 to
# 12 of them, drawn with their parameters from the input's own random generator, so that nearly
# every input differs from every other (docs/reliability.md, "Distinct inputs").

Slot = tuple[Any, Any, str]  # (operator, subtask, handle attribute)
SUBTASK_HANDLES = ("managed_operator", "raw_operator", "managed_keyed", "raw_keyed")
Touched = list[OperatorState]
Edit = Callable[[CheckpointMetadata, random.Random], Touched]
"""An edit changes ``meta`` in place and returns the operators whose objects it changed (or
added): every other one writes the bytes it wrote before (:class:`_Writer`). An object one edit
moves to another operator is a deep copy, so no operator shares a changeable object with another."""


def _slots(meta: CheckpointMetadata) -> list[Slot]:
    return [(op, st, k) for op in meta.operators for st in op.subtasks or [] for k in SUBTASK_HANDLES
            if getattr(st, k) is not None]


def _keyed(meta: CheckpointMetadata) -> list[tuple[Any, Any]]:
    return [(op, st) for op in meta.operators for st in op.subtasks or [] if st.managed_keyed is not None]


def _with_subtasks(meta: CheckpointMetadata) -> list[Any]:
    return [op for op in meta.operators if op.subtasks]


def _operator_handles(meta: CheckpointMetadata) -> list[tuple[OperatorState, OperatorStreamHandle]]:
    return [(op, getattr(st, k)) for op, st, k in _slots(meta) if not k.endswith("keyed")]


def _names_a_file(h: Any) -> bool:
    """Whether handle ``h`` reads a file: only then is a copy of its delegate elsewhere a stream
    read twice. A copy of inline state is new state, a valid savepoint that reads differently
    (inputs 35641, 36299 and 62297 of the first million-input run: a SQL job's idle rank subtask,
    its key groups all empty, given another operator's inline stream, read two more states)."""
    return isinstance(h.delegate, (FileHandle, RelativeFileHandle))


def _copy_delegate(meta: CheckpointMetadata, r: random.Random) -> Touched:
    slots = _slots(meta)
    (_, a, ka), (op, b, kb) = r.choice(slots), r.choice(slots)
    if not _names_a_file(getattr(a, ka)):
        return []
    getattr(b, kb).delegate = copy.deepcopy(getattr(a, ka).delegate)
    return [op]


def _share_delegate(meta: CheckpointMetadata, r: random.Random) -> Touched:
    """Several handles at once (across operators, subtasks, keyed and operator state) read one stream."""
    slots = _slots(meta)
    _, a, ka = r.choice(slots)
    if not _names_a_file(getattr(a, ka)):
        return []
    touched = []
    for op, b, kb in r.sample(slots, r.randint(1, len(slots))):
        getattr(b, kb).delegate = copy.deepcopy(getattr(a, ka).delegate)
        touched.append(op)
    return touched


def _swap_delegate(meta: CheckpointMetadata, r: random.Random) -> Touched:
    """Two handles of one operator exchange streams (across operators, inline state would make a
    valid savepoint that reads differently, not a reused one)."""
    op = r.choice(_with_subtasks(meta))
    slots = [(st, k) for st in op.subtasks for k in SUBTASK_HANDLES if getattr(st, k) is not None]
    if len(slots) > 1:
        (a, ka), (b, kb) = r.sample(slots, 2)
        ha, hb = getattr(a, ka), getattr(b, kb)
        ha.delegate, hb.delegate = hb.delegate, ha.delegate
    return [op]


def _operator_to_keyed(meta: CheckpointMetadata, r: random.Random) -> Touched:
    ops = [(o, st, k) for o, st, k in _slots(meta) if not k.endswith("keyed")]
    if ops and _keyed(meta):
        o, st, k = r.choice(ops)
        keyed = r.choice(_keyed(meta))[1].managed_keyed
        if not _names_a_file(keyed):
            return []
        getattr(st, k).delegate = copy.deepcopy(keyed.delegate)
        return [o]
    return []


def _raw_keyed_copy(meta: CheckpointMetadata, r: random.Random) -> Touched:
    if _keyed(meta):
        op, st = r.choice(_keyed(meta))
        st.raw_keyed = copy.deepcopy(st.managed_keyed)
        return [op]
    return []


def _reads_a_file(subtasks: list[Any]) -> bool:
    """Whether a handle of ``subtasks`` names a file: a copy of them that claims another place
    uses that file twice. A copy of inline state is new state (a valid savepoint that reads
    differently), so it keeps its place, where it is a subtask or an operator twice."""
    return any(isinstance(getattr(st, k).delegate, (FileHandle, RelativeFileHandle))
               for st in subtasks for k in SUBTASK_HANDLES if getattr(st, k) is not None)


def _subtask_dup(meta: CheckpointMetadata, r: random.Random) -> Touched:
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
    return [dst]


def _subtask_index(meta: CheckpointMetadata, r: random.Random) -> Touched:
    op = r.choice(_with_subtasks(meta))
    assert op.subtasks is not None
    # never negative: Flink writes a finished subtask as -index-1 (and nothing after it)
    r.choice(op.subtasks).index = r.choice([op.parallelism, op.parallelism - 1, 0, 1, 2,
                                            r.randint(0, 2 * op.parallelism + 2), r.choice(HOSTILE_I32) & 0x7FFFFFFF])
    return [op]


def _swap_index(meta: CheckpointMetadata, r: random.Random) -> Touched:
    op = r.choice(_with_subtasks(meta))
    assert op.subtasks is not None
    if len(op.subtasks) > 1:
        a, b = r.sample(op.subtasks, 2)
        a.index, b.index = b.index, a.index
    return [op]


def _swap_keyed(meta: CheckpointMetadata, r: random.Random) -> Touched:
    """Two subtasks of one operator exchange keyed state (across operators: a valid savepoint
    that reads differently)."""
    op = r.choice(_with_subtasks(meta))
    ks = [st for st in op.subtasks if st.managed_keyed is not None]
    if len(ks) > 1:
        a, b = r.sample(ks, 2)
        a.managed_keyed, b.managed_keyed = b.managed_keyed, a.managed_keyed
    return [op]


def _operator_dup(meta: CheckpointMetadata, r: random.Random) -> Touched:
    """An operator copied; when it reads a file, half the copies get an id and uid of their own,
    so that only their handles are used twice."""
    op = copy.deepcopy(r.choice(meta.operators))
    if _reads_a_file(op.subtasks or []) and r.random() < 0.5:
        op.operator_id = r.randbytes(len(op.operator_id))
        op.uid = f"{op.uid}-{r.randrange(1 << 20)}" if op.uid else op.uid
    meta.operators.insert(r.randrange(len(meta.operators) + 1), op)
    return [op]


def _operator_id(meta: CheckpointMetadata, r: random.Random) -> Touched:
    """An operator's id or uid set to another's (a uid only where there is one: an operator
    without a uid is only named by its id, a valid savepoint reading under another name)."""
    a, b = r.choice(meta.operators), r.choice(meta.operators)
    if not a.uid or r.random() < 0.5:  # an operator without a uid has an empty one
        b.operator_id = a.operator_id
    else:
        b.uid = a.uid
    return [b]


def _range_shift(meta: CheckpointMetadata, r: random.Random) -> Touched:
    if _keyed(meta):
        op, st = r.choice(_keyed(meta))
        h: KeyGroupsHandle = st.managed_keyed
        mp, n = op.max_parallelism, len(h.offsets)
        h.start_key_group = r.choice([0, 1, n // 2, n, 100, mp - n, mp - n + 1, mp, max(0, mp - 1),
                                      r.randint(0, mp + 1), h.start_key_group + r.choice((-1, 1))])
        return [op]
    return []


def _offsets_reuse(meta: CheckpointMetadata, r: random.Random) -> Touched:
    """Key groups of one handle (or of two) that start at the same block, swapped, or a range one
    longer than the key groups it holds, its last one another's block. Only blocks that hold
    state (offset 0 is an empty key group: pointing a group there drops its state, a valid
    savepoint; a range cut short likewise)."""
    if not _keyed(meta):
        return []
    (op_a, a), (op_b, b) = r.choice(_keyed(meta)), r.choice(_keyed(meta))
    ha, hb = a.managed_keyed, b.managed_keyed
    held_a, held_b = [i for i, o in enumerate(ha.offsets) if o], [j for j, o in enumerate(hb.offsets) if o]
    if not held_a or not held_b:
        return []
    i, j = r.choice(held_a), r.choice(held_b)
    what = r.randrange(3)
    if what == 0:
        ha.offsets[i] = hb.offsets[j]
    elif what == 1:
        ha.offsets[i], hb.offsets[j] = hb.offsets[j], ha.offsets[i]
    else:
        ha.offsets.append(hb.offsets[j])
    return [op_a, op_b]


def _operator_state_reuse(meta: CheckpointMetadata, r: random.Random) -> Touched:
    """Operator states of one name twice in a handle: a state copied (at any place), or renamed
    to a sibling's name."""
    hs = [(op, h) for op, h in _operator_handles(meta) if h.states]
    if not hs:
        return []
    op, h = r.choice(hs)
    sa, sb = r.choice(h.states), r.choice(h.states)
    if sa is sb or r.random() < 0.5:
        h.states.insert(r.randrange(len(h.states) + 1), copy.deepcopy(sb))
    else:
        sa.name = sb.name
    return [op]


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


def _repath(meta: CheckpointMetadata, r: random.Random) -> Touched:
    op, st, k = r.choice(_slots(meta))
    _repath_slot(st, k, r)
    return [op]


def _repath_many(meta: CheckpointMetadata, r: random.Random) -> Touched:
    """Several handles (or all) given hostile paths at once."""
    slots = _slots(meta)
    touched = []
    for op, st, k in r.sample(slots, r.randint(1, len(slots))):
        _repath_slot(st, k, r)
        touched.append(op)
    return touched


def _repath_shared(meta: CheckpointMetadata, r: random.Random) -> Touched:
    """A hostile path given to one handle, then reused by others (of any operator, subtask, kind)."""
    slots = _slots(meta)
    op, st, k = r.choice(slots)
    _repath_slot(st, k, r, inline_too=True)
    touched = [op]
    for ob, b, kb in r.sample(slots, r.randint(1, len(slots))):
        getattr(b, kb).delegate = copy.deepcopy(getattr(st, k).delegate)
        touched.append(ob)
    return touched


CONTAINMENT_EDITS: dict[str, Edit] = {
    "repath": _repath,
    "repath-many": _repath_many,
    "repath-shared": _repath_shared,
}

CONTROL_RATE = 1 / 1000
"""The share of a family's inputs that are the unedited seed, marked ``control``: the oracle's
own check that a seed reads as expected. Every other input differs from its seed."""
MAX_EDITS = 16


class _Writer:
    """``serialize_metadata`` of an edited seed, an operator at a time: its bytes are the seed's
    head (magic, version, checkpoint id, master states), the operator count, each operator as
    ``_write_operator`` writes it, and the trailer, and an edit changes operators only, so only
    the operators an edit touched (or added) are written again. Checked against
    ``serialize_metadata`` for every seed when it is first met (:func:`_seed_parts`), and for
    every edit of a sample of inputs by ``tests/fuzz/test_fast_paths.py``."""

    def __init__(self, seed: bytes, meta: CheckpointMetadata) -> None:
        self.version = meta.version
        self.head, self.tail, parts = _seed_parts(seed)
        self.parts: dict[int, tuple[OperatorState, bytes]] = {
            id(op): (op, b) for op, b in zip(meta.operators, parts, strict=True)}

        self.leaves = _Leaves()

    def __call__(self, meta: CheckpointMetadata, touched: Touched) -> bytes:
        for op in touched:
            self.parts.pop(id(op), None)
        out = [self.head, len(meta.operators).to_bytes(4, "big")]
        with self.leaves.kept():
            for op in meta.operators:
                kept = self.parts.get(id(op))
                if kept is None or kept[0] is not op:
                    kept = self.parts[id(op)] = (op, _operator_bytes(op, self.version))
                out.append(kept[1])
        out.append(self.tail)
        return b"".join(out)


def _operator_bytes(op: OperatorState, version: int) -> bytes:
    out = DataOutputSerializer()
    _write_operator(out, op, version)
    return out.get_copy_of_buffer()


class _Leaves:
    """The two pure functions an operator's bytes spend their time in, remembered for one input
    while its operators are written: a string's modified UTF-8 (``io.encode_modified_utf8``, a
    loop over the characters of a path of up to 8,192) and a handle's offsets
    (``handles._write_offsets``, a call a long, 128 to 256 of them a handle). An operator an edit
    touched is written again, its paths and offsets mostly as they were."""

    def __init__(self) -> None:
        self.texts: dict[str, bytes] = {}
        self.offsets: dict[tuple[int, ...], bytes] = {}

    def encode(self, text: str) -> bytes:
        got = self.texts.get(text)
        if got is None:
            got = self.texts[text] = _ENCODE(text)
        return got

    def write_offsets(self, out: DataOutputSerializer, offsets: Sequence[int]) -> None:
        key = tuple(offsets)
        got = self.offsets.get(key)
        if got is None:
            once = DataOutputSerializer()
            _WRITE_OFFSETS(once, offsets)
            got = self.offsets[key] = once.get_copy_of_buffer()
        out.write(got)

    @contextlib.contextmanager
    def kept(self) -> Iterator[None]:
        io.encode_modified_utf8 = self.encode
        handles._write_offsets = self.write_offsets
        try:
            yield
        finally:
            io.encode_modified_utf8 = _ENCODE
            handles._write_offsets = _WRITE_OFFSETS


_ENCODE = io.encode_modified_utf8
_WRITE_OFFSETS = handles._write_offsets


@functools.cache
def _seed_parts(seed: bytes) -> tuple[bytes, bytes, list[bytes]]:
    """The seed's bytes before its operator count, after its operators, and of each operator."""
    meta = parse_metadata(seed)
    parts = [_operator_bytes(op, meta.version) for op in meta.operators]
    tail = meta.trailer if meta.version >= 4 else b""
    head = seed[:len(seed) - len(tail) - 4 - sum(map(len, parts))]
    if head + len(parts).to_bytes(4, "big") + b"".join(parts) + tail != serialize_metadata(meta):
        raise AssertionError("serialize_metadata is no longer head, operator count, operators, trailer")
    return head, tail, parts


@functools.cache
def _seed_pickle(seed: bytes) -> bytes:
    return pickle.dumps(parse_metadata(seed), pickle.HIGHEST_PROTOCOL)


def _parsed_seed(seed: bytes) -> CheckpointMetadata:
    """``parse_metadata(seed)``, as new objects: a pickle of the seed's one parse, unpickled (the
    same values and the same sharing, a fifth of the time)."""
    if not FAST:
        return parse_metadata(seed)
    meta: CheckpointMetadata = pickle.loads(_seed_pickle(seed))
    return meta


def mutator(edits: dict[str, Edit]) -> Callable[[bytes, random.Random], tuple[bytes, str]]:
    """A family's mutation: 1 to 12 of ``edits`` (one alone in a twentieth of the inputs: a single
    edit has few variants, soon all seen) on the parsed seed, written back as Flink bytes;
    an edit that changes nothing (a handle copied onto itself, a swap in a one-subtask operator)
    is drawn again (up to four times), so an input holds as many edits as it says, and one that
    ends as the seed (two swaps undoing each other) gets more, up to :data:`MAX_EDITS`: only a
    ``control`` input is the seed. The bytes after each edit are ``serialize_metadata``'s, written
    an operator at a time (:class:`_Writer`) unless the fast paths are off."""
    names = list(edits)

    def mutate(seed: bytes, r: random.Random) -> tuple[bytes, str]:
        if r.random() < CONTROL_RATE:
            return seed, "control"
        meta = _parsed_seed(seed)
        write: Callable[[CheckpointMetadata, Touched], bytes] = (
            _Writer(seed, meta) if FAST else lambda m, _: serialize_metadata(m))
        ops: list[str] = []
        out = seed
        for _ in range(r.choice((1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 6, 6, 7, 8, 8, 10, 12, 12))):
            for _ in range(4):  # an edit that changed nothing (a swap in a one-subtask operator): another
                op = r.choice(names)
                now = write(meta, edits[op](meta, r))
                if now != out:
                    ops.append(op)
                    out = now
                    break
        while out == seed and len(ops) < MAX_EDITS:
            ops.append(r.choice(names))
            out = write(meta, edits[ops[-1]](meta, r))
        return out, "+".join(ops)

    return mutate


def seeds() -> list[tuple[str, bytes]]:
    return [(n, (SAVEPOINTS / n / "savepoint" / "_metadata").read_bytes()) for n in SEEDS
            if (SAVEPOINTS / n / "savepoint").is_dir()]


def skeleton_seeds() -> list[tuple[str, bytes]]:
    return [(n, _skeleton_seed(n)) for n in SEEDS if (SAVEPOINTS / n / "savepoint").is_dir()]


__all__ = ["CONTAINMENT_EDITS", "REUSE_EDITS", "check_flink", "check_skeleton", "mutator", "seeds",
           "skeleton_seeds"]
