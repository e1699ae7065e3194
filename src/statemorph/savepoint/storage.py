"""Savepoints at URIs (``s3://``, ``gs://``, ``hdfs://``, ``abfs://``, ``file://``) through ``pyarrow.fs``.

Why staging, and why here: every reader and writer of statemorph guards a *local directory* (no
symlink out, regular files only, sizes checked before reading, a claim lock, one ``rename`` to
publish; :mod:`statemorph.savepoint.files`). Object stores have none of these primitives (no
symlinks, no locks, no rename), so instead of a second set of readers and writers, a remote
savepoint is copied to a private local directory, handled there by the same code, and a result is
published back. This module is that one boundary: :func:`local_source` and
:func:`local_destination` turn a location into a local path and back, and nothing else in
statemorph knows about URIs. The cost is local disk for the savepoint (and its result) while a
verb runs.

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
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..errors import OutputError, SavepointNotFoundError, UnsafeFileError, UsageError
from .files import CHUNK

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
        import pyarrow.fs as pafs

        try:
            fs, path = pafs.FileSystem.from_uri(uri)
        except (ValueError, OSError) as e:  # unknown scheme, missing credentials, no such bucket region...
            raise UsageError(f"cannot open {uri}: {e}") from None
        return cls(fs, path.rstrip("/"), uri.rstrip("/"))

    def files(self) -> list[tuple[str, int]]:
        """Every file under the location as (relative path, size); empty when nothing is there."""
        import pyarrow.fs as pafs

        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.path, recursive=True, allow_not_found=True))
        except OSError as e:
            raise UsageError(f"cannot list {self.uri}: {e}") from None
        prefix = self.path + "/"
        return sorted((i.path[len(prefix):], int(i.size)) for i in infos
                      if i.type == pafs.FileType.File and i.path.startswith(prefix))


def _safe_relative(rel: str, uri: str) -> Path:
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise UnsafeFileError(f"{uri}: object {rel!r} would land outside the savepoint; refusing it")
    return Path(*parts)


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


__all__ = ["METADATA_FILES", "Location", "is_uri", "local_destination", "local_source", "publish"]
