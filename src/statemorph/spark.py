"""Moved to :mod:`statemorph.engine.spark` (the Spark runner sits beside the local one and runs
the same plan); ``statemorph.spark`` stays as the short public path."""

from .engine.bootstrap import StateData
from .engine.spark import (
    ArrowColumnUDF,
    decode_udf,
    ensure_python_env,
    migrate_savepoint,
    migrate_udf,
    read_operator_state,
    read_state,
    rescale_savepoint,
    savepoint_metadata,
    session,
    write_savepoint,
    write_state,
)

__all__ = [
    "ArrowColumnUDF",
    "decode_udf",
    "ensure_python_env",
    "migrate_savepoint",
    "migrate_udf",
    "StateData",
    "read_operator_state",
    "read_state",
    "rescale_savepoint",
    "savepoint_metadata",
    "session",
    "write_savepoint",
    "write_state",
]
