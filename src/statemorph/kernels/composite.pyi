"""Type declarations of the compiled kernel module ``statemorph.kernels.composite`` (built from
``_native/composite.pyx``). It has the names and signatures of its Python twin ``composite_py`` (tests prove
the two byte-equal), so the twin's annotations are the declarations; tests/packaging/test_kernel_stubs.py
keeps this list equal to what the compiled module exports."""

from .composite_py import core_row_fill as core_row_fill
from .composite_py import core_row_sizes as core_row_sizes
from .composite_py import pojo_migrate_run as pojo_migrate_run
