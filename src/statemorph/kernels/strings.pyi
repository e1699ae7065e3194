"""Type declarations of the compiled kernel module ``statemorph.kernels.strings`` (built from
``_native/strings.pyx``). It has the names and signatures of its Python twin ``strings_py`` (tests prove
the two byte-equal), so the twin's annotations are the declarations; tests/packaging/test_kernel_stubs.py
keeps this list equal to what the compiled module exports."""

from .strings_py import bytes_decode_fill as bytes_decode_fill
from .strings_py import bytes_decode_sizes as bytes_decode_sizes
from .strings_py import bytes_encode_fill as bytes_encode_fill
from .strings_py import string_decode_fill as string_decode_fill
from .strings_py import string_decode_sizes as string_decode_sizes
from .strings_py import string_encode_fill as string_encode_fill
from .strings_py import string_encode_sizes as string_encode_sizes
