"""The bulk layer: encode, decode and migrate whole Arrow arrays of state values.

Why a layer of its own: a savepoint holds billions of entries, and one Python object per entry is
far too slow. Here the kernels run over Arrow buffers (compiled, or their Python twins), a chunk
at a time and on several threads, choosing the path per serializer from ONE capability table
(:mod:`.capabilities`); bad entries become typed errors naming the row and the field path, and
every call returns a :class:`BulkResult` (the output and the errors of the rows it could not
handle, under the ``on_error`` policy ``raise | skip | null``).

Modules, one job each: :mod:`.types` (Arrow types and values), :mod:`.inputs` (what the kernels
read), :mod:`.chunks` (chunks, thread ranges, growing buffers), :mod:`.row_errors` (errors to rows and
paths, the policy, the report), :mod:`.capabilities` (which kernel handles what), :mod:`.binary_output`
(the one binary output builder), :mod:`.encoder`, :mod:`.decoder`, :mod:`.migrator`, and
:mod:`.tiers` (the only imports of the kernel modules). :mod:`statemorph.arrow` is the public
face users import; it returns the arrays alone.
"""

from __future__ import annotations

from .decoder import decode
from .encoder import encode
from .migrator import PreparedMigration, migrate
from .row_errors import BulkResult
from .types import arrow_type, arrow_type_for

__all__ = ["BulkResult", "PreparedMigration", "arrow_type", "arrow_type_for", "decode", "encode", "migrate"]
