"""Bulk migrate: entries written under an old serializer snapshot → the new serializer's bytes.

Why here: compatibility is resolved once per call; the capability table names the byte-remap
kernel for the pair (RowData, flink-core Row, POJO, Avro), whose program is compiled once and run
over every entry (one pass into estimated buffers, or two passes for flink-core Row); anything
else migrates per value through the reference implementation (the oracle the kernels equal).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import IncompatibleSchemaError, StateFormatError, check_on_error
from ..migration import migrate_resolved, resolved_target
from . import inputs, tiers
from .capabilities import remap_program
from .chunks import per_chunk, thread_ranges
from .errors import BulkResult, RowErrors, per_row_error
from .inputs import binary_input, validity_bits
from .output import binary_from_values, one_pass_output, two_pass_output
from .tiers import abi, jit, plans


def migrate(binary_array: Any, prior_snapshot: Any, new_serializer: Any, *, threads: int = 1,
            on_error: str = "raise") -> BulkResult:
    """Rewrite every entry written under ``prior_snapshot`` into ``new_serializer``'s format: a
    binary array in a :class:`BulkResult` (null in → null out). A bad entry raises a
    :class:`StateFormatError` naming the row and field path (``on_error="raise"``), or becomes a
    null (``"null"``) or is left out (``"skip"``), its error in the result.

    Compatibility is resolved once (incompatible → :class:`IncompatibleSchemaError` naming the
    fields). RowData → RowData, flink-core Row → Row, POJO → POJO (fields added, removed,
    reordered) and Avro → Avro run byte-remap kernels when the program compiler can express the
    plan; other serializers migrate per value through the reference implementation."""
    check_on_error(on_error)
    compat = prior_snapshot.resolve_schema_compatibility(new_serializer)
    if compat.is_incompatible():
        raise IncompatibleSchemaError(f"cannot migrate: {compat.reason}", compat.reason)
    k = tiers.current()
    prog, kernel = remap_program(prior_snapshot, new_serializer, compat)
    return per_chunk(binary_array, lambda a, base: _migrate_chunk(k, a, prior_snapshot, new_serializer, compat,
                                                                  prog, kernel, threads, on_error, base), on_error)


def _migrate_chunk(k: Any, arr: pa.Array, prior_snapshot: Any, new_serializer: Any, compat: Any,
                   prog: plans.RowProgram | None, kernel: str, threads: int, on_error: str, base: int) -> Any:
    n = len(arr)
    errors = RowErrors(on_error, "migrate", prog)
    if prog is None:
        return migrate_per_value(arr, prior_snapshot, new_serializer, compat, errors, base)
    offsets, data, validity, offset, wide = binary_input(arr)
    valid = validity_bits(arr)
    matrix = prog.matrix

    ranges = thread_ranges(n, threads)
    if kernel in ("rowdata", "pojo", "avro"):
        # one-pass kernels; the output estimate is the input bytes plus the plan's per-entry growth
        run_kernel, growth = {"rowdata": (k.migrate_run, row_growth(matrix)),
                              "pojo": (k.pojo_migrate_run, plans.pojo_growth(matrix)),
                              "avro": (k.avro_migrate_run, plans.avro_growth(matrix))}[kernel]
        span = inputs.input_spans(offsets, offset, wide, len(data), n)
        code, extra = tiers.machine_code(jit.plan_code, matrix, k, n) if kernel == "rowdata" else (None, ())

        def run(s: int, i: int, e: int, out_off: np.ndarray, out: np.ndarray, pos: int) -> tuple[int, int, int]:
            return run_kernel(matrix, offsets, data, validity, offset + s, wide, i, e, out_off, out, pos, *extra)

        def estimate(s: int, e: int) -> int:
            return span(s, e) + growth * (e - s)

        fallback = None
        if kernel in ("avro", "rowdata"):
            prior = prior_snapshot.restore_serializer()
            target, as_is = resolved_target(compat, new_serializer)

            def fallback(row: int) -> bytes | Exception:
                """An entry the kernel hands back to the reference (``abi.HAND_BACK``: a RowData map
                whose keys may repeat or hold a null, an Avro map with a repeated key or bytes
                read as a string that are not UTF-8): what ``migrate_bytes`` makes of it, its
                bytes or the error of a bad entry."""
                try:
                    return migrate_resolved(prior_snapshot, prior, target, arr[row].as_py(), as_is)
                except StateFormatError as e:
                    return per_row_error(e, base + row, "migrate")

        return errors.result(one_pass_output(n, ranges, valid, errors, base, run, wide, estimate, fallback))

    def sizes(s: int, e: int, out_off: np.ndarray, stop: bool) -> None:
        k.core_row_sizes(matrix, offsets, data, validity, offset, wide, s, e, out_off, stop)

    def fill(s: int, e: int, out_off: np.ndarray, out: np.ndarray) -> None:
        k.core_row_fill(matrix, offsets, data, validity, offset, wide, s, e, out_off, out)

    out = two_pass_output(n, ranges, valid, errors, base, sizes, fill, wide)
    return errors.result(out)


def row_growth(matrix: np.ndarray) -> int:
    """Bytes a migration adds per entry to the fixed parts of its remapped rows (arity changes);
    with the input span it sizes the one-pass output buffer, which grows if the guess is short."""
    grow = 0
    for row in matrix:
        if row[abi.COL_KIND] == abi.SLOT_ROW and not row[abi.COL_FLAGS] & abi.FLAG_VERBATIM:
            new_arity, old_arity = int(row[abi.COL_ARITY]), int(row[abi.COL_OLD_ARITY])
            grow += 8 * (new_arity - old_arity) + 8 * ((new_arity + 63 + 8) // 64 - (old_arity + 63 + 8) // 64)
    return max(grow, 0)


def migrate_per_value(arr: pa.Array, prior_snapshot: Any, new_serializer: Any, compat: Any, errors: RowErrors,
                      base: int) -> tuple[pa.Array, list[Exception]]:
    """Migrate through the reference implementation, one entry at a time (pairs without a
    byte-remap kernel, and plans their program compiler cannot express)."""
    prior = prior_snapshot.restore_serializer()
    target, as_is = resolved_target(compat, new_serializer)
    outs: list[bytes | None] = []
    for i, raw in enumerate(arr.to_pylist()):
        if raw is None:
            outs.append(None)
            continue
        try:
            outs.append(migrate_resolved(prior_snapshot, prior, target, raw, as_is))
        except StateFormatError as e:
            errors.add(per_row_error(e, base + i, "migrate"))
            outs.append(None)
    return errors.result(binary_from_values(outs))


__all__ = ["migrate", "migrate_per_value", "row_growth"]
