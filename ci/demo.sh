#!/usr/bin/env bash
# The README's main job: install statemorph, then build, check, migrate and restore the Events savepoint.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/install.sh >/dev/null
exec .venv/bin/statemorph demo "$@"
