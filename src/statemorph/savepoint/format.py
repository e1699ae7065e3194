"""Moved to :mod:`statemorph.savepoint.parquet.format` (the Parquet form is one of the savepoint
formats); this path stays so existing imports keep working."""

from .parquet.format import *  # noqa: F403
from .parquet.format import __all__  # noqa: F401
