"""Bulk API: encode, decode and migrate whole Arrow arrays of state values.

This is the public face of :mod:`statemorph.bulk` (users import ``statemorph.arrow``): each function
returns the output array alone. The bulk layer itself returns a :class:`~statemorph.bulk.BulkResult`
(the array and the errors of the rows it could not handle); use it when ``on_error`` is ``"null"``
or ``"skip"`` and the bad rows matter::

    from statemorph import arrow, bulk
    out = arrow.migrate(values, snap, new, threads=2)            # the array; raises on a bad entry
    result = bulk.migrate(values, snap, new, on_error="null")    # result.values, result.errors

Inputs: pyarrow arrays, chunked arrays, slices, binary / large_binary, read-only buffers, or any
object with ``__arrow_c_array__``. ``on_error`` is one of :data:`statemorph.errors.ON_ERROR_CHOICES`:
``"raise"`` (a typed error naming the row and field path), ``"null"`` (bad entries become nulls)
or ``"skip"`` (bad entries are left out). The former ``"collect"`` still works, with a
:class:`DeprecationWarning`: it nulls bad entries and returns ``(array, errors)``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from . import bulk
from .bulk.types import arrow_type


def _values(run: Callable[..., bulk.BulkResult], on_error: str, *args: Any, threads: int) -> Any:
    if on_error == "collect":
        warnings.warn('on_error="collect" is deprecated: call statemorph.bulk with on_error="null" and read '
                      'the errors from its result', DeprecationWarning, stacklevel=3)
        return tuple(run(*args, threads=threads, on_error="null"))
    return run(*args, threads=threads, on_error=on_error).values


def encode(array: Any, serializer: Any, *, threads: int = 1, on_error: str = "raise") -> Any:
    """Serialize every value of an Arrow array with ``serializer``: a BinaryArray of the bytes Flink
    writes (null in → null out). See :func:`statemorph.bulk.encode`."""
    return _values(bulk.encode, on_error, array, serializer, threads=threads)


def decode(binary_array: Any, serializer: Any, *, threads: int = 1, on_error: str = "raise") -> Any:
    """Deserialize every entry of a BinaryArray: an Arrow array of values (a StructArray for rows).
    See :func:`statemorph.bulk.decode`."""
    return _values(bulk.decode, on_error, binary_array, serializer, threads=threads)


def migrate(binary_array: Any, prior_snapshot: Any, new_serializer: Any, *, threads: int = 1,
            on_error: str = "raise") -> Any:
    """Rewrite every entry written under ``prior_snapshot`` into ``new_serializer``'s format: a
    BinaryArray. See :func:`statemorph.bulk.migrate`."""
    return _values(bulk.migrate, on_error, binary_array, prior_snapshot, new_serializer, threads=threads)


__all__ = ["arrow_type", "decode", "encode", "migrate"]
