"""Operator-level changes to a Flink savepoint: remove operators, change uids (adding one is
:func:`statemorph.engine.write_flink_savepoint` with ``base=``).

Why: a job whose topology changed needs its savepoint to match it. Flink's State Processor API
does these as ``removeOperator`` and ``changeOperatorIdentifier``; both only touch ``_metadata``
(an operator's state is addressed by its OperatorID, which Flink derives from the uid), so the
state files are carried over unchanged and nothing is decoded.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..errors import UsageError
from ..savepoint.files import StagedDirectory, output_error
from ..savepoint.flink import FlinkSavepoint
from ..savepoint.flink.files import file_handles
from ..savepoint.flink.metadata import OperatorState
from ..savepoint.flink.operator_ids import operator_id
from .bootstrap import carry_over, write_metadata


@dataclass
class ModifyReport:
    path: str
    removed: list[str]
    renamed: dict[str, str]
    operators: int


def _files(sp: FlinkSavepoint, op: OperatorState) -> set[str]:
    return {sp.directory.relative_name(h) for h in file_handles([op])}


def modify_flink_savepoint(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
                           remove: Iterable[str] = (), rename: Mapping[str, str] | None = None) -> ModifyReport:
    """Write ``dst``: savepoint ``src`` without the operators in ``remove`` (uids or uid hashes;
    their files are not carried) and with the operators in ``rename`` (uid or uid hash → new uid)
    given their new uid and the OperatorID Flink derives from it, so a job that sets the new uid
    restores their state. Everything else is carried over unchanged; ``dst`` appears atomically."""
    sp = FlinkSavepoint(src)
    rename = dict(rename or {})
    meta = copy.deepcopy(sp.metadata)
    index = {id(o): i for i, o in enumerate(sp.operators)}
    slots: list[OperatorState | None] = list(meta.operators)
    dropped: set[str] = set()
    removed = []
    for ident in remove:
        op = sp.operator(ident)
        if slots[index[id(op)]] is None:
            raise UsageError(f"{op.label()} is named twice in remove")
        dropped |= _files(sp, op)
        removed.append(op.uid or op.uid_hash)
        slots[index[id(op)]] = None
    for ident, new_uid in rename.items():
        if not new_uid:
            raise UsageError(f"the new uid of {ident!r} is empty")
        op = sp.operator(ident)
        target = slots[index[id(op)]]
        if target is None:
            raise UsageError(f"{op.label()} is both removed and renamed")
        target.uid, target.operator_id = new_uid, operator_id(new_uid)
    kept = [o for o in slots if o is not None]
    ids = [o.operator_id for o in kept]
    if len(set(ids)) != len(ids):
        raise UsageError(f"{src}: after the changes two operators would have the same uid (OperatorID)")
    meta.operators = kept
    try:
        with StagedDirectory(dst, source=src) as staged:
            carry_over(sp, meta, dropped, staged.temp)
            write_metadata(staged.temp, meta)
    except OSError as e:
        raise output_error(e, dst, "write the Flink savepoint") from e
    return ModifyReport(os.fspath(dst), removed, {k: v for k, v in rename.items()}, len(kept))


__all__ = ["ModifyReport", "modify_flink_savepoint"]
