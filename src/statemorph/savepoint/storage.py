"""Savepoints at URIs (``s3://``, ``gs://``, ``hdfs://``, ``abfs://``, ``file://``) through ``pyarrow.fs``.

This module is the one boundary between statemorph and remote filesystems: nothing else in
statemorph opens a URI. It offers two ways to handle a remote savepoint.

**Direct access** (the Spark engine migrating a Flink savepoint): the files are read and written
where they are, by whichever process needs them.

- :class:`RemoteSavepointDir` is :class:`~statemorph.savepoint.files.SavepointDir` for a prefix:
  a path from metadata is a checked relative name (no ``..``, no empty component), only objects
  that the filesystem reports as regular files are opened, the size metadata records is
  compared with the real size before a byte is read, and :class:`RemoteFile` reads only the
  byte ranges asked for (``read_at``: one ranged GET on S3), bounded by that size.
- :class:`NewFile` writes a new file front to back into a local directory or under a prefix;
  :func:`open_written` reads back, with its recorded size checked, what a task wrote.
- :class:`StagedPrefix` is :class:`~statemorph.savepoint.files.StagedDirectory` for a store
  without rename: the destination prefix must be empty; data files are written at their final
  names, scratch files (a Spark task's parts) under the temporary prefix :data:`SCRATCH`; the
  commit removes the temporary prefix and then writes the metadata file LAST (one object PUT,
  atomic on S3, GCS and Azure), so a prefix without it is never taken for a savepoint; a failure
  removes everything written under the destination.
- :func:`copy_server_side` carries an unchanged file inside the store (``copy_file``: S3
  CopyObject) when source and destination are on one filesystem; :func:`stream_copy` otherwise.

**Staging** (every other verb): every reader and writer of statemorph guards a *local
directory*, so a remote savepoint is copied to a private local directory, handled there by the
same code, and a result is published back. :func:`local_source` and :func:`local_destination`
turn a location into a local path and back. The cost is local disk for the savepoint (and its
result) while a verb runs.

A ``file://`` URI is simply its local path (no copy, every local guarantee).

Reading (:func:`local_source`): every object under the prefix is streamed to the local copy; an
object key that would land outside it (``..``, an empty component) is refused, as a symlink out
of a local savepoint is.

Publishing (:func:`local_destination`), the write protocol on a store without rename:

1. the destination prefix must hold no object (nothing is ever overwritten);
2. the savepoint is written locally, complete, by the usual atomic writer;
3. every file is uploaded under the prefix, *except* the top-level metadata file (``_metadata``
   for Flink's form, ``_metadata.json`` for the Parquet form);
4. the metadata file is uploaded last. Until then no reader (statemorph or Flink) sees a
   savepoint at the prefix, only orphan data files; a single object PUT is atomic on S3, so the
   savepoint appears complete at once;
5. if any upload fails, the objects already uploaded are deleted (best effort: a crash of the
   process itself can leave data objects without a metadata file, which no reader takes for a
   savepoint, and which a later run refuses to overwrite until they are removed).

Unlike the local claim lock, nothing stops two runs that publish to the same prefix at the same
moment: give each run its own destination.

Credentials and endpoints come from pyarrow's usual sources: for S3 the AWS SDK chain
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_PROFILE``, instance
roles), ``AWS_DEFAULT_REGION`` / ``AWS_REGION``, and ``AWS_ENDPOINT_URL`` (or
``AWS_ENDPOINT_URL_S3``) for an S3-compatible server such as MinIO; for GCS, HDFS and Azure,
pyarrow's own (``GOOGLE_APPLICATION_CREDENTIALS``, ``HADOOP_HOME`` / ``CLASSPATH``, ``AZURE_*``).
A :class:`Location` travels to Spark executors pickled with its filesystem (pyarrow keeps the
endpoint and region resolved on the driver; credentials given explicitly travel with it, those
from the SDK chain are resolved again by each executor from its own environment).
"""

from __future__ import annotations

# pyarrow.fs is imported where a URI is opened, not here: it costs ~50 ms (every cloud filesystem
# binding), which a run on local paths and every Spark worker importing this module would pay.
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlparse

from ..errors import OutputError, SavepointError, SavepointNotFoundError, UnsafeFileError, UsageError
from .files import (
    CHUNK,
    Closing,
    SafeFile,
    SavepointDir,
    check_range,
    check_relative_path,
    inside,
    open_regular,
    output_error,
    read_exactly,
    write_new_file,
)

#: the top-level files whose presence makes a prefix a savepoint; uploaded last
METADATA_FILES = ("_metadata", "_metadata.json")


def is_uri(location: str | os.PathLike[str]) -> bool:
    """True for ``scheme://...`` (``file://`` included); a plain path, relative or absolute, is local."""
    text = os.fspath(location)
    return "://" in text and bool(urlparse(text).scheme)


def _local_path(location: str | os.PathLike[str]) -> str | None:
    """The local path of a plain path or a ``file://`` URI (which then keeps every guarantee of a
    local directory: claim, rename), or None for a remote location."""
    if not is_uri(location):
        return os.fspath(location)
    parsed = urlparse(os.fspath(location))
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return parsed.path
    return None


@dataclass(frozen=True)
class Location:
    """A URI opened with ``pyarrow.fs``: the filesystem, the path inside it, the URI as given."""

    fs: Any
    path: str
    uri: str

    @classmethod
    def open(cls, uri: str) -> Location:
        import pyarrow.fs as pafs  # on first use: see the note above the imports

        try:
            fs, path = pafs.FileSystem.from_uri(uri)
        except (ValueError, OSError) as e:  # unknown scheme, missing credentials, no such bucket region...
            raise UsageError(f"cannot open {uri}: {e}") from None
        return cls(fs, path.rstrip("/"), uri.rstrip("/"))

    def files(self) -> list[tuple[str, int]]:
        """Every file under the location as (relative path, size); empty when nothing is there."""
        import pyarrow.fs as pafs  # on first use: see the note above the imports

        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.path, recursive=True, allow_not_found=True))
        except OSError as e:
            raise UsageError(f"cannot list {self.uri}: {e}") from None
        prefix = self.path + "/"
        return sorted((i.path[len(prefix):], int(i.size)) for i in infos
                      if i.type == pafs.FileType.File and i.path.startswith(prefix))

    @classmethod
    def of(cls, location: str | os.PathLike[str] | Location) -> Location | None:
        """``location`` opened when it is remote (a URI other than a local ``file://``, or a
        Location already), else None: the caller handles a local path as it always did."""
        if isinstance(location, Location):
            return location
        if _local_path(location) is not None:
            return None
        return cls.open(os.fspath(location))

    def child(self, rel: str) -> Location:
        """The location of ``rel`` (a checked relative name) under this one."""
        return Location(self.fs, f"{self.path}/{rel}", f"{self.uri}/{rel}")

    def kind(self) -> Any:
        """``pyarrow.fs.FileType`` of this location (NotFound, File, Directory...)."""
        try:
            return self.fs.get_file_info(self.path).type
        except OSError as e:
            raise UsageError(f"cannot read {self.uri}: {e}") from None

    def same_filesystem(self, other: Location) -> bool:
        """Whether a server-side copy from ``other`` to here is possible (one filesystem)."""
        if self.fs is other.fs:
            return True
        try:
            return bool(self.fs.equals(other.fs))
        except (TypeError, AttributeError):
            return False

    def remove_tree(self) -> None:
        """Delete every object under this location (best effort: a failure here must not hide
        the error that made the caller clean up)."""
        try:
            self.fs.delete_dir_contents(self.path, missing_dir_ok=True)
        except OSError:
            pass
        try:
            self.fs.delete_dir(self.path)
        except OSError:
            pass


def _safe_relative(rel: str, uri: str) -> Path:
    return Path(*check_relative_path(rel, f"{uri}: object {rel!r} would land outside the savepoint",
                                     UnsafeFileError).split("/"))


@contextmanager
def local_source(location: str | os.PathLike[str]) -> Iterator[str]:
    """A local path for the savepoint at ``location``: the path itself, or a private local copy
    of a remote savepoint (removed afterwards). The copy keeps the savepoint's name."""
    local = _local_path(location)
    if local is not None:
        yield local
        return
    loc = Location.open(os.fspath(location))
    files = loc.files()
    if not files:
        raise SavepointNotFoundError(f"savepoint {loc.uri} not found: no object under that prefix")
    with tempfile.TemporaryDirectory(prefix="statemorph-src-") as tmp:
        root = Path(tmp) / (Path(loc.path).name or "savepoint")
        for rel, _size in files:
            target = root / _safe_relative(rel, loc.uri)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with loc.fs.open_input_stream(f"{loc.path}/{rel}") as src, open(target, "wb") as dst:
                    while chunk := src.read(CHUNK):
                        dst.write(chunk)
            except OSError as e:
                raise UsageError(f"cannot read {loc.uri}/{rel}: {e}") from None
        yield str(root)


@contextmanager
def local_destination(location: str | os.PathLike[str]) -> Iterator[str]:
    """A local path to write the savepoint for ``location`` into: the path itself, or a private
    local directory whose result is published to the remote prefix (module docstring) when the
    block ends without an error. A remote prefix that already holds objects is refused first."""
    local_path = _local_path(location)
    if local_path is not None:
        yield local_path
        return
    loc = Location.open(os.fspath(location))
    if loc.files():
        raise UsageError(f"--out {loc.uri} already exists; savepoints are never overwritten")
    with tempfile.TemporaryDirectory(prefix="statemorph-dst-") as tmp:
        local = Path(tmp) / (Path(loc.path).name or "savepoint")
        yield str(local)
        if local.exists():
            publish(local, loc)


def publish(local: Path, loc: Location) -> None:
    """Upload the savepoint at ``local`` under ``loc``, its top-level metadata file last."""
    rels = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
    ordered = [r for r in rels if r not in METADATA_FILES] + [r for r in rels if r in METADATA_FILES]
    done: list[str] = []
    try:
        for rel in ordered:
            with open(local / rel, "rb") as src, loc.fs.open_output_stream(f"{loc.path}/{rel}") as dst:
                shutil.copyfileobj(src, dst, CHUNK)
            done.append(rel)
    except (OSError, KeyboardInterrupt) as e:
        for rel in reversed(done):
            try:
                loc.fs.delete_file(f"{loc.path}/{rel}")
            except OSError:
                pass
        if isinstance(e, KeyboardInterrupt):
            raise
        raise OutputError(f"cannot write {loc.uri}: {e}; the objects written so far were removed") from None



# -- direct access: read byte ranges, write files, commit a prefix --------------------------------

Target = Path | Location
"""Where new files go: a local directory, or a prefix of a remote filesystem."""

SCRATCH = ".statemorph-tmp"
"""The temporary prefix under a destination where tasks write scratch files (parts); removed
before the metadata file is written, and with everything else when a run fails."""


READ_AHEAD = 8 << 20
"""Bytes one request fetches once a remote file is read front to back (key group after key
group): S3 serves ranges of a few MiB at full speed, and one request per small key group would
spend the time waiting. The first read of a file, and any read that jumps, fetches exactly the
range asked for (a keyed-state header is read alone)."""


class RemoteFile(Closing):
    """An object of known size, read by byte range: :class:`~statemorph.savepoint.files.SafeFile`
    for a remote filesystem (``read_at``: one ranged GET on S3). Only the ranges asked for are
    fetched, plus up to :data:`READ_AHEAD` bytes ahead while the reads are sequential."""

    def __init__(self, f: Any, size: int, label: str, path: str,
                 damaged: type[SavepointError] = SavepointError) -> None:
        self.f, self.size, self.label, self.damaged = f, size, label, damaged
        self.identity = ("remote", path)
        self._buf, self._buf_start, self._next = b"", 0, -1

    def read_range(self, offset: int, n: int, what: str = "bytes") -> bytes:
        """Exactly ``n`` bytes from ``offset``; refused before any request when the range does not
        lie inside the object's checked size."""
        check_range(self, offset, n, what)
        sequential, self._next = offset == self._next, offset + n
        at = offset - self._buf_start
        if 0 <= at and offset + n <= self._buf_start + len(self._buf):
            return self._buf[at:at + n]
        if sequential and n < READ_AHEAD:
            self._buf, self._buf_start = self._fetch(offset, min(self.size, offset + READ_AHEAD) - offset), offset
            return self._buf[:n]
        return self._fetch(offset, n)

    def _fetch(self, offset: int, n: int) -> bytes:
        return read_exactly(self.f.read_at, offset, n, self.label, self.damaged)

    def chunks(self, chunk: int = CHUNK) -> Iterator[bytes]:
        """The object's bytes from 0 to ``size`` in ranges of at most ``chunk``."""
        offset = 0
        while offset < self.size:
            b = self.read_range(offset, min(chunk, self.size - offset))
            offset += len(b)
            yield b

    def copy_to(self, target: str | os.PathLike[str]) -> str:
        """Copy the object to a NEW local file chunk by chunk, hashing on the way; returns the
        sha256 of what was copied (as :meth:`SafeFile.copy_to`; write failures are OSErrors)."""
        return write_new_file(self.chunks(), target)

    def read_range_into(self, offset: int, out: memoryview, what: str = "bytes") -> None:
        """:meth:`read_range` into ``out`` (as :meth:`SafeFile.read_range_into`; a ranged read
        arrives as bytes, so this one copies)."""
        out[:] = self.read_range(offset, out.nbytes, what)

    def close(self) -> None:
        self.f.close()


def _open_remote(loc: Location, label: str, size: int | None, recorded_in: str,
                 unsafe: type[UnsafeFileError], damaged: type[SavepointError]) -> RemoteFile:
    """The object at ``loc``, refused (before a byte is read) unless the filesystem reports a
    regular file of the recorded size; the size of the opened file is checked again."""
    import pyarrow.fs as pafs  # on first use: see the note above the imports

    try:
        info = loc.fs.get_file_info(loc.path)
    except OSError as e:
        raise damaged(f"{label}: cannot be read: {e}") from None
    if info.type == pafs.FileType.NotFound:
        raise damaged(f"{label}: file listed in {recorded_in} is missing")
    if info.type != pafs.FileType.File:
        raise unsafe(f"{label}: is not a regular file ({info.type.name.lower()}); refused")
    if size is not None and info.size != size:
        raise damaged(f"{label}: size {info.size} != {size} recorded in {recorded_in} (truncated or replaced)")
    try:
        f = loc.fs.open_input_file(loc.path)
    except OSError as e:
        raise damaged(f"{label}: cannot be read: {e}") from None
    real = f.size()
    if real != info.size:
        f.close()
        raise damaged(f"{label}: was replaced while being opened ({info.size} then {real} bytes); refused")
    return RemoteFile(f, real, label, loc.path, damaged)


class RemoteSavepointDir:
    """:class:`~statemorph.savepoint.files.SavepointDir` for a savepoint under a remote prefix:
    the same interface (``open``, ``read_small``, ``top_files``) and the same refusals, raised as
    the format's error classes. Object stores have no symlinks; a name from metadata is checked
    to stay under the prefix (the format checks it too)."""

    def __init__(self, location: Location, *, unsafe: type[UnsafeFileError] = UnsafeFileError,
                 damaged: type[SavepointError] = SavepointError) -> None:
        import pyarrow.fs as pafs  # on first use: see the note above the imports

        self.location = location
        self.path = location.uri
        self.unsafe, self.damaged = unsafe, damaged
        if location.kind() != pafs.FileType.Directory:
            raise SavepointNotFoundError(f"savepoint {location.uri} not found: no object under that prefix")

    def resolve(self, rel: str) -> Location:
        _safe_relative(rel, self.path)
        return self.location.child(rel)

    def open(self, rel: str, *, size: int | None = None, recorded_in: str = "the metadata") -> RemoteFile:
        """Open the object ``rel`` under the prefix (see :func:`_open_remote`)."""
        return _open_remote(self.resolve(rel), f"{self.path}/{rel}", size, recorded_in, self.unsafe, self.damaged)

    def read_small(self, rel: str, limit: int, recorded_in: str = "the savepoint") -> bytes:
        """All bytes of a small object (metadata), refused above ``limit`` bytes before reading."""
        with self.open(rel, recorded_in=recorded_in) as f:
            if f.size > limit:
                raise self.damaged(f"{f.label}: {f.size} bytes exceeds the {limit}-byte limit")
            return f.read_range(0, f.size)

    def top_files(self) -> list[str]:
        """Names of the regular files directly under the prefix."""
        import pyarrow.fs as pafs  # on first use: see the note above the imports

        try:
            infos = self.location.fs.get_file_info(pafs.FileSelector(self.location.path, recursive=False))
        except OSError as e:
            raise self.damaged(f"{self.path}: cannot be listed: {e}") from None
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.File)


def savepoint_dir(path: str | os.PathLike[str] | Location, *, unsafe: type[UnsafeFileError] = UnsafeFileError,
                  damaged: type[SavepointError] = SavepointError) -> SavepointDir | RemoteSavepointDir:
    """The savepoint directory at ``path``: local (:class:`SavepointDir`) or remote."""
    local = None if isinstance(path, Location) else _local_path(path)
    if local is not None:
        return SavepointDir(local, unsafe=unsafe, damaged=damaged)
    return RemoteSavepointDir(path if isinstance(path, Location) else Location.open(os.fspath(path)), unsafe=unsafe,
                              damaged=damaged)


def open_written(target: Target, rel: str, size: int, damaged: type[SavepointError] = SavepointError
                 ) -> SafeFile | RemoteFile:
    """A file a task wrote under ``target`` (a part), with the size it reported checked first."""
    if isinstance(target, Location):
        return _open_remote(target.child(rel), f"{target.uri}/{rel}", size, "the task that wrote it",
                            UnsafeFileError, damaged)
    return open_regular(target / rel, size=size, recorded_in="the task that wrote it", damaged=damaged)


def remove_file(target: Target, rel: str) -> None:
    """Delete ``rel`` under ``target`` if it is there."""
    if isinstance(target, Location):
        import pyarrow.fs as pafs  # on first use: see the note above the imports

        path = target.child(rel).path
        if target.fs.get_file_info(path).type != pafs.FileType.NotFound:
            target.fs.delete_file(path)
        return
    (target / rel).unlink(missing_ok=True)


def scratch(target: Target) -> Target:
    """Where tasks writing into ``target`` put their scratch files: ``.parts`` inside a local
    temporary directory, :data:`SCRATCH` under a remote destination."""
    return target.child(SCRATCH) if isinstance(target, Location) else target / ".parts"


def remove_scratch(target: Target) -> None:
    """Remove :func:`scratch` of ``target`` (empty by then: tasks remove the parts they consumed)."""
    where = scratch(target)
    if isinstance(where, Location):
        where.remove_tree()
    else:
        os.rmdir(where)


WRITEBACK_BYTES = 64 << 20
"""Written bytes after which a local file asks the OS to start writing them to disk."""
_WRITEBACK = ThreadPoolExecutor(max_workers=1, thread_name_prefix="statemorph-writeback")
"""Where the OS is asked to write a file's pages: asking can wait for the disk's queue (tenths of a
second on a busy disk), which the thread that keeps a stream's order must not."""


class NewFile:
    """A new file ``rel`` under ``target``, written front to back: a local file (created
    exclusively, its pages handed to the disk as it grows, fsynced by :meth:`finish`) or an
    object (uploaded as it is written, complete at :meth:`finish`). Write failures are one
    :class:`~statemorph.errors.OutputError` naming the file."""

    def __init__(self, target: Target, rel: str) -> None:
        self.rel = check_relative_path(rel, "new file", UnsafeFileError)  # never lands outside ``target``
        self.target = target
        if isinstance(target, Location):
            self.label = f"{target.uri}/{rel}"
            try:
                self._f: Any = target.fs.open_output_stream(target.child(rel).path)
            except OSError as e:
                raise output_error(e, self.label) from e
        else:
            path = target / rel
            self.label = str(path)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._f = open(path, "xb")  # noqa: SIM115 (closed by finish/abort)
            except OSError as e:
                raise output_error(e, path) from e
        self.pos = 0
        self._flushed = 0
        self._writeback: Future[None] | None = None

    @property
    def closed(self) -> bool:
        return bool(self._f.closed)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        try:
            self._f.write(data)
        except OSError as e:
            raise output_error(e, self.label) from e
        self.pos += len(data)
        if not isinstance(self.target, Location) and self.pos - self._flushed >= WRITEBACK_BYTES:
            self._start_writeback()

    def writer_at(self) -> Callable[[int, Any], None] | None:
        """A function writing a buffer at an offset of this local file, from any thread
        (``pwrite``; what was written so far is flushed first), for bytes made in parallel whose
        places are known (:class:`~statemorph.bulk.chunks.PlacedInOrder`); the writer then
        counts them with :meth:`advance`. None for an object, which is written front to back (and
        where the OS has no ``pwrite``)."""
        if isinstance(self.target, Location) or not hasattr(os, "pwrite"):
            return None
        try:
            self._f.flush()
        except OSError as e:
            raise output_error(e, self.label) from e
        fd = self._f.fileno()

        def write_at(offset: int, data: Any) -> None:
            view = memoryview(data).cast("B")
            try:
                while view.nbytes:
                    n = os.pwrite(fd, view, offset)
                    view, offset = view[n:], offset + n
            except OSError as e:
                raise output_error(e, self.label) from e

        return write_at

    def advance(self, n: int) -> None:
        """Count ``n`` bytes that ``writer_at``'s function wrote after the last counted byte."""
        self.pos += n
        if self.pos - self._flushed >= WRITEBACK_BYTES:
            self._start_writeback()

    def _start_writeback(self) -> None:
        """Hand what was written so far to the disk now, without waiting for it: the final fsync
        then finds most of the file already written, and the disk works while the caller
        produces the next bytes. ``POSIX_FADV_DONTNEED`` starts the writeback of the range's
        dirty pages on Linux (and drops the pages already clean: nothing reads them back)."""
        self._f.flush()
        if hasattr(os, "posix_fadvise"):
            self._wait_writeback()  # one request at a time per file: a slow disk slows the writer
            self._writeback = _WRITEBACK.submit(os.posix_fadvise, self._f.fileno(), self._flushed,
                                                self.pos - self._flushed, os.POSIX_FADV_DONTNEED)
        self._flushed = self.pos

    def _wait_writeback(self) -> None:
        """Wait for the writeback requested last (on the :data:`_WRITEBACK` thread); its error
        is raised here."""
        pending, self._writeback = self._writeback, None
        if pending is not None:
            pending.result()

    def finish(self) -> None:
        """Make the file durable and close it."""
        try:
            if not isinstance(self.target, Location):
                self._wait_writeback()
                self._f.flush()
                os.fsync(self._f.fileno())
            self._f.close()
        except OSError as e:
            raise output_error(e, self.label) from e

    def read_back(self) -> bytes:
        """The finished file's bytes (a small file moving into metadata)."""
        try:
            if isinstance(self.target, Location):
                with self.target.fs.open_input_stream(self.target.child(self.rel).path) as f:
                    data = f.read()
                return bytes(data)
            return (self.target / self.rel).read_bytes()
        except OSError as e:
            raise output_error(e, self.label, "read back") from e

    def remove(self) -> None:
        try:
            remove_file(self.target, self.rel)
        except OSError as e:
            raise output_error(e, self.label, "remove") from e

    def abort(self) -> None:
        """Close (a flush may fail again: the file goes anyway) and remove what was written."""
        try:
            self._wait_writeback()
        except OSError:
            pass
        try:
            self._f.close()
        except OSError:
            pass
        try:
            remove_file(self.target, self.rel)
        except OSError:
            pass


def copy_server_side(source: Location, target: Target, rel: str, size: int) -> bool:
    """Copy ``source`` to ``rel`` under ``target`` inside the store (``copy_file``: S3
    CopyObject; no byte passes through this process) when both are on one remote filesystem and
    the store accepts it (S3 copies at most 5 GiB in one request); the copy's size is checked.
    False when the file must be streamed instead (:func:`stream_copy`)."""
    if not isinstance(target, Location) or not target.same_filesystem(source):
        return False
    dst = target.child(rel)
    try:
        target.fs.copy_file(source.path, dst.path)
        return bool(target.fs.get_file_info(dst.path).size == size)
    except OSError:
        return False


def stream_copy(source: SafeFile | RemoteFile, target: Target, rel: str) -> None:
    """Copy an opened, checked source file to a new file ``rel`` under ``target``, chunk by chunk
    through this process."""
    if not isinstance(target, Location):
        path = inside(target, rel, "copied file", UnsafeFileError)
        path.parent.mkdir(parents=True, exist_ok=True)
        source.copy_to(path)
        return
    out = NewFile(target, rel)
    try:
        for b in source.chunks():
            out.write(b)
        out.finish()
    except BaseException:
        out.abort()
        raise


class StagedPrefix:
    """A savepoint that appears under a remote prefix complete or not at all: the object-store
    form of :class:`~statemorph.savepoint.files.StagedDirectory` (module docstring).

    Files are written at their final names under :attr:`temp` (the destination itself: a
    store has no rename), scratch files under :data:`SCRATCH`; :meth:`commit` removes the
    scratch prefix and writes the metadata file last. Leaving the ``with`` block by an exception
    (or without a commit) removes every object written under the destination."""

    def __init__(self, dst: Location, *, source: Location | None = None) -> None:
        if dst.files():
            raise UsageError(f"--out {dst.uri} already exists; savepoints are never overwritten")
        if source is not None and dst.same_filesystem(source):
            inside = dst.path == source.path or dst.path.startswith(source.path.rstrip("/") + "/")
            if inside:
                raise UsageError(f"the output {dst.uri} is inside the source savepoint {source.uri}; "
                                 f"write it somewhere else")
        self.location = dst
        self.temp = dst
        self.state = "open"

    def commit(self, metadata_name: str, data: bytes) -> None:
        """Remove the scratch prefix, then write the metadata file: the savepoint exists from
        that one PUT on."""
        if self.state != "open":
            raise SavepointError(f"the output {self.location.uri} is {self.state}")
        scratch(self.location).remove_tree()  # type: ignore[union-attr]
        out = NewFile(self.location, metadata_name)
        try:
            out.write(data)
            out.finish()
        except BaseException:
            out.abort()
            raise
        self.state = "committed"

    def abort(self) -> None:
        """Remove everything written under the destination (it held nothing when we began)."""
        if self.state == "open":
            self.state = "aborted"
            self.location.remove_tree()

    def __enter__(self) -> StagedPrefix:
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None) -> None:
        self.abort()


__all__ = ["METADATA_FILES", "SCRATCH", "Location", "NewFile", "RemoteFile", "RemoteSavepointDir", "StagedPrefix",
           "Target", "copy_server_side", "is_uri", "local_destination", "local_source", "open_written", "publish",
           "remove_file", "remove_scratch", "savepoint_dir", "scratch", "stream_copy"]
