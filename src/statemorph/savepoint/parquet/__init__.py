"""statemorph's Parquet savepoint form: ``_metadata.json`` plus one Parquet dataset per state with
binary columns (key_group, key, namespace, [user_key | index], value), readable by any Arrow tool,
Spark or DuckDB. :mod:`.format` is the layout and the strict metadata parser, :mod:`.reader` reads
(every file verified against its checksum), :mod:`.writer` writes atomically."""

from .format import FORMAT_VERSION, METADATA_FILE, FileEntry, SavepointMetadata, StateMetadata, state_schema
from .reader import (
    iter_state_batches,
    read_metadata,
    read_state_table,
    state_files,
    verify_key_groups,
    verify_savepoint,
)
from .writer import SavepointWriter, StateWriter, remove_stale_temp_dirs

__all__ = [
    "FORMAT_VERSION", "METADATA_FILE", "FileEntry", "SavepointMetadata", "SavepointWriter", "StateMetadata",
    "StateWriter", "iter_state_batches", "read_metadata", "read_state_table", "remove_stale_temp_dirs", "state_files",
    "state_schema", "verify_key_groups", "verify_savepoint",
]
