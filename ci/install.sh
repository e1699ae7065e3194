#!/usr/bin/env bash
# Set up .venv from nothing.
#
#   ci/install.sh           everything the tests need: a JDK (for Spark, the golden-vector generator
#                           and the real-Flink savepoint generator / restore checker), statemorph
#                           built from source with the test and bench extras, and the Flink programs
#                           of ci/flink built against the Flink jars (ci/test.sh runs this)
#   ci/install.sh --light   statemorph built from source with its core dependencies only (numpy,
#                           pyarrow, cramjam): no extras, no JDK, no Flink jars (ci/demo.sh runs this)
#
# Either way a rerun with the same sources (src/ with the Cython sources in src/statemorph/kernels/_native/, setup.py, pyproject.toml, MANIFEST.in)
# skips pip, so the kernels are not compiled again: .venv/.statemorph-installed records the
# sources' hash and the extras of the last install (a full install also serves --light).
set -euo pipefail
cd "$(dirname "$0")/.."

LIGHT=0
case "${1:-}" in
  --light) LIGHT=1 ;;
  "") ;;
  *) echo "usage: ci/install.sh [--light]" >&2; exit 2 ;;
esac
say() { echo "[install ${SECONDS}s] $*"; }

# The hash of every source file a build reads: git's list (tracked and new files, git-ignored build
# outputs left out) in a checkout, else the same files found by name.
sources_hash() (
  set +o pipefail
  { git ls-files -z -co --exclude-standard -- src setup.py pyproject.toml MANIFEST.in 2>/dev/null ||
    find src setup.py pyproject.toml MANIFEST.in -type f ! -name '*.so' ! -name '*.c' ! -name '*.pyc' \
      ! -name 'abi_*.pxi' ! -path '*/__pycache__/*' ! -path '*.egg-info/*' -print0; } |
    LC_ALL=C sort -z | xargs -0 sha256sum 2>/dev/null | sha256sum | cut -d' ' -f1
)

if [ "$LIGHT" = 0 ] && { ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; }; then
  say "java/javac not found: installing a headless JDK with apt-get"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq default-jdk-headless >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $("$PY" -V 2>&1)"
  "$PY" -m venv .venv
fi

EXTRAS=$([ "$LIGHT" = 1 ] && echo "core" || echo "test,bench")
STAMP=.venv/.statemorph-installed
read -r HAVE_HASH HAVE_EXTRAS 2>/dev/null < "$STAMP" || { HAVE_HASH=""; HAVE_EXTRAS=""; }
if [ -x .venv/bin/statemorph ] && [ "$HAVE_HASH" = "$(sources_hash)" ] &&
   { [ "$HAVE_EXTRAS" = "$EXTRAS" ] || [ "$HAVE_EXTRAS" = "test,bench" ]; }; then
  say "statemorph is installed from these sources (${HAVE_EXTRAS}): pip and the kernel build skipped"
else
  rm -f "$STAMP"
  say "upgrading pip"
  .venv/bin/python -m pip install -q --upgrade pip
  if [ "$LIGHT" = 1 ]; then
    say "building statemorph from source (Cython kernels: about a minute) with numpy, pyarrow, cramjam"
    .venv/bin/python -m pip install -q .
  else
    say "building statemorph from source with the test and bench extras (Spark, RocksDB, Avro, LLVM ...)"
    .venv/bin/python -m pip install -q ".[test,bench]"
  fi
  echo "$(sources_hash) $EXTRAS" > "$STAMP"
fi
.venv/bin/python -c "import statemorph, statemorph.kernels as n; print('statemorph', statemorph.__version__, 'native tier:', n.TIER)" | while read -r line; do say "$line"; done
if [ "$LIGHT" = 0 ]; then
  # the real-Flink savepoint generator and restore checker (throwaway venvs for the jars, never
  # .venv): Flink 2.3.0, and 1.20.3 (the last 1.x: metadata-V4 savepoints, its SQL state shapes)
  ci/flink/setup.sh --with-1.20
fi
