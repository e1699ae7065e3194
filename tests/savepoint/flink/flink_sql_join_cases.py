"""The committed savepoints of the real Flink SQL Top-N / join job (ci/flink/src/savepoints/SqlJoinJobs.java)
and what a restore of them must emit.

The job runs three queries over ``src(k INT, x BIGINT, name STRING[, note STRING], rt rowtime)``,
record ``j`` of key ``j % keys``: ``topn`` (the two largest ``x`` per key), ``join`` (every record
with its key's ``MAX(x)`` and ``MAX(name)``: a regular join whose left side has no unique key and
whose right side's unique key is the join key) and ``interval`` (``x`` divisible by 3 joined with
the key's other records within ten minutes of event time), ``ranked`` (Top-N over an updating
input: the two keys of the largest ``SUM(x)`` per ``MOD(k, 2)``, RetractableTopNFunction) and
``outer`` (each key's ``MIN(x)`` and ``COUNT(*)`` left-joined with the record of that ``x``: an outer
join whose left side's unique key is not the join key), ``fast`` (Top-N over an updating input
with a unique key: the two keys of the largest ``MAX(x)`` per ``MOD(k, 2)``, UpdatableTopNFunction)
and ``proc_interval`` (``interval`` on processing time, ten years wide so that a committed
savepoint's rows still match). Version 2 (spec ``sql_join_version``)
adds the nullable ``note`` to every row the operators keep (see :data:`EVOLVE_SCHEMA`).

A restore sends one probe record per key and one of a new key (``j = total + p``, ``note`` set for
even ``p`` in version 2) and ends the input. The queries' inputs are two streams into one operator,
so which side's record comes first (and so the -U / -D spelling of a retraction) varies from run to
run; what a query emitted is compared as its net changelog: each row counted +1 when inserted,
-1 when retracted, rows netting 0 dropped.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

#: The planner's uids of the stateful operators (table.exec.uid.generation=ALWAYS); version 2 has
#: the same plan shape, so the same uids.
RANK, JOIN, INTERVAL, AGG = "4_rank", "13_join", "21_interval-join", "11_group-aggregate"
RANKED, RANKED_AGG = "30_rank", "27_group-aggregate"
OUTER, OUTER_AGG = "40_join", "36_group-aggregate"
FAST, FAST_AGG, PROC_INTERVAL = "47_rank", "45_group-aggregate", "54_interval-join"
OPERATORS = (RANK, JOIN, INTERVAL, AGG, RANKED, RANKED_AGG, OUTER, OUTER_AGG, FAST, FAST_AGG, PROC_INTERVAL)
#: Flink's SortedMapSerializer (RetractableTopNFunction's sort key → count, in the order of the
#: comparator Flink generated, which its snapshot records): a map of the sort key to its count.
SORTED_MAP = "MAP<ROW<`f0` BIGINT>, BIGINT>"
#: Flink's type of each state, as ``statemorph inspect`` prints it (value type, map key type).
ROWTIME = "`f2` TIMESTAMP_LTZ(3) *ROWTIME*"
BUFFER = f"ARRAY<ROW<`f0` ROW<`f0` INT, `f1` BIGINT, {ROWTIME}>, `f1` BOOLEAN>>"
PROCTIME = "`f2` TIMESTAMP_LTZ(3) NOT NULL *PROCTIME*"
PROC_BUFFER = f"ARRAY<ROW<`f0` ROW<`f0` INT, `f1` BIGINT, {PROCTIME}>, `f1` BOOLEAN>>"
#: UpdatableTopNFunction's one state: per partition (g), the input's unique key (g, k) -> the row and
#: its position among the rows of its sort key (Flink's Tuple2<RowData, Integer>)
FAST_ROW = "ROW<`f0` INT, `f1` INT, `f2` BIGINT, `f3` STRING>"
TYPES = {
    (RANK, "data-state-with-append"): ("map", "ARRAY<ROW<`f0` INT, `f1` BIGINT, `f2` STRING>>", "ROW<`f0` BIGINT>"),
    (JOIN, "left-records"): ("map", "INT", "ROW<`f0` INT, `f1` BIGINT>"),
    (JOIN, "right-records"): ("value", "ROW<`f0` INT, `f1` BIGINT, `f2` STRING>", None),
    (INTERVAL, "IntervalJoinLeftCache"): ("map", BUFFER, "BIGINT"),
    (INTERVAL, "IntervalJoinRightCache"): ("map", BUFFER, "BIGINT"),
    (INTERVAL, "IntervalJoinLeftTimerState"): ("value", "BIGINT", None),
    (INTERVAL, "IntervalJoinRightTimerState"): ("value", "BIGINT", None),
    (AGG, "accState"): ("value", "ROW<`f0` BIGINT, `f1` STRING>", None),
    # the outer side: unique key -> (row, how many right rows it matches), a Tuple2
    (OUTER, "left-records"): ("map", "ROW<`f0` ROW<`f0` INT, `f1` BIGINT, `f2` BIGINT NOT NULL>, `f1` INT>",
                              "ROW<`f0` INT>"),
    (OUTER, "right-records"): ("map", "INT", "ROW<`f0` BIGINT>"),
    # Top-N over the updating GROUP BY result (RetractableTopNFunction): sort key -> rows, and the
    # sorted map of sort key -> count per partition
    (RANKED, "data-state"): ("map", "ARRAY<ROW<`f0` INT, `f1` BIGINT, `f2` STRING, `f3` INT>>", "ROW<`f0` BIGINT>"),
    (RANKED, "sorted-map"): ("value", SORTED_MAP, None),
    (RANKED_AGG, "accState"): ("value", "ROW<`f0` BIGINT, `f1` STRING>", None),
    (OUTER_AGG, "accState"): ("value", "ROW<`f0` BIGINT, `f1` BIGINT>", None),
    (FAST, "data-state-with-update"): ("map", f"ROW<`f0` {FAST_ROW}, `f1` INT>", "ROW<`f0` INT, `f1` INT>"),
    (FAST_AGG, "accState"): ("value", "ROW<`f0` BIGINT, `f1` STRING>", None),
    # the processing-time interval join: the same states, its buffered rows' time a PROCTIME column
    (PROC_INTERVAL, "IntervalJoinLeftCache"): ("map", PROC_BUFFER, "BIGINT"),
    (PROC_INTERVAL, "IntervalJoinRightCache"): ("map", PROC_BUFFER, "BIGINT"),
    (PROC_INTERVAL, "IntervalJoinLeftTimerState"): ("value", "BIGINT", None),
    (PROC_INTERVAL, "IntervalJoinRightTimerState"): ("value", "BIGINT", None),
}
#: Version 2's rows, as a schema file says them: the savepoint's fields keep their names (RowData
#: snapshots record none: f0, f1, ...), the added nullable ones are named; in the interval join's
#: rows ``note`` comes before the rowtime column, as the planner projects it.
EVOLVED_BUFFER = f"ARRAY<ROW<`f0` ROW<`f0` INT, `f1` BIGINT, note STRING, {ROWTIME}>, `f1` BOOLEAN>>"
EVOLVED_PROC_BUFFER = f"ARRAY<ROW<`f0` ROW<`f0` INT, `f1` BIGINT, note STRING, {PROCTIME}>, `f1` BOOLEAN>>"
EVOLVE_SCHEMA = f"""\
# the Top-N / join job after the nullable `note STRING` joined src
[operators.{RANK}.states.data-state-with-append]
type = "ARRAY<ROW<`f0` INT, `f1` BIGINT, `f2` STRING, note STRING>>"

[operators.{JOIN}.states.right-records]
type = "ROW<`f0` INT, `f1` BIGINT, `f2` STRING, top_note STRING>"

[operators.{AGG}.states.accState]
type = "ROW<`f0` BIGINT, `f1` STRING, top_note STRING>"

[operators.{INTERVAL}.states.IntervalJoinLeftCache]
type = "{EVOLVED_BUFFER}"

[operators.{INTERVAL}.states.IntervalJoinRightCache]
type = "{EVOLVED_BUFFER}"

[operators.{RANKED}.states.data-state]
type = "ARRAY<ROW<`f0` INT, `f1` BIGINT, `f2` STRING, note STRING, `f3` INT>>"

[operators.{RANKED_AGG}.states.accState]
type = "ROW<`f0` BIGINT, `f1` STRING, top_note STRING>"

[operators.{OUTER}.states.left-records]
type = "ROW<`f0` ROW<`f0` INT, `f1` BIGINT, `f2` BIGINT NOT NULL, low_note STRING>, `f1` INT>"

[operators.{OUTER_AGG}.states.accState]
type = "ROW<`f0` BIGINT, `f1` BIGINT, low_note STRING>"

[operators.{FAST}.states.data-state-with-update]
type = "ROW<`f0` ROW<`f0` INT, `f1` INT, `f2` BIGINT, `f3` STRING, top_note STRING>, `f1` INT>"

[operators.{FAST_AGG}.states.accState]
type = "ROW<`f0` BIGINT, `f1` STRING, top_note STRING>"

[operators.{PROC_INTERVAL}.states.IntervalJoinLeftCache]
type = "{EVOLVED_PROC_BUFFER}"

[operators.{PROC_INTERVAL}.states.IntervalJoinRightCache]
type = "{EVOLVED_PROC_BUFFER}"
"""


QUERIES = ("topn", "join", "interval", "ranked", "outer", "fast", "proc_interval")


def spec(case: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((case / "spec.json").read_text(encoding="utf-8"))
    return data


def name(j: int) -> str:
    """The ``name`` column of record ``j`` (SqlJobs.name)."""
    return ("nö-" if j % 4 == 1 else "n-") + str(j)


def max_name(names: list[str]) -> str:
    """MAX over STRING as Flink compares it: by UTF-8 bytes."""
    return max(names, key=lambda s: s.encode("utf-8"))


def records(case: Path) -> dict[int, list[int]]:
    """Key → the ``x`` of its records before the savepoint, in order."""
    sp = spec(case)
    keys, total = sp["keys"], sp["keys"] * sp["records_per_key"]
    return {k: list(range(k, total, keys)) for k in range(keys)}


def net(entries: list[dict[str, Any]]) -> dict[str, Counter[str]]:
    """A restore's changelog lines as each query's net changelog (row as JSON → count)."""
    out: dict[str, Counter[str]] = {q: Counter() for q in QUERIES}
    for e in entries:
        out[e["query"]][json.dumps(e["row"], ensure_ascii=False)] += 1 if e["kind"] in ("+I", "+U") else -1
    return {q: Counter({row: n for row, n in c.items() if n}) for q, c in out.items()}


def expected_net(case: Path, version: int = 1) -> dict[str, Counter[str]]:
    """The net changelog each query must emit when the job of ``version`` is restored from
    ``case`` (migrated, for version 2: the restored rows' new columns null) and fed the probe."""
    sp = spec(case)
    keys, total = sp["keys"], sp["keys"] * sp["records_per_key"]
    old = records(case)
    two = version == 2

    def note(j: int) -> str | None:
        p = j - total
        return f"note-{p}" if p >= 0 and p % 2 == 0 else None

    def row(*fields: Any, notes: tuple[int, ...] = ()) -> str:
        extra = [note(j) for j in notes] if two else []
        return json.dumps([*fields, *extra], ensure_ascii=False)

    want: dict[str, Counter[str]] = {q: Counter() for q in QUERIES}
    for p in range(keys + 1):
        j = total + p
        xs = old.get(p, [])
        # Top-N: the probe is the key's largest x; it evicts the second of the two kept
        want["topn"][row(p, j, name(j), notes=(j,))] += 1
        if len(xs) >= 2:
            evicted = sorted(xs)[-2]
            want["topn"][row(p, evicted, name(evicted), notes=(evicted,))] -= 1
        # join: every left row's pairing with the key's old maxima is retracted, re-added with the new
        new_max = (j, max_name([name(x) for x in [*xs, j]]), note(j))
        if xs:
            old_max = (max(xs), max_name([name(x) for x in xs]), None)
            for a in xs:
                want["join"][json.dumps([p, a, *old_max[: 3 if two else 2]], ensure_ascii=False)] -= 1
                want["join"][json.dumps([p, a, *new_max[: 3 if two else 2]], ensure_ascii=False)] += 1
        want["join"][json.dumps([p, j, *new_max[: 3 if two else 2]], ensure_ascii=False)] += 1
        # interval joins (event and processing time): the probe pairs with the key's old records
        # on the other side
        for x in xs:
            left, right = (j, x) if j % 3 == 0 else (x, j)
            if left % 3 == 0 and right % 3 != 0:
                for query in ("interval", "proc_interval"):
                    want[query][row(p, left, right, notes=(left, right))] += 1
        # outer join: the key's count grows (MIN(x) stays), so its row, matched by the record of
        # MIN(x), is retracted and emitted again; the new key's row matches its own record
        mn = min(xs) if xs else j
        # (version 2's low_note comes before b.x, the join's own field order)
        if xs:
            want["outer"][json.dumps([p, mn, len(xs), *([None] if two else []), mn])] -= 1
        want["outer"][json.dumps([p, mn, len(xs) + 1, *([note(j)] if two else []), mn])] += 1
    # Top-N over the keys' sums, and over their maxima (per MOD(k, 2), the two largest): what it
    # shows after the probe less what it showed at the savepoint
    def shown(sums: dict[int, tuple[int, str, str | None]]) -> Counter[str]:
        rows: Counter[str] = Counter()
        for g in (0, 1):
            for k in sorted((k for k in sums if k % 2 == g), key=lambda k: -sums[k][0])[:2]:
                rows[json.dumps([g, k, *sums[k][: 3 if two else 2]], ensure_ascii=False)] += 1
        return rows

    before = {k: (sum(xs), max_name([name(x) for x in xs]), None) for k, xs in old.items()}
    after = {k: (sum(xs) + total + k, max_name([name(x) for x in [*xs, total + k]]), note(total + k))
             for k, xs in {**old, keys: []}.items()}
    want["ranked"] = shown(after)
    want["ranked"].subtract(shown(before))
    before = {k: (max(xs), max_name([name(x) for x in xs]), None) for k, xs in old.items()}
    after = {k: (total + k, max_name([name(x) for x in [*xs, total + k]]), note(total + k))
             for k, xs in {**old, keys: []}.items()}
    want["fast"] = shown(after)
    want["fast"].subtract(shown(before))
    return {q: Counter({r: n for r, n in c.items() if n}) for q, c in want.items()}
