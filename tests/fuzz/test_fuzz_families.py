"""Every decoder family under a bounded number of mutated inputs (CI), in one worker subprocess
that runs under RLIMIT_AS with a per-input time guard (see :mod:`.engine` for the oracle).

``STATEMORPH_FUZZ_INPUTS`` sets the inputs per family (default 300: the whole suite takes
about 15 s on 2 idle cores); the long run is ``python -m tests.fuzz`` (docs/reliability.md).

Input ``i`` of a family is a pure function of ``(family, i)``, so the run's *seed* is the index of
its first input: ``STATEMORPH_FUZZ_SEED`` when given (to replay a run), otherwise a fresh random
one per run, so every CI run judges inputs no run judged before. A failure names the seed and
the command that replays each finding alone.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest

from .engine import PeakRss, Stats, measured, regression_inputs, run_families
from .families import FAMILIES

pytestmark = pytest.mark.fuzz
INPUTS = int(os.environ.get("STATEMORPH_FUZZ_INPUTS", "300"))
SEED = int(os.environ.get("STATEMORPH_FUZZ_SEED") or secrets.randbelow(1 << 40))
"""The first input index of this run (any index is as valid as any other: the long runs start at 0)."""


@pytest.fixture(scope="module")
def results() -> dict[str, Stats]:
    return {s.family: s for s in run_families(list(FAMILIES), SEED, INPUTS)}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_gives_only_results_or_typed_errors(results: dict[str, Stats], family: str) -> None:
    stats = results[family]
    assert stats.inputs == INPUTS, (SEED, stats.to_json())
    replay = f"seed {SEED} (STATEMORPH_FUZZ_SEED={SEED} STATEMORPH_FUZZ_INPUTS={INPUTS} replays this run)"
    shown = [f"{f.kind} at input {f.index} ({f.target}): {f.message[:300]}; replay alone: "
             f"python -m tests.fuzz --family {family} --start {f.index} --inputs 1" for f in stats.findings[:10]]
    assert not stats.findings, "\n".join([replay, *shown])
    # the mutations reach both sides of the decoder: some inputs still read, some are refused. A
    # random window can miss a family's rare valid inputs (about 1 in 125 for snapshots), so a
    # window without one is judged again by the long runs' first window, which reads some
    assert any(k.startswith("error:") for k in stats.outcomes), (SEED, stats.outcomes)
    if not any(k.startswith("ok") for k in stats.outcomes):
        first = run_families([family], 0, INPUTS)[0]
        assert any(k.startswith("ok") for k in first.outcomes), (SEED, stats.outcomes, first.outcomes)


REGRESSIONS = list(regression_inputs())


@pytest.mark.parametrize("family,target,path", REGRESSIONS, ids=[f"{f}/{p.stem}" for f, _, p in REGRESSIONS])
def test_saved_regression_input(family: str, target: str, path: os.PathLike[str]) -> None:
    """Inputs a fuzz run once found a problem with (tests/data/fuzz/<family>/): now a result or a
    typed error, on every path, within the memory one input may take (``rss``)."""
    with open(path, "rb") as f:
        data = f.read()
    with PeakRss() as rss:  # its memory too
        outcome, kind, message, _ = measured(FAMILIES[family](), target, data, rss)
    assert kind is None, f"{outcome}: {message}"
    # the outcome the fix settled on (a refusal stays a refusal), where the .json records one
    expected = json.loads(Path(path).with_suffix(".json").read_text(encoding="utf-8")).get("outcome", outcome)
    assert outcome == expected, (outcome, expected)
