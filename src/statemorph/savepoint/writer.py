"""Moved to :mod:`statemorph.savepoint.parquet.writer` (the Parquet form is one of the savepoint
formats); this path stays so existing imports keep working."""

from .parquet.writer import *  # noqa: F403
from .parquet.writer import __all__  # noqa: F401
