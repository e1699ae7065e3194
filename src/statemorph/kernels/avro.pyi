"""Type declarations of the compiled kernel module ``statemorph.kernels.avro`` (built from
``_native/avro.pyx``). It has the names and signatures of its Python twin ``avro_py`` (tests prove
the two byte-equal), so the twin's annotations are the declarations; tests/packaging/test_kernel_stubs.py
keeps this list equal to what the compiled module exports."""

from .avro_py import avro_migrate_run as avro_migrate_run
