"""The kernel ABI, declared once: status codes, op kinds and program column indices.

Why one module: the compiled kernels (``_native/*.pyx``) and their Python twins must agree on
every number that crosses between a plan compiler, a kernel and the code that reads its results.
``setup.py`` renders each family below into ``_native/abi_<family>.pxi`` (``cdef enum`` blocks)
before Cython runs, and the kernels ``include`` those files; the twins import the names from
here. A test checks that the rendered files match this module and that no kernel source declares
one of these names by hand.

This module imports nothing, so ``setup.py`` can load it by path before statemorph is installed.
"""

from __future__ import annotations

# ------------------------------------------------------------------------------- statuses
# A kernel reports a bad entry as an error code (E_*) plus the program node it was at; see
# encode_err / decode_err. E_OK is success.
E_OK = 0
E_TRUNCATED = 1          # the entry is shorter than its format needs
E_TRAILING = 2           # bytes left after the value
E_BAD_LENGTH = 3         # a length field is negative or inconsistent
E_BAD_OFFSET = 4         # a variable-length reference points outside the row's variable part
E_BAD_HEADER = 5         # RowKind byte above 3, or null bits beyond the arity
E_BAD_UTF8 = 6           # not UTF-8
E_LONE_SURROGATE = 7     # a Flink string holds a lone UTF-16 surrogate (no Arrow string can)
E_BAD_CHAR = 8           # a Flink string character varint beyond one UTF-16 unit
E_BAD_SIZE = 9           # a fixed-width entry of the wrong size
E_NULL_NOT_ALLOWED = 10  # null in a NOT NULL field
E_BAD_INLINE = 11        # an inline-data marker with a length above 7
E_BAD_NANOS = 12         # nano-of-millisecond above 999999
E_TOO_LARGE = 13         # a value exceeds the format's limit
E_BAD_ARROW = 14         # an Arrow offsets buffer is inconsistent
E_BAD_JCHAR = 15         # an Arrow string that is not one UTF-16 code unit (a Java char)
E_BAD_FLAG = 16          # POJO flags byte not 01 / 02, or a field null flag not 00 / 01
E_AVRO_INDEX = 40        # Avro enum symbol or union branch index out of range
E_AVRO_RANGE = 41        # Avro date / time / timestamp outside what the reference's values hold

HAND_BACK = 17
"""Not an error: the kernel stops at an entry it cannot vouch for and hands it back to the
per-value reference, which re-runs that one entry. Cases: a map whose keys may repeat (two keys
with one hash, a null key, or ROW / ARRAY / MAP keys, whose value equality is not byte equality);
on decode with arrays, a value whose references may overlap; in an Avro migration, a kept map
with a duplicate key or bytes read as a string that are not UTF-8. Why: duplicate keys and the
overlap rule are the reference's business; re-running the rare suspect entry keeps each such rule
in one place. It travels in the same status word as the error codes, so it shares their space."""

ERROR_MESSAGES = {
    E_TRUNCATED: "truncated: the entry is shorter than its format needs",
    E_TRAILING: "trailing bytes after the value",
    E_BAD_LENGTH: "invalid length field",
    E_BAD_OFFSET: "variable-length reference outside the row's variable part",
    E_BAD_HEADER: "invalid row header (RowKind byte > 3 or null bits beyond the arity)",
    E_BAD_UTF8: "invalid UTF-8",
    E_LONE_SURROGATE: "string holds a lone UTF-16 surrogate, which an Arrow string cannot represent",
    E_BAD_CHAR: "string character varint beyond one UTF-16 unit",
    E_BAD_SIZE: "entry has the wrong size for a fixed-width value",
    E_NULL_NOT_ALLOWED: "null in a NOT NULL field",
    E_BAD_INLINE: "invalid inline-data marker in a slot",
    E_BAD_NANOS: "nano-of-millisecond above 999999",
    E_TOO_LARGE: "value exceeds the format's limit",
    E_BAD_ARROW: "Arrow offsets buffer is inconsistent",
    E_BAD_JCHAR: "a Java char is one character below U+10000 (one UTF-16 code unit)",
    HAND_BACK: "the entry needs the reference serializer (map keys that may repeat, or overlapping references)",
    E_BAD_FLAG: "invalid POJO flags byte (01 null, 02 a value; subclass values 04 / 08 are not supported) "
                "or field null flag (00 / 01)",
    E_AVRO_INDEX: "Avro enum symbol or union branch index out of range",
    E_AVRO_RANGE: "Avro date / time / timestamp value outside the range the reference's values hold",
}


def encode_err(code: int, field: int) -> int:
    """A bad row's status: negative, carrying the error code and the program node (field)."""
    return -((code << 32) | (field + 1))


def decode_err(status: int) -> tuple[int, int]:
    """Inverse of :func:`encode_err`: (code, node or -1)."""
    v = -status
    return v >> 32, (v & 0xFFFFFFFF) - 1


# ------------------------------------------------------------------------------- leaf kinds
# DataStream leaf kinds (primitives kernels, flink-core Row programs): big-endian fixed width,
# then the variable-width and nested kinds of a flink-core Row program.
K_BOOL = 1
K_I8 = 2
K_I16 = 3
K_I32 = 4
K_I64 = 5
K_F32 = 6
K_F64 = 7
K_CHAR = 8
K_STR = 9
K_BYTES = 10
K_ROW = 11

# ------------------------------------------------------------------------------- programs
# A program is an int64 matrix of NCOL columns, one row per node of the type in pre-order; node 0
# is the top-level row, the children of a node run from node + 1 to its END.
NCOL = 8
C_KIND = 0
C_POS = 1        # field index in the parent (new schema)
C_END = 2        # first node after this node's subtree
C_ARITY = 3      # rows: number of fields (new schema)
C_SRC = 4        # RowData migrate: field index in the old row (-1: added); encode / decode: = POS
C_OLD_ARITY = 5  # RowData migrate: the old row's arity
C_FLAGS = 6      # RowData: F_*; flink-core Row: F_ROW_KIND
C_LIMIT = 7
"""RowData: compact DECIMAL(p, s): 10**p (an unscaled value must stay below it); DECIMAL(p > 18):
p; TIMESTAMP(p > 3): units of its Arrow type per millisecond (1000 for us, 10**6 for ns)."""
C_WIDTH = 7      # flink-core Row: bytes of a fixed-width leaf

# BinaryRowData slot kinds (RowData programs)
R_BOOL = 1
R_I8 = 2
R_I16 = 3
R_I32 = 4
R_I64 = 5
R_F32 = 6
R_F64 = 7
R_STR = 8
R_BIN = 9
R_ROW = 10
R_BLOB = 11
R_DEC_BIG = 12
R_TS_BIG = 13
R_DEC_COMPACT = 14
R_ARRAY = 15
R_MAP = 16

F_NOT_NULL = 1   # RowData: the field is NOT NULL
F_VERBATIM = 2   # RowData migrate: the subtree is copied as it is after validation
F_ROW_KIND = 1   # flink-core Row: the mask starts with the two RowKind bits

# flink-core Row and POJO migrate programs (kernels/composite_py.py documents them): leaf kinds S_*,
# then the POJO node, emit and constant rows
C_OLD_FLAG = 5   # Row remap: the old row's RowKind flag
C_NEW_FLAG = 6   # Row remap: the new row's RowKind flag
C_N_OLD = 3      # POJO node: old fields
C_EMIT_AT = 4    # POJO node: its first emit row
C_N_NEW = 5      # POJO node: new fields (emit rows)
C_CONST = 5      # POJO emit row: offset of its constant bytes
C_CONST_LEN = 6  # POJO emit row: length of its constant bytes
S_FIXED = 1      # fixed-width big-endian (C_WIDTH bytes)
S_STR = 2        # StringValue
S_BYTES = 3      # byte[] (i32 BE length)
S_ROW = 4        # nested flink-core Row
S_BOOL = 5
S_F32 = 6
S_F64 = 7
P_EMIT = 8
P_CONST = 9
P_POJO = 10

# Avro migrate programs (kernels/avro_py.py documents the program)
C_OP = 0
C_EMIT = 1
C_A = 2
C_B = 3
C_C = 4
C_D = 5
C_E = 6
C_UNION = 7

O_HEAD = 0
O_NULL = 1
O_BOOL = 2
O_INT = 3
O_LONG = 4
O_FLOAT = 5
O_DOUBLE = 6
O_BLOB = 7
O_FIXED = 8
O_ENUM = 9
O_UNION = 10
O_ARRAY = 11
O_MAP = 12
O_RECORD = 13

W_SKIP = 0
W_I32 = 1
W_I64 = 2
W_F32 = 3
W_F64 = 4
W_VALUE = 5
W_BOOL = 6
W_UTF8 = 7
W_TREE = 8

# Key-group block scans of Flink keyed-state files (kernels/flinkblocks_py.py documents them)
KG_OK = 0
KG_SHORT = 1         # fewer than 2 bytes
KG_STATE_ID = 2      # a state id not below the header's state count
KG_TRUNCATED = 3     # an entry's length field runs past the end
KG_KEY_LENGTH = 4    # key length <= 0, or the key runs past the end
KG_VALUE_LENGTH = 5  # value length < 0, or the value runs past the end
KG_NO_MARK = 6       # no state id or end mark after a run
KG_CAPACITY = 7      # more entries or runs than the output arrays hold
KG_LIST = 8          # a list value that does not split into elements (``list_split``)

FAMILIES: dict[str, tuple[str, ...]] = {
    "common": ("E_OK", "E_TRUNCATED", "E_TRAILING", "E_BAD_LENGTH", "E_BAD_OFFSET", "E_BAD_HEADER",
               "E_BAD_UTF8", "E_LONE_SURROGATE", "E_BAD_CHAR", "E_BAD_SIZE", "E_NULL_NOT_ALLOWED",
               "E_BAD_INLINE", "E_BAD_NANOS", "E_TOO_LARGE", "E_BAD_ARROW", "E_BAD_JCHAR", "E_BAD_FLAG",
               "E_AVRO_INDEX", "E_AVRO_RANGE", "HAND_BACK",
               "K_BOOL", "K_I8", "K_I16", "K_I32", "K_I64", "K_F32", "K_F64", "K_CHAR"),
    "rowdata": ("NCOL", "C_KIND", "C_POS", "C_END", "C_ARITY", "C_SRC", "C_OLD_ARITY", "C_FLAGS", "C_LIMIT",
                "R_BOOL", "R_I8", "R_I16", "R_I32", "R_I64", "R_F32", "R_F64", "R_STR", "R_BIN", "R_ROW",
                "R_BLOB", "R_DEC_BIG", "R_TS_BIG", "R_DEC_COMPACT", "R_ARRAY", "R_MAP",
                "F_NOT_NULL", "F_VERBATIM"),
    "corerow": ("NCOL", "C_KIND", "C_POS", "C_END", "C_ARITY", "C_FLAGS", "C_WIDTH", "K_STR", "K_BYTES",
                "K_ROW", "F_ROW_KIND"),
    "composite": ("NCOL", "C_KIND", "C_POS", "C_END", "C_ARITY", "C_OLD_FLAG", "C_NEW_FLAG", "C_WIDTH",
                  "C_N_OLD", "C_EMIT_AT", "C_N_NEW", "C_SRC", "C_CONST", "C_CONST_LEN",
                  "S_FIXED", "S_STR", "S_BYTES", "S_ROW", "S_BOOL", "S_F32", "S_F64", "P_EMIT", "P_CONST", "P_POJO"),
    "avro": ("NCOL", "C_OP", "C_EMIT", "C_A", "C_B", "C_C", "C_D", "C_E", "C_UNION",
             "O_HEAD", "O_NULL", "O_BOOL", "O_INT", "O_LONG", "O_FLOAT", "O_DOUBLE", "O_BLOB", "O_FIXED",
             "O_ENUM", "O_UNION", "O_ARRAY", "O_MAP", "O_RECORD",
             "W_SKIP", "W_I32", "W_I64", "W_F32", "W_F64", "W_VALUE", "W_BOOL", "W_UTF8", "W_TREE"),
    "flinkblocks": ("KG_OK", "KG_SHORT", "KG_STATE_ID", "KG_TRUNCATED", "KG_KEY_LENGTH", "KG_VALUE_LENGTH",
                    "KG_NO_MARK", "KG_CAPACITY", "KG_LIST"),
}
"""Which names each ``_native/abi_<family>.pxi`` declares. ``common`` (the statuses and leaf kinds)
comes with ``cursor.pxd``, which every kernel cimports."""


def render_pxi(family: str) -> str:
    """The text of ``_native/abi_<family>.pxi``: one ``cdef enum`` with this module's values."""
    values = globals()
    lines = [f"# Generated by setup.py from src/statemorph/kernels/abi.py ({family}); do not edit.",
             "cdef enum:"]
    lines += [f"    {name} = {values[name]}" for name in FAMILIES[family]]
    return "\n".join(lines) + "\n"
