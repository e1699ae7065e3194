"""Java object serialization, only as far as Flink's table snapshots need it.

- :mod:`.nodes`: the neutral tree a stream is read into and written from;
- :mod:`.reader`: the bounded, whitelisting stream parser (instantiates nothing);
- :mod:`.writer`: the stream writer with Java's handle and back-reference rules;
- :mod:`.classes`: the whitelist, with the exact descriptors Flink 2.3 writes;
- :mod:`.logical`: LogicalType streams ⇄ :mod:`statemorph.types`;
- :mod:`.tableser`: the table serializer objects ArrayData / MapData snapshots serialize.
"""

from .logical import read_logical_type, write_logical_type, write_logical_type_to
from .reader import read_stream
from .writer import write_stream, write_stream_to

__all__ = ["read_logical_type", "read_stream", "write_logical_type", "write_logical_type_to", "write_stream",
           "write_stream_to"]
