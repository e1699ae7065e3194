"""The reference tier: every Flink format as readable Python, one module per family.

Importing this package registers every built-in snapshot class in the default snapshot registry.
"""

from .arrays import *  # noqa: F403
from .avro import *  # noqa: F403
from .base import TypeSerializer
from .collections import *  # noqa: F403
from .enums import *  # noqa: F403
from .external import *  # noqa: F403
from .pojo import *  # noqa: F403
from .primitives import *  # noqa: F403
from .rowdata import *  # noqa: F403
from .strings import *  # noqa: F403
from .table_snapshots import *  # noqa: F403
from .tuples import *  # noqa: F403
from .windows import *  # noqa: F403

__all__ = ["TypeSerializer"]
_MODULES = (arrays, avro, collections, enums, external, pojo, primitives, rowdata, strings, table_snapshots, tuples,  # type: ignore[name-defined] # noqa: F405
            windows)  # type: ignore[name-defined] # noqa: F405
for _m in _MODULES:
    __all__ += getattr(_m, "__all__", [])
