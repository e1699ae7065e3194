"""Moved to :mod:`statemorph.keyed.namespace` (below both the backends and the savepoint formats); this
path stays so existing imports keep working."""

from ..keyed.namespace import *  # noqa: F403
from ..keyed.namespace import __all__  # noqa: F401
