"""The Events values of real Flink savepoints take the bulk RowData kernel, not the per-value
reference. Their snapshot is Flink's own ``RowDataSerializerSnapshot``
(``FlinkRowDataSerializerSnapshot``), which the kernel table did not list, so every real Flink
savepoint migrated ~6x slower (benchmarks/RESULTS.md, "Flink savepoint rewrite"). The bytes must
be exactly what the reference writes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from savepoint.flink.flink_cases import EVOLVED_EVENTS, case_spec, committed_cases
from savepoint.flink.format_helpers import state_operator

from statemorph import arrow
from statemorph.bulk import capabilities
from statemorph.bulk.migrator import migrate_per_value
from statemorph.bulk.row_errors import RowErrors
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.description import describe_operators, find_keyed_operator
from statemorph.serializers import FlinkRowDataSerializerSnapshot, RowDataSerializer

CASES = [c for c in committed_cases() if "events" in case_spec(c)["states"]]


def _events(case: Path) -> tuple[FlinkRowDataSerializerSnapshot, pa.Array]:
    sp = FlinkSavepoint(case / "savepoint")
    uid = state_operator(sp)
    op = find_keyed_operator(describe_operators(sp), uid)
    snap = op.states["events"].snapshot("value_serializer")
    values = pa.concat_arrays([b.column("value") for b in sp.iter_state_batches(uid, "events")])
    return snap, values


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_flink_events_migrate_through_the_kernel_byte_equal_to_the_reference(case: Path) -> None:
    snap, values = _events(case)
    assert isinstance(snap, FlinkRowDataSerializerSnapshot)
    new = RowDataSerializer(EVOLVED_EVENTS)
    compat = snap.resolve_schema_compatibility(new)
    prog, kernel = capabilities.remap_program(snap, new, compat)
    assert kernel == "rowdata" and prog is not None, "the Flink snapshot must select the bulk RowData kernel"
    bulk = arrow.migrate(values, snap, new, threads=2)
    reference, _ = migrate_per_value(values, snap, new, compat, RowErrors("raise", "migrate", None), 0)
    assert len(values) > 0
    assert bulk.to_pylist() == reference.to_pylist()
