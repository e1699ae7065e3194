# Locate (or fetch) the jars of one Flink release. Sourced by ci/golden/generate.sh and
# ci/flink/setup.sh, so both find Flink the same way.
#
#   source ci/flink-jars.sh
#   lib=$(flink_lib 2.3.0 /tmp/flinkvenv "$BUILD/flinkvenv")
#
# flink_lib VERSION VENV...: prints the pyflink/lib directory of the first VENV holding
# flink-dist-VERSION.jar. If none does, it creates the LAST venv (a throwaway; never the project's
# .venv) and pip-installs apache-flink-libraries==VERSION into it without dependencies: that wheel
# is the part of apache-flink that carries the jars, and nothing else is needed to run Java against
# them. Progress goes to stderr; a failure returns non-zero.
flink_lib() {
    local version="$1"; shift
    local venv cand
    for venv in "$@"; do
        cand=$(ls -d "$venv"/lib/python3*/site-packages/pyflink/lib 2>/dev/null | head -n1 || true)
        if [[ -n "$cand" && -f "$cand/flink-dist-$version.jar" ]]; then
            echo "$cand"; return 0
        fi
    done
    venv="${!#}"
    echo "creating a throwaway venv with the Flink $version jars (apache-flink-libraries) in $venv" >&2
    python3 -m venv "$venv" >&2 || return 1
    "$venv/bin/pip" install --quiet --no-deps "apache-flink-libraries==$version" >&2 || return 1
    cand=$(ls -d "$venv"/lib/python3*/site-packages/pyflink/lib 2>/dev/null | head -n1 || true)
    [[ -n "$cand" && -f "$cand/flink-dist-$version.jar" ]] || {
        echo "no flink-dist-$version.jar after installing into $venv" >&2; return 1; }
    echo "$cand"
}

# flink_classpath LIB: the ':'-joined jars of a pyflink/lib directory.
flink_classpath() {
    ls "$1"/*.jar | tr '\n' ':' | sed 's/:$//'
}
