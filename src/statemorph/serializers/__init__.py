"""The reference tier: every Flink format as readable Python, one module per family.

Importing this package registers every built-in snapshot class in the default snapshot registry,
and every serializer class joins :data:`SERIALIZER_CLASSES` as it is defined (each declares there
its schema-file family, SQL type and bulk kernel: see :class:`TypeSerializer`). The modules are
listed once, below; each module's ``__all__`` is re-exported.
"""

from types import ModuleType as _ModuleType

from ..typeutils import SERIALIZER_CLASSES, BulkKernel, TypeSerializer
from .arrays import *  # noqa: F403
from .avro import *  # noqa: F403
from .collections import *  # noqa: F403
from .enums import *  # noqa: F403
from .external import *  # noqa: F403
from .pojo import *  # noqa: F403
from .primitives import *  # noqa: F403
from .rowdata import *  # noqa: F403
from .sorted_map import *  # noqa: F403
from .strings import *  # noqa: F403
from .table_snapshots import *  # noqa: F403
from .tuples import *  # noqa: F403
from .windows import *  # noqa: F403

__all__: list[str] = ["SERIALIZER_CLASSES", "BulkKernel", "TypeSerializer"]  # the contract's, from typeutils
for _n, _m in list(globals().items()):  # the public modules imported above
    if isinstance(_m, _ModuleType) and _m.__name__ == f"{__name__}.{_n}" and not _n.startswith("_"):
        __all__ += _m.__all__
