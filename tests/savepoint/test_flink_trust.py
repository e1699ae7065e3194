"""Issue 24 items 1, 2, 3 and 5, through the CLI: every path read from any input stays inside its
directory, every file and handle is used once, key-group ranges are checked when ``_metadata`` is
parsed, and a claim file is never written through. Each refusal is one ``statemorph: error:``
line with exit status 4 (damaged savepoint), and nothing is written anywhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from savepoint.flink.flink_cases import EVOLVED_EVENTS
from savepoint.hostile_metadata import (
    EVENTS,
    EVENTS_ENTRIES,
    EVENTS_OPERATOR,
    HANDLE_REUSE,
    KINDS_INLINE,
    RANGES,
    absolute_keyed_path,
    edit_skeleton,
    edited,
    keyed,
    keyed_path,
    listing,
    state_twice_in_header,
    symlinked_keyed_file,
)

from statemorph.cli import main
from statemorph.errors import UnsafeFileError
from statemorph.savepoint.files import CLAIM_TAG, StagedDirectory
from statemorph.savepoint.flink import FlinkSavepoint, RelativeFileHandle

pytestmark = pytest.mark.skipif(not EVENTS.is_dir(), reason="no committed real-Flink savepoints")


def _schema(tmp_path: Path) -> str:
    p = tmp_path / "v2.toml"
    p.write_text(f'[operators.{EVENTS_OPERATOR}.states.events]\ntype = "{EVOLVED_EVENTS}"\n', encoding="utf-8")
    return str(p)


def _refused(argv: list[str], root: Path, capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """``argv`` exits 4 with one typed line naming ``needles``, and writes nothing under ``root``."""
    before = listing(root)
    capsys.readouterr()
    assert main(argv) == 4
    err = capsys.readouterr().err.strip()
    assert err.startswith("statemorph: error:") and "\n" not in err and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    assert listing(root) == before
    return err


def _every_verb_refuses(sp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *needles: str) -> None:
    schema = _schema(tmp_path)
    _refused(["inspect", str(sp)], tmp_path, capsys, *needles)
    _refused(["convert", str(sp), "--out", str(tmp_path / "pq")], tmp_path, capsys, *needles)
    _refused(["migrate", str(sp), "--schema", schema, "--out", str(tmp_path / "v2")], tmp_path, capsys, *needles)


# -- item 2: handles used twice -------------------------------------------------------------------

REUSE_NEEDLES = {
    "operator-state-names-keyed-file": ("is listed twice", "managed operator state", "managed keyed state"),
    "subtasks-share-a-file": ("is listed twice", "subtask 1", "subtask 0"),
    "subtask-index-twice": ("subtask 0 appears twice",),
    "operator-twice": ("operator #2", "also operator #1"),
    "one-file-two-names": ("alias", "is the same file as"),
}


@pytest.mark.parametrize("case", list(HANDLE_REUSE))
def test_a_handle_used_twice_is_refused_by_every_verb(case: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    sp = edited(EVENTS, tmp_path / "sp", HANDLE_REUSE[case])
    _every_verb_refuses(sp, tmp_path, capsys, *REUSE_NEEDLES[case])


def test_a_state_twice_in_a_keyed_header_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The second state of a name would silently lose its rows in ``convert``."""
    sp = edited(KINDS_INLINE, tmp_path / "sp", state_twice_in_header)
    _refused(["inspect", str(sp)], tmp_path, capsys, "appears twice in the keyed-state header")
    _refused(["convert", str(sp), "--out", str(tmp_path / "pq")], tmp_path, capsys, "appears twice")


# -- item 3: key-group ranges ---------------------------------------------------------------------

RANGE_NEEDLES = {
    "range-past-max-parallelism": ("subtask 1 managed keyed state", "100..163", "max parallelism 128"),
    "ranges-overlap": ("0..63 of subtask 0", "32..95 of subtask 1", "overlap"),
    "subtask-past-parallelism": ("subtask 5", "parallelism 2"),
}


@pytest.mark.parametrize("case", list(RANGES))
def test_a_bad_key_group_range_is_refused_when_metadata_is_parsed(case: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    sp = edited(EVENTS, tmp_path / "sp", RANGES[case])
    _every_verb_refuses(sp, tmp_path, capsys, *RANGE_NEEDLES[case])


# -- item 1: paths from the Parquet form's skeleton, and the Flink form ----------------------------

def _outside(tmp_path: Path) -> Path:
    return tmp_path / "outside" / "deep" / "planted"


@pytest.fixture
def converted(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    pq_dir = tmp_path / "work" / "pq"
    assert main(["convert", str(EVENTS), "--out", str(pq_dir), "-q"]) == 0
    return pq_dir


@pytest.mark.parametrize("where", ["absolute", "dot-dot", "nested-dot-dot"])
def test_convert_back_never_writes_outside_out(where: str, converted: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    planted = _outside(tmp_path)
    out = tmp_path / "work" / "back"
    rel = os.path.relpath(planted, out)
    path = {"absolute": str(planted), "dot-dot": rel, "nested-dot-dot": f"x/../{rel}"}[where]
    edit_skeleton(converted, lambda m: setattr(keyed(m, 0), "delegate", RelativeFileHandle(path, 0)))
    _refused(["convert", str(converted), "--out", str(out)], tmp_path, capsys, "leads outside", repr(path))
    assert not (tmp_path / "outside").exists() and not out.exists()


@pytest.mark.parametrize("case", ["range-past-max-parallelism", "ranges-overlap", "subtasks-share-a-file"])
def test_convert_back_checks_the_skeleton_like_a_flink_metadata(case: str, converted: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The kept skeleton is parsed by the same checks: a range past max parallelism (once a
    ``ValueError`` traceback), overlapping ranges, two subtasks writing one stream file."""
    change = {**RANGES, **HANDLE_REUSE}[case]
    edit_skeleton(converted, lambda m: change(m, tmp_path))
    _refused(["convert", str(converted), "--out", str(tmp_path / "work" / "back")], tmp_path, capsys,
             "flink/_metadata", {"range-past-max-parallelism": "passes the max parallelism",
                                 "ranges-overlap": "overlap", "subtasks-share-a-file": "is listed twice"}[case])


@pytest.mark.parametrize("clash", ["metadata", "carried-file"])
def test_convert_back_refuses_two_output_files_of_one_name(clash: str, converted: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A keyed-state stream named ``_metadata``, or like a carried file: refused before writing
    (it used to fail with exit 6, "File exists", halfway)."""
    carried = tmp_path / "work" / "pq" / "flink" / "files"
    carried.mkdir(parents=True, exist_ok=True)
    if clash == "metadata":
        edit_skeleton(converted, lambda m: setattr(keyed(m, 0), "delegate", RelativeFileHandle("_metadata", 0)))
        needle = "'_metadata' is listed twice"
    else:
        import hashlib
        import json

        (carried / "extra").write_bytes(b"x")
        doc = json.loads((converted / "_metadata.json").read_text(encoding="utf-8"))
        doc["flink"]["files"].append({"path": "flink/files/extra", "size": 1,
                                      "sha256": hashlib.sha256(b"x").hexdigest()})
        (converted / "_metadata.json").write_text(json.dumps(doc), encoding="utf-8")
        edit_skeleton(converted, lambda m: setattr(keyed(m, 0), "delegate", RelativeFileHandle("extra", 0)))
        needle = "'extra' is listed twice"
    _refused(["convert", str(converted), "--out", str(tmp_path / "work" / "back")], tmp_path, capsys, needle)


def test_convert_back_refuses_a_file_that_is_another_ones_directory(converted: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Subtask 0's stream named ``sub/x`` and subtask 1's ``sub``: one could never be written (the
    containment fuzz family found it, exit 6 "File exists" halfway;
    tests/data/fuzz/containment/583bbb5eebe9.bin)."""
    def name(m: object) -> None:
        keyed(m, 0).delegate = RelativeFileHandle("sub/x", 0)  # type: ignore[arg-type]
        keyed(m, 1).delegate = RelativeFileHandle("sub", 0)  # type: ignore[arg-type]
    edit_skeleton(converted, name)
    _refused(["convert", str(converted), "--out", str(tmp_path / "work" / "back")], tmp_path, capsys,
             "subtask 1 managed keyed state stream: file 'sub' is also the directory of a file of", "subtask 0")


def test_convert_back_refuses_a_handle_naming_no_carried_file(converted: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """An operator-state handle of the skeleton must name a carried file: the Flink savepoint
    written would name a file it does not hold."""
    def point(m: object) -> None:
        st = next(st for op in m.operators for st in op.subtasks or [] if st.managed_operator)  # type: ignore[attr-defined]
        st.managed_operator.delegate = RelativeFileHandle("nowhere", 10)
    edit_skeleton(converted, point)
    _refused(["convert", str(converted), "--out", str(tmp_path / "work" / "back")], tmp_path, capsys,
             "'nowhere'", "not among the carried files")


@pytest.mark.parametrize("where", ["../outside", "a/../../x", "a//b", "/etc/passwd/"])
def test_flink_paths_leaving_the_directory_are_refused_when_parsed(where: str, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    sp = edited(EVENTS, tmp_path / "sp", keyed_path(where))
    _every_verb_refuses(sp, tmp_path, capsys, "leads outside", "subtask 0 managed keyed state")


NO_FILE_NAME = {"lone-surrogate": ("sub/\ud800x", "holds a character no file name can"),
                "part-of-256-bytes": ("a" * 256, "longer than 255 bytes")}


@pytest.mark.parametrize("case", list(NO_FILE_NAME))
def test_flink_paths_no_file_can_have_are_refused(case: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A lone surrogate (Flink's modified UTF-8 carries one; once a ``UnicodeEncodeError``
    traceback) or a part longer than a file name: exit 4 (the containment fuzz family found both)."""
    where, needle = NO_FILE_NAME[case]
    sp = edited(EVENTS, tmp_path / "sp", keyed_path(where))
    _every_verb_refuses(sp, tmp_path, capsys, needle)


@pytest.mark.parametrize("case", list(NO_FILE_NAME))
def test_convert_back_refuses_a_name_no_file_can_have(case: str, converted: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Named by the skeleton, such a stream was refused only when written: exit 6 ("File name too
    long") after the checks (tests/data/fuzz/containment input 19289)."""
    where, needle = NO_FILE_NAME[case]
    edit_skeleton(converted, lambda m: setattr(keyed(m, 0), "delegate", RelativeFileHandle(where, 0)))
    _refused(["convert", str(converted), "--out", str(tmp_path / "work" / "back")], tmp_path, capsys, needle)


def test_a_relocated_absolute_handle_and_an_inside_symlink_read_the_same(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """What the rule accepts reads the same entries: an absolute handle is taken by its file name
    inside the savepoint; a symlink to a file inside the savepoint is that file."""
    for name, change in [("absolute", absolute_keyed_path("s3://bucket/elsewhere/sp")),
                         ("symlink", symlinked_keyed_file(lambda d, f: f))]:
        sp = edited(EVENTS, tmp_path / name, change)
        info = FlinkSavepoint(sp).inspect()
        assert sum(s.entries for op in info.operators for s in op.states) == EVENTS_ENTRIES, name
    sp = edited(EVENTS, tmp_path / "out-link", symlinked_keyed_file(lambda d, f: str((EVENTS / f).resolve())))
    _refused(["inspect", str(sp)], tmp_path, capsys, "leads out of the savepoint directory")


# -- item 5: the claim file -----------------------------------------------------------------------

def _claim(dst: Path) -> Path:
    return dst.parent / f".{dst.name}{CLAIM_TAG}"


@pytest.mark.parametrize("kind", ["hard-link", "symlink"])
def test_a_claim_file_that_is_not_ours_is_never_written_through(kind: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    dst = tmp_path / "work" / "pq"
    dst.parent.mkdir()
    (os.link if kind == "hard-link" else os.symlink)(victim, _claim(dst))
    _refused(["convert", str(EVENTS), "--out", str(dst)], tmp_path, capsys, CLAIM_TAG, "not writing through it")
    assert victim.read_bytes() == b"precious\n"


def test_a_stale_claim_is_replaced_not_truncated(tmp_path: Path) -> None:
    """A claim left by a dead run is taken over (the kill -9 case) by unlinking it and creating a
    new one: the old file's bytes are never changed (whoever else holds it keeps them)."""
    dst = tmp_path / "pq"
    claim = _claim(dst)
    claim.write_bytes(b"pid 1 on elsewhere, and a lot more bytes than a claim\n")
    with open(claim, "rb") as old:
        with StagedDirectory(dst) as staged:
            (staged.temp / "f").write_bytes(b"")
            assert os.stat(claim).st_ino != os.fstat(old.fileno()).st_ino
            assert claim.read_bytes().startswith(f"pid {os.getpid()} ".encode())
        assert old.read() == b"pid 1 on elsewhere, and a lot more bytes than a claim\n"
    assert dst.is_dir() and not claim.exists()


def test_a_claim_that_is_a_directory_or_fifo_is_refused(tmp_path: Path) -> None:
    for i, make in enumerate((os.mkdir, os.mkfifo)):
        dst = tmp_path / f"d{i}"
        make(_claim(dst))
        with pytest.raises(UnsafeFileError, match="the claim file is a (directory|FIFO)"):
            StagedDirectory(dst)
        assert not dst.exists()
