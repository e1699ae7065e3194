"""A user's program written against the documented public API passes ``mypy --strict``: the names
resolve to real types (including the lazily imported ones: the RocksDB backend, the dry run), rows
can be plain tuples, ``parse_type`` results feed the serializers, and the compiled kernels and
py.typed make the package's own annotations the ones a user's type-checker reads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from processes import mypy_env

USER_PROGRAM = '''
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information

from statemorph import arrow, engine, serializers, typeutils
from statemorph.errors import IncompatibleSchemaError, SavepointError, StateFormatError
from statemorph.migration import migrate_bytes
from statemorph.engine import check_savepoint
from statemorph.state import EmbeddedRocksDBStateBackend, HashMapStateBackend, ValueStateDescriptor
from statemorph.types import parse_type

old = serializers.RowDataSerializer("ROW<eventId BIGINT, metadata ROW<userId INT, deviceType STRING>>")
new = serializers.RowDataSerializer(parse_type("ROW<eventId BIGINT, metadata ROW<userId INT, deviceType STRING, "
                                               "location STRING>>"))
data: bytes = old.to_bytes((7, (3, "phone")))
row: tuple[object, ...] = new.from_bytes(migrate_bytes(old.snapshot_configuration(), new, data))
snap = typeutils.read_versioned_snapshot(typeutils.write_versioned_snapshot(old.snapshot_configuration()))
compat = new.snapshot_configuration().resolve_schema_compatibility(snap)
flags: list[bool] = [compat.is_compatible_as_is(), compat.is_compatible_after_migration(),
                     compat.is_compatible_with_reconfigured_serializer(), compat.is_incompatible()]
text: str = serializers.StringSerializer().from_bytes(serializers.StringSerializer().to_bytes("h\\u00e9llo"))
values = arrow.encode(pa.array([{"eventId": 1, "metadata": {"userId": 2, "deviceType": "tv"}}]), old)
backend = HashMapStateBackend(key_serializer=serializers.StringSerializer(), max_parallelism=128)
events = backend.get_state(ValueStateDescriptor("events", old))
restore = EmbeddedRocksDBStateBackend.restore
errors: tuple[type[Exception], ...] = (IncompatibleSchemaError, SavepointError, StateFormatError)
reveal_type(restore)
reveal_type(check_savepoint)
reveal_type(engine.read_state_table)
'''


def test_user_program_passes_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    user = tmp_path / "user.py"
    user.write_text(USER_PROGRAM, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent",
                           "--cache-dir", str(tmp_path / "cache"), str(user)], cwd=tmp_path,
                          env=mypy_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    revealed = [ln.split("Revealed type is ", 1)[1] for ln in proc.stdout.splitlines() if "Revealed type" in ln]
    assert len(revealed) == 3 and '"Any"' not in revealed, proc.stdout
    assert revealed[0].endswith('-> statemorph.state.rocksdb.EmbeddedRocksDBStateBackend"')
    assert revealed[1].endswith('-> statemorph.engine.plan.RewritePlan"')
