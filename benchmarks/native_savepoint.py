"""A native RocksDB savepoint of Events RowData values taken by real Flink 2.3 (the ci/flink
generator, spec ``"format": "native"``), and the canonical savepoint of the same state converted
from it with ``statemorph convert --to canonical`` (whose tables
``tests/savepoint/flink/test_native_real_flink.py`` proves equal to the native reader's, and which
real Flink restores).

The generator writes ``expected.json`` with every key's value, which makes large runs slow on this
project's 2-core machine (``benchmarks/flink_savepoint.py``: 1,000,000 keys took 3 min 40 s there),
so ``STATEMORPH_NATIVE_BENCH_N`` (default 1,000,000) sets the key count; one ``events`` entry a key.
Built once into the cache directory (atomically: staged, then renamed) and reused."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from statemorph.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
UID = "state-op"
STATE = "events"
FORMAT_VERSION = 1
"""Bumped when the built pair changes, so a stale cache is rebuilt."""
JVM_FLAGS = ["-XX:+UseParallelGC", "-Xmx6g", "-Dlog4j2.level=WARN"]


@dataclass
class NativePair:
    """The native savepoint, the canonical one converted from it, and their entry count."""

    native: Path
    canonical: Path
    n: int


def spec(n: int) -> dict[str, object]:
    """The generator spec: RocksDB, parallelism 2, ``n`` int keys, one Events value each."""
    return {"name": f"native-events-{n}", "backend": "rocksdb", "format": "native", "parallelism": 2,
            "storage": "filesystem", "keys": n, "records_per_key": 1, "states": [STATE]}


def _driver() -> ModuleType:
    """ci/flink/flink.py as a module (standard library only), as the tests load it."""
    if "statemorph_ci_flink" in sys.modules:
        return sys.modules["statemorph_ci_flink"]
    loader = importlib.util.spec_from_file_location("statemorph_ci_flink", ROOT / "ci" / "flink" / "flink.py")
    assert loader is not None and loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    sys.modules[loader.name] = module  # dataclasses look their module up there
    loader.loader.exec_module(module)
    return module


def build(cache: Path, n: int) -> NativePair:
    """The pair for ``n`` keys in ``cache`` (taken once; reused while its manifest matches)."""
    target = cache / f"native-events-{n}"
    pair = NativePair(target / "native" / "savepoint", target / "canonical", n)
    manifest = target / "bench.json"
    if manifest.is_file() and json.loads(manifest.read_text()).get("format") == FORMAT_VERSION:
        return pair
    shutil.rmtree(target, ignore_errors=True)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".native-events-{n}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        driver = _driver()
        (tmp / "spec.json").write_text(json.dumps(spec(n)))
        driver.generate([(tmp / "spec.json", tmp / "native")], jvm_flags=JVM_FLAGS, timeout=3600)
        (tmp / "native" / "expected.json").unlink(missing_ok=True)  # every key's value: not needed here
        if main(["convert", str(tmp / "native" / "savepoint"), "--to", "canonical",
                 "--out", str(tmp / "canonical"), "-q"]) != 0:
            raise RuntimeError("convert --to canonical of the native benchmark savepoint failed")
        (tmp / "bench.json").write_text(json.dumps({"format": FORMAT_VERSION, "n": n}))
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return pair


if __name__ == "__main__":
    import time

    t = time.perf_counter()
    p = build(Path(sys.argv[1]), int(sys.argv[2]))
    print(p, f"{time.perf_counter() - t:.1f} s")
