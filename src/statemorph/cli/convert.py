"""``statemorph convert``: a Flink savepoint into statemorph's Parquet form, and back.

Flink → Parquet writes every keyed state of every operator as a Parquet dataset any Arrow tool
reads, plus what Flink needs to come back (the ``_metadata`` skeleton, keyed-state headers,
operator-state files); Parquet → Flink rebuilds a canonical savepoint Flink restores with the same
content. The direction follows from the source (:func:`statemorph.engine.formats.convert_savepoint`); a
native savepoint or retained RocksDB checkpoint becomes the Parquet form or, with ``--to canonical``, a
canonical savepoint, or with ``--to native`` a self-contained native savepoint (what ``--to`` may name
is the format's ``converts_to``)."""

from __future__ import annotations

import argparse
from typing import Any

from ..engine.formats import convert_savepoint
from ..errors import ExitCode, UsageError
from ..savepoint.files import destination_taken, refuse_inside
from .output import Console, common_options


def cmd_convert(args: argparse.Namespace) -> int:
    out = Console.from_args(args)
    if destination_taken(args.out):
        raise UsageError(f"--out {args.out} already exists; savepoints are never overwritten")
    refuse_inside(args.out, args.savepoint)
    report = convert_savepoint(args.savepoint, args.out, to=args.to)
    out.emit({**report.to_dict(), "exit_status": int(ExitCode.OK)})
    out.say(report.summary())
    for name, rows in report.states.items():
        out.detail(f"  {name}: {rows:,} rows")
    return ExitCode.OK


def add_parser(sub: Any) -> None:
    s = sub.add_parser("convert", parents=[common_options(json_output=True)],
                       help="convert a Flink savepoint to the Parquet form, or a converted one back to Flink")
    s.add_argument("savepoint", metavar="SAVEPOINT",
                   help="a Flink savepoint, or a Parquet savepoint converted from one")
    s.add_argument("--out", required=True, metavar="DST", help="the converted savepoint (must not exist)")
    s.add_argument("--to", choices=("parquet", "canonical", "native"), default=None,
                   help="what to write: the Parquet form or a canonical Flink savepoint (default: the other "
                        "form; a native savepoint or a retained RocksDB checkpoint: parquet, canonical, or "
                        "native: a self-contained native savepoint)")
    s.set_defaults(func=cmd_convert)


__all__ = ["cmd_convert"]
