"""Python views of Arrow buffers, shared by the kernels' Python twins.

Why: every twin reads binary columns as (offsets, data, validity, element offset, wide) and checks
the output offsets a one-pass kernel hands back the same way; one copy keeps the twins honest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .abi import ERR_BAD_ARROW, ERR_OK

MAX32 = (1 << 31) - 1
"""Largest int32 Arrow offset: a narrow (int32-offset) output that would pass it is widened."""


def bit_get(buf: Any, i: int) -> bool:
    return bool(buf[i >> 3] >> (i & 7) & 1)




def mark_bad(slots: Any, slot: int, status: int, row: int, first: int) -> int:
    """A two-pass kernel's bad row: its status (an ``encode_err``) into ``slots[slot]``; the first
    bad row so far (``first``, or ``row`` when it is the first)."""
    slots[slot] = status
    return row if first < 0 else first


def bit_set(buf: Any, i: int) -> None:
    buf[i >> 3] |= 1 << (i & 7)




class BinView:
    """An Arrow binary column, read entry by entry with the kernels' validation."""

    def __init__(self, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, stop: int) -> None:
        om = memoryview(offsets).cast("B")
        if (offset + stop + 1) * (8 if wide else 4) > len(om):
            raise ValueError("offsets buffer shorter than the array")
        self.offs = np.frombuffer(om, dtype=np.int64 if wide else np.int32)
        self.data = bytes(memoryview(data).cast("B")) if data is not None else b""
        self.bits = memoryview(validity).cast("B") if validity is not None else None
        self.offset = offset

    def valid(self, i: int) -> bool:
        return self.bits is None or bit_get(self.bits, self.offset + i)

    def entry(self, i: int) -> tuple[int, int, int]:
        """(code, start, end) of entry i."""
        s = int(self.offs[self.offset + i])
        e = int(self.offs[self.offset + i + 1])
        if s < 0 or e < s or e > len(self.data):
            return ERR_BAD_ARROW, 0, 0
        return ERR_OK, s, e




def check_outputs(who: str, out_off: Any, out_data: Any, start: int, stop: int, pos: int) -> None:
    """A one-pass kernel's outputs (Arrow offsets, int32 or int64, and the byte buffer) hold the
    rows ``start..stop`` from ``pos`` (twin of ``out_offsets`` in ``kernels/_native/cursor.pxd``)."""
    if out_off.itemsize == 4 and len(out_data) > 0x7FFFFFFF:
        raise ValueError(f"{who}: int32 offsets cannot address more than 2 GiB of output")
    if stop > len(out_off) - 1 or start < 0 or pos < 0 or pos > len(out_data):
        raise ValueError(f"{who}: output arrays shorter than the rows")


#: a one-pass migrate twin's work on one entry: ``(code, start, end)`` of the entry (``code`` from
#: :meth:`BinView.entry`) -> (0 or the entry's ``encode_err``, its migrated bytes)
MigrateEntry = Callable[[int, int, int], "tuple[int, bytes | bytearray]"]


def one_pass_run(v: BinView, start: int, stop: int, out_off: Any, out_data: Any, pos: int,
                 migrate: MigrateEntry) -> tuple[int, int, int]:
    """The loop of the one-pass migrate twins: each valid entry migrated, packed from
    ``out_data[pos]``, each row's end in ``out_off[i + 1]``; returns ``(next_row, pos, status)``
    (``status < 0``: entry ``next_row`` is bad; else ``next_row < stop``: it did not fit)."""
    out = memoryview(out_data).cast("B")
    status = 0
    i = start
    while i < stop:
        if v.valid(i):
            status, buf = migrate(*v.entry(i))
            if not status:
                if len(buf) > len(out) - pos:
                    break
                out[pos:pos + len(buf)] = buf
                pos += len(buf)
        out_off[i + 1] = pos
        if status:
            break
        i += 1
    return i, pos, status
