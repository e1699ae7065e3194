"""Errors of bulk work mapped to rows and field paths, the ``on_error`` policy, and the report
every bulk call returns (:class:`BulkResult`).

Why here: the kernels leave ``nogil`` code with a status code and a row index only; this module
turns them (and the reference serializers' exceptions on the per-value path) into typed errors
that name the row and the field path, then applies the caller's policy (:data:`statemorph.errors.
ON_ERROR_CHOICES`): raise the first, or null the bad rows, or skip them, always reporting them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import numpy as np
import pyarrow as pa

from ..errors import MalformedDataError, SerializationError, StateFormatError, TruncatedDataError
from .tiers import abi, plans


class BulkResult(NamedTuple):
    """What a bulk encode / decode / migrate returns: the output array and the errors of the rows
    it could not handle, in row order (empty unless ``on_error`` is ``"null"`` or ``"skip"``).
    Each error is typed and carries ``row`` (the index in the input), ``field_path`` and ``code``.

    With ``"null"`` the output has one entry per input entry (a bad row is null); with ``"skip"``
    bad rows are left out, so ``values`` is shorter than the input by ``len(errors)`` and
    :attr:`bad_rows` says which input rows are missing (drop them from a parallel key column)."""

    values: Any
    errors: list[Exception]

    @property
    def bad_rows(self) -> list[int]:
        """Input row indices of :attr:`errors` (sorted, one per bad row)."""
        return [e.row for e in self.errors]  # type: ignore[attr-defined]  # every bulk error is located


def finish(values: Any, errors: list[Exception], on_error: str) -> BulkResult:
    """The report of a whole call; with ``"skip"`` the bad rows are dropped from ``values`` (they
    were nulls until now, so the kernels need no third mode)."""
    if on_error == "skip" and errors:
        keep = np.ones(len(values), dtype=bool)
        keep[[e.row for e in errors]] = False  # type: ignore[attr-defined]
        values = values.filter(pa.array(keep))
    return BulkResult(values, errors)


def kernel_error(status: int, row: int, paths: plans.RowProgram | None, what: str) -> Any:
    """A typed error for a kernel status: bad input bytes are a :class:`StateFormatError`; a value
    that cannot be written (encode) is a :class:`SerializationError`."""
    code, node = abi.decode_err(status)
    path = paths.path(node) if paths is not None and node >= 0 else ""
    where = f"row {row}" + (f", field {path}" if path else "")
    message = f"{what}: {where}: {abi.ERROR_MESSAGES.get(code, f'error code {code}')}"
    err: Exception
    if what.startswith("encode"):
        err = SerializationError(message)
    elif code == abi.ERR_TRUNCATED:
        err = TruncatedDataError(message)
    else:
        err = MalformedDataError(message)
    return locate(err, row, path, code)


_E = TypeVar("_E", bound=Exception)


def locate(err: _E, row: int, path: str, code: int = -1) -> _E:
    """Attach ``row`` / ``field_path`` / ``code`` so callers can act on the error programmatically."""
    err.__dict__.update(row=row, field_path=path, code=code)
    return err


def per_row_error(e: Exception, row: int, what: str) -> StateFormatError:
    message = f"{what}: row {row}: {e}"
    err: StateFormatError = TruncatedDataError(message) if isinstance(e, TruncatedDataError) \
        else MalformedDataError(message)
    err.__cause__ = e
    return locate(err, row, "")


class RowErrors:
    """Bad rows of one chunk: raise the first (``"raise"``), or record them all, each row then
    null in the output (``"null"``; ``"skip"`` drops those rows afterwards, see :func:`finish`)."""

    def __init__(self, on_error: str, what: str, prog: plans.RowProgram | None) -> None:
        self.on_error = on_error
        self.what = what
        self.prog = prog
        self.items: list[Exception] = []

    def from_status(self, status: np.ndarray, base: int) -> np.ndarray:
        """Row indices with a negative status; raises in 'raise' mode."""
        bad = np.flatnonzero(status < 0)
        if len(bad):
            if self.on_error == "raise":
                i = int(bad[0])
                raise kernel_error(int(status[i]), base + i, self.prog, self.what)
            self.items.extend(kernel_error(int(status[i]), base + int(i), self.prog, self.what) for i in bad)
        return bad

    def add(self, err: Exception) -> None:
        if self.on_error == "raise":
            raise err
        self.items.append(err)

    def per_value(self, values: list[Any], one: Callable[[Any], Any], base: int,
                  catch: tuple[type[Exception], ...], error_of: Callable[[Exception, int], Exception]) -> list[Any]:
        """``one`` applied to each non-null value, the per-value path of encode, decode and migrate:
        a value it fails on with one of ``catch`` is null in the result, and its error,
        ``error_of(exception, row)``, is recorded here (raised at once under ``"raise"``)."""
        out: list[Any] = []
        for i, v in enumerate(values):
            if v is None:
                out.append(None)
                continue
            try:
                out.append(one(v))
            except catch as e:
                self.add(error_of(e, base + i))
                out.append(None)
        return out

    def result(self, arr: Any) -> tuple[Any, list[Exception]]:
        """The output and the bad rows' errors in row order, whichever stage found them."""
        return arr, sorted(self.items, key=lambda e: getattr(e, "row", -1))


def rerouted(status: int) -> bool:
    """An entry the kernels hand back to the reference serializer (``abi.HAND_BACK``), not an error."""
    return abi.decode_err(status)[0] == abi.HAND_BACK


def report(errors: RowErrors, bad: list[tuple[int, int]], base: int,
            extra: list[tuple[int, Exception]] | None = None) -> None:
    """Turn the kernels' (row, encoded error) pairs, and ``extra`` (row, error) pairs of rerouted
    entries, into typed errors, in row order (so "raise" raises the first)."""
    items = [(row, kernel_error(status, base + row, errors.prog, errors.what)) for row, status in bad]
    for _, err in sorted(items + (extra or []), key=lambda p: p[0]):
        errors.add(err)


class Settle:
    """Settles a one-pass kernel's (row, status) pairs: entries rerouted to the reference
    (``abi.HAND_BACK``: maps with suspect keys) run through the per-value path, then every error,
    the kernel's and the reference's, is reported in row order. Runs before the output is built
    (in "raise" mode a kernel stops at the first error, leaving later rows unwritten);
    :meth:`splice` then puts the rerouted entries' results in."""

    def __init__(self, arr: pa.Array, serializer: Any, per_value: Callable[..., Any], errors: RowErrors,
                 base: int) -> None:
        self.arr, self.serializer, self.per_value, self.errors, self.base = arr, serializer, per_value, errors, base
        self.rows: list[int] = []
        self.pieces: list[pa.Array] = []

    def __call__(self, bad: list[tuple[int, int]]) -> None:
        found: list[tuple[int, Exception]] = []
        for row, status in sorted(bad):
            if rerouted(status):
                out, errs = self.per_value(self.arr.slice(row, 1), self.serializer,
                                           RowErrors("null", self.errors.what, None), self.base + row)
                self.rows.append(row)
                self.pieces.append(out)
                found += [(row, e) for e in errs]
        report(self.errors, [b for b in bad if not rerouted(b[1])], self.base, found)

    def splice(self, out: pa.Array) -> pa.Array:
        """``out`` with each rerouted entry replaced by the reference's result."""
        if not self.rows:
            return out
        parts, at = [], 0
        for row, piece in zip(self.rows, self.pieces, strict=True):
            parts += [out.slice(at, row - at), piece.cast(out.type)]
            at = row + 1
        parts.append(out.slice(at))
        return pa.concat_arrays(parts)


__all__ = ["BulkResult", "RowErrors", "Settle", "finish", "kernel_error", "locate", "per_row_error", "report",
           "rerouted"]
