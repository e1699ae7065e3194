"""Hostile Flink savepoint directories, and a reader to run in a subprocess over them.

Each builder copies a real savepoint (tests/data/flink_savepoints) and breaks one thing an
attacker or an unlucky operator could: a handle path leaving the directory, a state file that is
a symlink to ``/dev/zero``, a FIFO or a directory, sizes and key-group offsets beyond the file.
``python -m tests.fuzz.faults DIR…`` reads everything in each DIR through the Flink reader
(operators, states, every batch) and prints one JSON line per DIR: the exit status the CLI would
give (the typed error's), its one-line message, or ``untyped`` with the traceback, or ``hang``
when a DIR takes longer than :data:`HANG_SECONDS` (``SIGALRM`` also interrupts a blocking open).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from statemorph.savepoint.flink import (
    ByteStreamHandle,
    FileHandle,
    FlinkSavepoint,
    RelativeFileHandle,
    parse_metadata,
    serialize_metadata,
)

SAVEPOINTS = Path(__file__).resolve().parents[1] / "data" / "flink_savepoints"
FILES = SAVEPOINTS / "kinds-rocksdb-p1-files-mp256" / "savepoint"  # keyed state in a file next to _metadata
INLINE = SAVEPOINTS / "kinds-hashmap-p1" / "savepoint"  # keyed state inline in _metadata


def _keyed(meta):  # type: ignore[no-untyped-def]
    """The first managed keyed-state handle of the savepoint (the stateful operator's subtask 0)."""
    for op in meta.operators:
        for st in op.subtasks or []:
            if st.managed_keyed is not None:
                return st.managed_keyed
    raise LookupError("no keyed state")


def _copy(source: Path, dst: Path) -> Path:
    shutil.copytree(source, dst)
    return dst


def _with_handle(source: Path, dst: Path, change: Callable[..., None]) -> Path:
    """A copy of ``source`` whose keyed handle went through ``change`` (in ``_metadata``)."""
    d = _copy(source, dst)
    meta = copy.deepcopy(parse_metadata((source / "_metadata").read_bytes()))
    change(_keyed(meta))
    (d / "_metadata").write_bytes(serialize_metadata(meta))
    return d


def _state_file(d: Path) -> Path:
    rel = _keyed(parse_metadata((d / "_metadata").read_bytes())).delegate
    assert isinstance(rel, RelativeFileHandle)
    return d / rel.relative_path


def _replace_state_file(source: Path, dst: Path, make: Callable[[Path], None]) -> Path:
    d = _copy(source, dst)
    f = _state_file(d)
    f.unlink()
    make(f)
    return d


def _set(**fields: object) -> Callable[..., None]:
    def change(h) -> None:  # type: ignore[no-untyped-def]
        for k, v in fields.items():
            setattr(h.delegate, k, v)
    return change


def _offsets(fn: Callable[[list[int], int], list[int]]) -> Callable[..., None]:
    def change(h) -> None:  # type: ignore[no-untyped-def]
        size = h.delegate.size if not isinstance(h.delegate, ByteStreamHandle) else len(h.delegate.data)
        h.offsets = fn(list(h.offsets), size)
    return change


def _first_nonzero(offsets: list[int], value: int) -> list[int]:
    i = next(i for i, o in enumerate(offsets) if o)
    offsets[i] = value
    return offsets


def _last_nonzero(offsets: list[int], value: int) -> list[int]:
    i = max(i for i, o in enumerate(offsets) if o)
    offsets[i] = value
    return offsets


def _absolute(target: str) -> Callable[..., None]:
    def change(h) -> None:  # type: ignore[no-untyped-def]
        h.delegate = FileHandle(target, h.delegate.size)
    return change


def _metadata_replaced(make: Callable[[Path], None]) -> Callable[[Path, Path], Path]:
    def build(source: Path, dst: Path) -> Path:
        d = _copy(source, dst)
        (d / "_metadata").unlink()
        make(d / "_metadata")
        return d
    return build


CASES: dict[str, Callable[[Path], Path]] = {
    "relative-path-leaves-dir": lambda t: _with_handle(FILES, t, _set(relative_path="../outside")),
    "relative-path-deep-escape": lambda t: _with_handle(FILES, t, _set(relative_path="a/../../../etc/passwd")),
    "absolute-path-dev-zero": lambda t: _with_handle(FILES, t, _absolute("/dev/zero")),
    "absolute-path-etc-passwd": lambda t: _with_handle(FILES, t, _absolute("/etc/passwd")),
    "state-file-symlink-dev-zero": lambda t: _replace_state_file(FILES, t, lambda f: os.symlink("/dev/zero", f)),
    "state-file-symlink-outside": lambda t: _replace_state_file(
        FILES, t, lambda f: os.symlink(str(_state_file(FILES).resolve()), f)),
    "state-file-fifo": lambda t: _replace_state_file(FILES, t, lambda f: os.mkfifo(f)),
    "state-file-directory": lambda t: _replace_state_file(FILES, t, lambda f: f.mkdir()),
    "state-file-missing": lambda t: _replace_state_file(FILES, t, lambda f: None),
    "state-file-truncated": lambda t: _replace_state_file(
        FILES, t, lambda f: f.write_bytes(_state_file(FILES).read_bytes()[:-100])),
    "size-beyond-file": lambda t: _with_handle(FILES, t, _set(size=_state_file(FILES).stat().st_size + 4096)),
    "size-2^62": lambda t: _with_handle(FILES, t, _set(size=1 << 62)),
    "size-negative": lambda t: _with_handle(FILES, t, _set(size=-1)),
    "offset-beyond-file": lambda t: _with_handle(FILES, t, _offsets(lambda o, n: _last_nonzero(o, n + 10))),
    "offset-2^62": lambda t: _with_handle(FILES, t, _offsets(lambda o, n: _last_nonzero(o, 1 << 62))),
    "offset-negative": lambda t: _with_handle(FILES, t, _offsets(lambda o, n: _first_nonzero(o, -5))),
    "offsets-decreasing": lambda t: _with_handle(FILES, t, _offsets(lambda o, n: list(reversed(o)))),
    "inline-offset-beyond-stream": lambda t: _with_handle(INLINE, t, _offsets(lambda o, n: _last_nonzero(o, n + 1))),
    "metadata-fifo": lambda t: _metadata_replaced(lambda f: os.mkfifo(f))(FILES, t),
    "metadata-symlink-dev-zero": lambda t: _metadata_replaced(lambda f: os.symlink("/dev/zero", f))(FILES, t),
    "metadata-directory": lambda t: _metadata_replaced(lambda f: f.mkdir())(FILES, t),
    "metadata-empty": lambda t: _metadata_replaced(lambda f: f.write_bytes(b""))(FILES, t),
}


def read_everything(path: str) -> int:
    """Every state of every operator, batch by batch; the number of rows read."""
    sp = FlinkSavepoint(path)
    rows = 0
    for op in sp.inspect().operators:
        for st in op.states:
            for batch in sp.iter_state_batches(op.uid or op.uid_hash, st.name):
                rows += batch.num_rows
    return rows


HANG_SECONDS = 60


class _Hang(BaseException):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Hang()


def judge_dir(path: str) -> dict[str, object]:
    from statemorph.errors import StatemorphError

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_SECONDS)
    try:
        return {"dir": path, "status": 0, "line": f"{read_everything(path)} rows"}
    except _Hang:
        return {"dir": path, "status": "hang", "line": f"no answer after {HANG_SECONDS} s"}
    except StatemorphError as e:
        return {"dir": path, "status": int(e.exit_code), "line": f"statemorph: error: {e}"}
    except Exception:  # noqa: BLE001  (reported to the test, which fails on it)
        return {"dir": path, "status": "untyped", "line": traceback.format_exc()}
    finally:
        signal.alarm(0)


def main(argv: list[str]) -> int:
    for path in argv:
        print(json.dumps(judge_dir(path)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
