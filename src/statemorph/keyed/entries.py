"""The row layout of keyed state entries, shared by the backends' bulk paths and the savepoint
formats: one row per entry (per list element), every field in Flink's serialized form.

=========  ==========================================================================
column     content
=========  ==========================================================================
key_group  int32, the key group of the key (``murmurHash(key.hashCode()) % max_parallelism``)
key        binary, the key serialized with the key serializer
namespace  binary, the namespace serialized with the namespace serializer
user_key   binary, map state only: the map key serialized with the user key serializer
index      int32, list state only: the element's position in its list (0-based)
value      binary: value state -> the value; list state -> ONE element (one row per element);
           map state -> the map value, or null for a null map value
=========  ==========================================================================
"""

from __future__ import annotations

import pyarrow as pa

from .kinds import StateKind

COL_KEY_GROUP = "key_group"
COL_KEY = "key"
COL_NAMESPACE = "namespace"
COL_USER_KEY = "user_key"
COL_INDEX = "index"
COL_VALUE = "value"


def state_schema(kind: StateKind | str) -> pa.Schema:
    """The Arrow schema of one state's Parquet files."""
    kind = StateKind(kind)
    fields = [
        pa.field(COL_KEY_GROUP, pa.int32(), nullable=False),
        pa.field(COL_KEY, pa.binary(), nullable=False),
        pa.field(COL_NAMESPACE, pa.binary(), nullable=False),
    ]
    if kind is StateKind.MAP:
        fields.append(pa.field(COL_USER_KEY, pa.binary(), nullable=False))
        fields.append(pa.field(COL_VALUE, pa.binary(), nullable=True))
    elif kind is StateKind.LIST:
        fields.append(pa.field(COL_INDEX, pa.int32(), nullable=False))
        fields.append(pa.field(COL_VALUE, pa.binary(), nullable=False))
    else:
        fields.append(pa.field(COL_VALUE, pa.binary(), nullable=False))
    return pa.schema(fields)


__all__ = ["COL_INDEX", "COL_KEY", "COL_KEY_GROUP", "COL_NAMESPACE", "COL_USER_KEY", "COL_VALUE", "state_schema"]
