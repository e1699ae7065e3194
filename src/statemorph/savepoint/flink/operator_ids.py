"""How a name a user gives finds an operator of a savepoint, in every Flink version.

Flink keys operator state by OperatorID, 16 bytes. An operator with a user-set uid gets
``StreamGraphHasherV2.generateUserSpecifiedHash(uid)``: Guava's ``murmur3_128`` with seed 0 over
the uid's UTF-8 bytes (``putString(uid, UTF_8)`` hashes the encoded bytes), in Guava's
``asBytes`` order, which is also the order ``_metadata`` stores and ``AbstractID.toHexString``
prints. The hasher is frozen since Flink 1.2 ("DO NOT MODIFY"), so 1.x and 2.x agree.

Flink 2.x savepoints (``_metadata`` version 5+) also record the uid string; Flink 1.x savepoints
(version 4) keep only the ID. :func:`find_operator` is therefore the one place that resolves a
name: the uid strings first, then the ID in hex, then the ID derived from the name as a uid. So a
schema file naming ``[operators.events-state]`` serves a 1.x and a 2.x savepoint of the same job.

The hash is implemented here in pure Python (MurmurHash3 x64 128, as Guava): it runs once per
name, and no dependency of statemorph provides Guava's variant. Checked against Flink's own
hasher (``tests/data/golden/operator_ids.jsonl``) and the IDs in real savepoints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from .metadata import OperatorState

_M64 = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


def _rotl64(v: int, n: int) -> int:
    return ((v << n) | (v >> (64 - n))) & _M64


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    k ^= k >> 33
    return k


def _mix_k1(k1: int) -> int:
    return (_rotl64((k1 * _C1) & _M64, 31) * _C2) & _M64


def _mix_k2(k2: int) -> int:
    return (_rotl64((k2 * _C2) & _M64, 33) * _C1) & _M64


def murmur3_128(data: bytes, seed: int = 0) -> bytes:
    """Guava's ``Hashing.murmur3_128(seed).hashBytes(data).asBytes()`` (MurmurHash3 x64 128)."""
    h1 = h2 = seed & _M64
    n = len(data)
    full = n - n % 16
    for i in range(0, full, 16):
        k1 = int.from_bytes(data[i : i + 8], "little")
        k2 = int.from_bytes(data[i + 8 : i + 16], "little")
        h1 ^= _mix_k1(k1)
        h1 = _rotl64(h1, 27)
        h1 = (h1 + h2) & _M64
        h1 = (h1 * 5 + 0x52DCE729) & _M64
        h2 ^= _mix_k2(k2)
        h2 = _rotl64(h2, 31)
        h2 = (h2 + h1) & _M64
        h2 = (h2 * 5 + 0x38495AB5) & _M64
    tail = data[full:]
    if tail:  # the tail's low 8 bytes feed k1, the rest k2 (a zero k2 mixes to zero)
        h1 ^= _mix_k1(int.from_bytes(tail[:8], "little"))
        h2 ^= _mix_k2(int.from_bytes(tail[8:], "little"))
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    return h1.to_bytes(8, "little") + h2.to_bytes(8, "little")


def operator_id(uid: str) -> bytes:
    """The OperatorID bytes (as ``_metadata`` stores them) of an operator with user-set ``uid``.
    A uid holding a lone surrogate has no UTF-8 form; Java's encoder writes ``?`` for it."""
    return murmur3_128(uid.encode("utf-8", errors="replace"))


T = TypeVar("T")

NAMINGS = ("uid", "uid_hash", "derived_id")
"""How a name can name an operator, in the order :func:`find_operator` tries them."""


def naming(op: OperatorState, ident: str) -> str | None:
    """How ``ident`` names ``op``: ``uid`` (the uid the savepoint records), ``uid_hash`` (its
    OperatorID in hex, any case), ``derived_id`` (a uid the savepoint does not record, Flink 1.x
    keeps none, whose :func:`operator_id` is the operator's ID), or None."""
    if op.uid and op.uid == ident:
        return "uid"
    if op.uid_hash == ident.lower():
        return "uid_hash"
    if op.operator_id == operator_id(ident):
        return "derived_id"
    return None


def find_operator(candidates: Iterable[T], ident: str, state_of: Callable[[T], OperatorState]) -> T | None:
    """The candidate whose operator ``ident`` names, or None: the one lookup every verb and API
    uses. A recorded uid wins over a uid hash, which wins over a derived ID (:func:`naming`).
    ``state_of`` gives a candidate's :class:`OperatorState` (candidates may be descriptions)."""
    found: dict[str, T] = {}
    for c in candidates:
        how = naming(state_of(c), ident)
        if how is not None:
            found.setdefault(how, c)
    return next((found[how] for how in NAMINGS if how in found), None)


__all__ = ["NAMINGS", "find_operator", "murmur3_128", "naming", "operator_id"]
