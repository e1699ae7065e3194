"""docs/README.md is the index of the documentation: it links every page in docs/ (and the example
job), and every page it links exists."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _linked() -> set[str]:
    return set(LINK.findall((DOCS / "README.md").read_text(encoding="utf-8")))


def test_the_index_links_every_page() -> None:
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*") if p.is_file() and p.suffix in (".md", ".py")}
    assert pages - {"README.md"} <= _linked(), sorted(pages - {"README.md"} - _linked())


def test_every_indexed_page_exists() -> None:
    local = {link for link in _linked() if "://" not in link and not link.startswith("../")}
    assert [link for link in sorted(local) if not (DOCS / link).is_file()] == []
