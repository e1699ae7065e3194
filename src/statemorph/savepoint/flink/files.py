"""Safe access to the files of a Flink savepoint directory.

Every path that comes out of ``_metadata`` is untrusted: a relative path must stay inside the
savepoint directory (no ``..``, no absolute path, no symlink leading out), and only regular files
are opened (a FIFO would block a reader forever, a device could be endless). Sizes declared in
``_metadata`` are checked against the real file before anything is read or allocated. An
absolute :class:`FileHandle` (written when the file system injected entropy into paths) is taken
by its file name inside the savepoint directory, so a relocated savepoint still reads and
nothing outside the directory is ever opened. The checks themselves are the shared ones of
:mod:`statemorph.savepoint.files` (the Parquet form uses the same), raised as Flink's error classes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from ...errors import FlinkSavepointError, SavepointPathError
from ..files import Closing, SafeFile, SeenFiles
from ..storage import Location, RemoteFile, RemoteSavepointDir, savepoint_dir
from .handles import ByteStreamHandle, FileHandle, RelativeFileHandle, StreamHandle, file_name
from .metadata import METADATA_FILE_NAME, CheckpointMetadata, OperatorState

MAX_METADATA_BYTES = 1 << 30
"""A ``_metadata`` file larger than this is refused before it is read (inline state is capped at
1 MB per handle by Flink, so real files stay far below)."""


class StreamSource(Closing):
    """The bytes of one stream handle: random access by offset, bounds-checked."""

    size: int
    name: str

    def read_at(self, offset: int, n: int, what: str) -> bytes:
        self._check(offset, n, what)
        return self._read(offset, n)

    def read_into(self, offset: int, out: memoryview, what: str) -> None:
        """``read_at(offset, len(out))`` written into ``out`` (a writable byte buffer): a local
        file reads straight into it, without a ``bytes`` in between."""
        self._check(offset, out.nbytes, what)
        self._read_into(offset, out)

    def _check(self, offset: int, n: int, what: str) -> None:
        if offset < 0 or n < 0 or offset + n > self.size:
            raise FlinkSavepointError(
                f"{self.name}: reading {what} needs bytes {offset}..{offset + n} but the stream has {self.size}"
            )

    def _read(self, offset: int, n: int) -> bytes:
        raise NotImplementedError

    def _read_into(self, offset: int, out: memoryview) -> None:
        out[:] = self._read(offset, out.nbytes)

    def close(self) -> None:
        """Release the file descriptor, if any."""


class InlineStream(StreamSource):
    def __init__(self, data: bytes, name: str) -> None:
        self.data, self.size, self.name = data, len(data), name

    def _read(self, offset: int, n: int) -> bytes:
        return self.data[offset : offset + n]


class FileStream(StreamSource):
    """A stream in a file of the savepoint, opened through :mod:`statemorph.savepoint.files`
    (a regular file inside the directory whose real size is the one ``_metadata`` records), or
    through :mod:`statemorph.savepoint.storage` for a remote savepoint (the same checks; only the
    byte ranges read are fetched)."""

    def __init__(self, file: SafeFile | RemoteFile, name: str) -> None:
        self.file, self.size, self.name = file, file.size, name

    def _read(self, offset: int, n: int) -> bytes:
        return self.file.read_range(offset, n)

    def _read_into(self, offset: int, out: memoryview) -> None:
        self.file.read_range_into(offset, out)

    def close(self) -> None:
        self.file.close()


class SavepointDirectory:
    """A Flink savepoint directory and the only way its files are opened: by the shared
    :class:`~statemorph.savepoint.files.SavepointDir` (regular files only, inside the directory,
    sizes checked against ``_metadata`` before a read), with Flink's error classes; a URI or a
    :class:`~statemorph.savepoint.storage.Location` is opened in place with the same checks
    (:class:`~statemorph.savepoint.storage.RemoteSavepointDir`)."""

    def __init__(self, path: str | os.PathLike[str] | Location) -> None:
        self.files = savepoint_dir(path, unsafe=SavepointPathError, damaged=FlinkSavepointError)
        self.path: Path | str = self.files.path

    @property
    def location(self) -> Location | None:
        """The remote location of the savepoint, None for a local directory."""
        return self.files.location if isinstance(self.files, RemoteSavepointDir) else None

    def read_metadata(self) -> bytes:
        return self.files.read_small(METADATA_FILE_NAME, MAX_METADATA_BYTES)

    def relative_name(self, handle: FileHandle | RelativeFileHandle) -> str:
        """The checked path of a file handle, relative to the savepoint directory (:func:`.handles.file_name`)."""
        return file_name(handle, str(self.path))

    def resolve(self, handle: FileHandle | RelativeFileHandle) -> Path:
        """The real path of a file handle's file in a local savepoint; one that leads out of the
        directory (through a symlink) is refused."""
        if isinstance(self.files, RemoteSavepointDir):
            raise TypeError(f"{self.path} is remote: its files have no local path")
        return Path(self.files.resolve(self.relative_name(handle)))

    def open(self, handle: FileHandle | RelativeFileHandle) -> SafeFile | RemoteFile:
        """The handle's file, open, refused unless it is a regular file inside the directory of
        exactly the size ``_metadata`` records (see :func:`~statemorph.savepoint.files.open_regular`)."""
        return self.files.open(self.relative_name(handle), size=handle.size, recorded_in=METADATA_FILE_NAME)

    def open_stream(self, handle: StreamHandle, where: str) -> StreamSource:
        if handle is None:
            raise FlinkSavepointError(f"{where}: the state handle has no data stream")
        if isinstance(handle, ByteStreamHandle):
            return InlineStream(handle.data, f"{where} (inline in _metadata)")
        f = self.open(handle)
        return FileStream(f, f.label)

    def carried_files(self, meta: CheckpointMetadata, exclude: set[str]) -> dict[str, int | None]:
        """What a rewrite or a conversion carries over, by relative name: every file ``meta``'s
        handles reference (with the size ``_metadata`` records, checked when it is opened) and
        any other regular file next to ``_metadata`` (no recorded size), except ``exclude``."""
        out: dict[str, int | None] = {}
        for h in file_handles(meta.operators):
            out[self.relative_name(h)] = h.size
        for name in self.files.top_files():
            if name != METADATA_FILE_NAME:
                out.setdefault(name, None)
        return {rel: size for rel, size in sorted(out.items()) if rel not in exclude}

    def check_distinct(self, meta: CheckpointMetadata) -> None:
        """Every file the handles of ``meta`` name is a different file: ``_metadata`` already
        refuses one name used twice; here two names reaching one inode (a hard link, a symlink
        inside the savepoint) are refused too, before anything is read or written (the Parquet
        form's :class:`~statemorph.savepoint.files.SeenFiles` rule). A remote store has neither;
        a missing file is refused when it is opened."""
        if isinstance(self.files, RemoteSavepointDir):
            return
        seen = SeenFiles(SavepointPathError)
        for h in file_handles(meta.operators):
            rel = self.relative_name(h)
            try:
                st = os.stat(self.files.resolve(rel))
            except OSError:
                continue
            seen.add_identity((st.st_dev, st.st_ino), f"{self.path}/{rel}")

    def relativize(self, meta: CheckpointMetadata) -> None:
        """Absolute file handles become relative ones: a new savepoint lives somewhere else."""
        for op in meta.operators:
            for st in op.subtasks or []:
                for h in (st.managed_operator, st.raw_operator, st.managed_keyed, st.raw_keyed):
                    if h is not None and isinstance(h.delegate, FileHandle):
                        h.delegate = RelativeFileHandle(self.relative_name(h.delegate), h.delegate.size)


def file_handles(operators: Iterable[OperatorState]) -> Iterator[FileHandle | RelativeFileHandle]:
    """Every file handle of every subtask of ``operators``."""
    for op in operators:
        for st in op.subtasks or []:
            for h in (st.managed_operator, st.raw_operator, st.managed_keyed, st.raw_keyed):
                if h is not None and isinstance(h.delegate, (FileHandle, RelativeFileHandle)):
                    yield h.delegate
