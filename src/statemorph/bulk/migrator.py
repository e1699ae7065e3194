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
from .binary_output import binary_from_values, one_pass_output, two_pass_output
from .capabilities import remap_program
from .chunks import per_chunk, thread_ranges
from .inputs import binary_input, validity_bits
from .row_errors import BulkResult, RowErrors, per_row_error
from .tiers import KernelTier, abi, jit, plans


def migrate(binary_array: Any, prior_snapshot: Any, new_serializer: Any, *, threads: int = 1,
            on_error: str = "raise") -> BulkResult:
    """Rewrite every entry written under ``prior_snapshot`` into ``new_serializer``'s format: a
    binary array in a :class:`BulkResult` (null in → null out). A bad entry raises a
    :class:`StateFormatError` naming the row and field path (``on_error="raise"``), or becomes a
    null (``"null"``) or is left out (``"skip"``), its error in the result.

    Compatibility is resolved once (incompatible → :class:`IncompatibleSchemaError` naming the
    fields). RowData → RowData, flink-core Row → Row, POJO → POJO (fields added, removed,
    reordered) and Avro → Avro run byte-remap kernels when the program compiler can express the
    plan; other serializers migrate per value through the reference implementation. A caller
    that migrates many arrays of one state keeps a :class:`PreparedMigration` instead."""
    check_on_error(on_error)
    return PreparedMigration(prior_snapshot, new_serializer)(binary_array, threads=threads, on_error=on_error)


class PreparedMigration:
    """One state's migration resolved once: compatibility, the byte-remap kernel and its program
    (with its output growth per entry), and the reference's serializers for entries the kernel
    hands back. Calling it migrates one array, as :func:`migrate` does; an engine keeps one per
    state and calls it per batch, so a run of many small batches (the slices of Flink key
    groups) resolves nothing per batch."""

    def __init__(self, prior_snapshot: Any, new_serializer: Any) -> None:
        compat = prior_snapshot.resolve_schema_compatibility(new_serializer)
        if compat.is_incompatible():
            raise IncompatibleSchemaError(f"cannot migrate: {compat.reason}", compat.reason)
        self.prior_snapshot, self.new_serializer, self.compat = prior_snapshot, new_serializer, compat
        self.prog, self.kernel = remap_program(prior_snapshot, new_serializer, compat)
        growth = {"rowdata": row_growth, "pojo": plans.pojo_growth, "avro": plans.avro_growth}.get(self.kernel)
        self.growth = growth(self.prog.matrix) if growth is not None and self.prog is not None else 0
        self._reference: tuple[Any, Any, bool] | None = None
        self._code: Any = None  # the machine code compiled ahead (held: it owns the code's memory)

    def reference(self) -> tuple[Any, Any, bool]:
        """(old serializer, target serializer, as is) of the per-value reference, on first use."""
        if self._reference is None:
            prior = self.prior_snapshot.restore_serializer()
            self._reference = (prior, *resolved_target(self.compat, self.new_serializer))
        return self._reference

    def compile_machine_code(self) -> None:
        """Compile the plan's machine code now (a RowData plan on the compiled tier, where
        ``llvmlite`` is there): an engine calls this before its worker threads start, so the
        first batches do not wait on LLVM (about 0.1-1 s, and every worker that reached it at once
        compiled it again). Later batches find it in :mod:`~statemorph.kernels.jit`'s cache."""
        if self.kernel == "rowdata" and self.prog is not None and tiers.current().name == "native":
            self._code = jit.plan_code(self.prog.matrix)

    def __call__(self, binary_array: Any, *, threads: int = 1, on_error: str = "raise") -> BulkResult:
        k = tiers.current()
        return per_chunk(binary_array, lambda a, base: self._chunk(k, a, threads, on_error, base), on_error)

    def _chunk(self, k: KernelTier, arr: pa.Array, threads: int, on_error: str, base: int) -> Any:
        prog, kernel = self.prog, self.kernel
        n = len(arr)
        errors = RowErrors(on_error, "migrate", prog)
        if prog is None:
            return migrate_per_value(arr, self.prior_snapshot, self.new_serializer, self.compat, errors, base)
        offsets, data, validity, offset, wide = binary_input(arr)
        valid = validity_bits(arr)
        matrix = prog.matrix

        ranges = thread_ranges(n, threads)
        if kernel in ("rowdata", "pojo", "avro"):
            # one-pass kernels; the output estimate is the input bytes plus the plan's per-entry growth
            run_kernel = {"rowdata": k.migrate_run, "pojo": k.pojo_migrate_run, "avro": k.avro_migrate_run}[kernel]
            growth = self.growth
            span = inputs.input_spans(offsets, offset, wide, len(data), n)
            code, extra = tiers.machine_code(jit.plan_code, matrix, k, n) if kernel == "rowdata" else (None, ())

            def run(s: int, i: int, e: int, out_off: np.ndarray, out: np.ndarray, pos: int) -> tuple[int, int, int]:
                return run_kernel(matrix, offsets, data, validity, offset + s, wide, i, e, out_off, out, pos, *extra)

            def estimate(s: int, e: int) -> int:
                """The range's output bytes: exact for a plan that only adds or reorders fields
                (null entries take no bytes, so they add no growth)."""
                rows = e - s if valid is None or not growth else int(np.count_nonzero(valid[s:e]))
                return span(s, e) + growth * rows

            fallback = None
            if kernel in ("avro", "rowdata"):

                def fallback(row: int) -> bytes | Exception:
                    """An entry the kernel hands back to the reference (``abi.HAND_BACK``: a RowData map
                    whose keys may repeat or hold a null, an Avro map with a repeated key or bytes
                    read as a string that are not UTF-8): what ``migrate_bytes`` makes of it, its
                    bytes or the error of a bad entry."""
                    prior, target, as_is = self.reference()
                    try:
                        return migrate_resolved(self.prior_snapshot, prior, target, arr[row].as_py(), as_is)
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
    outs = errors.per_value(arr.to_pylist(), lambda raw: migrate_resolved(prior_snapshot, prior, target, raw, as_is),
                            base, (StateFormatError,), lambda e, row: per_row_error(e, row, "migrate"))
    return errors.result(binary_from_values(outs))


__all__ = ["PreparedMigration", "migrate", "migrate_per_value", "row_growth"]
