"""Type declarations of the compiled kernel module ``statemorph.kernels.corerow`` (built from
``_native/corerow.pyx``). It has the names and signatures of its Python twin ``corerow_py`` (tests prove
the two byte-equal), so the twin's annotations are the declarations; tests/packaging/test_kernel_stubs.py
keeps this list equal to what the compiled module exports."""

from .corerow_py import corerow_decode as corerow_decode
from .corerow_py import corerow_encode as corerow_encode
