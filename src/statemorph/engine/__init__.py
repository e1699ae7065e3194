"""The engine: the ONE planner (:mod:`.plan`, what a check or a rewrite does to each state) and
its runners: :mod:`.local` (migrate, read (decode) and bootstrap (encode) whole states over
pyarrow, streaming with bounded memory) and :mod:`.spark` (the same plan and the same batch
transforms on a Spark cluster; imported on demand, pyspark is optional).

::

    from statemorph import engine
    report = engine.migrate_savepoint("sp-old", "sp-new", [ValueStateDescriptor("events", new_ser)])
    table = engine.read_state_table("sp-new", "events")

    # Flink's own canonical savepoints: states belong to operators (uid, or uid hash)
    new_events = {"events-state": [ValueStateDescriptor("events", new_ser)]}
    report = engine.migrate_savepoint("flink-sp", "flink-sp-v2", new_events)
    table = engine.read_flink_state_table("flink-sp-v2", "events-state", "events")

    # the State Processor API's writer half: bootstrap a new Flink savepoint, change max parallelism
    engine.write_flink_savepoint("boot", operator="events-state", key_serializer=LongSerializer(),
                                 states={"events": engine.StateData(table, events_ser)}, max_parallelism=128)
    engine.rescale_flink_savepoint("flink-sp", "flink-sp-256", "events-state", max_parallelism=256)

The names are imported on first use (PEP 562, as ``statemorph.savepoint`` does for the planner).
Why: every fresh Spark Python worker imports this package for its first task
(:mod:`.spark_flink`), and a task needs its own runner and the kernels only; importing every
runner (the bootstrap writer, the Parquet engine, and pandas through pyarrow) was about a second
of each executor's first task.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # type checkers see the names where they live; at run time each is imported on first use
    from .batches import ColumnDecoder, ColumnMigrator, IdentityTransform, StateDecoder, StateEncoder
    from .bootstrap import BootstrapReport, StateData, write_flink_savepoint
    from .convert import ConvertReport
    from .flink import (
        FlinkMigrateReport,
        FlinkPlan,
        flink_savepoint_metadata,
        inspect_flink_savepoint,
        migrate_flink_savepoint,
        plan_flink_savepoint,
        read_flink_operator_state,
        read_flink_state_table,
    )
    from .flink_ranges import read_flink_state, read_flink_state_schema
    from .formats import SavepointFormat, check_savepoint, convert_savepoint, format_of, migrate_savepoint
    from .keys import key_groups
    from .local import RewriteReport, read_state, read_state_table, write_state
    from .modify import ModifyReport, modify_flink_savepoint
    from .operator_bootstrap import OperatorStateData, write_operator_state_savepoint
    from .plan import (
        COPY,
        INCOMPATIBLE,
        KEEP,
        MIGRATE,
        NEW,
        CheckReport,
        RewritePlan,
        StateCheck,
        StatePlan,
        plan_rewrite,
    )
    from .rescale import rescale_flink_savepoint

_HOME: dict[str, str] = {}
"""Each public name → the submodule that defines it."""
for _module, _names in {
    "batches": ("ColumnDecoder", "ColumnMigrator", "IdentityTransform", "StateDecoder", "StateEncoder"),
    "bootstrap": ("BootstrapReport", "StateData", "write_flink_savepoint"),
    "convert": ("ConvertReport",),
    "flink": (
        "FlinkMigrateReport",
        "FlinkPlan",
        "flink_savepoint_metadata",
    "format_of",
        "inspect_flink_savepoint",
        "migrate_flink_savepoint",
        "plan_flink_savepoint",
        "read_flink_operator_state",
        "read_flink_state_table",
    ),
    "flink_ranges": ("read_flink_state", "read_flink_state_schema"),
    "formats": ("SavepointFormat", "check_savepoint", "convert_savepoint", "format_of", "migrate_savepoint"),
    "keys": ("key_groups",),
    "local": ("RewriteReport", "read_state", "read_state_table", "write_state"),
    "modify": ("ModifyReport", "modify_flink_savepoint"),
    "operator_bootstrap": ("OperatorStateData", "write_operator_state_savepoint"),
    "plan": (
        "COPY",
        "CheckReport",
        "INCOMPATIBLE",
        "KEEP",
        "MIGRATE",
        "NEW",
        "RewritePlan",
        "StateCheck",
        "StatePlan",
        "plan_rewrite",
    ),
    "rescale": ("rescale_flink_savepoint",),
}.items():
    _HOME.update(dict.fromkeys(_names, _module))


def __getattr__(name: str) -> Any:
    mod = _HOME.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))


__all__ = [
    "BootstrapReport",
    "COPY",
    "CheckReport",
    "ColumnDecoder",
    "ColumnMigrator",
    "ConvertReport",
    "FlinkMigrateReport",
    "FlinkPlan",
    "INCOMPATIBLE",
    "IdentityTransform",
    "KEEP",
    "ModifyReport",
    "MIGRATE",
    "NEW",
    "OperatorStateData",
    "RewritePlan",
    "RewriteReport",
    "SavepointFormat",
    "StateDecoder",
    "StateCheck",
    "StateEncoder",
    "StateData",
    "StatePlan",
    "check_savepoint",
    "convert_savepoint",
    "flink_savepoint_metadata",
    "format_of",
    "inspect_flink_savepoint",
    "key_groups",
    "migrate_flink_savepoint",
    "migrate_savepoint",
    "modify_flink_savepoint",
    "plan_flink_savepoint",
    "plan_rewrite",
    "read_flink_operator_state",
    "read_flink_state",
    "read_flink_state_schema",
    "read_flink_state_table",
    "read_state",
    "read_state_table",
    "rescale_flink_savepoint",
    "write_flink_savepoint",
    "write_operator_state_savepoint",
    "write_state",
]
