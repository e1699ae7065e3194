"""The case list for the golden-vector generator: which SPECs and VALUEs real Flink must encode.

Why a Python script: edge cases are easiest to enumerate in a loop (70 000-char strings, every
RowKind, mask-byte boundaries), and the output is plain JSON Lines that the Java generator
(``ci/golden/src/golden/Generate.java``) reads. It writes *inputs* only; the recorded vectors in
``tests/data/golden/*.jsonl`` come from Flink. Stdlib only, so ``generate.sh`` runs it with any python3.

Usage: ``python3 cases.py OUT_DIR`` writes OUT_DIR/{datastream,snapshots,rowdata,avro,compat,migration,
flink_rowdata,operator_ids,edge}.jsonl.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

NAN = {"$f": "NaN"}
INF = {"$f": "Infinity"}
NINF = {"$f": "-Infinity"}
NZERO = {"$f": "-0.0"}
F32_MIN_SUB = 1.401298464324817e-45
F32_MIN_NORMAL = 1.1754943508222875e-38
F32_MAX = 3.4028234663852886e38
F64_MIN_SUB = 5e-324
F64_MIN_NORMAL = 2.2250738585072014e-308
F64_MAX = 1.7976931348623157e308
I32 = (-(2**31), 2**31 - 1)
I64 = (-(2**63), 2**63 - 1)


def b(hexstr: str) -> dict[str, str]:
    return {"$b": hexstr}


def s(units: list[int]) -> dict[str, list[int]]:
    return {"$s": units}


def m(*pairs: tuple[Any, Any]) -> dict[str, list[list[Any]]]:
    return {"$map": [[k, v] for k, v in pairs]}


def row(*fields: Any, kind: str = "+I") -> dict[str, Any]:
    return {"$row": list(fields), "kind": kind}


def dec(x: str) -> dict[str, str]:
    return {"$dec": x}


def date(x: str) -> dict[str, str]:
    return {"$date": x}


def time(x: str) -> dict[str, str]:
    return {"$time": x}


def ts(millis: int, nanos: int = 0) -> dict[str, list[int]]:
    return {"$ts": [millis, nanos]}


class Cases:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.names: set[str] = set()

    def _add(self, d: dict[str, Any]) -> None:
        if d["case"] in self.names:
            raise SystemExit(f"duplicate case name {d['case']}")
        self.names.add(d["case"])
        self.lines.append(d)

    def value(self, name: str, spec: str, value: Any) -> None:
        self._add({"case": name, "serializer": spec, "value": value})

    def values(self, prefix: str, spec: str, values: list[Any]) -> None:
        for i, v in enumerate(values):
            self.value(f"{prefix}/{i}", spec, v)

    def snapshot(self, name: str, spec: str) -> None:
        self._add({"case": name, "serializer": spec, "snapshot": True})

    def compat(self, name: str, old: str, new: str) -> None:
        self._add({"case": name, "old": old, "new": new})

    def write(self, path: Path) -> None:
        with path.open("w", encoding="utf-8") as f:
            for d in self.lines:
                f.write(json.dumps(d) + "\n")


FLOATS = [0.0, NZERO, 1.5, -2.25, 0.1, NAN, INF, NINF]
COLOR = "Enum<p.Color:RED,GREEN,BLUE>"
MYPOJO = "Pojo<p.MyPojo:b=Int,a=String,c=Long>"


def datastream() -> Cases:
    c = Cases()
    c.values("boolean", "Boolean", [True, False])
    c.values("byte", "Byte", [0, 1, -1, -128, 127])
    c.values("short", "Short", [0, 1, -1, -2, -(2**15), 2**15 - 1, 256])
    c.values("int", "Int", [0, 1, -1, 42, *I32, 65536])
    c.values("long", "Long", [0, 1, -1, *I64, 2**53 + 1, 1700000000000])
    c.values("float", "Float", [*FLOATS, F32_MIN_SUB, -F32_MIN_SUB, F32_MIN_NORMAL, F32_MAX, -F32_MAX, 16777217])
    c.values("double", "Double", [*FLOATS, F64_MIN_SUB, F64_MIN_NORMAL, F64_MAX, -F64_MAX, 3.141592653589793])
    c.values(
        "char",
        "Char",
        [
            "a",
            "\u00e9",
            "\u20ac",
            "\u0000",
            "\u007f",
            "\u0080",
            "\u3fff",
            "\u4000",
            "\uffff",
            s([0xD800]),
            s([0xDC00]),
            s([0xDFFF]),
        ],
    )
    strings: list[Any] = [
        None,
        "",
        "a",
        "hello",
        "h\u00e9llo",
        "\u20ac",
        "\U0001f600",
        "\u20ac\U0001f600",
        "a\u0000b",
        "a\u0000\u00e9\U0001f600",
        s([0xD800]),
        s([0x61, 0xDC00, 0x62]),
        s([0xDE00, 0xD83D]),
        "x" * 200,
        "a" * 126,
        "a" * 127,
        "\u00e9" * 100,
        "\u4000\u3fff\u0080\u007f",
        'line\nbreak\ttab"quote\\',
        "\u0001\u001f",
        "\ufeff\uffff",
    ]
    c.values("string", "String", strings)
    c.value("string/len16383", "String", "z" * 16383)
    c.value("string/len16384", "String", "z" * 16384)
    c.value("string/len70000", "String", "ab\u00e9\u20ac\U0001f600" * 10000)
    c.values("bytes", "Bytes", [b(""), b("010203"), b("00ff7f80"), b(bytes(range(256)).hex())])
    c.values("booleanarray", "BooleanArray", [[], [True, False, True]])
    c.values("shortarray", "ShortArray", [[], [0, -1, -(2**15), 2**15 - 1]])
    c.values("chararray", "CharArray", [[], ["a", "\u00e9", "\uffff", s([0xD83D])]])
    c.values("intarray", "IntArray", [[], [0, -1, *I32], [7]])
    c.values("longarray", "LongArray", [[], [0, -1, *I64]])
    c.values("floatarray", "FloatArray", [[], [NAN, NZERO, INF, NINF, F32_MIN_SUB, F32_MAX, 0.1]])
    c.values("doublearray", "DoubleArray", [[], [NAN, NZERO, INF, NINF, F64_MIN_SUB, F64_MAX, 0.1]])
    c.values("stringarray", "StringArray", [[], [None], [None, "", "a", "\u20ac\U0001f600"]])
    c.values("list_int", "List<Int>", [[], [1, 2], [*I32, 0]])
    c.values("list_string", "List<String>", [[], [None, "", "x"]])
    c.values("list_list_long", "List<List<Long>>", [[[1], [], [2, 3]], []])
    c.values("list_nullable_int", "List<Nullable<Int>>", [[1, None, 3]])
    c.values("map_string_long", "Map<String,Long>", [m(), m(("k", 5), ("n", None)), m(("b", 1), ("a", 2), ("c", -1))])
    c.values("map_int_string", "Map<Int,String>", [m((1, "a"), (2, None), (-3, ""))])
    c.values("map_string_list", "Map<String,List<Int>>", [m(("x", [1, 2]), ("y", []), ("z", None))])
    c.values("map_nested", "Map<String,Map<Int,Double>>", [m(("o", m((1, 1.5), (2, NAN))), ("e", m()))])
    c.values("nullable_int", "Nullable<Int>", [None, 5, -1])
    c.values("nullable_int_padded", "Nullable<Int,padded>", [None, 5])
    c.values("nullable_long_padded", "Nullable<Long,padded>", [None, I64[0]])
    c.values("nullable_double_padded", "Nullable<Double,padded>", [None, NAN])
    c.values("nullable_bool_padded", "Nullable<Boolean,padded>", [None, True])
    c.values("nullable_string", "Nullable<String>", [None, "", "x"])
    c.values("nullable_string_padded", "Nullable<String,padded>", [None, "x"])
    c.values("nullable_tuple_padded", "Nullable<Tuple<Int,Long>,padded>", [None, [1, 2]])
    c.values("nullable_list", "Nullable<List<Int>>", [None, [1]])
    c.values("enum", COLOR, ["RED", "GREEN", "BLUE"])
    c.values("enum_single", "Enum<p.Only:ONE>", ["ONE"])
    c.values("list_enum", f"List<{COLOR}>", [["BLUE", "RED", "BLUE"]])
    c.values("tuple1", "Tuple<Int>", [[7], [I32[0]]])
    c.values("tuple2", "Tuple<Int,String>", [[7, "ab"], [0, ""], [-1, None]])
    c.values("tuple3", "Tuple<Int,String,Double>", [[1, "x", 1.5], [2, "\u20ac", NAN]])
    c.values("tuple_nested", "Tuple<Tuple<Int,Long>,String>", [[[1, 2], "n"]])
    c.values("tuple_nested2", "Tuple<String,Tuple<Tuple<Boolean>,List<Int>>>", [["a", [[True], [1, 2]]]])
    c.values("tuple_nullable", "Tuple<Nullable<Int>,String>", [[None, "x"], [3, "y"]])
    c.values("tuple5", "Tuple<Byte,Short,Int,Long,Char>", [[1, 2, 3, 4, "c"]])
    c.values("tuple_enum_map", f"Tuple<{COLOR},Map<String,Int>>", [["GREEN", m(("a", 1))]])
    t25 = "Tuple<" + ",".join(["Int"] * 24 + ["String"]) + ">"
    c.value("tuple25/max_arity", t25, [*range(24), "last"])
    r100 = "Row<" + ",".join(["Byte"] * 100) + ">"
    c.value("row100/13_mask_bytes", r100, row(*[None if i % 9 == 4 else i for i in range(100)], kind="-U"))
    c.values("row_of_nullables", "Row<Nullable<Int,padded>,Nullable<String>>", [row(None, None), row(1, "a")])
    c.values("map_row_values", "Map<Int,Row<String,Double>>", [m((1, row("a", 1.0, kind="+U")), (2, None))])
    c.values("list_tuple", "List<Tuple<String,Long>>", [[["a", 1], ["b", 2]], []])
    c.values("nullable_enum", f"Nullable<{COLOR},padded>", [None, "GREEN"])
    c.values("map_null_key", "Map<String,Int>", [m((None, 1), ("a", None))])
    c.values("tuple_of_padded", "Tuple<Nullable<Long,padded>,Nullable<Boolean,padded>>", [[None, True], [1, None]])
    c.values(
        "pojo_tuple_row_fields",
        "Pojo<p.TR:t=Tuple<Int,String>,r=Row<Long>,arr=LongArray>",
        [
            {"t": [1, "a"], "r": row(2, kind="+U"), "arr": [3]},
            {"t": None, "r": None, "arr": None},
        ],
    )
    nan_f = [{"$fbits": "7fc00001"}, {"$fbits": "ffc00000"}, {"$fbits": "7fffffff"}]
    nan_d = [{"$dbits": "7ff8000000000001"}, {"$dbits": "fff8000000000000"}, {"$dbits": "7ff80000deadbeef"}]
    c.values("float_nan_payload", "Float", nan_f)
    c.values("double_nan_payload", "Double", nan_d)
    c.values("floatarray_nan_payload", "FloatArray", [nan_f])
    c.values("doublearray_nan_payload", "DoubleArray", [nan_d])
    c.values("chararray_pair", "CharArray", [[s([0xD83D]), s([0xDE00]), "x"]])
    c.values(
        "row2",
        "Row<Int,String>",
        [
            row(1, None),
            row(1, "x", kind="+U"),
            row(None, None, kind="-D"),
            row(None, "y", kind="-U"),
            row(1, "x"),
        ],
    )
    c.values("row_legacy", "Row[legacy]<Int,String>", [row(1, None), row(None, None), row(2, "ab")])
    nine = "Row<" + ",".join(["Int"] * 9) + ">"
    c.value("row9/-U_f1_f8_null", nine, row(0, None, 2, 3, 4, 5, 6, 7, None, kind="-U"))
    c.value("row9/all_null", nine, row(*([None] * 9), kind="+U"))
    c.value("row9/none_null", nine, row(*range(9), kind="-D"))
    six = "Row<" + ",".join(["Long"] * 6) + ">"
    c.value("row6/one_mask_byte", six, row(1, None, 3, None, 5, None, kind="-D"))
    seven = "Row<" + ",".join(["String"] * 7) + ">"
    c.value("row7/two_mask_bytes", seven, row("a", None, "c", None, "e", None, None, kind="+U"))
    sixteen = "Row[legacy]<" + ",".join(["Short"] * 16) + ">"
    c.value("row16_legacy/two_mask_bytes", sixteen, row(*[None if i % 3 == 0 else i for i in range(16)]))
    c.value(
        "row8_legacy/one_mask_byte", "Row[legacy]<" + ",".join(["Int"] * 8) + ">", row(None, 1, 2, 3, 4, 5, 6, None)
    )
    c.value("row9_legacy/two_mask_bytes", "Row[legacy]<" + ",".join(["Int"] * 9) + ">", row(*([None] * 8), 8))
    c.values("row0", "Row<>", [row(), row(kind="-D")])
    c.values("row0_legacy", "Row[legacy]<>", [row()])
    c.values(
        "row_nested",
        "Row<Int,Row<String,Long>>",
        [
            row(1, row("a", 2, kind="-U"), kind="+U"),
            row(1, None),
            row(None, row(None, None, kind="-D")),
        ],
    )
    c.values(
        "row_collections",
        "Row<List<Int>,Map<String,Boolean>,Bytes,IntArray>",
        [
            row([1, 2], m(("t", True), ("n", None)), b("beef"), [1, 2]),
            row(None, None, None, None, kind="-D"),
        ],
    )
    c.values("row_in_list", "List<Row<Int,String>>", [[row(1, "a"), row(None, None, kind="-D")]])
    c.values(
        "pojo",
        MYPOJO,
        [
            {"a": "hi", "b": 9, "c": None},
            None,
            {"a": None, "b": None, "c": None},
            {"a": "\u20ac", "b": I32[0], "c": I64[1]},
        ],
    )
    c.values(
        "pojo_sorting",
        "Pojo<p.Sorted:zeta=Int,Alpha=String,beta=Long,_x=Boolean,a1=Short,a=Byte>",
        [
            {"zeta": 1, "Alpha": "A", "beta": 2, "_x": True, "a1": 3, "a": 4},
            {"zeta": None, "Alpha": None, "beta": 2, "_x": None, "a1": None, "a": None},
        ],
    )
    c.values(
        "pojo_nested",
        "Pojo<p.Outer:name=String,inner=Pojo<p.Inner:x=Int,y=Double>,tags=List<String>>",
        [
            {"name": "o", "inner": {"x": 1, "y": 2.5}, "tags": ["a", None]},
            {"name": None, "inner": None, "tags": None},
        ],
    )
    c.values(
        "pojo_enum_field",
        f"Pojo<p.WithEnum:color={COLOR},count=Long>",
        [
            {"color": "BLUE", "count": 3},
            {"color": None, "count": None},
        ],
    )
    c.values("pojo_empty", "Pojo<p.Empty:>", [{}, None])
    c.values("list_pojo", f"List<{MYPOJO}>", [[{"a": "x", "b": 1, "c": 2}, None]])
    c.values("map_string_pojo", f"Map<String,{MYPOJO}>", [m(("k", {"a": "y", "b": 2, "c": None}), ("n", None))])
    c.values("row_pojo_tuple", f"Row<{MYPOJO},Tuple<Int,String>>", [row({"a": "z", "b": 3, "c": 4}, [5, "t"])])
    return c


def snapshots() -> Cases:
    c = Cases()
    for atom in [
        "Boolean",
        "Byte",
        "Short",
        "Int",
        "Long",
        "Float",
        "Double",
        "Char",
        "String",
        "Bytes",
        "BooleanArray",
        "ShortArray",
        "CharArray",
        "IntArray",
        "LongArray",
        "FloatArray",
        "DoubleArray",
        "StringArray",
    ]:
        c.snapshot(f"snapshot/{atom}", atom)
    for spec in [
        "List<Int>",
        "List<String>",
        "List<List<Long>>",
        "Map<String,Long>",
        "Map<Int,List<String>>",
        "Nullable<Int>",
        "Nullable<Int,padded>",
        "Nullable<Long,padded>",
        "Nullable<String>",
        "Nullable<Tuple<Int,Long>,padded>",
        "Tuple<Int>",
        "Tuple<Int,String>",
        "Tuple<Int,String,Double>",
        "Tuple<Tuple<Int,Long>,String>",
        "Row<Int,String>",
        "Row[legacy]<Int,String>",
        "Row<>",
        "Row<Int,Row<String,Long>>",
        "Row<List<Int>,Map<String,Boolean>,Bytes,IntArray>",
        COLOR,
        "Enum<p.Only:ONE>",
        f"List<{COLOR}>",
        MYPOJO,
        "Pojo<p.Empty:>",
        "Pojo<p.Sorted:zeta=Int,Alpha=String,beta=Long,_x=Boolean,a1=Short,a=Byte>",
        "Pojo<p.Outer:name=String,inner=Pojo<p.Inner:x=Int,y=Double>,tags=List<String>>",
        f"Pojo<p.WithEnum:color={COLOR},count=Long>",
        f"Map<String,{MYPOJO}>",
        f"Row<{MYPOJO},Tuple<Int,String>>",
        "Tuple<Nullable<Int>,String>",
        "Tuple<" + ",".join(["Int"] * 24 + ["String"]) + ">",
        "Row<" + ",".join(["Int"] * 9) + ">",
        "Nullable<Double,padded>",
        "Map<String,Map<Int,Double>>",
        "List<Row<Int,String>>",
        f"Nullable<{COLOR},padded>",
        "Row[legacy]<>",
        "Map<Int,Row<String,Double>>",
        "Pojo<p.TR:t=Tuple<Int,String>,r=Row<Long>,arr=LongArray>",
    ]:
        c.snapshot(f"snapshot/{spec}", spec)
    return c


def compat() -> Cases:
    c = Cases()
    rgb = COLOR
    rg = "Enum<p.Color:RED,GREEN>"
    pojo_ab = "Pojo<p.P:a=Int,b=String>"
    for name, old, new in [
        ("int_int", "Int", "Int"),
        ("int_long", "Int", "Long"),
        ("int_string", "Int", "String"),
        ("string_string", "String", "String"),
        ("bytes_string", "Bytes", "String"),
        ("longarray_longarray", "LongArray", "LongArray"),
        ("intarray_longarray", "IntArray", "LongArray"),
        ("list_int_int", "List<Int>", "List<Int>"),
        ("list_int_long", "List<Int>", "List<Long>"),
        ("map_value_int_long", "Map<String,Int>", "Map<String,Long>"),
        ("map_key_string_int", "Map<String,Int>", "Map<Int,Int>"),
        ("map_same", "Map<String,List<Int>>", "Map<String,List<Int>>"),
        ("nullable_padding_added", "Nullable<Int>", "Nullable<Int,padded>"),
        ("nullable_padding_removed", "Nullable<Int,padded>", "Nullable<Int>"),
        ("nullable_same", "Nullable<Long,padded>", "Nullable<Long,padded>"),
        ("nullable_inner_changed", "Nullable<Int>", "Nullable<Long>"),
        ("int_to_nullable", "Int", "Nullable<Int>"),
        ("row_same", "Row<Int,String>", "Row<Int,String>"),
        ("row_arity_added", "Row<Int,String>", "Row<Int,String,Long>"),
        ("row_arity_removed", "Row<Int,String,Long>", "Row<Int,String>"),
        ("row_field_type", "Row<Int,String>", "Row<Long,String>"),
        ("row_legacy_to_kind", "Row[legacy]<Int,String>", "Row<Int,String>"),
        ("row_kind_to_legacy", "Row<Int,String>", "Row[legacy]<Int,String>"),
        ("row_nested_enum_appended", f"Row<Int,{rg}>", f"Row<Int,{rgb}>"),
        ("enum_same", rgb, rgb),
        ("enum_appended", rg, rgb),
        ("enum_reordered", rgb, "Enum<p.Color:BLUE,RED,GREEN>"),
        ("list_enum_appended", f"List<{rg}>", f"List<{rgb}>"),
        ("pojo_same", pojo_ab, pojo_ab),
        ("pojo_field_added", pojo_ab, "Pojo<p.P:a=Int,b=String,c=Long>"),
        ("pojo_field_removed", pojo_ab, "Pojo<p.P:a=Int>"),
        ("pojo_field_added_and_removed", pojo_ab, "Pojo<p.P:a=Int,z=Double>"),
        ("pojo_field_type_changed", pojo_ab, "Pojo<p.P:a=Long,b=String>"),
        ("pojo_field_order_changed", pojo_ab, "Pojo<p.P:b=String,a=Int>"),
        ("pojo_enum_field_appended", f"Pojo<p.Q:e={rg}>", f"Pojo<p.Q:e={rgb}>"),
        ("pojo_nested_field_added", "Pojo<p.O:i=Pojo<p.I:x=Int>>", "Pojo<p.O:i=Pojo<p.I:x=Int,y=Int>>"),
        ("map_pojo_field_added", f"Map<String,{pojo_ab}>", "Map<String,Pojo<p.P:a=Int,b=String,c=Long>>"),
        ("tuple_same", "Tuple<Int,String>", "Tuple<Int,String>"),
        ("tuple_field_type", "Tuple<Int,String>", "Tuple<Int,Long>"),
        ("tuple_arity", "Tuple<Int,String>", "Tuple<Int,String,Int>"),
        ("tuple_pojo_field_added", f"Tuple<Int,{pojo_ab}>", "Tuple<Int,Pojo<p.P:a=Int,b=String,c=Long>>"),
        ("tuple_enum_appended", f"Tuple<{rg},String>", f"Tuple<{rgb},String>"),
        ("list_to_map", "List<Int>", "Map<Int,Int>"),
        ("tuple_to_row", "Tuple<Int,String>", "Row<Int,String>"),
        ("row_nullable_padding", "Row<Nullable<Int,padded>>", "Row<Nullable<Int>>"),
        ("map_value_enum_appended", f"Map<String,{rg}>", f"Map<String,{rgb}>"),
        ("map_enum_appended_and_int_long", f"Map<{rg},Int>", f"Map<{rgb},Long>"),
        ("pojo_field_added_enum_appended", f"Pojo<p.R:e={rg}>", f"Pojo<p.R:e={rgb},n=Int>"),
        ("nullable_enum_appended", f"Nullable<{rg},padded>", f"Nullable<{rgb},padded>"),
        ("string_array_same", "StringArray", "StringArray"),
        ("row_list_int_long", "Row<List<Int>>", "Row<List<Long>>"),
        ("pojo_renamed_field", "Pojo<p.P:a=Int,b=String>", "Pojo<p.P:a=Int,bb=String>"),
        ("row_legacy_nested_pojo_added", f"Row[legacy]<{pojo_ab}>", "Row<Pojo<p.P:a=Int,b=String,c=Long>>"),
    ]:
        c.compat(f"compat/{name}", old, new)
    return c


def migration() -> Cases:
    """One old value per schema change that Flink 2.3 can restore, with the bytes Flink's restore
    produces (maps hold one entry: Flink rewrites a migrated map in Java HashMap order)."""
    c = Cases()
    rgb = COLOR
    rg = "Enum<p.Color:RED,GREEN>"
    pab = "Pojo<p.P:a=Int,b=String>"
    pabc = "Pojo<p.P:a=Int,b=String,c=Long>"
    v_ab = {"a": 1, "b": "x"}
    for name, old, new, values in [
        ("pojo_field_added", pab, pabc, [v_ab, None, {"a": None, "b": None}]),
        ("pojo_field_removed", pab, "Pojo<p.P:a=Int>", [v_ab, {"a": None, "b": "gone"}]),
        ("pojo_field_added_and_removed", pab, "Pojo<p.P:a=Int,z=Double>", [v_ab]),
        ("pojo_field_order_changed", pab, "Pojo<p.P:b=String,a=Int>", [v_ab]),
        (
            "pojo_nested_field_added",
            "Pojo<p.O:i=Pojo<p.I:x=Int>,s=String>",
            "Pojo<p.O:i=Pojo<p.I:x=Int,y=Int>,s=String>",
            [{"i": {"x": 5}, "s": "t"}, {"i": None, "s": None}],
        ),
        ("pojo_enum_field_appended", f"Pojo<p.Q:e={rg}>", f"Pojo<p.Q:e={rgb}>", [{"e": "GREEN"}]),
        ("pojo_field_added_enum_appended", f"Pojo<p.R:e={rg}>", f"Pojo<p.R:e={rgb},n=Int>", [{"e": "RED"}]),
        ("map_pojo_field_added", f"Map<String,{pab}>", f"Map<String,{pabc}>", [m(("k", v_ab)), m(("n", None)), m()]),
        ("list_pojo_field_removed", f"List<{pab}>", "List<Pojo<p.P:b=String>>", [[v_ab, None, {"a": 2, "b": "y"}]]),
        ("tuple_pojo_field_added", f"Tuple<Int,{pab}>", f"Tuple<Int,{pabc}>", [[7, v_ab]]),
        ("row_legacy_to_kind", "Row[legacy]<Int,String>", "Row<Int,String>", [row(1, None), row(None, "a")]),
        ("row_kind_to_legacy", "Row<Int,String>", "Row[legacy]<Int,String>", [row(1, "x", kind="-U"), row(None, None)]),
        ("row_legacy_nested_pojo_added", f"Row[legacy]<{pab}>", f"Row<{pabc}>", [row(v_ab), row(None)]),
        ("enum_appended", rg, rgb, ["GREEN"]),
        ("enum_reordered", rgb, "Enum<p.Color:BLUE,RED,GREEN>", ["RED", "BLUE"]),
        ("list_enum_appended", f"List<{rg}>", f"List<{rgb}>", [["RED", "GREEN"]]),
        ("int_as_is", "Int", "Int", [42]),
    ]:
        c.values(f"migration/{name}", old, values)
        for line in c.lines[-len(values) :]:
            line["old"], line["new"] = line.pop("serializer"), new
    return c


EVENTS_OLD = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
EVENTS_NEW = (
    "ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, "
    "`timestamp` BIGINT, appVersion STRING, sessionId BIGINT>>"
)


def rowdata() -> Cases:
    c = Cases()

    def rd(name: str, sql: str, values: list[Any]) -> None:
        c.values(f"rowdata/{name}", f"RowData<{sql}>", values)

    rd(
        "bigint_string",
        "ROW<a BIGINT, b STRING>",
        [
            row(7, "abc"),
            row(7, "hello world!"),
            row(None, None, kind="-U"),
            row(0, ""),
            row(-1, "abcdefg"),
            row(1, "abcdefgh", kind="+U"),
            row(I64[0], "\u00e9\u20ac\U0001f600", kind="-D"),
        ],
    )
    scalars = "ROW<bo BOOLEAN, ti TINYINT, si SMALLINT, i INT, bi BIGINT, f FLOAT, d DOUBLE>"
    rd(
        "scalars",
        scalars,
        [
            row(True, 1, 2, 3, 4, 1.5, 2.5),
            row(False, -128, -(2**15), I32[0], I64[0], -F32_MAX, -F64_MAX),
            row(True, 127, 2**15 - 1, I32[1], I64[1], F32_MAX, F64_MAX, kind="+U"),
            row(None, None, None, None, None, None, None, kind="-D"),
            row(False, 0, 0, 0, 0, NAN, NAN),
            row(False, 0, 0, 0, 0, NZERO, NZERO),
            row(False, 0, 0, 0, 0, INF, NINF),
            row(True, -1, -1, -1, -1, F32_MIN_SUB, F64_MIN_SUB),
        ],
    )
    rd(
        "decimals",
        "ROW<d10 DECIMAL(10,2), d20 DECIMAL(20,2), d38 DECIMAL(38,10), d18 DECIMAL(18,0), d5 DECIMAL(5,5)>",
        [
            row(dec("123.45"), dec("123.45"), dec("1.5"), dec("1"), dec("0.12345")),
            row(dec("-123.45"), dec("-123.45"), dec("-0.0000000001"), dec("-999999999999999999"), dec("-0.99999")),
            row(
                dec("99999999.99"),
                dec("999999999999999999.99"),
                dec("9999999999999999999999999999.9999999999"),
                dec("999999999999999999"),
                dec("0.00000"),
            ),
            row(dec("0.00"), dec("0.00"), dec("0E-10"), dec("0"), None, kind="-U"),
            row(None, None, None, None, None),
            row(dec("1.00"), dec("10.00"), dec("12345678901234567890.0123456789"), dec("10"), dec("0.00001")),
        ],
    )
    rd(
        "strings",
        "ROW<c CHAR(3), v VARCHAR(10), s STRING>",
        [
            row("abc", "", ""),
            row("", "abcdefg", "abcdefgh"),
            row(None, "\u00e9\u20ac", "\U0001f600\U0001f600"),
            row("a", None, "x" * 100),
            row("\u20ac", "1234567", None, kind="+U"),
            row("a\u0000b", "\u0000", "end\u0000"),
            row("", "", s([0x61, 0xD800, 0x62])),
        ],
    )
    rd(
        "binary",
        "ROW<b BINARY(3), vb VARBINARY(10), by BYTES>",
        [
            row(b("010203"), b(""), b("00")),
            row(b("ffffff"), b("01020304050607"), b("0102030405060708")),
            row(None, b("ff" * 10), b(bytes(range(40)).hex())),
            row(b("000000"), None, None, kind="-D"),
        ],
    )
    rd(
        "date_time",
        "ROW<dt DATE, t0 TIME(0), t3 TIME(3)>",
        [
            row(date("1970-01-01"), time("00:00:00"), time("00:00:00.000")),
            row(date("2024-02-29"), time("12:34:56"), time("23:59:59.999")),
            row(date("1900-01-01"), time("23:59:59"), time("00:00:00.001")),
            row(date("9999-12-31"), None, time("12:00:00.500"), kind="+U"),
            row(date("0001-01-01"), None, None),
        ],
    )
    rd(
        "timestamps",
        "ROW<ts3 TIMESTAMP(3), ts6 TIMESTAMP(6), ts9 TIMESTAMP(9), l3 TIMESTAMP_LTZ(3), l6 TIMESTAMP_LTZ(6)>",
        [
            row(ts(0), ts(0), ts(0), ts(0), ts(0)),
            row(ts(1000), ts(1000, 123000), ts(1000, 123456), ts(1000), ts(1000, 999000)),
            row(
                ts(1700000000123),
                ts(1700000000123, 456000),
                ts(1700000000123, 456789),
                ts(1700000000123),
                ts(1700000000123, 1000),
            ),
            row(ts(-1), ts(-1, 999000), ts(-86400000, 1), ts(-1000), ts(-1, 0), kind="-U"),
            row(None, None, None, None, None),
            row(ts(253402300799999), None, ts(253402300799999, 999999), None, None),
        ],
    )
    rd(
        "arrays",
        "ROW<ai ARRAY<INT>, ast ARRAY<STRING>, ar ARRAY<ROW<x INT, y STRING>>>",
        [
            row(
                [1, None, 3], ["a", None, "abcdefghij"], [row(1, "a"), None, row(None, "long string value", kind="+U")]
            ),
            row([], [], []),
            row(None, None, None, kind="-D"),
            row([None], [""], [row(None, None)]),
            row(list(range(33)), ["x" * 8] * 3, None),
        ],
    )
    rd(
        "arrays_wide",
        "ROW<bo ARRAY<BOOLEAN>, ti ARRAY<TINYINT>, si ARRAY<SMALLINT>, bi ARRAY<BIGINT>, "
        "f ARRAY<FLOAT>, d ARRAY<DOUBLE>>",
        [
            row(
                [True, None, False],
                [1, -1, None],
                [2**15 - 1, None],
                [I64[0], None, I64[1]],
                [1.5, NAN, None],
                [NZERO, NAN, INF],
            ),
            row([True] * 9, list(range(-5, 5)), [], [], [F32_MIN_SUB], [F64_MIN_SUB]),
        ],
    )
    rd(
        "arrays_nested",
        "ROW<aa ARRAY<ARRAY<INT>>, ad ARRAY<DECIMAL(20,2)>, adc ARRAY<DECIMAL(10,2)>, "
        "ats ARRAY<TIMESTAMP(6)>, ats3 ARRAY<TIMESTAMP(3)>, adt ARRAY<DATE>, ab ARRAY<BYTES>>",
        [
            row(
                [[1, 2], None, []],
                [dec("123.45"), None, dec("-1.00")],
                [dec("1.23"), None],
                [ts(1000, 123000), None],
                [ts(5)],
                [date("2000-01-01"), None],
                [b("01"), None, b("00" * 9)],
            ),
            row([], [], [], [], [], [], []),
        ],
    )
    rd(
        "maps",
        "ROW<m MAP<STRING, INT>, ms MULTISET<STRING>, mi MAP<INT, ARRAY<STRING>>>",
        [
            row(m(("k", 1)), m(("a", 2), ("b", 1)), m((1, ["x"]), (2, None))),
            row(m(), m(), m()),
            row(None, None, None, kind="-U"),
            row(m(("a long key here", None), ("z", -1)), m(("same", 100)), m((-1, []))),
        ],
    )
    rd(
        "nested_rows",
        "ROW<i INT, r ROW<x INT, s STRING>, rr ROW<a ROW<b BIGINT>>>",
        [
            row(1, row(2, "s"), row(row(3))),
            row(None, None, None, kind="+U"),
            row(1, row(None, None), row(None)),
            row(5, row(6, "a string longer than seven"), row(row(None), kind="-D"), kind="-D"),
        ],
    )
    rd(
        "doc_7_6",
        "ROW<i INT, r ROW<x INT>, arr ARRAY<INT>, m MAP<VARCHAR(10), INT>, d20 DECIMAL(20,2), "
        "d10 DECIMAL(10,2), ts6 TIMESTAMP(6), ts3 TIMESTAMP(3), bo BOOLEAN, db DOUBLE, vb VARBINARY>",
        [
            row(
                5,
                row(6),
                [1, None, 3],
                m(("k", 1)),
                dec("123.45"),
                dec("123.45"),
                ts(1000, 123456),
                ts(1000),
                True,
                1.5,
                b("010203040506070809"),
            ),
        ],
    )
    rd(
        "not_null",
        "ROW<a INT NOT NULL, b STRING NOT NULL, c ARRAY<INT NOT NULL> NOT NULL>",
        [
            row(1, "x", [1, 2]),
            row(0, "", [], kind="-D"),
        ],
    )
    rd("kinds", "ROW<a INT>", [row(1, kind=k) for k in ("+I", "-U", "+U", "-D")] + [row(None)])
    rd("single_string", "ROW<s STRING>", [row("abcdefg"), row("abcdefgh"), row("")])
    rd(
        "normalised_on_write",
        "ROW<f FLOAT, ts3 TIMESTAMP(3), s STRING, l3 TIMESTAMP_LTZ(3)>",
        [
            row(0.1, ts(1000, 999999), s([0xD800]), ts(5, 1)),
            row(1e-46, ts(-1, 5), s([0x61, 0xDFFF]), None),
        ],
    )
    rd("empty_row", "ROW<>", [row(), row(kind="-D")])
    rd(
        "nan_payloads",
        "ROW<f FLOAT, d DOUBLE, af ARRAY<FLOAT>, ad ARRAY<DOUBLE>>",
        [
            row(
                {"$fbits": "7fc00001"},
                {"$dbits": "7ff8000000000001"},
                [{"$fbits": "7fc00001"}],
                [{"$dbits": "fff8000000000000"}],
            ),
            row({"$fbits": "ffc00000"}, {"$dbits": "7ff80000deadbeef"}, [NAN, {"$fbits": "7fffffff"}], [NAN]),
        ],
    )
    rd(
        "more_collections",
        "ROW<aa ARRAY<ARRAY<STRING>>, mss MAP<STRING, STRING>, mi MULTISET<INT>, "
        "a9 ARRAY<TIMESTAMP(9)>, ac ARRAY<CHAR(2)>, r ROW<x INT NOT NULL> NOT NULL>",
        [
            row(
                [["a", None], None, ["long enough string"]],
                m(("k", "v" * 20), ("n", None)),
                m((1, 3), (None, 1)),
                [ts(1, 1), None],
                ["ab", None],
                row(1),
            ),
            row([], m(), m(), [], [], row(0), kind="-U"),
        ],
    )
    rd(
        "decimal_boundaries",
        "ROW<a DECIMAL(18,18), b DECIMAL(19,0), c DECIMAL(38,0), d DECIMAL(1,0)>",
        [
            row(dec("0.999999999999999999"), dec("9999999999999999999"), dec("9" * 38), dec("9")),
            row(dec("-0.000000000000000001"), dec("-9223372036854775808"), dec("-" + "9" * 38), dec("-9")),
            row(dec("0E-18"), dec("0"), dec("1"), dec("0")),
        ],
    )
    rd(
        "timestamp_precisions",
        "ROW<t0 TIMESTAMP(0), t7 TIMESTAMP(7), l9 TIMESTAMP_LTZ(9), l0 TIMESTAMP_LTZ(0)>",
        [
            row(ts(1000), ts(1000, 100), ts(1000, 999999), ts(-5000)),
            row(ts(-62135596800000), ts(0, 1000), ts(1, 1), ts(0)),
        ],
    )
    rd(
        "map_complex",
        "ROW<mr MAP<INT, ROW<a STRING, b DOUBLE>>, ma MAP<STRING, ARRAY<BIGINT>>, am ARRAY<MAP<STRING, INT>>>",
        [
            row(m((1, row("x", 1.5)), (2, None)), m(("k", [1, None])), [m(("a", 1)), None, m()]),
            row(m(), m(), []),
        ],
    )
    rd(
        "varchar_lengths",
        "ROW<v1 VARCHAR(1), c10 CHAR(10), b1 BINARY(1), vb2 VARBINARY(2)>",
        [
            row("a", "0123456789", b("ff"), b("0102")),
            row("", "short", b("00"), b("")),
        ],
    )
    wide = "ROW<" + ", ".join(f"f{i} INT" for i in range(60)) + ">"
    rd("wide60", wide, [row(*[None if i % 7 == 0 else i for i in range(60)], kind="+U")])
    wide56 = "ROW<" + ", ".join(f"f{i} BIGINT" for i in range(57)) + ">"
    rd("wide57", wide56, [row(*[None if i in (0, 55, 56) else i for i in range(57)])])
    rd(
        "events_old",
        EVENTS_OLD,
        [
            row(7, row(3, 1700000000000, "phone")),
            row(8, row(None, None, None)),
            row(9, None, kind="-D"),
            row(10, row(42, 1, "a very long device type string")),
        ],
    )
    rd(
        "events_new",
        EVENTS_NEW,
        [
            row(7, row("phone", None, 3, 1700000000000, None, None)),
            row(8, row(None, None, None, None, None, None)),
            row(9, None, kind="-D"),
            row(10, row("a very long device type string", None, 42, 1, None, None)),
            row(11, row("tablet", "Berlin", 5, 1700000000001, "2.3.0", 123456789)),
        ],
    )
    return c


AVRO_RECORD = json.dumps(
    {
        "type": "record",
        "name": "Rec",
        "namespace": "p",
        "fields": [
            {"name": "id", "type": "int"},
            {"name": "l", "type": "long"},
            {"name": "s", "type": ["null", "string"]},
            {"name": "arr", "type": {"type": "array", "items": "int"}},
            {"name": "m", "type": {"type": "map", "values": "boolean"}},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        ],
    },
    separators=(",", ":"),
)
AVRO_SCALARS = json.dumps(
    {
        "type": "record",
        "name": "Scalars",
        "namespace": "p",
        "fields": [
            {"name": "b", "type": "boolean"},
            {"name": "f", "type": "float"},
            {"name": "d", "type": "double"},
            {"name": "by", "type": "bytes"},
            {"name": "fx", "type": {"type": "fixed", "name": "F4", "size": 4}},
            {"name": "n", "type": "null"},
            {"name": "u", "type": ["null", "long", "string"]},
        ],
    },
    separators=(",", ":"),
)
AVRO_NESTED = json.dumps(
    {
        "type": "record",
        "name": "Outer",
        "namespace": "p",
        "fields": [
            {"name": "name", "type": "string"},
            {
                "name": "inner",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": "Inner",
                        "fields": [
                            {"name": "x", "type": "int"},
                            {"name": "tags", "type": {"type": "array", "items": "string"}},
                        ],
                    },
                ],
            },
            {"name": "lm", "type": {"type": "map", "values": {"type": "array", "items": "long"}}},
        ],
    },
    separators=(",", ":"),
)


AVRO_REFS = json.dumps(
    {
        "type": "record",
        "name": "A",
        "namespace": "n",
        "fields": [
            {"name": "x", "type": ["null", {"type": "record", "name": "B", "fields": [{"name": "y", "type": "int"}]}]},
            {"name": "w", "type": "n.B"},
            {"name": "v", "type": "B"},
            {"name": "e", "type": ["null", {"type": "enum", "name": "Suit", "symbols": ["H", "S"]}, "string"]},
        ],
    },
    separators=(",", ":"),
)


def avro() -> Cases:
    c = Cases()
    c.values(
        "avro/record",
        f"Avro<{AVRO_RECORD}>",
        [
            {"id": 1, "l": -2, "s": "h\u00e9", "arr": [5, 6], "m": m(("k", True)), "e": "B"},
            {"id": 0, "l": 0, "s": None, "arr": [], "m": m(), "e": "A"},
            {"id": I32[0], "l": I64[1], "s": "", "arr": list(range(200)), "m": m(("a", False), ("b", True)), "e": "A"},
        ],
    )
    c.values(
        "avro/scalars",
        f"Avro<{AVRO_SCALARS}>",
        [
            {"b": True, "f": 1.5, "d": NAN, "by": b("0102"), "fx": b("deadbeef"), "n": None, "u": None},
            {"b": False, "f": NZERO, "d": F64_MAX, "by": b(""), "fx": b("00000000"), "n": None, "u": 5},
            {"b": False, "f": INF, "d": NINF, "by": b("ff" * 130), "fx": b("01020304"), "n": None, "u": "\U0001f600"},
        ],
    )
    c.values(
        "avro/nested",
        f"Avro<{AVRO_NESTED}>",
        [
            {"name": "o", "inner": {"x": 1, "tags": ["a", "b"]}, "lm": m(("k", [1, 2]), ("e", []))},
            {"name": "", "inner": None, "lm": m()},
        ],
    )
    c.values(
        "avro/named_refs",
        f"Avro<{AVRO_REFS}>",
        [
            {"x": None, "w": {"y": 1}, "v": {"y": 2}, "e": "S"},
            {"x": {"y": 3}, "w": {"y": -1}, "v": {"y": 0}, "e": "not a symbol"},
            {"x": None, "w": {"y": 1}, "v": {"y": 2}, "e": None},
        ],
    )
    c.values("avro/primitive_string", 'Avro<"string">', ["abc", "", "\u20ac"])
    c.values("avro/primitive_long", 'Avro<"long">', [0, -1, I64[0]])
    c.values("avro/array", 'Avro<{"type":"array","items":["null","double"]}>', [[1.5, None, NAN], []])
    return c


# Every logical type statemorph supports, alone (its Java-serialized LogicalType) and as row fields
# (Flink's RowDataSerializerSnapshot). NOT NULL variants, comments and nested rows included.
FLINK_TYPES = [
    "BOOLEAN",
    "TINYINT",
    "SMALLINT",
    "INT",
    "BIGINT",
    "FLOAT",
    "DOUBLE",
    "CHAR(1)",
    "CHAR(3)",
    "VARCHAR(1)",
    "VARCHAR(10)",
    "STRING",
    "BINARY(1)",
    "BINARY(3)",
    "VARBINARY(10)",
    "BYTES",
    "DECIMAL(10, 2)",
    "DECIMAL(5, 5)",
    "DECIMAL(18, 0)",
    "DECIMAL(38, 10)",
    "DATE",
    "TIME(0)",
    "TIME(3)",
    "TIMESTAMP(0)",
    "TIMESTAMP(3)",
    "TIMESTAMP(6)",
    "TIMESTAMP(9)",
    "TIMESTAMP_LTZ(3)",
    "TIMESTAMP_LTZ(9)",
    "ARRAY<INT>",
    "ARRAY<STRING NOT NULL>",
    "ARRAY<ARRAY<DECIMAL(5, 5)>>",
    "ARRAY<TIMESTAMP_LTZ(6)>",
    "MAP<STRING, BIGINT>",
    "MAP<INT, INT>",
    "MAP<DATE, TIME(0)>",
    "MAP<DECIMAL(10, 2), ARRAY<BYTES>>",
    "MAP<STRING, MAP<INT, BOOLEAN>>",
    "MULTISET<STRING>",
    "MULTISET<INT NOT NULL>",
    "ROW<a INT>",
    "ROW<>",
    "ROW<a INT NOT NULL, b STRING 'the b field'> NOT NULL",
    "ROW<x ROW<y ROW<z BIGINT>>, `x y` DOUBLE>",
    "ARRAY<ROW<a INT, b STRING>>",
    "MAP<STRING, ROW<n INT>>",
    "ARRAY<ROW<a BOOLEAN, b TINYINT, c SMALLINT, d INT, e BIGINT, f FLOAT, g DOUBLE, h CHAR(2), i VARCHAR(3), "
    "j BINARY(2), k VARBINARY(3), l DECIMAL(10, 2), m DATE, n TIME(3), o TIMESTAMP(3), p TIMESTAMP_LTZ(3), "
    "q ARRAY<INT>, r MAP<INT, INT>, s MULTISET<INT>, t ROW<x INT>>>",
]


def flink_rowdata() -> Cases:
    c = Cases()
    for t in FLINK_TYPES:
        for variant in ([t, f"{t} NOT NULL"] if not t.endswith("NOT NULL") else [t]):
            c._add({"case": f"javaser/{variant}", "logical_type": variant})
    for t in FLINK_TYPES:
        if t.startswith(("ARRAY", "MAP", "MULTISET", "ROW<a")):
            c._add({"case": f"internal_serializer/{t}", "internal_serializer": t})
    rows = {
        "events_old": EVENTS_OLD,
        "events_new": EVENTS_NEW,
        "empty": "ROW<>",
        "one_int": "ROW<a INT>",
        "bigint_string": "ROW<a BIGINT, b STRING>",
        "scalars": "ROW<bo BOOLEAN, ti TINYINT, si SMALLINT, i INT, bi BIGINT, f FLOAT, d DOUBLE>",
        "not_null": "ROW<a INT NOT NULL, b STRING NOT NULL, c ROW<d BIGINT NOT NULL> NOT NULL>",
        "comments": "ROW<a INT 'first', b ROW<c STRING 'inner comment'> 'nested'>",
        "strings_binary": "ROW<c CHAR(3), v VARCHAR(10), s STRING, b BINARY(3), vb VARBINARY(10), by BYTES>",
        "decimals": "ROW<d10 DECIMAL(10, 2), d20 DECIMAL(20, 2), d38 DECIMAL(38, 10), d5 DECIMAL(5, 5)>",
        "date_time": "ROW<dt DATE, t0 TIME(0), t3 TIME(3), ts0 TIMESTAMP(0), ts3 TIMESTAMP(3), ts9 TIMESTAMP(9), "
        "l3 TIMESTAMP_LTZ(3), l6 TIMESTAMP_LTZ(6)>",
        "collections": "ROW<a ARRAY<INT>, m MAP<STRING, BIGINT>, s MULTISET<STRING>, "
        "n ARRAY<MAP<INT, ARRAY<DECIMAL(10, 2)>>>>",
        "rows_in_collections": "ROW<a ARRAY<ROW<x INT, y STRING>>, m MAP<STRING, ROW<n INT NOT NULL, "
        "d DECIMAL(5, 5), t TIMESTAMP(3), r ROW<z BOOLEAN>>>, s MULTISET<ROW<q BIGINT>>>",
        "all_types": "ROW<" + ", ".join(f"f{i} {t}" for i, t in enumerate(FLINK_TYPES) if "ROW" not in t) + ">",
    }
    for name, sql in rows.items():
        c.snapshot(f"flink_rowdata/{name}", f"RowData<{sql}>")
    return c


OPERATOR_UIDS: list[Any] = [
    "",  # no byte: the hash of the empty input
    "a",
    "events-state",
    "kinds",
    "records",
    "Data stream collect sink",
    "x" * 15, "x" * 16, "x" * 17,  # one 16-byte block and its tail boundaries
    "y" * 31, "y" * 32, "y" * 33,
    "clé-ü",  # 2-byte UTF-8
    "演算子-状態",  # 3-byte UTF-8
    "op-\U0001f680",  # a supplementary character: a surrogate pair in Java, 4 UTF-8 bytes
    " spaced uid\t",
    "a" * 1000,
    s([0x61, 0xD800, 0x62]),  # a lone surrogate: Java's UTF-8 encoder writes '?'
]


def operator_ids() -> Cases:
    c = Cases()
    for i, uid in enumerate(OPERATOR_UIDS):
        c._add({"case": f"operator_id/{i}", "uid": uid})
    return c


def edge() -> Cases:
    """The edge vectors of tests/datastream/test_{scalar,struct}_flink_edge_vectors.py, first written by
    a throw-away harness: lone surrogates, varint boundaries, NaN payloads in arrays, padded Nullable
    around a variable-length type, null map values, nested snapshots, POJO field order beyond ASCII,
    rows nesting rows and POJOs, nested tuples and a POJO evolution. Those tests check that their
    hex literals are exactly what this group's lines record."""
    c = Cases()
    color = "Enum<Gen$Color:RED,GREEN,BLUE>"  # the harness's nested enum class, by its binary name
    for name, spec, value in [
        ("str_nul", "String", "a\u0000b"),
        ("str_lone_high", "String", s([0x78, 0xD800, 0x79])),
        ("str_lone_low_end", "String", s([0xDC00])),
        ("str_boundaries", "String", "\u007f\u0080\u07ff\u0800\u3fff\u4000\uffff"),
        ("str_emoji", "String", "\U0001F600z"),
        ("str_long", "String", "q" * 16384),
        ("chars", "CharArray", ["a", s([0xD83D]), "\uffff"]),
        ("bools", "BooleanArray", [True, False, True]),
        ("floats_nan", "FloatArray", [{"$fbits": "7fc00001"}, NZERO, F32_MIN_SUB]),
        ("doubles_nan", "DoubleArray", [{"$dbits": "7ff8000000000001"}, NINF]),
        ("shorts", "ShortArray", [-32768, 1]),
        ("longs", "LongArray", list(I64)),
        ("strarr", "StringArray", ["a", None, "\u00e9"]),
        ("nullable_long_pad_null", "Nullable<Long,padded>", None),
        ("nullable_long_pad_5", "Nullable<Long,padded>", 5),
        ("nullable_str_pad_null", "Nullable<String,padded>", None),
        ("nullable_str_pad_x", "Nullable<String,padded>", "x"),
        ("map_int_str", "Map<Int,String>", m((1, None), (2, "b"), (3, None))),
        ("list_str", "List<String>", ["a", None, ""]),
        ("enum_blue", color, "BLUE"),
    ]:
        c.value(f"edge/{name}", spec, value)
    for name, spec in [
        ("strarr", "StringArray"),
        ("bytes", "Bytes"),
        ("char", "Char"),
        ("nullable_str_pad", "Nullable<String,padded>"),
        ("nullable_long_nopad", "Nullable<Long>"),
        ("map_str_list_long", "Map<String,List<Long>>"),
        ("list_enum", f"List<{color}>"),
    ]:
        c.snapshot(f"edge/snapshot/{name}", spec)
    inner = "Pojo<p.Inner:x=Int,y=String>"
    weird = f"Pojo<p.Weird:B=Int,a=String,b=Long,\uff71=String,\U0001d400=Int,inner={inner}>"
    for name, spec, value in [
        ("weird", weird, {"B": 1, "a": "x", "b": None, "\uff71": "k", "\U0001d400": 5, "inner": {"x": 3, "y": None}}),
        ("row", f"Row<Int,String,Row<Int,String>,{inner}>", row(1, None, row(2, "z", kind="-D"), {"x": 7, "y": "q"},
                                                                kind="+U")),
        ("legacy", "Row[legacy]<Int,String>", row(4, None)),
        ("tuple", "Tuple<Int,Tuple<Long,String>,String>", [9, [-1, "\u00e9"], ""]),
    ]:
        c.value(f"edge/struct/{name}", spec, value)
        c.snapshot(f"edge/struct_snapshot/{name}", spec)
    c._add({"case": "edge/evo", "old": "Pojo<p.Evo:a=Int,gone=String,keep=Long>",
            "new": "Pojo<p.Evo:a=Int,keep=Long,added=String>", "value": {"a": 1, "gone": "g", "keep": 2},
            "restored": True})
    c.snapshot("edge/evo_old_snapshot", "Pojo<p.Evo:a=Int,gone=String,keep=Long>")
    return c


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, fn in [
        ("datastream", datastream),
        ("snapshots", snapshots),
        ("rowdata", rowdata),
        ("avro", avro),
        ("compat", compat),
        ("migration", migration),
        ("flink_rowdata", flink_rowdata),
        ("operator_ids", operator_ids),
        ("edge", edge),
    ]:
        fn().write(out / f"{name}.jsonl")


if __name__ == "__main__":
    main()
