"""The fenced code blocks of the README, and how the README test treats each.

A block's language says what it is: ``bash`` and ``python`` blocks are programs, ``toml`` blocks are
schema files, ``text`` blocks are prose (types, layouts). Every program runs, in README order, in one
working directory (a later block may use what an earlier one wrote), unless its first line carries
one of the visible annotations a reader sees too:

- ``# not run by the tests: REASON``: the block cannot run here (a YARN cluster, PyPI, the suite
  itself); it is still parsed (``bash -n`` / ``compile``), so a broken example fails anyway;
- ``# needs: flink ...`` / ``# needs: spark ...``: the block runs when real Flink (ci/flink) or
  Spark (pyspark and Java) is there; elsewhere it is skipped with that reason, and CI, which has
  both and sets STATEMORPH_REQUIRE_FLINK=1, runs it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PROGRAMS = ("bash", "python")
LANGUAGES = (*PROGRAMS, "toml", "text")
NOT_RUN = "# not run by the tests:"
NEEDS = "# needs:"
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, its code (indentation of a list item removed), its line."""

    lang: str
    code: str
    line: int

    @property
    def first_line(self) -> str:
        return self.code.split("\n", 1)[0].strip()

    @property
    def not_run_reason(self) -> str | None:
        """Why the block is only parsed, or None when it runs."""
        first = self.first_line
        return first[len(NOT_RUN):].strip() if first.startswith(NOT_RUN) else None

    @property
    def needs(self) -> str | None:
        """``flink`` or ``spark`` when the block needs that to run."""
        first = self.first_line
        return first[len(NEEDS):].split()[0] if first.startswith(NEEDS) else None

    @property
    def id(self) -> str:
        return f"{self.lang}-line{self.line}"


def readme_blocks(text: str | None = None) -> list[Block]:
    """Every fenced block of the README (or of ``text``), in order."""
    text = README.read_text(encoding="utf-8") if text is None else text
    blocks = []
    for m in FENCE.finditer(text):
        indent = m["indent"]
        lines = m["body"].split("\n")
        code = "\n".join(ln[len(indent):] if ln.startswith(indent) else ln for ln in lines)
        blocks.append(Block(m["lang"].strip(), code, text.count("\n", 0, m.start()) + 1))
    return blocks
