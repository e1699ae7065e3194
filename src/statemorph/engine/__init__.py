"""Bulk savepoint rewrites without Spark: migrate, read (decode) and bootstrap (encode) whole
states over pyarrow, streaming with bounded memory. :mod:`statemorph.spark` runs the same plan and
the same batch transforms on a Spark cluster.

::

    from statemorph import engine
    report = engine.migrate_savepoint("sp-old", "sp-new", [ValueStateDescriptor("events", new_ser)])
    table = engine.read_state_table("sp-new", "events")
"""

from .batches import ColumnDecoder, ColumnMigrator, IdentityTransform, StateDecoder, StateEncoder
from .keys import key_groups
from .local import RewriteReport, migrate_savepoint, read_state, read_state_table, write_state
from .plan import COPY, INCOMPATIBLE, KEEP, MIGRATE, RewritePlan, StatePlan, plan_rewrite

__all__ = [
    "COPY",
    "ColumnDecoder",
    "ColumnMigrator",
    "INCOMPATIBLE",
    "IdentityTransform",
    "KEEP",
    "MIGRATE",
    "RewritePlan",
    "RewriteReport",
    "StateDecoder",
    "StateEncoder",
    "StatePlan",
    "key_groups",
    "migrate_savepoint",
    "plan_rewrite",
    "read_state",
    "read_state_table",
    "write_state",
]
