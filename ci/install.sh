#!/usr/bin/env bash
# Set up everything the tests need, from nothing: a JDK (for Spark, the golden-vector generator and
# the real-Flink savepoint generator / restore checker), a virtualenv in .venv, statemorph built
# from source with all extras, and the Flink programs of ci/flink built against the Flink jars.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
  echo "java/javac not found: installing a headless JDK with apt-get"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq default-jdk-headless >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q ".[test,bench]"
.venv/bin/python -c "import statemorph, statemorph.kernels as n; print('statemorph', statemorph.__version__, 'native tier:', n.TIER)"
# the real-Flink savepoint generator and restore checker (throwaway venv for the jars, never .venv)
ci/flink/setup.sh
