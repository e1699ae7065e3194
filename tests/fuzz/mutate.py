"""Deterministic mutations of valid inputs.

Why: a decoder is attacked with bytes that are *almost* valid (a flipped bit, a length one too
large, a stream cut short, two valid streams glued together), because those reach deep into the
parser, where random bytes stop at the first check. Every input is a pure function of
``(family, index)``: a finding is reproduced from its index alone, in any process, on any run.
"""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Callable, Sequence

HOSTILE_I32 = (0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x40000000, 0x00010000, 0x01000000)
HOSTILE_I16 = (0x7FFF, 0x8000, 0xFFFF, 0x0100)
HOSTILE_I64 = (0x7FFFFFFFFFFFFFFF, 0x8000000000000000, 0xFFFFFFFFFFFFFFFF, 1 << 40)
INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF)
HOSTILE_JSON = (None, True, -1, 0, 1 << 31, 1 << 63, 10**30, 1.5e308, "", "..", "../x", "/etc/passwd",
                "x" * 300, [], {}, [None], {"": None})


def rng_for(family: str, index: int) -> random.Random:
    """The input generator for one index (string seeds hash with SHA-512: stable across runs)."""
    return random.Random(f"statemorph-fuzz/{family}/{index}")


def _flip(d: bytearray, r: random.Random, pool: Sequence[bytes]) -> None:
    if d:
        d[r.randrange(len(d))] ^= 1 << r.randrange(8)


def _set_byte(d: bytearray, r: random.Random, pool: Sequence[bytes]) -> None:
    if d:
        d[r.randrange(len(d))] = r.choice(INTERESTING_BYTES)


def _truncate(d: bytearray, r: random.Random, pool: Sequence[bytes]) -> None:
    if d:
        del d[r.randrange(len(d)):]


def _insert(d: bytearray, r: random.Random, pool: Sequence[bytes]) -> None:
    pos = r.randrange(len(d) + 1)
    d[pos:pos] = bytes(r.randrange(256) for _ in range(r.choice((1, 1, 2, 4, 8, 16))))


def _delete(d: bytearray, r: random.Random, pool: Sequence[bytes]) -> None:
    if d:
        pos = r.randrange(len(d))
        del d[pos:pos + r.choice((1, 2, 4, 8, 32))]


def _duplicate(d: bytearray, r: random.Random, pool: Sequence[bytes]) -> None:
    if d:
        pos = r.randrange(len(d))
        chunk = d[pos:pos + r.choice((1, 4, 16, 64))]
        at = r.randrange(len(d) + 1)
        d[at:at] = chunk


def _boost_length(d: bytearray, r: random.Random, pool: Sequence[bytes]) -> None:
    """Overwrite a 1/2/4/8-byte big-endian field (a length, a count, an offset) with a hostile value."""
    width = r.choice((4, 4, 4, 2, 2, 8, 1))
    if len(d) < width:
        return
    pos = r.randrange(len(d) - width + 1)
    if width == 4:
        value = r.choice((*HOSTILE_I32, len(d), len(d) - pos + 1))
        d[pos:pos + 4] = struct.pack(">I", value & 0xFFFFFFFF)
    elif width == 2:
        d[pos:pos + 2] = struct.pack(">H", r.choice(HOSTILE_I16))
    elif width == 8:
        d[pos:pos + 8] = struct.pack(">Q", r.choice(HOSTILE_I64))
    else:
        d[pos] = r.choice((0x7F, 0x80, 0xFF))


def _nudge_int(d: bytearray, r: random.Random, pool: Sequence[bytes]) -> None:
    """A length one or a few bytes off: add a small delta to a big-endian i32 or i16."""
    width = r.choice((4, 2))
    if len(d) < width:
        return
    pos = r.randrange(len(d) - width + 1)
    fmt = ">I" if width == 4 else ">H"
    value = struct.unpack_from(fmt, d, pos)[0] + r.choice((-16, -2, -1, 1, 2, 16))
    d[pos:pos + width] = struct.pack(fmt, value % (1 << (8 * width)))


def _splice(d: bytearray, r: random.Random, pool: Sequence[bytes]) -> None:
    """A prefix of this input followed by a suffix of another valid input of the same family."""
    other = r.choice(pool)
    if other:
        head = r.randrange(len(d) + 1)
        d[head:] = other[r.randrange(len(other)):]


OPS: dict[str, Callable[[bytearray, random.Random, Sequence[bytes]], None]] = {
    "flip": _flip,
    "byte": _set_byte,
    "truncate": _truncate,
    "insert": _insert,
    "delete": _delete,
    "duplicate": _duplicate,
    "length": _boost_length,
    "nudge": _nudge_int,
    "splice": _splice,
}
# length fields are where decoders go wrong: weight them up
WEIGHTS = {"flip": 3, "byte": 2, "truncate": 2, "insert": 1, "delete": 1, "duplicate": 1, "length": 4, "nudge": 2,
           "splice": 1}
_NAMES = list(WEIGHTS)
_W = [WEIGHTS[n] for n in _NAMES]


def _json_mutation(seed: bytes, r: random.Random) -> bytes | None:
    """For JSON inputs: replace, drop or duplicate one node of the tree (keeps the JSON valid, so
    the checks behind the parser are reached)."""
    try:
        tree = json.loads(seed)
    except ValueError:
        return None
    nodes: list[tuple[object, object]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for k in node:
                nodes.append((node, k))
                walk(node[k])
        elif isinstance(node, list):
            for i in range(len(node)):
                nodes.append((node, i))
                walk(node[i])

    walk(tree)
    if not nodes:
        return None
    parent, key = r.choice(nodes)
    what = r.randrange(4)
    if what == 0:
        parent[key] = r.choice(HOSTILE_JSON)  # type: ignore[index]
    elif what == 1:
        del parent[key]  # type: ignore[attr-defined]
    elif what == 2 and isinstance(parent, list):
        parent.append(parent[key])  # type: ignore[call-overload]
    else:
        value = parent[key]  # type: ignore[index]
        if isinstance(value, int) and not isinstance(value, bool):
            parent[key] = value + r.choice((-1, 1, 1 << 31, 1 << 62, -(1 << 62)))  # type: ignore[index]
        elif isinstance(value, str):
            parent[key] = r.choice((value + value, value[:-1], value[::-1], "AAAA" + value))  # type: ignore[index]
        else:
            parent[key] = r.choice(HOSTILE_JSON)  # type: ignore[index]
    return json.dumps(tree).encode()


def mutate(seed: bytes, r: random.Random, pool: Sequence[bytes], json_aware: bool = False) -> tuple[bytes, str]:
    """One mutated input and the names of the operations applied (1 to 4 stacked)."""
    if json_aware and r.random() < 0.6:
        out = _json_mutation(seed, r)
        if out is not None:
            return out, "json"
    d = bytearray(seed)
    names = r.choices(_NAMES, _W, k=r.choice((1, 1, 1, 2, 2, 3, 4)))
    for name in names:
        OPS[name](d, r, pool)
    return bytes(d), "+".join(names)
