#!/usr/bin/env python3
"""Wall time of recording + checking the whole golden catalog, against ``python -c "import torch"``.

    python tools/bench_golden.py [--repeat 3]

Each figure is the best of ``--repeat`` fresh processes (start-up included). Recording writes into
a scratch folder (the real ``golden/`` is not touched); checking compares that folder. Planning is
torch-free, so both should cost well under the torch import (target: record + check at most about
2x ``import torch``). The allocation check (every case built on ``meta``) is the only step that
imports torch; it is timed separately for information.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "tools" / "record_golden.py"
TORCH_PROBE = """
import runpy, sys
sys.argv = ["record_golden.py", "--check", "--golden", sys.argv[1]]
try:
    runpy.run_path({record!r}, run_name="__main__")
except SystemExit:
    pass
print("TORCH_IMPORTED", "torch" in sys.modules)
"""
META_CHECK = """
import sys
from pathlib import Path
from kvstrategies.api import build
from kvstrategies.golden.snapshot import case_files, load_catalog_case, plan_case
ok = bad = 0
for path in case_files(Path(sys.argv[1])):
    try:
        planned = plan_case(load_catalog_case(path))
    except Exception:
        continue
    built = build(planned, "meta")
    if built.allocated_bytes == planned.layout.planned_bytes:
        ok += 1
    else:
        bad += 1
print("META", ok, bad)
"""


def best_of(repeat: int, command: list[str]) -> tuple[float, str]:
    best, output = float("inf"), ""
    for _ in range(repeat):
        start = time.perf_counter()
        run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        best = min(best, time.perf_counter() - start)
        output = run.stdout
    return best, output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time the golden catalog against import torch.")
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per figure (best is kept)")
    args = parser.parse_args(argv)
    python = sys.executable
    cases = ROOT / "cases"
    with tempfile.TemporaryDirectory(prefix="kvs-bench-golden-") as scratch:
        gold = str(Path(scratch) / "golden")
        torch_s, _ = best_of(args.repeat, [python, "-c", "import torch"])
        record_s, record_out = best_of(args.repeat, [python, str(RECORD), "--golden", gold, "-q"])
        check_s, check_out = best_of(args.repeat, [python, str(RECORD), "--golden", gold, "--check"])
        probe = subprocess.run([python, "-c", TORCH_PROBE.format(record=str(RECORD)), gold],
                               cwd=ROOT, capture_output=True, text=True, check=False).stdout
        meta_s, meta_out = best_of(1, [python, "-c", META_CHECK, str(cases)])
    summary = (record_out.strip().splitlines() or ["?"])[-1]
    checked = (check_out.strip().splitlines() or ["?"])[-1]
    torch_free = "TORCH_IMPORTED False" in probe
    total = record_s + check_s
    print(f"python -c 'import torch'      {torch_s:6.2f} s  (best of {args.repeat})")
    print(f"record whole catalog          {record_s:6.2f} s  ({summary})")
    print(f"check whole catalog           {check_s:6.2f} s  ({checked})")
    print(f"record + check                {total:6.2f} s  = {total / torch_s:.2f} x import torch (target <= ~2x); "
          f"torch imported while planning: {'no' if torch_free else 'YES'}")
    meta = meta_out.split()
    print(f"meta allocation check         {meta_s:6.2f} s  (imports torch; {meta[1] if len(meta) > 2 else '?'} cases "
          f"allocated == planned, {meta[2] if len(meta) > 2 else '?'} not)")
    return 0 if torch_free else 1


if __name__ == "__main__":
    sys.exit(main())
