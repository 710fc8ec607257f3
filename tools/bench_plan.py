#!/usr/bin/env python3
"""How long ``kvstrategies plan`` takes for every preset, and proof that it never imports torch.

    python tools/bench_plan.py [--gpu H200] [--tp 8] [--repeat 5]

Two figures per preset:

* ``in-process``: the best of ``--repeat`` calls of ``kvstrategies.cli.main(["plan", preset,
  "--gpu", GPU, "--tp", TP, "--json"])`` in this process (launch defaults, GPU budget, weight
  estimate, sizing, layout, breakdown, fit and fix search; output discarded);
* ``process``: one fresh ``python -m kvstrategies.cli plan ...`` (interpreter start-up included).

Target: well under a second per preset for both; ``torch`` must not be in ``sys.modules`` after
planning every preset (the script exits 1 otherwise). A preset whose plan is a user error (weights
larger than the GPU, say) still counts: the answer is the error line, exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvstrategies.cli import main  # noqa: E402
from kvstrategies.presets import preset_names  # noqa: E402


def plan_args(preset: str, gpu: str, tp: int) -> list[str]:
    return ["plan", preset, "--gpu", gpu, "--tp", str(tp), "--json"]


def in_process(args: list[str], repeat: int) -> tuple[float, int]:
    best, code = float("inf"), 0
    for _ in range(repeat):
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = main(args)
        best = min(best, time.perf_counter() - start)
    return best, code


def fresh_process(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kvstrategies.cli", *args], cwd=ROOT, capture_output=True, check=False)
    return time.perf_counter() - start


def run() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", default="H200")
    parser.add_argument("--tp", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    print(f"{'preset':<24}{'exit':>5}{'in-process ms':>15}{'process ms':>12}")
    worst_in, worst_proc = 0.0, 0.0
    for preset in preset_names():
        args = plan_args(preset, options.gpu, options.tp)
        seconds, code = in_process(args, options.repeat)
        proc = fresh_process(args)
        worst_in, worst_proc = max(worst_in, seconds), max(worst_proc, proc)
        print(f"{preset:<24}{code:>5}{seconds * 1000:>15.1f}{proc * 1000:>12.0f}")
    print(f"{'worst':<24}{'':>5}{worst_in * 1000:>15.1f}{worst_proc * 1000:>12.0f}")
    if "torch" in sys.modules:
        print("FAIL: planning imported torch", file=sys.stderr)
        return 1
    print("torch imported: no")
    return 0


if __name__ == "__main__":
    sys.exit(run())
