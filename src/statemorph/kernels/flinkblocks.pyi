"""Type declarations of the compiled kernel module ``statemorph.kernels.flinkblocks`` (built from
``_native/flinkblocks.pyx``). It has the names and signatures of its Python twin ``flinkblocks_py`` (tests prove
the two byte-equal), so the twin's annotations are the declarations; tests/packaging/test_kernel_stubs.py
keeps this list equal to what the compiled module exports."""

from .flinkblocks_py import copy_slices as copy_slices
from .flinkblocks_py import kg_rebuild as kg_rebuild
from .flinkblocks_py import kg_scan as kg_scan
from .flinkblocks_py import list_split as list_split
