#!/usr/bin/env bash
# The README's test command: install from source, lint, type-check, run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install.sh
.venv/bin/ruff check src
.venv/bin/mypy
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
# run from a directory without src/ on the path, so tests exercise the installed package
.venv/bin/python -m pytest -q -p no:cacheprovider --benchmark-disable "$@"
