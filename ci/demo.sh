#!/usr/bin/env bash
# The README's first command: set up .venv with statemorph alone (core dependencies, no extras, no
# JDK, no Flink jars; a rerun with unchanged sources skips pip and the kernel build), then migrate
# the savepoint real Flink 2.3 took of the Events job (tests/data/flink_savepoints/, RocksDB,
# parallelism 2, Snappy): statemorph inspect, check and migrate, then read the result back and
# print a few rows. Where ci/flink is set up (ci/install.sh, ci/flink/setup.sh), real Flink also
# restores the migrated savepoint. Arguments go to `statemorph demo` (e.g. --keep).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "[demo ${SECONDS}s] $*"; }

CASE=tests/data/flink_savepoints/events-rocksdb-p2-files-snappy
NEW_TYPE='ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, `timestamp` BIGINT, appVersion STRING, sessionId BIGINT>>'
WORK=$(mktemp -d "${TMPDIR:-/tmp}/statemorph-demo.XXXXXX")
KEEP=0
for a in "$@"; do case "$a" in --keep) KEEP=1 ;; esac; done
if [ "$KEEP" = 0 ]; then trap 'rm -rf "$WORK"; say "removed $WORK (ci/demo.sh --keep keeps it)"' EXIT; fi

say "setting up .venv (statemorph and its core dependencies only)"
ci/install.sh --light
say "running: statemorph demo $CASE/savepoint"
.venv/bin/statemorph demo "$CASE/savepoint" --workdir "$WORK" "$@"

if why=$(python3 -c 'import sys; sys.path.insert(0, "ci/flink"); import flink; flink.classpath()' 2>&1 | tail -n 1); then
  say "real Flink 2.3 restores the migrated savepoint and reads every value (ci/flink/flink.py restore)"
  python3 ci/flink/flink.py restore --events-type "$NEW_TYPE" "$WORK/events-v2" "$CASE/spec.json" "$WORK/restored.jsonl"
  say "$(wc -l < "$WORK/restored.jsonl") values restored by Flink; the first two:"
  head -n 2 "$WORK/restored.jsonl"
else
  say "real Flink is not set up here (${why#*FlinkUnavailable: }), so its restore is skipped;"
  say "ci/install.sh sets it up, and the README's 'Migrate a real Flink savepoint' shows the restore command"
fi
