"""The kernel ABI, declared once: status codes, op kinds and program column indices.

Why one module: the compiled kernels (``kernels/_native/*.pyx``) and their Python twins must agree on
every number that crosses between a plan compiler, a kernel and the code that reads its results.
``setup.py`` renders each family below into ``kernels/_native/abi_<family>.pxi`` (``cdef enum`` blocks)
before Cython runs, and the kernels ``include`` those files; the twins import the names from
here. A test checks that the rendered files match this module and that no kernel source declares
one of these names by hand.

This module imports nothing, so ``setup.py`` can load it by path before statemorph is installed.
"""

from __future__ import annotations

# ------------------------------------------------------------------------------- statuses
# A kernel reports a bad entry as an error code (ERR_*) plus the program node it was at; see
# encode_err / decode_err. ERR_OK is success.
ERR_OK = 0
ERR_TRUNCATED = 1          # the entry is shorter than its format needs
ERR_TRAILING = 2           # bytes left after the value
ERR_BAD_LENGTH = 3         # a length field is negative or inconsistent
ERR_BAD_OFFSET = 4         # a variable-length reference points outside the row's variable part
ERR_BAD_HEADER = 5         # RowKind byte above 3, or null bits beyond the arity
ERR_BAD_UTF8 = 6           # not UTF-8
ERR_LONE_SURROGATE = 7     # a Flink string holds a lone UTF-16 surrogate (no Arrow string can)
ERR_BAD_CHAR = 8           # a Flink string character varint beyond one UTF-16 unit
ERR_BAD_SIZE = 9           # a fixed-width entry of the wrong size
ERR_NULL_NOT_ALLOWED = 10  # null in a NOT NULL field
ERR_BAD_INLINE = 11        # an inline-data marker with a length above 7
ERR_BAD_NANOS = 12         # nano-of-millisecond above 999999
ERR_TOO_LARGE = 13         # a value exceeds the format's limit
ERR_BAD_ARROW = 14         # an Arrow offsets buffer is inconsistent
ERR_BAD_JCHAR = 15         # an Arrow string that is not one UTF-16 code unit (a Java char)
ERR_BAD_FLAG = 16          # POJO flags byte not 01 / 02, or a field null flag not 00 / 01
ERR_AVRO_INDEX = 40        # Avro enum symbol or union branch index out of range
ERR_AVRO_RANGE = 41        # Avro date / time / timestamp outside what the reference's values hold

HAND_BACK = 17
"""Not an error: the kernel stops at an entry it cannot vouch for and hands it back to the
per-value reference, which re-runs that one entry. Cases: a map whose keys may repeat (two keys
with one hash, a null key, or ROW / ARRAY / MAP keys, whose value equality is not byte equality);
on decode with arrays, a value whose references may overlap; in an Avro migration, a kept map
with a duplicate key or bytes read as a string that are not UTF-8. Why: duplicate keys and the
overlap rule are the reference's business; re-running the rare suspect entry keeps each such rule
in one place. It travels in the same status word as the error codes, so it shares their space."""

ERROR_MESSAGES = {
    ERR_TRUNCATED: "truncated: the entry is shorter than its format needs",
    ERR_TRAILING: "trailing bytes after the value",
    ERR_BAD_LENGTH: "invalid length field",
    ERR_BAD_OFFSET: "variable-length reference outside the row's variable part",
    ERR_BAD_HEADER: "invalid row header (RowKind byte > 3 or null bits beyond the arity)",
    ERR_BAD_UTF8: "invalid UTF-8",
    ERR_LONE_SURROGATE: "string holds a lone UTF-16 surrogate, which an Arrow string cannot represent",
    ERR_BAD_CHAR: "string character varint beyond one UTF-16 unit",
    ERR_BAD_SIZE: "entry has the wrong size for a fixed-width value",
    ERR_NULL_NOT_ALLOWED: "null in a NOT NULL field",
    ERR_BAD_INLINE: "invalid inline-data marker in a slot",
    ERR_BAD_NANOS: "nano-of-millisecond above 999999",
    ERR_TOO_LARGE: "value exceeds the format's limit",
    ERR_BAD_ARROW: "Arrow offsets buffer is inconsistent",
    ERR_BAD_JCHAR: "a Java char is one character below U+10000 (one UTF-16 code unit)",
    HAND_BACK: "the entry needs the reference serializer (map keys that may repeat, or overlapping references)",
    ERR_BAD_FLAG: "invalid POJO flags byte (01 null, 02 a value; subclass values 04 / 08 are not supported) "
                "or field null flag (00 / 01)",
    ERR_AVRO_INDEX: "Avro enum symbol or union branch index out of range",
    ERR_AVRO_RANGE: "Avro date / time / timestamp value outside the range the reference's values hold",
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
LEAF_BOOL = 1
LEAF_I8 = 2
LEAF_I16 = 3
LEAF_I32 = 4
LEAF_I64 = 5
LEAF_F32 = 6
LEAF_F64 = 7
LEAF_CHAR = 8
LEAF_STR = 9
LEAF_BYTES = 10
LEAF_ROW = 11

# ------------------------------------------------------------------------------- programs
# A program is an int64 matrix of PROGRAM_COLUMNS columns, one row per node of the type in pre-order; node 0
# is the top-level row, the children of a node run from node + 1 to its END.
PROGRAM_COLUMNS = 8
COL_KIND = 0
COL_POS = 1        # field index in the parent (new schema)
COL_END = 2        # first node after this node's subtree
COL_ARITY = 3      # rows: number of fields (new schema)
COL_SRC = 4        # RowData migrate: field index in the old row (-1: added); encode / decode: = POS
COL_OLD_ARITY = 5  # RowData migrate: the old row's arity
COL_FLAGS = 6      # RowData: FLAG_*; flink-core Row: FLAG_ROW_KIND
COL_LIMIT = 7
"""RowData: compact DECIMAL(p, s): 10**p (an unscaled value must stay below it); DECIMAL(p > 18):
p; TIMESTAMP(p > 3): units of its Arrow type per millisecond (1000 for us, 10**6 for ns)."""
COL_WIDTH = 7      # flink-core Row: bytes of a fixed-width leaf

# BinaryRowData slot kinds (RowData programs)
SLOT_BOOL = 1
SLOT_I8 = 2
SLOT_I16 = 3
SLOT_I32 = 4
SLOT_I64 = 5
SLOT_F32 = 6
SLOT_F64 = 7
SLOT_STR = 8
SLOT_BIN = 9
SLOT_ROW = 10
SLOT_BLOB = 11
SLOT_DEC_BIG = 12
SLOT_TS_BIG = 13
SLOT_DEC_COMPACT = 14
SLOT_ARRAY = 15
SLOT_MAP = 16

FLAG_NOT_NULL = 1   # RowData: the field is NOT NULL
FLAG_VERBATIM = 2   # RowData migrate: the subtree is copied as it is after validation
FLAG_ROW_KIND = 1   # flink-core Row: the mask starts with the two RowKind bits

# flink-core Row and POJO migrate programs (kernels/composite_py.py documents them): leaf kinds COMPOSITE_*,
# then the POJO node, emit and constant rows
COL_OLD_FLAG = 5   # Row remap: the old row's RowKind flag
COL_NEW_FLAG = 6   # Row remap: the new row's RowKind flag
COL_N_OLD = 3      # POJO node: old fields
COL_EMIT_AT = 4    # POJO node: its first emit row
COL_N_NEW = 5      # POJO node: new fields (emit rows)
COL_CONST = 5      # POJO emit row: offset of its constant bytes
COL_CONST_LEN = 6  # POJO emit row: length of its constant bytes
COMPOSITE_FIXED = 1      # fixed-width big-endian (COL_WIDTH bytes)
COMPOSITE_STR = 2        # StringValue
COMPOSITE_BYTES = 3      # byte[] (i32 BE length)
COMPOSITE_ROW = 4        # nested flink-core Row
COMPOSITE_BOOL = 5
COMPOSITE_F32 = 6
COMPOSITE_F64 = 7
COMPOSITE_EMIT = 8
COMPOSITE_CONST = 9
COMPOSITE_POJO = 10

# Avro migrate programs (kernels/avro_py.py documents the program)
COL_OP = 0
COL_EMIT = 1
COL_A = 2
COL_B = 3
COL_C = 4
COL_D = 5
COL_E = 6
COL_UNION = 7

AVRO_OP_HEAD = 0
AVRO_OP_NULL = 1
AVRO_OP_BOOL = 2
AVRO_OP_INT = 3
AVRO_OP_LONG = 4
AVRO_OP_FLOAT = 5
AVRO_OP_DOUBLE = 6
AVRO_OP_BLOB = 7
AVRO_OP_FIXED = 8
AVRO_OP_ENUM = 9
AVRO_OP_UNION = 10
AVRO_OP_ARRAY = 11
AVRO_OP_MAP = 12
AVRO_OP_RECORD = 13

EMIT_SKIP = 0
EMIT_I32 = 1
EMIT_I64 = 2
EMIT_F32 = 3
EMIT_F64 = 4
EMIT_VALUE = 5
EMIT_BOOL = 6
EMIT_UTF8 = 7
EMIT_TREE = 8

# Key-group block scans of Flink keyed-state files (kernels/flinkblocks_py.py documents them)
BLOCK_OK = 0
BLOCK_SHORT = 1         # fewer than 2 bytes
BLOCK_STATE_ID = 2      # a state id not below the header's state count
BLOCK_TRUNCATED = 3     # an entry's length field runs past the end
BLOCK_KEY_LENGTH = 4    # key length <= 0, or the key runs past the end
BLOCK_VALUE_LENGTH = 5  # value length < 0, or the value runs past the end
BLOCK_NO_MARK = 6       # no state id or end mark after a run
BLOCK_CAPACITY = 7      # more entries or runs than the output arrays hold
BLOCK_LIST = 8          # a list value that does not split into elements (``list_split``)

# RocksDB block-based table (SST) reads (kernels/sst_py.py documents them). Below SST_UNSUPPORTED:
# the input is damaged; from it on: a feature the kernels do not read (the caller reads that
# column family through RocksDB instead); SST_OK and the SST_* stops from SST_END on are not errors.
SST_OK = 0
SST_TRUNCATED = 1       # a block, trailer or entry runs past its bounds
SST_CHECKSUM = 2        # a block's checksum does not match its bytes
SST_SNAPPY = 3          # a Snappy block that does not decompress to its stated length
SST_ENTRY = 4           # an entry whose lengths or shared prefix do not fit its block
SST_ORDER = 5           # internal keys out of order (damaged file)
SST_KEY = 6             # an internal key shorter than its 8-byte trailer
SST_UNSUPPORTED = 16    # from here on: a feature the kernels do not read
SST_COMPRESSION = 16    # a compression type other than none / Snappy
SST_CHECKSUM_TYPE = 17  # a checksum type other than none / CRC32c / XXH3
SST_HASH_INDEX = 18     # a data block with a hash index
SST_ENTRY_TYPE = 19     # a value type other than Put / Delete / SingleDelete / Merge
SST_NO_MERGE = 20       # merge operands without a supported merge operator
SST_END = 32            # sst_merge: every input is read, or the range's end is reached
SST_GROUP = 33          # sst_merge: the next key is in another key group
SST_SLICE = 34          # sst_merge: the run reached its byte budget or the output's capacity
SST_REFILL = 35         # sst_merge: an input needs its next blocks decoded
SST_CAPACITY = 36       # an output buffer is too small

# RocksDB SST writes (kernels/sstwrite_py.py): the slots of the ``state`` array carried from
# one sst_data call to the next.
STATE_OUT = 0           # bytes of ``out`` written (the caller writes them and sets this back to 0)
STATE_FILE_POS = 1      # the file offset of ``out[0]`` plus STATE_OUT: where the next block starts
STATE_INDEX = 2         # bytes of the index entries written into ``index``
STATE_BLOCKS = 3        # data blocks written (index entries, their restarts in ``index_restarts``)
STATE_ENTRIES = 4       # entries written
STATE_RAW_KEYS = 5      # internal-key bytes written (RocksDB's ``rocksdb.raw.key.size``)
STATE_RAW_VALUES = 6    # value bytes written (``rocksdb.raw.value.size``)
STATE_SIZE = 7          # slots of the array

FAMILIES: dict[str, tuple[str, ...]] = {
    "common": ("ERR_OK", "ERR_TRUNCATED", "ERR_TRAILING", "ERR_BAD_LENGTH", "ERR_BAD_OFFSET", "ERR_BAD_HEADER",
               "ERR_BAD_UTF8", "ERR_LONE_SURROGATE", "ERR_BAD_CHAR", "ERR_BAD_SIZE", "ERR_NULL_NOT_ALLOWED",
               "ERR_BAD_INLINE", "ERR_BAD_NANOS", "ERR_TOO_LARGE", "ERR_BAD_ARROW", "ERR_BAD_JCHAR", "ERR_BAD_FLAG",
               "ERR_AVRO_INDEX", "ERR_AVRO_RANGE", "HAND_BACK", "LEAF_BOOL", "LEAF_I8", "LEAF_I16", "LEAF_I32",
               "LEAF_I64", "LEAF_F32", "LEAF_F64", "LEAF_CHAR"),
    "rowdata": ("PROGRAM_COLUMNS", "COL_KIND", "COL_POS", "COL_END", "COL_ARITY", "COL_SRC", "COL_OLD_ARITY",
                "COL_FLAGS", "COL_LIMIT", "SLOT_BOOL", "SLOT_I8", "SLOT_I16", "SLOT_I32", "SLOT_I64", "SLOT_F32",
                "SLOT_F64", "SLOT_STR", "SLOT_BIN", "SLOT_ROW", "SLOT_BLOB", "SLOT_DEC_BIG", "SLOT_TS_BIG",
                "SLOT_DEC_COMPACT", "SLOT_ARRAY", "SLOT_MAP", "FLAG_NOT_NULL", "FLAG_VERBATIM"),
    "corerow": ("PROGRAM_COLUMNS", "COL_KIND", "COL_POS", "COL_END", "COL_ARITY", "COL_FLAGS", "COL_WIDTH",
                "LEAF_STR", "LEAF_BYTES", "LEAF_ROW", "FLAG_ROW_KIND"),
    "composite": ("PROGRAM_COLUMNS", "COL_KIND", "COL_POS", "COL_END", "COL_ARITY", "COL_OLD_FLAG", "COL_NEW_FLAG",
                  "COL_WIDTH", "COL_N_OLD", "COL_EMIT_AT", "COL_N_NEW", "COL_SRC", "COL_CONST", "COL_CONST_LEN",
                  "COMPOSITE_FIXED", "COMPOSITE_STR", "COMPOSITE_BYTES", "COMPOSITE_ROW", "COMPOSITE_BOOL",
                  "COMPOSITE_F32", "COMPOSITE_F64", "COMPOSITE_EMIT", "COMPOSITE_CONST", "COMPOSITE_POJO"),
    "avro": ("PROGRAM_COLUMNS", "COL_OP", "COL_EMIT", "COL_A", "COL_B", "COL_C", "COL_D", "COL_E", "COL_UNION",
             "AVRO_OP_HEAD", "AVRO_OP_NULL", "AVRO_OP_BOOL", "AVRO_OP_INT", "AVRO_OP_LONG", "AVRO_OP_FLOAT",
             "AVRO_OP_DOUBLE", "AVRO_OP_BLOB", "AVRO_OP_FIXED", "AVRO_OP_ENUM", "AVRO_OP_UNION", "AVRO_OP_ARRAY",
             "AVRO_OP_MAP", "AVRO_OP_RECORD", "EMIT_SKIP", "EMIT_I32", "EMIT_I64", "EMIT_F32", "EMIT_F64",
             "EMIT_VALUE", "EMIT_BOOL", "EMIT_UTF8", "EMIT_TREE"),
    "flinkblocks": ("BLOCK_OK", "BLOCK_SHORT", "BLOCK_STATE_ID", "BLOCK_TRUNCATED", "BLOCK_KEY_LENGTH",
                    "BLOCK_VALUE_LENGTH", "BLOCK_NO_MARK", "BLOCK_CAPACITY", "BLOCK_LIST"),
    "sst": ("SST_OK", "SST_TRUNCATED", "SST_CHECKSUM", "SST_SNAPPY", "SST_ENTRY", "SST_ORDER", "SST_KEY",
            "SST_COMPRESSION", "SST_CHECKSUM_TYPE", "SST_HASH_INDEX", "SST_ENTRY_TYPE",
            "SST_NO_MERGE", "SST_END", "SST_GROUP", "SST_SLICE", "SST_REFILL", "SST_CAPACITY"),
    "sstwrite": ("STATE_OUT", "STATE_FILE_POS", "STATE_INDEX", "STATE_BLOCKS", "STATE_ENTRIES", "STATE_RAW_KEYS",
                 "STATE_RAW_VALUES", "STATE_SIZE"),
}
"""Which names each ``kernels/_native/abi_<family>.pxi`` declares. ``common`` (the statuses and leaf kinds)
comes with ``cursor.pxd``, which every kernel cimports."""


def render_pxi(family: str) -> str:
    """The text of ``kernels/_native/abi_<family>.pxi``: one ``cdef enum`` with this module's values."""
    values = globals()
    lines = [f"# Generated by setup.py from src/statemorph/kernels/abi.py ({family}); do not edit.",
             "cdef enum:"]
    lines += [f"    {name} = {values[name]}" for name in FAMILIES[family]]
    return "\n".join(lines) + "\n"
