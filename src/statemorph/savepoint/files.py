"""File safety shared by every savepoint format: reading an untrusted directory, writing atomically.

Why one module: a savepoint directory is input from anywhere (a bucket, a colleague, an attacker),
and its metadata names the files to read with their sizes. Every format needs the same defences,
so they live here once (the Parquet form uses them; Flink's canonical form can reuse them):

Reading (:class:`SavepointDir`, :func:`open_regular`, :class:`SafeFile`)
    - a path from metadata is a plain relative path (:func:`check_relative_path`, the one rule
      for every path read from any input: no absolute path, no ``..``, no empty part, no
      backslash), and each file is used once (:class:`UsedOnce`);
    - a path from metadata must resolve (``realpath``) inside the savepoint directory; a file or a
      state directory that is a symlink leading out is refused before it is opened, and the
      message never says anything about the outside file (no size, no checksum);
    - only regular files are opened: ``os.lstat`` first, then ``open(O_NOFOLLOW | O_NONBLOCK)``
      and ``fstat`` on the descriptor (same inode, still regular), so a FIFO can never make a
      reader wait and a device is never read;
    - the size metadata records is compared with the real size before any byte is read, so a
      hostile ``size`` (``2**63``, ``10**30``) is a typed error, never an allocation;
    - bytes are streamed in bounded chunks (sha256 while streaming, copies chunk by chunk);
      nothing reads a whole file into memory.

Writing (:class:`StagedDirectory`)
    - the destination is *claimed* first: an ``flock``-ed file ``.<dst>.statemorph-claim`` next
      to it, so two runs writing one destination give one result and one clear
      :class:`~statemorph.errors.DestinationBusyError`; the kernel drops the lock when a process
      dies, so a claim left by ``kill -9`` is taken over by the next run. A claim is only ever
      written when this run created it (``O_EXCL``): an existing claim file is never truncated
      or written through (a symlink, a hard link or anything but a regular file is refused; a
      stale one is locked, unlinked and created anew);
    - files are written into ``.<dst>.statemorph-tmp-<pid>-<random>`` (a recognisable name with
      the owner's pid), removed on failure and on SIGINT / SIGTERM (handlers installed only while a
      staged directory is open, the previous ones restored and the signal re-delivered to them
      after the cleanup); a later run for the same destination removes the ones whose pid is dead;
    - the directory appears at the destination by one ``rename`` after fsync, complete or not at
      all; a destination inside the source savepoint is refused;
    - a file-system failure (ENOSPC, EFBIG, EROFS, EACCES...) becomes one
      :class:`~statemorph.errors.OutputError` line naming the path (:func:`output_error`).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, TypeVar

from ..errors import (
    DestinationBusyError,
    DestinationError,
    OutputError,
    SavepointError,
    SavepointNotFoundError,
    UnsafeFileError,
    UsageError,
)

CHUNK = 1 << 20
"""Bytes per read or write when streaming a file (hashing, copying)."""

TEMP_TAG = ".statemorph-tmp-"
"""Temporary directories are ``.<dst name>.statemorph-tmp-<pid>-<hex>`` next to the destination."""
CLAIM_TAG = ".statemorph-claim"
"""The claim of a destination is the locked file ``.<dst name>.statemorph-claim`` next to it."""
LEGACY_TEMP_MARKER = ".tmp-"
"""Older writers named temporary directories ``.<dst name>.tmp-<hex>`` (no pid)."""

_TEMP_RE = re.compile(r"^\.(?P<name>.+)" + re.escape(TEMP_TAG) + r"(?P<pid>\d+)-[0-9a-f]+$")

NAME_MAX = 255
"""The longest file name (one part of a path, in bytes) of the file systems a savepoint lives on."""
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


# -- reading ------------------------------------------------------------------------------------

def check_relative_path(p: str, where: str, error: type[SavepointError] = SavepointError) -> str:
    """The one containment rule for a path read from any input (Flink's ``_metadata``, the Parquet
    form's ``_metadata.json`` and its kept Flink skeleton, an object key): a plain relative path
    that cannot leave the directory it is joined to. An absolute path, a ``..``, ``.`` or empty
    part (``a//b``, a trailing ``/``), a backslash or a NUL is ``error`` naming ``where``; so is a
    path no file can have: a character the file system cannot encode (a lone surrogate, which
    Flink's modified UTF-8 can carry), or a part longer than :data:`NAME_MAX` bytes (which would
    fail only when written, after the checks)."""
    if (not p or p.startswith("/") or "\\" in p or "\x00" in p
            or any(part in ("", ".", "..") for part in p.split("/"))):
        raise error(f"{where}: path {p!r} leads outside the savepoint directory or is not a plain relative "
                    f"path (absolute, '..', an empty part or a backslash); refused")
    try:
        raw = os.fsencode(p)
    except UnicodeEncodeError:
        raise error(f"{where}: path {p!r} holds a character no file name can; refused") from None
    if any(len(part) > NAME_MAX for part in raw.split(b"/")):
        raise error(f"{where}: path {p[:80]!r}... has a part longer than {NAME_MAX} bytes, more than a file "
                    f"name can hold; refused")
    return p


def inside(root: Path, rel: str, where: str, error: type[SavepointError] = SavepointError) -> Path:
    """``root / rel`` for a ``rel`` that passes :func:`check_relative_path`: what a writer uses to
    place a file named by an input, so it never lands outside ``root``."""
    return root / check_relative_path(rel, where, error)


class UsedOnce:
    """Every file and handle of a savepoint is used once: a name used by two users (a file listed
    twice, two subtasks' handles naming one file, an operator-state handle naming a keyed-state
    file) would be read twice, or rewritten under one of its users' feet; and a name cannot be a
    file and the directory of another (``sub`` and ``sub/x``: one of them could never be written
    or read). ``add`` refuses the second user with ``error``, naming both (after ``where``, the
    file the names come from, when the users do not say it)."""

    def __init__(self, error: type[SavepointError] = SavepointError, where: str = "") -> None:
        self.users: dict[str, str] = {}
        self.dirs: dict[str, str] = {}
        self.error = error
        self.where = f"{where}: " if where else ""

    def add(self, name: str, user: str) -> None:
        at = f"{self.where}{user}: file {name!r}"
        other = self.users.get(name)
        if other is not None:
            raise self.error(f"{at} is listed twice (also by {other}); every file and handle is used once, or its "
                             f"data would be read twice")
        if name in self.dirs:
            raise self.error(f"{at} is also the directory of a file of {self.dirs[name]}")
        parts = name.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent in self.users:
                raise self.error(f"{at} lies in {parent!r}, which is a file of {self.users[parent]}")
            self.dirs.setdefault(parent, user)
        self.users[name] = user


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "not a regular file"


def read_exactly(read_at: Callable[[int, int], bytes], offset: int, n: int, label: str,
                 damaged: type[SavepointError]) -> bytes:
    """``n`` bytes from ``offset`` through ``read_at(count, offset)`` (``pread`` of a local file,
    a ranged read of a remote one), at most 1 GiB a call; a failed read or a file that ends
    early is ``damaged`` naming ``label``."""
    parts = []
    while n > 0:
        try:
            b = read_at(min(n, 1 << 30), offset)
        except OSError as e:
            raise damaged(f"{label}: cannot be read: {os.strerror(e.errno) if e.errno else e}") from None
        if not b:
            raise damaged(f"{label}: the file shrank while being read (at byte {offset})")
        parts.append(b)
        offset += len(b)
        n -= len(b)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def check_range(file: Any, offset: int, n: int, what: str) -> None:
    """Refuse, before any read, a range of ``file`` (a :class:`SafeFile` or a remote one: ``size``,
    ``label``, ``damaged``) that does not lie inside its checked size."""
    if offset < 0 or n < 0 or offset + n > file.size:
        raise file.damaged(f"{file.label}: reading {what} needs bytes {offset}..{offset + n} but the file has "
                           f"{file.size}")


def write_new_file(chunks: Iterable[bytes], target: str | os.PathLike[str]) -> str:
    """Write ``chunks`` to a NEW file ``target`` (refused if it exists), fsync it, and return the
    sha256 of what was written. Write failures are OSErrors (the caller names the output)."""
    h = hashlib.sha256()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        for b in chunks:
            h.update(b)
            view = memoryview(b)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    return h.hexdigest()


_Closing = TypeVar("_Closing", bound="Closing")


class Closing:
    """A resource a ``with`` block closes on leaving (whatever happened): the files, streams and
    sources every format reads through."""

    __slots__ = ()

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Closing) -> _Closing:
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class SafeFile(Closing):
    """An open regular file of known size, read by offset (``pread``) in bounded chunks.

    ``label`` is how messages name it (the path under the savepoint as the user gave it);
    ``damaged`` is the error class a failed read raises (a format's own :class:`SavepointError`)."""

    def __init__(self, fd: int, size: int, label: str, st: os.stat_result,
                 damaged: type[SavepointError] = SavepointError) -> None:
        self.fd = fd
        self.size = size
        self.label = label
        self.identity = (st.st_dev, st.st_ino)
        self.damaged = damaged

    def read_range(self, offset: int, n: int, what: str = "bytes") -> bytes:
        """Exactly ``n`` bytes from ``offset`` (a range a format's metadata gives, e.g. a Flink
        key group); refused before reading when it does not lie inside the file."""
        check_range(self, offset, n, what)
        return read_exactly(lambda k, at: os.pread(self.fd, k, at), offset, n, self.label, self.damaged)

    def read_range_into(self, offset: int, out: memoryview, what: str = "bytes") -> None:
        """:meth:`read_range` of ``len(out)`` bytes straight into ``out`` (a writable byte
        buffer): no intermediate ``bytes`` to copy from."""
        n = out.nbytes
        check_range(self, offset, n, what)
        done = 0
        while done < n:
            try:
                got = os.preadv(self.fd, [out[done:done + (1 << 30)]], offset + done)
            except OSError as e:
                raise self.damaged(f"{self.label}: cannot be read: {os.strerror(e.errno or 0)}") from None
            if got == 0:
                raise self.damaged(f"{self.label}: the file shrank while being read (at byte {offset + done})")
            done += got

    def chunks(self, chunk: int = CHUNK) -> Any:
        """Yield the file's bytes from offset 0 to ``size`` in chunks of at most ``chunk``."""
        offset = 0
        while offset < self.size:
            try:
                b = os.pread(self.fd, min(chunk, self.size - offset), offset)
            except OSError as e:
                raise self.damaged(f"{self.label}: cannot be read: {os.strerror(e.errno or 0)}") from None
            if not b:
                raise self.damaged(f"{self.label}: the file shrank while being read (at byte {offset})")
            offset += len(b)
            yield b

    def sha256(self) -> str:
        """Hex sha256 of the file, streamed."""
        h = hashlib.sha256()
        for b in self.chunks():
            h.update(b)
        return h.hexdigest()

    def verify_sha256(self, expected: str, recorded_in: str) -> None:
        """Stream the file and compare its sha256 with ``expected`` (a SavepointError if not)."""
        digest = self.sha256()
        if digest != expected:
            raise SavepointError(f"{self.label}: sha256 {digest} != {expected} recorded in {recorded_in} (damaged)")

    def copy_to(self, target: str | os.PathLike[str]) -> str:
        """Copy the file to a NEW file ``target`` chunk by chunk, hashing on the way; returns the
        sha256 of what was copied. Write failures are OSErrors (the caller names the output)."""
        return write_new_file(self.chunks(), target)

    def reader(self) -> io.BufferedReader:
        """A binary file object over the same open file (for Parquet readers that seek); closing
        it does not close this SafeFile."""
        return os.fdopen(os.dup(self.fd), "rb")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def open_regular(path: str | os.PathLike[str], label: str | None = None, *, size: int | None = None,
                 recorded_in: str = "the metadata", follow: bool = False,
                 unsafe: type[UnsafeFileError] = UnsafeFileError,
                 damaged: type[SavepointError] = SavepointError) -> SafeFile:
    """Open ``path`` for reading only if it is a regular file, without blocking and (unless
    ``follow``) without following a symlink; with ``size`` the real size must equal it.

    Refusals are ``unsafe`` (not a regular file, a symlink), a missing file or a size mismatch
    ``damaged``; all name ``label`` and are raised before a read. A format passes its own
    subclasses (Flink's :class:`~statemorph.errors.SavepointPathError` / ``FlinkSavepointError``)."""
    label = label if label is not None else os.fspath(path)
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        raise damaged(f"{label}: file listed in {recorded_in} is missing") from None
    except OSError as e:
        raise damaged(f"{label}: cannot be read: {os.strerror(e.errno or 0)}") from None
    if not stat.S_ISREG(st.st_mode):
        raise unsafe(f"{label}: is {_kind_of(st.st_mode)}, not a regular file; refused")
    try:
        fd = os.open(path, _READ_FLAGS | (0 if follow else _NOFOLLOW))
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise unsafe(f"{label}: is a symlink; refused") from None
        raise damaged(f"{label}: cannot be read: {os.strerror(e.errno or 0)}") from None
    fst = os.fstat(fd)
    if not stat.S_ISREG(fst.st_mode) or (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise unsafe(f"{label}: was replaced while being opened; refused")
    if size is not None and fst.st_size != size:
        os.close(fd)
        raise damaged(f"{label}: size {fst.st_size} != {size} recorded in {recorded_in} "
                      f"(truncated or replaced)")
    return SafeFile(fd, fst.st_size, label, fst, damaged)


class SeenFiles:
    """The files already read in one pass, by inode: a file reached under two names (a hard link,
    a symlink inside the savepoint) would have its rows read twice."""

    def __init__(self, error: type[UnsafeFileError] = UnsafeFileError) -> None:
        self.files: dict[tuple[int, int], str] = {}
        self.error = error

    def add(self, f: SafeFile) -> None:
        self.add_identity(f.identity, f.label)

    def add_identity(self, identity: tuple[int, int], label: str) -> None:
        """Record the file ``(st_dev, st_ino)`` read as ``label``; another label is refused."""
        other = self.files.setdefault(identity, label)
        if other != label:
            raise self.error(f"{label}: is the same file as {other} (its rows would be read twice)")


class SavepointDir:
    """A savepoint directory, and the only way the files its metadata names are opened.

    ``unsafe`` / ``damaged`` are the error classes its refusals raise (see :func:`open_regular`)."""

    def __init__(self, path: str | os.PathLike[str], *, unsafe: type[UnsafeFileError] = UnsafeFileError,
                 damaged: type[SavepointError] = SavepointError) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise SavepointNotFoundError(f"savepoint {self.path} does not exist or is not a directory")
        self.real = os.path.realpath(self.path)
        self.unsafe = unsafe
        self.damaged = damaged

    def resolve(self, rel: str) -> str:
        """The real path of ``rel`` (a checked relative path from metadata); a path that leads out
        of the directory through a symlink (the file or one of its directories) is refused without
        looking at the outside file."""
        check_relative_path(rel, str(self.path), self.unsafe)
        target = os.path.realpath(os.path.join(self.real, rel))
        if target == self.real or os.path.commonpath([self.real, target]) != self.real:
            raise self.unsafe(f"{self.path / rel}: leads out of the savepoint directory through a symlink; "
                              f"refused")
        return target

    def open(self, rel: str, *, size: int | None = None, recorded_in: str = "the metadata") -> SafeFile:
        """Open the regular file ``rel`` inside the savepoint (see :func:`open_regular`)."""
        return open_regular(self.resolve(rel), str(self.path / rel), size=size, recorded_in=recorded_in,
                            unsafe=self.unsafe, damaged=self.damaged)

    def read_small(self, rel: str, limit: int, recorded_in: str = "the savepoint") -> bytes:
        """All bytes of a small file (metadata), refused above ``limit`` bytes before reading."""
        with self.open(rel, recorded_in=recorded_in) as f:
            if f.size > limit:
                raise self.damaged(f"{f.label}: {f.size} bytes exceeds the {limit}-byte limit")
            return b"".join(f.chunks())

    def top_files(self) -> list[str]:
        """Names of the regular files (not symlinks) directly in the directory."""
        return sorted(e.name for e in os.scandir(self.real) if e.is_file(follow_symlinks=False))


def fsync_path(path: str | os.PathLike[str]) -> None:
    """fsync a file or a directory (so a rename or a new entry in it is durable)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) if Path(path).is_dir() else os.O_RDONLY
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sha256_file(path: str | os.PathLike[str], chunk: int = CHUNK) -> tuple[str, int]:
    """(hex digest, size) of a regular file, streamed (a FIFO or device is refused)."""
    with open_regular(path, follow=True) as f:
        h = hashlib.sha256()
        for b in f.chunks(chunk):
            h.update(b)
        return h.hexdigest(), f.size


# -- writing ------------------------------------------------------------------------------------

_ERRNO_WORDS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large (file-size limit)",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}


def output_error(e: OSError, path: str | os.PathLike[str], doing: str = "write") -> OutputError:
    """One line for a failed write: what, where and the system's reason (no traceback)."""
    reason = _ERRNO_WORDS.get(e.errno or 0) or (os.strerror(e.errno) if e.errno else str(e))
    return OutputError(f"cannot {doing} {os.fspath(path)}: {reason}")


def refuse_inside(dst: str | os.PathLike[str], source: str | os.PathLike[str]) -> None:
    """A destination inside (or equal to) the source savepoint is a UsageError: the source is
    never modified, and a rewrite would read its own output."""
    src_real = os.path.realpath(source)
    d = Path(dst)
    dst_real = os.path.join(os.path.realpath(d.parent), d.name)
    if dst_real == src_real or os.path.commonpath([src_real, dst_real]) == src_real:
        raise UsageError(f"the output {os.fspath(dst)} is inside the source savepoint {os.fspath(source)}; "
                         f"write it somewhere else")


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_temp_dirs(parent: str | os.PathLike[str], name: str | None = None) -> tuple[list[Path], list[Path]]:
    """Temporary directories of statemorph writers under ``parent`` (for destination ``name``,
    or all): ``(stale, live)``, where stale ones belong to a pid that no longer runs here."""
    stale: list[Path] = []
    live: list[Path] = []
    try:
        entries = sorted(Path(parent).iterdir())
    except OSError:
        return stale, live
    for p in entries:
        m = _TEMP_RE.match(p.name)
        if m is None or (name is not None and m.group("name") != name) or not p.is_dir() or p.is_symlink():
            continue
        pid = int(m.group("pid"))
        (live if pid == os.getpid() or _pid_alive(pid) else stale).append(p)
    return stale, live


def _claim_is_stale(path: Path) -> bool:
    """A claim file nobody holds a lock on was left by a run that died."""
    try:
        fd = os.open(path, os.O_RDWR | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:  # not a claim statemorph made: left alone
        os.close(fd)
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops the lock again
    return True


def remove_stale_temp_dirs(parent: str | os.PathLike[str], name: str | None = None, *,
                           legacy: bool = True) -> list[Path]:
    """Remove what killed writers left under ``parent`` (for destination ``name``, or all):
    ``.<name>.statemorph-tmp-<pid>-*`` directories whose pid is dead, claim files nobody holds, and
    with ``legacy`` directories of older writers (``.<name>.tmp-<hex>``, no pid: only call this when
    no such writer runs). Returns the removed paths; the live ones are left (see :func:`stale_temp_dirs`)."""
    removed, _live = stale_temp_dirs(parent, name)
    for p in removed:
        shutil.rmtree(p, ignore_errors=True)
    try:
        entries = sorted(Path(parent).iterdir())
    except OSError:
        return removed
    for p in entries:
        n = p.name
        if not n.startswith("."):
            continue
        if n.endswith(CLAIM_TAG) and (name is None or n == f".{name}{CLAIM_TAG}") and _claim_is_stale(p):
            p.unlink(missing_ok=True)
            removed.append(p)
        elif (legacy and LEGACY_TEMP_MARKER in n and TEMP_TAG not in n and p.is_dir() and not p.is_symlink()
              and (name is None or n.startswith(f".{name}{LEGACY_TEMP_MARKER}"))):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def destination_taken(dst: str | os.PathLike[str]) -> bool:
    """Whether ``dst`` exists (a savepoint is never overwritten). If it does, what a killed run
    for it left next to it (its temporary directory, its claim) is removed: no run can be writing
    a destination that already exists."""
    d = Path(dst)
    if not os.path.lexists(d):
        return False
    remove_stale_temp_dirs(d.parent, d.name, legacy=False)
    return True


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived while a staged directory was open; raised in the main thread so
    every ``with`` block unwinds and removes what it wrote. The signal is re-delivered to the
    previous handler once the last staged directory is gone."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


_HANDLED = (signal.SIGINT, signal.SIGTERM)
_open_dirs: set[StagedDirectory] = set()
_saved_handlers: dict[int, Any] = {}
_registry_lock = threading.Lock()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def _register(sd: StagedDirectory) -> None:
    with _registry_lock:
        if not _open_dirs and threading.current_thread() is threading.main_thread():
            for sig in _HANDLED:
                prev = signal.getsignal(sig)
                if prev is signal.SIG_IGN:
                    continue  # an ignored signal stays ignored
                _saved_handlers[sig] = prev
                signal.signal(sig, _on_signal)
        _open_dirs.add(sd)


def _unregister(sd: StagedDirectory) -> bool:
    """Forget ``sd``; True when it was the last one and the previous handlers are back."""
    with _registry_lock:
        _open_dirs.discard(sd)
        if _open_dirs or threading.current_thread() is not threading.main_thread():
            return False
        for sig, prev in _saved_handlers.items():
            signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
        _saved_handlers.clear()
        return True


class StagedDirectory:
    """A directory that appears at ``dst`` complete or not at all (see the module docstring).

    Write into :attr:`temp`, then :meth:`commit` (fsync + rename) or :meth:`abort`; as a context
    manager it commits on success and aborts on any exception. ``source`` (a savepoint being
    rewritten) makes a destination inside it a UsageError."""

    def __init__(self, dst: str | os.PathLike[str], *, source: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(dst)
        if destination_taken(self.path):
            raise DestinationError(f"savepoint path {self.path} already exists; savepoints are never overwritten")
        if source is not None:
            refuse_inside(self.path, source)
        parent = self.path.parent
        if not parent.is_dir():
            raise DestinationError(f"parent directory {parent} of savepoint {self.path.name} does not exist")
        self._claim_fd = -1
        self._claim_path = parent / f".{self.path.name}{CLAIM_TAG}"
        self.state = "open"
        self._claim()
        try:
            if os.path.lexists(self.path):
                raise DestinationError(f"savepoint path {self.path} already exists; savepoints are never overwritten")
            self.removed_stale, _ = stale_temp_dirs(parent, self.path.name)
            for p in self.removed_stale:  # we hold the claim: no live run writes this destination
                shutil.rmtree(p, ignore_errors=True)
            self.temp = parent / f".{self.path.name}{TEMP_TAG}{os.getpid()}-{secrets.token_hex(6)}"
            try:
                self.temp.mkdir()
            except OSError as e:
                raise output_error(e, self.path, "create the savepoint") from e
        except BaseException:
            self._release()
            raise
        _register(self)

    def _claim(self) -> None:
        path = self._claim_path
        while True:
            fd, created = self._open_claim()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                try:
                    owner = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
                finally:
                    os.close(fd)
                raise DestinationBusyError(
                    f"{self.path} is being written by another statemorph run ({owner}); not writing it twice"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(path, follow_symlinks=False).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # the previous owner removed the file between our open and our lock
                os.close(fd)
                continue
            if not created:
                # a claim nobody holds: left by a run that died. It is never written through
                # (it may be a file someone else put there): unlinked while locked, made anew.
                try:
                    os.unlink(path)
                except OSError as e:
                    os.close(fd)
                    raise output_error(e, path, "remove the stale claim") from e
                os.close(fd)
                continue
            try:
                os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
            except OSError as e:
                os.close(fd)
                raise output_error(e, self.path, "create the savepoint") from e
            self._claim_fd = fd
            return

    def _open_claim(self) -> tuple[int, bool]:
        """The claim file, open: ``(fd, True)`` when this call created it (``O_EXCL``), else the
        existing one, opened without following a symlink or blocking, and refused unless it is a
        regular file with one name (a hard link or a device under the claim's name is not ours)."""
        path = self._claim_path
        flags = os.O_RDWR | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        while True:
            try:
                return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644), True
            except FileExistsError:
                pass
            except OSError as e:
                raise output_error(e, self.path, "create the savepoint") from e
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue  # removed since: create it
            if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                try:
                    fd = os.open(path, flags)
                except FileNotFoundError:
                    continue
                except OSError as e:
                    if e.errno != errno.ELOOP:
                        raise output_error(e, path, "open the claim") from e
                    continue  # replaced by a symlink since: look again
                fst = os.fstat(fd)
                if (fst.st_dev, fst.st_ino, fst.st_nlink) == (st.st_dev, st.st_ino, 1):
                    return fd, False
                os.close(fd)
                continue  # replaced since: look again
            what = (_kind_of(st.st_mode) if not stat.S_ISREG(st.st_mode)
                    else f"a file with {st.st_nlink} names (a hard link)")
            raise UnsafeFileError(f"{path}: the claim file is {what}, not a claim of statemorph; not writing "
                                  f"through it (remove it)")

    def _release(self) -> None:
        if self._claim_fd >= 0:
            try:
                if os.fstat(self._claim_fd).st_ino == os.stat(self._claim_path, follow_symlinks=False).st_ino:
                    os.unlink(self._claim_path)  # only our own claim, never a file put in its place
            except OSError:
                pass
            os.close(self._claim_fd)
            self._claim_fd = -1

    def commit(self) -> Path:
        """fsync the temporary directory tree and rename it onto the destination."""
        if self.state != "open":
            raise SavepointError(f"the output {self.path} is {self.state}")
        try:
            try:
                for dirpath, _dirs, _files in os.walk(self.temp):
                    fsync_path(dirpath)
                if os.path.lexists(self.path):
                    raise SavepointError(f"savepoint path {self.path} appeared while writing; not overwriting it")
                os.rename(self.temp, self.path)
                fsync_path(self.path.parent)
            except OSError as e:
                raise output_error(e, self.path, "move the finished savepoint to") from e
        except BaseException as e:
            self.abort(e)
            raise
        self.state = "committed"
        self._release()
        _unregister(self)
        return self.path

    def abort(self, exc: BaseException | None = None) -> None:
        """Remove everything written and release the claim; the destination is never touched. If
        ``exc`` is an :class:`Interrupted`, the signal goes to the previous handler afterwards."""
        if self.state != "open":
            return
        self.state = "aborted"
        shutil.rmtree(self.temp, ignore_errors=True)
        self._release()
        if _unregister(self) and isinstance(exc, Interrupted):
            signal.raise_signal(exc.signum)

    def __enter__(self) -> StagedDirectory:
        return self

    def __exit__(self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None) -> None:
        if v is None:
            if self.state == "open":
                self.commit()
        else:
            self.abort(v)


__all__ = [
    "CHUNK",
    "CLAIM_TAG",
    "Interrupted",
    "SafeFile",
    "UsedOnce",
    "SavepointDir",
    "SeenFiles",
    "StagedDirectory",
    "TEMP_TAG",
    "check_relative_path",
    "destination_taken",
    "fsync_path",
    "inside",
    "open_regular",
    "output_error",
    "read_exactly",
    "refuse_inside",
    "remove_stale_temp_dirs",
    "sha256_file",
    "stale_temp_dirs",
]
