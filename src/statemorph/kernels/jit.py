"""Machine code for RowData migrate plans and row types, compiled once each with LLVM (``llvmlite``).

Why: the compiled kernels interpret a program for every entry; on the Events workload a migrate
is ~370 instructions per entry, where code written for exactly that schema pair needs ~110. No C
compiler can be assumed where the library runs, but ``llvmlite`` ships LLVM in its wheel, so each
migrate plan (and each row type, for encode and decode) becomes a function with every slot offset,
null bit, width and row size as a constant.

The generated code takes only the common case. Migrate: valid entries, int32 Arrow offsets, no
null entries; fixed-width fields, STRING / BINARY and evolved nested rows are inlined, other kinds
(arrays, maps, big DECIMAL / TIMESTAMP, unchanged nested rows) call the interpreter's own function
for that one field. Encode / decode: rows of primitives, compact DECIMAL / TIMESTAMP, strings,
binaries and nested rows. At the first entry it does not take (a bad entry, an odd value, a full
output buffer) it returns that entry's index; the kernel (``rowdata.migrate_run`` / ``encode_run``
/ ``decode_run``) runs that entry through its own walk, which reports it exactly as it always does,
and resumes the machine code after it. So the machine code never decides an error or a size: every
check that fails sends the entry to the walk, and what a taken entry writes is what the walk writes
(the tests compare the two, bytes, arrays and errors).

Optional: without ``llvmlite`` (or with ``STATEMORPH_JIT=0``) every entry takes the kernels' walks.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from . import abi

_MASK64 = (1 << 64) - 1


def _c(v: int) -> str:
    """An i64 literal (LLVM wants signed decimals)."""
    v &= _MASK64
    return str(v - (1 << 64) if v >> 63 else v)


def _bits(v: int) -> Iterator[int]:
    w = 0
    while v:
        if v & 1:
            yield w
        v >>= 1
        w += 1


class _IR:
    """LLVM IR text of one function. Mutable values live in allocas, which LLVM's SROA turns into
    registers; every failed check branches to ``%bail``."""

    def __init__(self, utf8: int) -> None:
        self.utf8 = utf8
        self.body: list[str] = []
        self.allocas: list[str] = []
        self.n = 0

    # -- plumbing -------------------------------------------------------------------------------
    def tmp(self) -> str:
        self.n += 1
        return f"%t{self.n}"

    def label(self) -> str:
        self.n += 1
        return f"L{self.n}"

    def op(self, text: str) -> str:
        r = self.tmp()
        self.body.append(f"  {r} = {text}")
        return r

    def put(self, text: str) -> None:
        self.body.append(f"  {text}")

    def block(self, name: str) -> None:
        self.body.append(f"{name}:")

    def var(self) -> str:
        r = self.tmp()
        self.allocas.append(f"  {r} = alloca i64, align 8")
        return r

    def get(self, var: str) -> str:
        return self.op(f"load i64, ptr {var}, align 8")

    def set(self, var: str, value: str) -> None:
        self.put(f"store i64 {value}, ptr {var}, align 8")

    def bin(self, name: str, a: str, b: str) -> str:
        return self.op(f"{name} i64 {a}, {b}")

    def cmp(self, pred: str, a: str, b: str) -> str:
        return self.op(f"icmp {pred} i64 {a}, {b}")

    def at(self, ptr: str, off: str) -> str:
        return self.op(f"getelementptr i8, ptr {ptr}, i64 {off}")

    def load64(self, ptr: str, off: str) -> str:
        return self.op(f"load i64, ptr {self.at(ptr, off)}, align 1")

    def load32(self, ptr: str, off: str) -> str:
        """A little-endian int32, sign-extended."""
        return self.op(f"sext i32 {self.op(f'load i32, ptr {self.at(ptr, off)}, align 1')} to i64")

    def store64(self, ptr: str, off: str, value: str) -> None:
        self.put(f"store i64 {value}, ptr {self.at(ptr, off)}, align 1")

    def bail_if(self, cond: str) -> None:
        ok = self.label()
        self.put(f"br i1 {cond}, label %bail, label %{ok}")
        self.block(ok)

    def branch(self, cond: str) -> tuple[str, str]:
        yes, no = self.label(), self.label()
        self.put(f"br i1 {cond}, label %{yes}, label %{no}")
        return yes, no

    def bit_set(self, word: str, bit: int) -> str:
        return self.op(f"trunc i64 {self.bin('lshr', word, str(bit))} to i1")

    def bit_of(self, ptr: str, i: str) -> tuple[str, str]:
        """Byte address and mask of bit ``i`` of a bitmap."""
        at = self.at(ptr, self.bin("lshr", i, "3"))
        mask = self.op(f"trunc i64 {self.bin('shl', '1', self.bin('and', i, '7'))} to i8")
        return at, mask

    def set_bit(self, ptr: str, i: str) -> None:
        at, mask = self.bit_of(ptr, i)
        old = self.op(f"load i8, ptr {at}, align 1")
        self.put(f"store i8 {self.op(f'or i8 {old}, {mask}')}, ptr {at}, align 1")

    def clear_bit(self, ptr: str, i: str) -> None:
        at, mask = self.bit_of(ptr, i)
        old = self.op(f"load i8, ptr {at}, align 1")
        keep = self.op(f"xor i8 {mask}, -1")
        self.put(f"store i8 {self.op(f'and i8 {old}, {keep}')}, ptr {at}, align 1")

    def utf8_check(self, high: str, at: str, n: str) -> None:
        """Bytes with a high bit set (``high`` != 0) must be valid UTF-8: the interpreter's
        validator decides, a failure sends the entry to the interpreter."""
        check, ok = self.branch(self.cmp("ne", high, "0"))
        self.block(check)
        valid = self.op(f"call i32 %utf8(ptr {self.at('%d', at)}, i64 {n})")
        self.bail_if(self.op(f"icmp eq i32 {valid}, 0"))
        self.put(f"br label %{ok}")
        self.block(ok)

    def or_into(self, var: str, value: str) -> None:
        self.set(var, self.bin("or", self.get(var), value))

    def copy_words(self, src_at: str, dst: str, dst_at: str, n: str, r8: str, is_str: bool,
                   src: str = "%d") -> None:
        """n bytes from ``src`` to ``dst`` a word at a time (``r8`` = n rounded up to 8 bytes are
        readable and writable: the caller checked), the last word masked to the string's end
        (which zeroes the pad); with ``is_str`` the ASCII test rides along, and other strings must
        be valid UTF-8."""
        w, acc = self.var(), self.var()
        self.set(w, "0")
        self.set(acc, "0")
        head, body, tail = self.label(), self.label(), self.label()
        self.put(f"br label %{head}")
        self.block(head)
        wv = self.get(w)
        self.put(f"br i1 {self.cmp('slt', self.bin('add', wv, '8'), r8)}, label %{body}, label %{tail}")
        self.block(body)
        v = self.load64(src, self.bin("add", src_at, wv))
        self.or_into(acc, v)
        self.store64(dst, self.bin("add", dst_at, wv), v)
        self.set(w, self.bin("add", wv, "8"))
        self.put(f"br label %{head}")
        self.block(tail)
        last, done = self.label(), self.label()
        self.put(f"br i1 {self.cmp('ne', r8, '0')}, label %{last}, label %{done}")
        self.block(last)
        wv = self.get(w)
        keep = self.bin("lshr", _c(_MASK64), self.bin("mul", self.bin("sub", r8, n), "8"))
        v = self.bin("and", self.load64(src, self.bin("add", src_at, wv)), keep)
        self.or_into(acc, v)
        self.store64(dst, self.bin("add", dst_at, wv), v)
        self.put(f"br label %{done}")
        self.block(done)
        if is_str:
            self.utf8_check(self.bin("and", self.get(acc), _c(0x8080808080808080)), src_at, n)

    def assemble(self, params: str, body: list[str], carried: tuple[str, ...] = (), pro: tuple[str, ...] = (),
                 on_bail: tuple[str, ...] = (), on_done: tuple[str, ...] = ()) -> str:
        """The function ``i64 @plan(params)`` around a loop ``body`` (from label ``body``, back to
        ``loop``) over entries ``%i0 .. %stop`` (``%iv``). Each name in ``carried`` is an i64 kept
        in ``%{name}v``, read from ``%{name}io`` on entry and written back on return. ``bail``
        returns the entry it stopped at, ``done`` returns ``%stop``."""
        head = ["declare i32 @llvm.bswap.i32(i32)", f"define i64 @plan({params}) nounwind {{", "entry:"]
        if self.utf8:
            head.append(f"  %utf8 = inttoptr i64 {self.utf8} to ptr")
        head += ["  %iv = alloca i64, align 8", *(f"  %{c}v = alloca i64, align 8" for c in carried), *self.allocas,
                 *pro, "  store i64 %i0, ptr %iv, align 8"]
        for c in carried:
            head += [f"  %{c}0 = load i64, ptr %{c}io, align 8", f"  store i64 %{c}0, ptr %{c}v, align 8"]
        head += ["  br label %loop", "loop:", "  %il = load i64, ptr %iv, align 8", "  %more = icmp slt i64 %il, %stop",
                 "  br i1 %more, label %body, label %done"]
        tail = []
        for label, extra, result in (("bail", on_bail, "%ib"), ("done", on_done, "%stop")):
            tail += [f"{label}:", *extra]
            for c in carried:
                tail += [f"  %{c}{label} = load i64, ptr %{c}v, align 8",
                         f"  store i64 %{c}{label}, ptr %{c}io, align 8"]
            if label == "bail":
                tail.append("  %ib = load i64, ptr %iv, align 8")
            tail.append(f"  ret i64 {result}")
        return "\n".join(head + body + tail + ["}"]) + "\n"

    def entry(self, i: str) -> tuple[str, str]:
        """``entry_span``'s checks of entry i (``i32 BE sizeInBytes ‖ row``, plain int32 Arrow
        offsets): the row's start and size."""
        s = self.load32("%offs", self.bin("mul", i, "4"))
        e = self.load32("%offs", self.bin("add", self.bin("mul", i, "4"), "4"))
        self.bail_if(self.cmp("slt", s, "0"))
        self.bail_if(self.cmp("slt", e, self.bin("add", s, "4")))
        self.bail_if(self.cmp("sgt", e, "%dlen"))
        be = self.op(f"load i32, ptr {self.at('%d', s)}, align 1")
        n = self.op(f"sext i32 {self.op(f'call i32 @llvm.bswap.i32(i32 {be})')} to i64")
        self.bail_if(self.cmp("ne", n, self.bin("sub", self.bin("sub", e, s), "4")))
        return self.bin("add", s, "4"), n


class _MigrateEmitter(_IR):
    """A RowData migrate plan (its lowered ops) as ``int64 plan(offs, d, dlen, i, stop, o, cap,
    &pos, o32)``: the contract of ``rowdata.PlanCode``."""

    def __init__(self, ops: list[dict[str, Any]], codes: dict[str, int], utf8: int, var_field: int,
                 prog: int) -> None:
        super().__init__(utf8)
        self.ops = ops
        self.k = codes
        self.var_field = var_field
        self.prog = prog

    def copy_run(self, src: str, dst: str, nb0: str, sbit: int, dbit: int, n: int) -> str:
        """``copy_run``: n slots copied, null ones zeroed; returns their new null bits."""
        nulls = self.bin("and", self.bin("lshr", nb0, str(sbit)), _c((1 << n) - 1))
        for k in range(n):
            v = self.load64(src, str(8 * k))
            keep = self.bin("sub", self.bin("and", self.bin("lshr", nulls, str(k)), "1"), "1")
            self.store64(dst, str(8 * k), self.bin("and", v, keep))
        return self.bin("shl", nulls, str(dbit))

    def string(self, op: dict[str, Any], base: str, size: str, ofixed: int, obase: str, cur: str) -> None:
        """``copy_string`` of a non-null STRING / BINARY field."""
        is_str = op["kind"] == self.k["SLOT_STR"]
        raw = self.load64("%d", self.bin("add", base, str(op["soff"])))
        inline, long_ = self.branch(self.cmp("slt", raw, "0"))
        join = self.label()
        self.block(inline)
        n = self.bin("and", self.bin("lshr", raw, "56"), "127")
        self.bail_if(self.cmp("ugt", n, "7"))
        if is_str:  # inline ASCII needs no scan
            mask = self.bin("sub", self.bin("shl", "1", self.bin("mul", n, "8")), "1")
            high = self.bin("and", self.bin("and", raw, mask), _c(0x8080808080808080))
            self.utf8_check(high, self.bin("add", base, str(op["soff"])), n)
        self.store64("%o", self.bin("add", obase, str(op["doff"])), raw)
        self.put(f"br label %{join}")

        self.block(long_)
        off = self.bin("lshr", raw, "32")
        n = self.bin("and", raw, _c(0xFFFFFFFF))
        end = self.bin("add", off, n)
        self.bail_if(self.op(f"or i1 {self.cmp('slt', off, str(ofixed))}, {self.cmp('sgt', end, size)}"))
        r8 = self.bin("and", self.bin("add", n, "7"), _c(~7))
        src_at = self.bin("add", base, off)
        c = self.get(cur)
        dst_at = self.bin("add", obase, c)
        self.bail_if(self.cmp("sgt", self.bin("add", src_at, r8), "%dlen"))
        self.bail_if(self.cmp("sgt", self.bin("add", dst_at, r8), "%cap"))
        self.copy_words(src_at, "%o", dst_at, n, r8, is_str)
        self.store64("%o", self.bin("add", obase, str(op["doff"])), self.bin("or", self.bin("shl", c, "32"), n))
        self.set(cur, self.bin("add", c, r8))
        self.put(f"br label %{join}")
        self.block(join)

    def row(self, i: int, base: str, size: str, obase: str) -> tuple[int, str]:
        """A row from its ENTER at ``ops[i]`` (``enter_row`` and the ops up to its EXIT / END).
        Returns the index after them and the new row's size."""
        k = self.k
        enter = self.ops[i]
        ofixed, nfixed = enter["ofixed"], enter["nfixed"]
        self.bail_if(self.cmp("slt", size, str(ofixed)))
        nb0 = self.load64("%d", base)
        self.bail_if(self.cmp("ne", self.bin("and", nb0, _c(enter["forbid"])), "0"))
        self.bail_if(self.cmp("sgt", self.bin("add", obase, str(nfixed)), "%cap"))
        for w in _bits(enter["zero"]):
            self.store64("%o", self.bin("add", obase, str(8 * w)), "0")
        new0, cur = self.var(), self.var()
        first = self.bin("or", self.bin("and", nb0, "255"), _c(enter["added"]))
        if enter.get("rn", 0):
            first = self.bin("or", first, self.copy_run(self.at("%d", self.bin("add", base, str(enter["rsoff"]))),
                                                       self.at("%o", self.bin("add", obase, str(enter["rdoff"]))),
                                                       nb0, enter["rsbit"], enter["rdbit"], enter["rn"]))
        self.set(new0, first)
        self.set(cur, str(nfixed))
        i += 1
        while True:
            op = self.ops[i]
            code = op["code"]
            if code in (k["EXIT"], k["END"]):
                self.store64("%o", obase, self.get(new0))
                return i + 1, self.get(cur)
            if code == k["FIXED"]:
                self.or_into(new0, self.copy_run(self.at("%d", self.bin("add", base, str(op["soff"]))),
                                                 self.at("%o", self.bin("add", obase, str(op["doff"]))),
                                                 nb0, op["sbit"], op["dbit"], op["n"]))
                i += 1
                continue
            null, present = self.branch(self.bit_set(nb0, op["sbit"]))
            join = self.label()
            self.block(null)
            self.or_into(new0, _c(1 << op["dbit"]))
            self.store64("%o", self.bin("add", obase, str(op["doff"])), "0")
            self.put(f"br label %{join}")
            self.block(present)
            if code == k["STR"]:
                self.string(op, base, size, ofixed, obase, cur)
                i += 1
            elif code == k["ENTER"]:
                raw = self.load64("%d", self.bin("add", base, str(op["soff"])))
                self.bail_if(self.cmp("slt", raw, "0"))
                off = self.bin("lshr", raw, "32")
                n = self.bin("and", raw, _c(0xFFFFFFFF))
                self.bail_if(self.op(f"or i1 {self.cmp('slt', off, str(ofixed))}, "
                                     f"{self.cmp('sgt', self.bin('add', off, n), size)}"))
                c = self.get(cur)
                i, r = self.row(i, self.bin("add", base, off), n, self.bin("add", obase, c))
                self.store64("%o", self.bin("add", obase, str(op["doff"])), self.bin("or", self.bin("shl", c, "32"), r))
                self.set(cur, self.bin("add", c, r))
            elif code == k["VAR"]:  # the interpreter's own code for every other kind, called
                raw = self.load64("%d", self.bin("add", base, str(op["soff"])))
                r = self.op(f"call i64 %varfield(ptr %prog, ptr %d, i64 {op['node']}, i64 {op['kind']}, "
                            f"i64 {op['flags']}, i64 {raw}, i64 {base}, i64 {size}, i64 {ofixed}, "
                            f"i64 {self.bin('add', base, str(op['soff']))}, ptr %o, i64 {obase}, "
                            f"i64 {self.bin('add', obase, str(op['doff']))}, i64 {self.get(cur)}, i64 %cap)")
                self.bail_if(self.cmp("slt", r, "0"))
                self.set(cur, r)
                i += 1
            else:
                raise ValueError(f"unknown op {code}")
            self.put(f"br label %{join}")
            self.block(join)

    def function(self) -> str:
        self.block("body")
        i = self.get("%iv")
        pos = self.get("%posv")
        base, n = self.entry(i)
        self.bail_if(self.cmp("sgt", self.bin("add", pos, "4"), "%cap"))
        end, r = self.row(0, base, n, self.bin("add", pos, "4"))
        if end != len(self.ops):
            raise ValueError("ops after END")
        swapped = self.op(f"call i32 @llvm.bswap.i32(i32 {self.op(f'trunc i64 {r} to i32')})")
        self.put(f"store i32 {swapped}, ptr {self.at('%o', pos)}, align 1")
        newpos = self.bin("add", self.bin("add", pos, r), "4")
        self.set("%posv", newpos)
        nxt = self.bin("add", i, "1")
        self.put(f"store i32 {self.op(f'trunc i64 {newpos} to i32')}, "
                 f"ptr {self.op(f'getelementptr i32, ptr %o32, i64 {nxt}')}, align 4")
        self.set("%iv", nxt)
        self.put("br label %loop")
        return self.assemble("ptr noalias %offs, ptr noalias %d, i64 %dlen, i64 %i0, i64 %stop, ptr noalias %o, "
                             "i64 %cap, ptr noalias %posio, ptr noalias %o32", self.body, carried=("pos",),
                             pro=(f"  %varfield = inttoptr i64 {self.var_field} to ptr",
                                  f"  %prog = inttoptr i64 {self.prog} to ptr"))


class _ColumnsEmitter(_IR):
    """Machine code over a row program's Arrow columns, which the kernel keeps in its ``Node``
    array (``rowdata.node_layout`` gives the field offsets)."""

    def __init__(self, matrix: list[list[int]], layout: dict[str, int], utf8: int) -> None:
        super().__init__(utf8)
        self.m = matrix
        self.lay = layout
        self.cols: dict[tuple[int, str], str] = {}  # (node, field) → its value in the prologue

    def field(self, c: int, name: str, ty: str) -> str:
        """Field ``name`` of node c's ``Node``."""
        at = self.at("%nodes", str(c * self.lay["size"] + self.lay[name]))
        return self.op(f"load {ty}, ptr {at}, align 8")


class _DecodeEmitter(_ColumnsEmitter):
    """A RowData row type's decode as ``int64 plan(offs, d, dlen, i, stop, nodes)``: the contract
    of ``rowdata.DecodeCode``. It scatters entries into the Arrow outputs ``decode_run`` prepared
    (their pointers and counters read from its ``Node`` array, counters written back on return).
    On an entry it does not take it clears what it wrote for that row (validity and BOOLEAN bits,
    values) and returns, so the walk decodes the entry onto the same zeroed outputs as without it."""

    def kind(self, c: int) -> int:
        return self.m[c][abi.COL_KIND]

    def prologue(self) -> list[str]:
        """Every column's buffers (they do not move during a call) and counters."""
        for c in range(len(self.m)):
            k = self.kind(c)
            self.cols[c, "valid"] = self.field(c, "valid", "ptr")
            self.cols[c, "count"], self.cols[c, "count0"] = self.var(), self.var()
            count = self.field(c, "count", "i64")
            self.set(self.cols[c, "count"], count)
            self.set(self.cols[c, "count0"], count)
            if k in (abi.SLOT_STR, abi.SLOT_BIN):
                self.cols[c, "offs"] = self.field(c, "offs", "ptr")
                wide = self.field(c, "wide", f"i{8 * self.lay['wide_size']}")
                self.cols[c, "wide"] = self.op(f"icmp ne i{8 * self.lay['wide_size']} {wide}, 0")
                self.cols[c, "sdata"] = self.field(c, "sdata", "ptr")
                self.cols[c, "scap"] = self.field(c, "scap", "i64")
                self.cols[c, "spos"], self.cols[c, "spos0"] = self.var(), self.var()
                spos = self.field(c, "spos", "i64")
                self.set(self.cols[c, "spos"], spos)
                self.set(self.cols[c, "spos0"], spos)
            elif k != abi.SLOT_ROW:
                self.cols[c, "vals"] = self.field(c, "vals", "ptr")
        lines, self.body = self.body, []
        return lines

    def count_up(self, c: int) -> None:
        v = self.cols[c, "count"]
        self.set(v, self.bin("add", self.get(v), "1"))

    def string(self, c: int, slot: str, base: str, size: str, fixed: int) -> None:
        """``decode_row``'s STRING / BINARY: inline or var part, UTF-8, appended to the column a
        word at a time (the column's buffer must hold the whole words, or the walk takes the entry)."""
        is_str = self.kind(c) == abi.SLOT_STR
        sdata, spos = self.cols[c, "sdata"], self.cols[c, "spos"]
        pos = self.get(spos)
        room = self.bin("sub", self.cols[c, "scap"], pos)
        raw = self.load64("%d", slot)
        inline, long_ = self.branch(self.cmp("slt", raw, "0"))
        join = self.label()
        self.block(inline)
        n = self.bin("and", self.bin("lshr", raw, "56"), "127")
        self.bail_if(self.cmp("ugt", n, "7"))
        if is_str:
            mask = self.bin("sub", self.bin("shl", "1", self.bin("mul", n, "8")), "1")
            self.utf8_check(self.bin("and", self.bin("and", raw, mask), _c(0x8080808080808080)), slot, n)
        self.bail_if(self.cmp("slt", room, "8"))
        self.store64(sdata, pos, raw)
        self.set(spos, self.bin("add", pos, n))
        self.put(f"br label %{join}")
        self.block(long_)
        off = self.bin("lshr", raw, "32")
        n = self.bin("and", raw, _c(0xFFFFFFFF))
        self.bail_if(self.op(f"or i1 {self.cmp('slt', off, str(fixed))}, "
                             f"{self.cmp('sgt', self.bin('add', off, n), size)}"))
        at = self.bin("add", base, off)
        r8 = self.bin("and", self.bin("add", n, "7"), _c(~7))
        self.bail_if(self.cmp("sgt", self.bin("add", at, r8), "%dlen"))
        self.bail_if(self.cmp("sgt", r8, room))
        self.copy_words(at, sdata, pos, n, r8, is_str)
        self.set(spos, self.bin("add", pos, n))
        self.put(f"br label %{join}")
        self.block(join)

    def value(self, c: int, slot: str, i: str) -> None:
        """``put_value`` / the 4- and 8-byte copies of ``decode_row``."""
        k, vals = self.kind(c), self.cols[c, "vals"]
        if k == abi.SLOT_BOOL:
            byte = self.op(f"load i8, ptr {self.at('%d', slot)}, align 1")
            yes, no = self.branch(self.op(f"icmp ne i8 {byte}, 0"))
            self.block(yes)
            self.set_bit(vals, i)
            self.put(f"br label %{no}")
            self.block(no)
            return
        if k == abi.SLOT_DEC_COMPACT:
            v = self.load64("%d", slot)
            at = self.bin("mul", i, "16")
            self.store64(vals, at, v)
            self.store64(vals, self.bin("add", at, "8"), self.bin("ashr", v, "63"))
            return
        bits = 8 * _WIDTH[k]
        v = self.op(f"load i{bits}, ptr {self.at('%d', slot)}, align 1")
        self.put(f"store i{bits} {v}, ptr {self.at(vals, self.bin('mul', i, str(_WIDTH[k])))}, align 1")

    def row(self, node: int, base: str, size: str, i: str) -> None:
        """``decode_row`` of the row at ``node``: ``check_row_header``, then every field."""
        arity = self.m[node][abi.COL_ARITY]
        fixed = 8 + 8 * arity
        self.bail_if(self.cmp("slt", size, str(fixed)))
        kind = self.op(f"load i8, ptr {self.at('%d', base)}, align 1")
        # the top row's RowKind is 0..3; a nested row other than INSERT goes to the walk, which
        # hands it to the reference (an Arrow struct has no row kind)
        self.bail_if(self.op(f"icmp ugt i8 {kind}, 3" if node == 0 else f"icmp ne i8 {kind}, 0"))
        nb0 = self.load64("%d", base)
        self.bail_if(self.cmp("ne", self.bin("lshr", nb0, str(arity + 8)), "0"))
        c = node + 1
        while c < self.m[node][abi.COL_END]:
            j = self.m[c][abi.COL_POS]
            null, present = self.branch(self.bit_set(nb0, j + 8))
            self.block(present)
            self.set_bit(self.cols[c, "valid"], i)
            self.count_up(c)
            slot = self.bin("add", base, str(8 + 8 * j))
            k = self.kind(c)
            if k in (abi.SLOT_STR, abi.SLOT_BIN):
                self.string(c, slot, base, size, fixed)
            elif k == abi.SLOT_ROW:
                raw = self.load64("%d", slot)
                self.bail_if(self.cmp("slt", raw, "0"))
                off = self.bin("lshr", raw, "32")
                n = self.bin("and", raw, _c(0xFFFFFFFF))
                self.bail_if(self.op(f"or i1 {self.cmp('slt', off, str(fixed))}, "
                                     f"{self.cmp('sgt', self.bin('add', off, n), size)}"))
                self.row(c, self.bin("add", base, off), n, i)
            else:
                self.value(c, slot, i)
            self.put(f"br label %{null}")
            self.block(null)
            c = self.m[c][abi.COL_END]

    def undo(self, i: str) -> None:
        """What this call wrote for row i, where the walk expects zeros."""
        for c in range(1, len(self.m)):
            k = self.kind(c)
            self.clear_bit(self.cols[c, "valid"], i)
            if k == abi.SLOT_BOOL:
                self.clear_bit(self.cols[c, "vals"], i)
            elif (c, "vals") in self.cols:
                w = 16 if k == abi.SLOT_DEC_COMPACT else _WIDTH[k]
                at = self.bin("mul", i, str(w))
                for b in range(0, w, 8) if w >= 8 else [0]:
                    bits = 64 if w >= 8 else 8 * w
                    self.put(f"store i{bits} 0, ptr {self.at(self.cols[c, 'vals'], self.bin('add', at, str(b)))}, "
                             f"align 1")

    def write_back(self, committed: bool) -> None:
        """Counters into the ``Node`` array (the values after the last whole entry)."""
        for c in range(len(self.m)):
            suffix = "0" if committed else ""
            at = self.at("%nodes", str(c * self.lay["size"] + self.lay["count"]))
            self.put(f"store i64 {self.get(self.cols[c, 'count' + suffix])}, ptr {at}, align 8")
            if (c, "spos") in self.cols:
                pos = self.get(self.cols[c, "spos" + suffix])
                for name in ("spos", "sstart"):
                    at = self.at("%nodes", str(c * self.lay["size"] + self.lay[name]))
                    self.put(f"store i64 {pos}, ptr {at}, align 8")

    def function(self) -> str:
        pro = self.prologue()
        self.block("body")
        i = self.get("%iv")
        base, size = self.entry(i)
        self.row(0, base, size, i)
        self.set_bit(self.cols[0, "valid"], i)
        self.count_up(0)
        nxt = self.bin("add", i, "1")
        for c in range(1, len(self.m)):
            if (c, "spos") not in self.cols:
                continue
            pos = self.get(self.cols[c, "spos"])
            wide, narrow = self.branch(self.cols[c, "wide"])
            done = self.label()
            self.block(wide)
            self.store64(self.cols[c, "offs"], self.bin("mul", nxt, "8"), pos)
            self.put(f"br label %{done}")
            self.block(narrow)
            self.put(f"store i32 {self.op(f'trunc i64 {pos} to i32')}, "
                     f"ptr {self.at(self.cols[c, 'offs'], self.bin('mul', nxt, '4'))}, align 1")
            self.put(f"br label %{done}")
            self.block(done)
            self.set(self.cols[c, "spos0"], pos)
        for c in range(len(self.m)):
            self.set(self.cols[c, "count0"], self.get(self.cols[c, "count"]))
        self.set("%iv", nxt)
        self.put("br label %loop")
        body, self.body = self.body, []
        self.undo(self.get("%iv"))
        self.write_back(committed=True)
        on_bail, self.body = self.body, []
        self.write_back(committed=False)
        on_done, self.body = self.body, []
        return self.assemble("ptr noalias %offs, ptr noalias %d, i64 %dlen, i64 %i0, i64 %stop, ptr %nodes", body,
                             pro=tuple(pro), on_bail=tuple(on_bail), on_done=tuple(on_done))


class _EncodeEmitter(_ColumnsEmitter):
    """A RowData row type's encode as ``int64 plan(nodes, i, stop, o, cap, &pos, offs, valid,
    &written)``: the contract of ``rowdata.EncodeCode``. Arrow columns are read through the
    ``Node`` array ``encode_run`` prepared (buffers checked there); an entry it does not take leaves
    nothing behind (position, offsets and validity move only after a whole entry)."""

    def prologue(self) -> list[str]:
        for c, row in enumerate(self.m):
            valid = self.cols[c, "valid_in"] = self.field(c, "valid_in", "ptr")
            self.cols[c, "has_valid"] = self.op(f"icmp ne ptr {valid}, null")
            self.cols[c, "off_in"] = self.field(c, "off_in", "i64")
            if row[abi.COL_KIND] != abi.SLOT_ROW:
                self.cols[c, "vals_in"] = self.field(c, "vals_in", "ptr")
                self.cols[c, "vals_len"] = self.field(c, "vals_len", "i64")
            if row[abi.COL_KIND] in (abi.SLOT_STR, abi.SLOT_BIN):
                self.cols[c, "offs_in"] = self.field(c, "offs_in", "ptr")
        lines, self.body = self.body, []
        return lines

    def null_branch(self, c: int, e: str) -> tuple[str, str]:
        """Branch on Arrow value e of column c being null (a column without a bitmap has none):
        returns the (null, present) labels."""
        check, null, present = self.label(), self.label(), self.label()
        self.put(f"br i1 {self.cols[c, 'has_valid']}, label %{check}, label %{present}")
        self.block(check)
        at, mask = self.bit_of(self.cols[c, "valid_in"], e)
        byte = self.op(f"load i8, ptr {at}, align 1")
        bit = self.op(f"and i8 {byte}, {mask}")
        self.put(f"br i1 {self.op(f'icmp eq i8 {bit}, 0')}, label %{null}, label %{present}")
        return null, present

    def string(self, c: int, e: str, slot: str, ob: str, cur: str) -> None:
        """``encode_str``: inline up to 7 bytes, else a padded var part."""
        vals, vlen = self.cols[c, "vals_in"], self.cols[c, "vals_len"]
        s = self.load32(self.cols[c, "offs_in"], self.bin("mul", e, "4"))
        end = self.load32(self.cols[c, "offs_in"], self.bin("add", self.bin("mul", e, "4"), "4"))
        self.bail_if(self.op(f"or i1 {self.cmp('slt', s, '0')}, {self.cmp('slt', end, s)}"))
        self.bail_if(self.cmp("sgt", end, vlen))
        n = self.bin("sub", end, s)
        self.bail_if(self.cmp("sgt", self.bin("add", s, "8"), vlen))  # whole words readable (else: the walk)
        short, long_ = self.branch(self.cmp("sle", n, "7"))
        join = self.label()
        self.block(short)
        keep = self.bin("sub", self.bin("shl", "1", self.bin("mul", n, "8")), "1")
        word = self.bin("and", self.load64(vals, s), keep)
        self.store64("%o", slot, self.bin("or", word, self.bin("shl", self.bin("or", n, "128"), "56")))
        self.put(f"br label %{join}")
        self.block(long_)
        r8 = self.bin("and", self.bin("add", n, "7"), _c(~7))
        c0 = self.get(cur)
        self.bail_if(self.cmp("sgt", r8, self.bin("sub", self.bin("sub", "%cap", ob), c0)))
        self.bail_if(self.cmp("sgt", self.bin("add", s, r8), vlen))
        self.copy_words(s, "%o", self.bin("add", ob, c0), n, r8, False, src=vals)
        self.store64("%o", slot, self.bin("or", self.bin("shl", c0, "32"), n))
        self.set(cur, self.bin("add", c0, r8))
        self.put(f"br label %{join}")
        self.block(join)

    def row(self, node: int, i: str, ob: str) -> str:
        """``encode_row``: row i of the columns under ``node`` at ``o[ob:]``; returns its size."""
        arity = self.m[node][abi.COL_ARITY]
        fixed = 8 + 8 * arity
        self.bail_if(self.cmp("sgt", str(fixed), self.bin("sub", "%cap", ob)))
        for w in range(8, fixed, 8):
            self.store64("%o", self.bin("add", ob, str(w)), "0")
        nb0, cur = self.var(), self.var()
        self.set(nb0, "0")
        self.set(cur, str(fixed))
        c = node + 1
        while c < self.m[node][abi.COL_END]:
            row = self.m[c]
            k, j = row[abi.COL_KIND], row[abi.COL_POS]
            e = self.bin("add", self.cols[c, "off_in"], i)
            null, present = self.null_branch(c, e)
            join = self.label()
            self.block(null)
            if row[abi.COL_FLAGS] & abi.FLAG_NOT_NULL:
                self.put("br label %bail")
            else:
                self.or_into(nb0, _c(1 << (j + 8)))
                self.put(f"br label %{join}")
            self.block(present)
            slot = self.bin("add", ob, str(8 + 8 * j))
            if k in _WIDTH:
                bits = 8 * _WIDTH[k]
                v = self.op(f"load i{bits}, ptr {self.at(self.cols[c, 'vals_in'], self.bin('mul', e, str(_WIDTH[k])))}"
                            f", align 1")
                self.store64("%o", slot, v if bits == 64 else self.op(f"zext i{bits} {v} to i64"))
            elif k == abi.SLOT_BOOL:
                at, mask = self.bit_of(self.cols[c, "vals_in"], e)
                byte = self.op(f"load i8, ptr {at}, align 1")
                bit = self.op(f"and i8 {byte}, {mask}")
                one = self.op(f"zext i1 {self.op(f'icmp ne i8 {bit}, 0')} to i8")
                self.put(f"store i8 {one}, ptr {self.at('%o', slot)}, align 1")
            elif k == abi.SLOT_DEC_COMPACT:
                at = self.bin("mul", e, "16")
                lo = self.load64(self.cols[c, "vals_in"], at)
                hi = self.load64(self.cols[c, "vals_in"], self.bin("add", at, "8"))
                limit = row[abi.COL_LIMIT]
                self.bail_if(self.cmp("ne", hi, self.bin("ashr", lo, "63")))
                self.bail_if(self.op(f"or i1 {self.cmp('sle', lo, _c(-limit))}, {self.cmp('sge', lo, _c(limit))}"))
                self.store64("%o", slot, lo)
            elif k in (abi.SLOT_STR, abi.SLOT_BIN):
                self.string(c, e, slot, ob, cur)
            else:  # ROW
                c0 = self.get(cur)
                sub = self.row(c, i, self.bin("add", ob, c0))
                self.store64("%o", slot, self.bin("or", self.bin("shl", c0, "32"), sub))
                self.set(cur, self.bin("add", c0, sub))
            self.put(f"br label %{join}")
            self.block(join)
            c = row[abi.COL_END]
        self.store64("%o", ob, self.get(nb0))
        return self.get(cur)

    def function(self) -> str:
        pro = self.prologue()
        self.block("body")
        i = self.get("%iv")
        pos = self.get("%posv")
        nxt = self.bin("add", i, "1")
        null, present = self.null_branch(0, self.bin("add", self.cols[0, "off_in"], i))
        end = self.label()
        self.block(present)
        self.bail_if(self.cmp("sgt", self.bin("add", pos, "4"), "%cap"))
        r = self.row(0, i, self.bin("add", pos, "4"))
        swapped = self.op(f"call i32 @llvm.bswap.i32(i32 {self.op(f'trunc i64 {r} to i32')})")
        self.put(f"store i32 {swapped}, ptr {self.at('%o', pos)}, align 1")
        self.set("%posv", self.bin("add", self.bin("add", pos, r), "4"))
        self.set_bit("%ovalid", i)
        self.set("%wv", self.bin("add", self.get("%wv"), "1"))
        self.put(f"br label %{end}")
        self.block(null)
        self.put(f"br label %{end}")
        self.block(end)
        newpos = self.get("%posv")
        self.put(f"store i32 {self.op(f'trunc i64 {newpos} to i32')}, "
                 f"ptr {self.at('%offs', self.bin('mul', nxt, '4'))}, align 1")
        self.set("%iv", nxt)
        self.put("br label %loop")
        return self.assemble("ptr %nodes, i64 %i0, i64 %stop, ptr noalias %o, i64 %cap, ptr noalias %posio, "
                             "ptr noalias %offs, ptr noalias %ovalid, ptr noalias %wio", self.body,
                             carried=("pos", "w"), pro=tuple(pro))


_WIDTH = {abi.SLOT_I8: 1, abi.SLOT_I16: 2, abi.SLOT_I32: 4, abi.SLOT_F32: 4, abi.SLOT_I64: 8, abi.SLOT_F64: 8}
_DECODE_KINDS = frozenset({abi.SLOT_BOOL, abi.SLOT_DEC_COMPACT, abi.SLOT_STR, abi.SLOT_BIN, abi.SLOT_ROW, *_WIDTH})


class PlanCode:
    """A plan's machine code: ``address`` is what ``rowdata.migrate_run`` calls; the object owns
    the LLVM engine holding the code and the program matrix the code points into, so hold it for
    as long as the address is in use."""

    def __init__(self, engine: Any, address: int, program: np.ndarray) -> None:
        self._engine = engine
        self._program = program
        self.address = address


def enabled() -> bool:
    """Machine code is on unless ``STATEMORPH_JIT=0`` or ``llvmlite`` is missing. ``STATEMORPH_JIT=1``
    asks for it explicitly: then a missing ``llvmlite`` is an error naming the ``[jit]`` extra."""
    flag = os.environ.get("STATEMORPH_JIT", "").strip()
    if flag == "0":
        return False
    try:
        import llvmlite  # noqa: F401
    except ImportError:
        if flag == "1":
            from ..extras import require

            require("llvmlite", "STATEMORPH_JIT=1 (machine code for RowData migrations)")
        return False
    return True


def plan_code(matrix: np.ndarray) -> PlanCode | None:
    """The machine code of a RowData migrate program (compiled the first time a program is seen),
    or None: machine code disabled or unavailable, or a plan without lowered ops
    (rows over 56 fields or nested past the op stack, which take the general walk, and identity
    plans, which copy entries as they are)."""
    return _code("migrate", matrix)


def decode_code(matrix: np.ndarray) -> PlanCode | None:
    """The machine code of a RowData decode program (compiled the first time one is seen), or
    None: machine code disabled or unavailable, or a row type with kinds it does not take (arrays,
    maps, big DECIMAL / TIMESTAMP: the blocked walk) or rows of 56 fields or more."""
    return _code("decode", matrix)


def encode_code(matrix: np.ndarray) -> PlanCode | None:
    """The machine code of a RowData encode program (compiled the first time one is seen), or
    None: machine code disabled or unavailable, or a row type with kinds it does not take (as for
    :func:`decode_code`)."""
    return _code("encode", matrix)


_COMPILE_LOCK = threading.Lock()
"""Held while a plan is looked up or compiled: threads that reach a new plan at once compile it
once (the cache alone lets each of them compile it: ~0.1-1 s each, inside their first batch)."""


def _code(kind: str, matrix: np.ndarray) -> PlanCode | None:
    if not enabled():
        return None
    m = np.ascontiguousarray(matrix, dtype=np.int64)
    with _COMPILE_LOCK:
        return _compile(kind, m.tobytes(), m.shape[0], m.shape[1])


@functools.lru_cache(maxsize=64)
def _compile(kind: str, program: bytes, rows: int, cols: int) -> PlanCode | None:
    from . import rowdata  # type: ignore[attr-defined]

    matrix = np.frombuffer(program, dtype=np.int64).reshape(rows, cols).copy()
    if kind == "migrate":
        ops = rowdata.lowered_ops(matrix)
        if ops is None:
            return None
        ir = _MigrateEmitter(ops, rowdata.OP_CODES, rowdata.utf8_valid_address(), rowdata.var_field_address(),
                             matrix.ctypes.data).function()
    else:
        m = matrix.tolist()
        if any(r[abi.COL_KIND] not in _DECODE_KINDS or (r[abi.COL_KIND] == abi.SLOT_ROW and r[abi.COL_ARITY] >= 56)
               for r in m):
            return None
        ir = _DecodeEmitter(m, rowdata.node_layout(), rowdata.utf8_valid_address()).function() \
            if kind == "decode" else _EncodeEmitter(m, rowdata.node_layout(), 0).function()
    engine, address = _build(ir)
    return PlanCode(engine, address, matrix)


_LLVM_LOCK = threading.Lock()  # llvmlite parses into LLVM's one global context: one build at a time


def _build(ir: str) -> tuple[Any, int]:
    import llvmlite.binding as llvm

    with _LLVM_LOCK:
        _init_llvm()
        module = llvm.parse_assembly(ir)
        module.verify()
        machine = _machine()  # a fresh one: the engine takes ownership of it (and frees it with itself)
        builder = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(speed_level=3))
        builder.getModulePassManager().run(module, builder)
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        return engine, engine.get_function_address("plan")


@functools.lru_cache(maxsize=1)
def _init_llvm() -> None:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def _machine() -> Any:
    import llvmlite.binding as llvm

    return llvm.Target.from_default_triple().create_target_machine(
        opt=3, cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten())

