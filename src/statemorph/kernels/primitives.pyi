"""Type declarations of the compiled kernel module ``statemorph.kernels.primitives`` (built from
``_native/primitives.pyx``). It has the names and signatures of its Python twin ``primitives_py`` (tests prove
the two byte-equal), so the twin's annotations are the declarations; tests/packaging/test_kernel_stubs.py
keeps this list equal to what the compiled module exports."""

from .primitives_py import fixed_decode as fixed_decode
from .primitives_py import fixed_encode as fixed_encode
