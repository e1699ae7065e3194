#!/usr/bin/env bash
# Set up everything the tests need, from nothing: a JRE (for Spark and the golden-vector
# generator), a virtualenv in .venv, and statemorph built from source with all extras.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v java >/dev/null 2>&1; then
  echo "java not found: installing a headless JRE with apt-get"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq default-jre-headless >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q ".[test,bench]"
.venv/bin/python -c "import statemorph, statemorph.kernels as n; print('statemorph', statemorph.__version__, 'native tier:', n.TIER)"
