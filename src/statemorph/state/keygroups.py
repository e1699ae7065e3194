"""Moved to :mod:`statemorph.keyed.keygroups` (below both the backends and the savepoint formats); this
path stays so existing imports keep working."""

from ..keyed.keygroups import *  # noqa: F403
from ..keyed.keygroups import __all__  # noqa: F401
