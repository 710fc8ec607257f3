#!/usr/bin/env python3
"""A sweep of every preset x TP x KV dtype x GPU in one process: how long, and how many cells.

    python tools/bench_sweep.py [--gpus H100,H200,B200,A100-80GB] [--tp 1,2,4,8]
                                [--kv-cache-dtypes auto,fp8_e4m3] [--against DIR]

One :func:`kvstrategies.planner.sweep.sweep` per preset over the grid (each cell a full plan:
launch defaults, GPU budget, weight estimate, sizing, layout, fit; no fix search, as ``kvstrategies
sweep`` plans it), in one process after its imports. Prints the cells, the CPU seconds
(``time.process_time``) and wall seconds of the whole grid, and the cells that are errors (a
model too large for a GPU at that TP is an answer, not a failure). The default grid is 34
presets x 4 TP x 2 KV dtypes x 4 GPUs = 1,088 cells; the target is at most 5 s.

``--against DIR`` sweeps the same grid with a second checkout (a folder holding ``kvstrategies/``)
in a worker process right after, and prints ``DIR cpu / this cpu`` (one run, same load).
``tests/planner/test_sweep_grid.py`` checks (untimed) that a sweep's cells equal one plan each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def grid_seconds(gpus: list[str], tps: list[int], kvs: list[str]) -> tuple[float, float, int, int]:
    """``(cpu seconds, wall seconds, cells, error cells)`` of the whole grid in this process."""
    from kvstrategies.planner.gpus import lookup_gpu
    from kvstrategies.planner.request import DeploymentRequest
    from kvstrategies.planner.sweep import sweep
    from kvstrategies.presets import preset_names

    accelerators = [lookup_gpu(name) for name in gpus]
    kv_dtypes: list[str | None] = [None if kv == "auto" else kv for kv in kvs]
    cells = errors = 0
    cpu, wall = time.process_time(), time.perf_counter()
    for preset in preset_names():
        base = DeploymentRequest(preset, {"preset": preset}, gpu=accelerators[0])
        rows = sweep(base, tp_sizes=tps, kv_cache_dtypes=kv_dtypes, page_sizes=[None], gpus=accelerators)
        cells += len(rows)
        errors += sum(1 for row in rows if row.error)
    return time.process_time() - cpu, time.perf_counter() - wall, cells, errors


def run() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", default="H100,H200,B200,A100-80GB")
    parser.add_argument("--tp", default="1,2,4,8")
    parser.add_argument("--kv-cache-dtypes", default="auto,fp8_e4m3", help="'auto' leaves the launch's choice")
    parser.add_argument("--against", type=Path, default=None, metavar="DIR", help="a second checkout to compare")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    gpus = [g.strip() for g in options.gpus.split(",") if g.strip()]
    tps = [int(t) for t in options.tp.split(",") if t.strip()]
    kvs = [k.strip() for k in options.kv_cache_dtypes.split(",") if k.strip()]
    if options.worker:
        print(json.dumps(grid_seconds(gpus, tps, kvs)))
        return 0
    sys.path.insert(0, str(ROOT))
    cpu, wall, cells, errors = grid_seconds(gpus, tps, kvs)
    print(f"{cells:,} cells ({errors:,} of them errors): {cpu:.2f} s CPU, {wall:.2f} s wall, "
          f"{cpu / cells * 1000:.2f} ms CPU per cell")  # fmt: skip
    if options.against is not None:
        tree = options.against.resolve()
        worker = [sys.executable, __file__, "--worker", "--gpus", options.gpus, "--tp", options.tp,
                  "--kv-cache-dtypes", options.kv_cache_dtypes]  # fmt: skip
        done = subprocess.run(worker, env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree, capture_output=True,
                              text=True, check=True)  # fmt: skip
        their_cpu, their_wall, their_cells, their_errors = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{tree}: {their_cells:,} cells ({their_errors:,} errors): {their_cpu:.2f} s CPU, {their_wall:.2f} s "
              f"wall; {their_cpu / cpu:.1f}x this checkout's CPU")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(run())
