"""``--help`` explains every argument: each option and positional of each verb has a help text."""

from __future__ import annotations

import argparse

import pytest

from statemorph.cli.main import build_parser


def _verbs() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("verb", sorted(_verbs()))
def test_every_argument_has_help(verb: str) -> None:
    parser = _verbs()[verb]
    bare = [a.metavar or a.dest for a in parser._actions if not a.help or a.help == argparse.SUPPRESS]
    assert not bare, f"statemorph {verb} --help explains nothing for {bare}"


def test_the_savepoint_and_engine_are_explained(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["migrate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "SAVEPOINT a Flink savepoint" in text
    assert "--engine {local,spark} local: threads on this machine" in text
