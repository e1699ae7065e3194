"""The serial fraction of the Flink savepoint rewrite at 1 and 2 threads, beside the parallel floor
(issue 22, item 3), as a pytest-benchmark case: it runs ``benchmarks/serial_fraction.py`` (its
docstring says what is measured and how) and prints its report.

Size: ``STATEMORPH_BENCH_FLINK_N`` entries (default 10,000,000), ``STATEMORPH_BENCH_FLINK_ROUNDS``
rounds (default 3). Run: ``.venv/bin/python -m pytest benchmarks/test_serial_fraction.py
--benchmark-only -s``.
"""

from __future__ import annotations

import os
from typing import Any

from . import serial_fraction as S
from .conftest import record_external

N = int(os.environ.get("STATEMORPH_BENCH_FLINK_N", "10000000"))
ROUNDS = int(os.environ.get("STATEMORPH_BENCH_FLINK_ROUNDS", "3"))
THREADS = [1, 2]


def test_flink_rewrite_serial_fraction(benchmark: Any) -> None:
    results: list[dict[str, Any]] = []
    benchmark.pedantic(lambda: results.append(S.measure(N, ROUNDS, THREADS, None)), rounds=1, iterations=1)
    result = results[0]
    print("\n" + "\n".join(S.report(result, THREADS)))
    for t in THREADS:
        runs = result["runs"][f"migrate@{t}"]
        best = min(runs, key=lambda r: r["seconds"])
        floor = min(r["seconds"] for r in result["runs"][f"floor@{t}"])
        record_external(f"flink rewrite serial fraction, {t} thread(s)", N / best["seconds"], N,
                        serial_fraction=best["timings"]["serial_fraction"],
                        ratio_to_floor=round(best["seconds"] / floor, 3))
        benchmark.extra_info[f"serial_fraction_{t}"] = best["timings"]["serial_fraction"]
        benchmark.extra_info[f"ratio_to_floor_{t}"] = round(best["seconds"] / floor, 3)
