#!/usr/bin/env bash
# The README's test command: install from source, lint, type-check, run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install.sh
.venv/bin/ruff check src
.venv/bin/mypy
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
# hypothesis runs derandomized (tests/conftest.py); a fixed hash seed makes the examples of
# strategies that iterate over sets or dicts the same on every run too
export PYTHONHASHSEED="${PYTHONHASHSEED:-0}"
# the real-Flink tests (tests/savepoint/flink) fail instead of skipping when Flink is missing
export STATEMORPH_REQUIRE_FLINK=1
# run from a directory without src/ on the path, so tests exercise the installed package
.venv/bin/python -m pytest -q -p no:cacheprovider --benchmark-disable "$@"
