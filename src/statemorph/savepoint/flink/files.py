"""Safe access to the files of a Flink savepoint directory.

Every path that comes out of ``_metadata`` is untrusted: a relative path must stay inside the
savepoint directory (no ``..``, no absolute path, no symlink leading out), and only regular files
are opened (a FIFO would block a reader forever, a device could be endless). Sizes declared in
``_metadata`` are checked against the real file before anything is read or allocated. An
absolute :class:`FileHandle` (written when the file system injected entropy into paths) is taken
by its file name inside the savepoint directory, so a relocated savepoint still reads and
nothing outside the directory is ever opened.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import TracebackType

from ...errors import FlinkSavepointError, SavepointPathError
from .handles import ByteStreamHandle, FileHandle, RelativeFileHandle, StreamHandle
from .metadata import METADATA_FILE_NAME

MAX_METADATA_BYTES = 1 << 30
"""A ``_metadata`` file larger than this is refused before it is read (inline state is capped at
1 MB per handle by Flink, so real files stay far below)."""


class StreamSource:
    """The bytes of one stream handle: random access by offset, bounds-checked."""

    size: int
    name: str

    def read_at(self, offset: int, n: int, what: str) -> bytes:
        if offset < 0 or n < 0 or offset + n > self.size:
            raise FlinkSavepointError(
                f"{self.name}: reading {what} needs bytes {offset}..{offset + n} but the stream has {self.size}"
            )
        return self._read(offset, n)

    def _read(self, offset: int, n: int) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        """Release the file descriptor, if any."""

    def __enter__(self) -> StreamSource:
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class InlineStream(StreamSource):
    def __init__(self, data: bytes, name: str) -> None:
        self.data, self.size, self.name = data, len(data), name

    def _read(self, offset: int, n: int) -> bytes:
        return self.data[offset : offset + n]


class FileStream(StreamSource):
    def __init__(self, fd: int, size: int, name: str) -> None:
        self.fd, self.size, self.name = fd, size, name

    def _read(self, offset: int, n: int) -> bytes:
        parts = []
        while n > 0:
            try:
                chunk = os.pread(self.fd, min(n, 1 << 30), offset)
            except OSError as e:
                raise FlinkSavepointError(f"{self.name}: reading at offset {offset} failed: {e.strerror}") from e
            if not chunk:
                raise FlinkSavepointError(f"{self.name}: the file shrank while being read (offset {offset})")
            parts.append(chunk)
            offset += len(chunk)
            n -= len(chunk)
        return b"".join(parts) if len(parts) != 1 else parts[0]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class SavepointDirectory:
    """A savepoint directory and the only way its files are opened."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise FlinkSavepointError(f"{self.path}: not a directory")
        self.root = Path(os.path.realpath(self.path))

    def read_metadata(self) -> bytes:
        fd, size = self._open_regular(self.root / METADATA_FILE_NAME, METADATA_FILE_NAME)
        try:
            if size > MAX_METADATA_BYTES:
                raise FlinkSavepointError(
                    f"{self.path / METADATA_FILE_NAME}: {size} bytes is larger than the {MAX_METADATA_BYTES}-byte limit"
                )
            return FileStream(fd, size, str(self.path / METADATA_FILE_NAME)).read_at(0, size, "_metadata")
        finally:
            os.close(fd)

    def relative_name(self, handle: FileHandle | RelativeFileHandle) -> str:
        """The checked path of a file handle, relative to the savepoint directory."""
        if isinstance(handle, RelativeFileHandle):
            rel = handle.relative_path
            parts = rel.split("/")
            if (not rel or rel.startswith("/") or "\\" in rel or "\x00" in rel
                    or any(p in ("", ".", "..") for p in parts)):
                raise SavepointPathError(f"{self.path}: state file path {rel!r} leaves the savepoint directory")
            return rel
        raw = handle.path
        name = raw.rstrip("/").rsplit("/", 1)[-1]
        if not name or name in (".", "..") or "\x00" in name or "\\" in name:
            raise SavepointPathError(f"{self.path}: absolute state file path {raw!r} has no usable file name")
        return name

    def resolve(self, handle: FileHandle | RelativeFileHandle) -> Path:
        rel = self.relative_name(handle)
        target = Path(os.path.realpath(self.root / rel))
        if os.path.commonpath([str(self.root), str(target)]) != str(self.root) or target == self.root:
            raise SavepointPathError(f"{self.path}: state file {rel!r} resolves outside the savepoint directory")
        return target

    def open_stream(self, handle: StreamHandle, where: str) -> StreamSource:
        if handle is None:
            raise FlinkSavepointError(f"{where}: the state handle has no data stream")
        if isinstance(handle, ByteStreamHandle):
            return InlineStream(handle.data, f"{where} (inline in _metadata)")
        target = self.resolve(handle)
        fd, size = self._open_regular(target, self.relative_name(handle))
        if size < handle.size:
            os.close(fd)
            raise FlinkSavepointError(
                f"{target}: the file has {size} bytes but _metadata records {handle.size} (truncated state file)"
            )
        return FileStream(fd, handle.size, str(target))

    def _open_regular(self, target: Path, label: str) -> tuple[int, int]:
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(target, flags)
        except FileNotFoundError:
            raise FlinkSavepointError(f"{self.path}: {label} is missing") from None
        except OSError as e:
            raise SavepointPathError(f"{self.path}: {label} cannot be opened as a regular file: {e.strerror}") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise SavepointPathError(f"{self.path}: {label} is not a regular file")
        return fd, st.st_size
