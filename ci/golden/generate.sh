#!/usr/bin/env bash
# Regenerate the golden vectors in tests/data/golden/*.jsonl by running REAL Flink 2.3.0 serializers
# (avro.jsonl: real Avro Java over this project's encoder of Flink's Avro state format; see the README there).
#
#   ci/golden/generate.sh                 # reuse /tmp/flinkvenv if present, else fetch the Flink jars
#   FLINK_LIB=/path/to/pyflink/lib ci/golden/generate.sh
#   ci/golden/generate.sh extra.jsonl     # also turn extra case inputs into extra.out.jsonl next to them
#
# Needs: java + javac 17, python3 (stdlib only). Avro cases additionally need the Avro jar; it is
# taken from AVRO_JARS (a ':'-separated class path) or from Debian's libavro-java package, fetched
# with `apt-get download` into the build dir (not installed). Without it the Avro file is skipped.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD="${GOLDEN_BUILD:-$HERE/build}"
OUT="${GOLDEN_OUT:-$ROOT/tests/data/golden}"   # GOLDEN_OUT: write the vectors elsewhere (reproducibility test)
FLINK_VERSION=2.3.0
mkdir -p "$BUILD"

# --- 1. the Flink jars (shared logic: ci/flink-jars.sh) ---------------------------------------
source "$ROOT/ci/flink-jars.sh"
if [[ -z "${FLINK_LIB:-}" ]]; then
    FLINK_LIB=$(flink_lib "$FLINK_VERSION" /tmp/flinkvenv "$BUILD/flinkvenv")
fi
ls "$FLINK_LIB"/flink-dist-"$FLINK_VERSION".jar >/dev/null || {
    echo "no flink-dist-$FLINK_VERSION.jar in $FLINK_LIB" >&2; exit 1; }
CP=$(flink_classpath "$FLINK_LIB")

# --- 2. the Avro jar (optional) --------------------------------------------------------------
if [[ -z "${AVRO_JARS:-}" ]]; then
    AVRO_DIR="$BUILD/avro"
    if [[ ! -f "$AVRO_DIR/usr/share/java/avro.jar" ]] && command -v apt-get >/dev/null; then
        mkdir -p "$AVRO_DIR/debs"
        (cd "$AVRO_DIR/debs" && apt-get download libavro-java libjackson-json-java libslf4j-java \
            libcommons-compress-java libparanamer-java >/dev/null 2>&1) || true
        for d in "$AVRO_DIR"/debs/*.deb; do [[ -f "$d" ]] && dpkg-deb -x "$d" "$AVRO_DIR"; done
    fi
    if [[ -f "$AVRO_DIR/usr/share/java/avro.jar" ]]; then
        J="$AVRO_DIR/usr/share/java"
        AVRO_JARS="$J/avro.jar:$J/jackson-core-asl-1.9.13.jar:$J/jackson-mapper-asl-1.9.13.jar"
    fi
fi

# --- 3. compile ------------------------------------------------------------------------------
rm -rf "$BUILD/classes" "$BUILD/worlds"
mkdir -p "$BUILD/classes"
javac -nowarn -encoding UTF-8 -cp "$CP" -d "$BUILD/classes" "$HERE"/src/golden/*.java
PAIRS=()
FILES=(datastream snapshots rowdata compat migration flink_rowdata operator_ids edge)
if [[ -n "${AVRO_JARS:-}" ]]; then
    CP="$CP:$AVRO_JARS"
    javac -nowarn -encoding UTF-8 -cp "$BUILD/classes:$CP" -d "$BUILD/classes" "$HERE"/src-avro/golden/*.java
    FILES+=(avro)
else
    echo "warning: no Avro jar; tests/data/golden/avro.jsonl is left as it is" >&2
fi

# --- 4. cases -> vectors ---------------------------------------------------------------------
python3 "$HERE/cases.py" "$BUILD/cases"
for f in "${FILES[@]}"; do PAIRS+=("$BUILD/cases/$f.jsonl" "$OUT/$f.jsonl"); done
for extra in "$@"; do PAIRS+=("$extra" "${extra%.jsonl}.out.jsonl"); done
java -cp "$BUILD/classes:$CP" -Dlog4j2.level=WARN golden.Generate "$BUILD" "${PAIRS[@]}" 2> >(grep -v '^SLF4J' >&2)
