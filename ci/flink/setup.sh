#!/usr/bin/env bash
# Build the real-Flink savepoint generator and restore checker (ci/flink/src) against the Flink jars.
#
#   ci/flink/setup.sh              # Flink 2.3.0: reuse /tmp/flinkvenv if present, else fetch the jars
#   ci/flink/setup.sh --with-1.20  # also Flink 1.20.3 (writes metadata-V4 savepoints)
#   ci/flink/setup.sh --with-1.19 --with-2.0 --with-2.1 --with-2.2   # other releases
#                                  # (opt-in: each fetches ~300 MB of jars; CI builds 2.3.0 and 1.20.3)
#   (no 1.18: the programs use OpenContext and sink.v2.DiscardingSink, which Flink 1.19 added)
#   FLINK_LIB=/path/to/pyflink/lib ci/flink/setup.sh          # use these 2.3.0 jars
#   FLINK_LIB_1_20=/path/to/pyflink/lib ci/flink/setup.sh --with-1.20   # (FLINK_LIB_2_1 for --with-2.1, ...)
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

# The releases a --with-X.Y flag builds (the newest patch of each; ci/flink/flink.py VERSIONS).
declare -A RELEASES=([1.19]=1.19.3 [1.20]=1.20.3 [2.0]=2.0.2 [2.1]=2.1.3 [2.2]=2.2.1)
WITH=()
for a in "$@"; do
    minor="${a#--with-}"
    if [[ "$a" == --with-* && -n "${RELEASES[$minor]:-}" ]]; then
        WITH+=("$minor")
    else
        echo "usage: ci/flink/setup.sh [--with-1.19] [--with-1.20] [--with-2.0] [--with-2.1] [--with-2.2]" >&2
        exit 2
    fi
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

for minor in "${WITH[@]}"; do
    var="FLINK_LIB_${minor/./_}"
    lib="${!var:-}"
    if [[ -z "$lib" ]]; then
        lib=$(flink_lib "${RELEASES[$minor]}" "/tmp/flinkvenv-$minor" "$BUILD/flinkvenv-$minor")
    fi
    build "${RELEASES[$minor]}" "$lib"
done
