"""One format dispatch: ``format_of`` names each savepoint's format, refuses what is no savepoint
with the usage errors every verb shares, and each format refuses descriptors of the other's shape."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli.events_savepoint import write_savepoint

from statemorph.engine import format_of, migrate_savepoint
from statemorph.engine.formats import FLINK, FORMATS, NATIVE, PARQUET, convert_savepoint
from statemorph.errors import ExitCode, NotASavepointError, SavepointNotFoundError, UsageError
from statemorph.serializers import IntSerializer
from statemorph.state import ValueStateDescriptor

FLINK_SP = Path(__file__).parents[1] / "data" / "flink_savepoints" / "events-hashmap-p1" / "savepoint"


def test_each_form_is_claimed_by_its_format(tmp_path: Path) -> None:
    write_savepoint(tmp_path / "pq", n=2)
    assert format_of(FLINK_SP) is FLINK and format_of(str(tmp_path / "pq")) is PARQUET
    assert FORMATS == (NATIVE, FLINK, PARQUET)  # a native savepoint's files are a canonical one's special case
    assert [f.name for f in FORMATS] == ["flink", "flink", "parquet"]  # both Flink kinds: the "flink" documents
    assert not NATIVE.claims(FLINK_SP)


def test_convert_to_names_a_form_the_format_converts_to(tmp_path: Path) -> None:
    """``convert --to`` is checked against the source's format (``converts_to``) before anything is
    written; ``canonical`` is what a native savepoint and the Parquet form convert to."""
    write_savepoint(tmp_path / "pq", n=2)
    with pytest.raises(UsageError, match=r"--to parquet: .* is the Parquet form, which converts to canonical only"):
        convert_savepoint(tmp_path / "pq", tmp_path / "out", to="parquet")
    with pytest.raises(UsageError, match=r"--to canonical: .* is a Flink savepoint, which converts to parquet only"):
        convert_savepoint(FLINK_SP, tmp_path / "out", to="canonical")
    assert not (tmp_path / "out").exists()
    assert NATIVE.converts_to == ("parquet", "canonical", "native")


def test_migrate_to_names_a_form_the_format_migrates_to(tmp_path: Path) -> None:
    """``migrate --to`` is checked against the source's format (``migrates_to``) before anything is
    planned or written: each format migrates into its own form; a native savepoint into a canonical
    one (the default) or a native one."""
    write_savepoint(tmp_path / "pq", n=2)
    with pytest.raises(UsageError, match=r"--to native: .* is the Parquet form, which migrates to parquet only"):
        migrate_savepoint(tmp_path / "pq", tmp_path / "out", [], to="native")
    with pytest.raises(UsageError, match=r"--to native: .* is a Flink savepoint, which migrates to canonical only"):
        migrate_savepoint(FLINK_SP, tmp_path / "out", {}, to="native")
    assert not (tmp_path / "out").exists()
    assert NATIVE.migrates_to == ("canonical", "native") and FLINK.migrates_to == ("canonical",)


def test_flink_metadata_wins_when_both_files_are_there(tmp_path: Path) -> None:
    """The first format in FORMATS that claims a path is its format: one answer, in one order."""
    sp = tmp_path / "sp"
    sp.mkdir()
    (sp / "_metadata").write_bytes(b"")
    (sp / "_metadata.json").write_text("{}")
    assert format_of(sp) is FLINK


def test_a_directory_no_format_claims_is_not_a_savepoint(tmp_path: Path) -> None:
    with pytest.raises(NotASavepointError, match="is not a savepoint") as e:
        format_of(tmp_path)
    assert e.value.exit_code == ExitCode.USAGE


def test_a_missing_path_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(SavepointNotFoundError, match="does not exist") as e:
        format_of(tmp_path / "nowhere")
    assert e.value.exit_code == ExitCode.USAGE


def test_descriptors_in_the_other_formats_shape_are_a_usage_error(tmp_path: Path) -> None:
    write_savepoint(tmp_path / "pq", n=2)
    per_operator = {"events-state": [ValueStateDescriptor("events", IntSerializer())]}
    with pytest.raises(UsageError, match="belong to no operator"):
        migrate_savepoint(tmp_path / "pq", tmp_path / "out", per_operator)
    with pytest.raises(UsageError, match="belong to operators"):
        migrate_savepoint(FLINK_SP, tmp_path / "out", [ValueStateDescriptor("events", IntSerializer())])
    assert not (tmp_path / "out").exists()
