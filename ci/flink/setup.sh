#!/usr/bin/env bash
# Build the real-Flink savepoint generator and restore checker (ci/flink/src) against the Flink jars.
#
#   ci/flink/setup.sh              # Flink 2.3.0: reuse /tmp/flinkvenv if present, else fetch the jars
#   ci/flink/setup.sh --with-1.20  # also Flink 1.20.3 (writes metadata-V4 savepoints)
#   FLINK_LIB=/path/to/pyflink/lib ci/flink/setup.sh          # use these 2.3.0 jars
#   FLINK_LIB_1_20=/path/to/pyflink/lib ci/flink/setup.sh --with-1.20
#
# Prints one line per Flink version built: the path of a file holding the class path to run
# `java -cp "$(cat FILE)" savepoints.Main ...` with (ci/flink/flink.py reads it). Everything goes
# into FLINK_BUILD (default ci/flink/build, git-ignored); a second run with unchanged sources and
# jars only prints the paths. Needs java + javac 17 and python3 (for the throwaway venvs).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"  # physical: a symlinked ci/ must not leak into the class path
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD="${FLINK_BUILD:-$HERE/build}"
mkdir -p "$BUILD"
source "$ROOT/ci/flink-jars.sh"

WITH_120=0
for a in "$@"; do
    case "$a" in
        --with-1.20) WITH_120=1 ;;
        *) echo "usage: ci/flink/setup.sh [--with-1.20]" >&2; exit 2 ;;
    esac
done
command -v javac >/dev/null || { echo "javac not found: install a JDK 17" >&2; exit 1; }

# The generator uses the golden generator's JSON reader/writer instead of a second copy.
SOURCES=("$HERE"/src/savepoints/*.java "$ROOT"/ci/golden/src/golden/Json.java)
# The POJO job's state class in its two versions: one class name, compiled into pojo-VERSION/v1 and
# pojo-VERSION/v2; the job is compiled against v1 and a run puts one of them on its class path.
POJO_V1=("$HERE"/src/pojo/v1/savepoints/pojo/*.java)
POJO_V2=("$HERE"/src/pojo/v2/savepoints/pojo/*.java)

# build VERSION LIB: compile SOURCES against LIB into classes-VERSION (and the POJO class versions
# into pojo-VERSION/v1 and v2) unless already done with
# the same sources and jars; print the class-path file.
build() {
    local version="$1" lib="$2"
    local classes="$BUILD/classes-$version" cpfile="$BUILD/classpath-$version" pojo="$BUILD/pojo-$version"
    local cp stamp
    cp=$(flink_classpath "$lib")
    stamp=$( (echo "$lib"; cat "${SOURCES[@]}" "${POJO_V1[@]}" "${POJO_V2[@]}") | sha256sum | cut -d' ' -f1)
    if [[ ! -f "$classes/.stamp" || "$(cat "$classes/.stamp")" != "$stamp" || ! -f "$cpfile" ]]; then
        rm -rf "$classes" "$pojo"
        mkdir -p "$classes" "$pojo/v1" "$pojo/v2"
        javac -nowarn -encoding UTF-8 -d "$pojo/v1" "${POJO_V1[@]}"
        javac -nowarn -encoding UTF-8 -d "$pojo/v2" "${POJO_V2[@]}"
        javac -nowarn -encoding UTF-8 -cp "$pojo/v1:$cp" -d "$classes" "${SOURCES[@]}"
        echo "$stamp" > "$classes/.stamp"
        echo "$classes:$cp" > "$cpfile"
    fi
    touch "$classes/.stamp"  # checked against the sources: flink.py refuses classes older than them
    echo "$cpfile"
}

if [[ -z "${FLINK_LIB:-}" ]]; then
    FLINK_LIB=$(flink_lib 2.3.0 /tmp/flinkvenv "$BUILD/flinkvenv")
fi
build 2.3.0 "$FLINK_LIB"

if [[ "$WITH_120" == 1 ]]; then
    if [[ -z "${FLINK_LIB_1_20:-}" ]]; then
        FLINK_LIB_1_20=$(flink_lib 1.20.3 /tmp/flinkvenv-1.20 "$BUILD/flinkvenv-1.20")
    fi
    build 1.20.3 "$FLINK_LIB_1_20"
fi
