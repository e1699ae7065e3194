"""Moved to :mod:`statemorph.savepoint.parquet.reader` (the Parquet form is one of the savepoint
formats); this path stays so existing imports keep working."""

from .parquet.reader import *  # noqa: F403
from .parquet.reader import __all__  # noqa: F401
