"""The fast paths of ``handle-reuse`` and ``containment`` (docs/reliability.md, "Fast paths")
against the full ones, on a sample of inputs: the same inputs for the same indices, the same
bytes after every edit, and the same verdicts; and a kept scene that an input changed is never
used unnoticed.

The sample starts at ``STATEMORPH_FUZZ_SEED`` when given, otherwise at a fresh random index per
run (printed by a failure, which replays it), like the CI fuzz run.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from statemorph.savepoint.flink import serialize_metadata

from . import trust
from .engine import input_for, judge
from .families import FAMILIES, Disagreement

pytestmark = pytest.mark.fuzz
INPUTS = int(os.environ.get("STATEMORPH_FUZZ_INPUTS", "300"))
SEED = int(os.environ.get("STATEMORPH_FUZZ_SEED") or secrets.randbelow(1 << 40))
FAMILIES_WITH_FAST_PATHS = ("handle-reuse", "containment")


@pytest.fixture(scope="module", params=FAMILIES_WITH_FAST_PATHS)
def family(request: pytest.FixtureRequest) -> Any:
    return FAMILIES[request.param]()


def _indices() -> range:
    return range(SEED, SEED + INPUTS)


def test_the_same_inputs_for_the_same_indices(family: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Generated an operator at a time, from a pickled parse of the seed, every input is the one
    ``serialize_metadata`` gives after every edit (checked edit by edit, not only at the end)."""
    written = 0
    call = trust._Writer.__call__

    def checked(self: trust._Writer, meta: Any, touched: Any) -> bytes:
        nonlocal written
        got = call(self, meta, touched)
        assert got == serialize_metadata(meta), f"seed {SEED}: an edit's bytes differ from serialize_metadata"
        written += 1
        return got

    fast = [input_for(family, i) for i in _indices()]
    with monkeypatch.context() as m:
        m.setattr(trust._Writer, "__call__", checked)
        assert [input_for(family, i) for i in _indices()] == fast
    assert written > INPUTS  # every input but a control is at least one edit
    with trust.full_path():
        full = [input_for(family, i) for i in _indices()]
    differ = [SEED + n for n, (a, b) in enumerate(zip(fast, full, strict=True)) if a != b]
    assert not differ, f"seed {SEED}: inputs {differ[:10]} differ"


def _verdicts(family: Any) -> Iterator[tuple[str, str | None]]:
    for i in _indices():
        target, data, _ = input_for(family, i)
        outcome, kind, _ = judge(family, target, data)
        yield outcome, kind


def test_the_same_verdicts_in_kept_scenes_as_in_fresh_ones(family: Any) -> None:
    """Kept scenes and keyed-state headers parsed once give each input the outcome a fresh scene
    and a fresh parse give it (outcome label, finding kind)."""
    fast = list(_verdicts(family))
    with trust.full_path():
        full = list(_verdicts(family))
    differ = [(SEED + n, a, b) for n, (a, b) in enumerate(zip(fast, full, strict=True)) if a != b]
    assert not differ, f"seed {SEED}: {differ[:10]}"
    assert any(o == "ok" for o, _ in fast) or INPUTS < 300, (SEED, fast)  # the sample reaches both sides
    assert any(o.startswith("error:") for o, _ in fast), (SEED, fast)


def test_a_kept_scene_changed_after_its_input_ended_is_a_finding() -> None:
    """What a run writes into its scene after it returned (a thread left running) is seen by the
    next input, which a fresh scene would not have shown: a disagreement, not a silent rebuild."""
    name, seed = trust.seeds()[0]
    assert trust.check_flink(name, seed) == "ok"
    scene = trust._SCENES[name, False]
    (scene.parent / "sp" / "late").write_bytes(b"x")
    try:
        with pytest.raises(Disagreement, match="the scene changed after the previous input ended"):
            trust.check_flink(name, seed)
        assert trust.check_flink(name, seed) == "ok"  # rebuilt after the finding
        assert trust._SCENES[name, False] is not scene
    finally:
        scene.remove()


def test_a_state_file_rewritten_to_its_own_size_is_seen() -> None:
    """The listing holds inodes and modification times: a state file rewritten in place, to the
    same size, is a change (a listing of names, kinds and sizes alone missed it)."""
    name, seed = next((n, s) for n, s in trust.seeds() if "files" in n)  # state in files, not inline
    assert trust.check_flink(name, seed) == "ok"
    scene = trust._SCENES[name, False]
    state = next(p for p in (scene.parent / "sp").iterdir()
                 if p.is_file() and not p.is_symlink() and p.name != "_metadata" and not p.name.startswith("alias-"))
    data = state.read_bytes()
    before = trust._listing(scene.root)
    os.utime(state, ns=(0, 0))
    state.write_bytes(data)
    assert trust._listing(scene.root) != before
    with pytest.raises(Disagreement):
        trust.check_flink(name, seed)
    assert trust.check_flink(name, seed) == "ok"


def test_a_kept_header_is_a_fresh_copy() -> None:
    """Each parse handed out by the header memo is a new object equal to a parse (``convert``
    back changes the header it gets, which must not reach the next caller)."""
    from savepoint.flink.format_helpers import cases  # noqa: F401  (the test helpers' import root)

    from statemorph.savepoint.flink import parse_keyed_header
    from statemorph.savepoint.flink.keyed_blocks import key_group_extents

    from .families import _keyed_streams

    name, data, handle = next(s for s in _keyed_streams() if s[1])
    end, _ = key_group_extents(handle, len(data), name)
    memo = trust._HeaderMemo()
    first, second = memo.parse(data[:end], end, name), memo.parse(data[:end], end, name)
    assert first is not second and first.states[0] is not second.states[0]
    assert first == second == parse_keyed_header(data[:end], end, name)
    second.states.clear()
    assert memo.parse(data[:end], end, name) == first
