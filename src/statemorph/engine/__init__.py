"""The engine: the ONE planner (:mod:`.plan`, what a check or a rewrite does to each state) and
its runners: :mod:`.local` (migrate, read (decode) and bootstrap (encode) whole states over
pyarrow, streaming with bounded memory) and :mod:`.spark` (the same plan and the same batch
transforms on a Spark cluster; imported on demand, pyspark is optional).

::

    from statemorph import engine
    report = engine.migrate_savepoint("sp-old", "sp-new", [ValueStateDescriptor("events", new_ser)])
    table = engine.read_state_table("sp-new", "events")
"""

from .batches import ColumnDecoder, ColumnMigrator, IdentityTransform, StateDecoder, StateEncoder
from .keys import key_groups
from .local import RewriteReport, migrate_savepoint, read_state, read_state_table, write_state
from .plan import COPY, INCOMPATIBLE, KEEP, MIGRATE, NEW, RewritePlan, StatePlan, check_savepoint, plan_rewrite

__all__ = [
    "COPY",
    "ColumnDecoder",
    "ColumnMigrator",
    "INCOMPATIBLE",
    "IdentityTransform",
    "KEEP",
    "MIGRATE",
    "NEW",
    "RewritePlan",
    "RewriteReport",
    "StateDecoder",
    "StateEncoder",
    "StatePlan",
    "check_savepoint",
    "key_groups",
    "migrate_savepoint",
    "plan_rewrite",
    "read_state",
    "read_state_table",
    "write_state",
]
