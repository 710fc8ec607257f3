#!/usr/bin/env python3
"""How long ``kvstrategies plan`` takes for every preset, and proof that it never imports torch.

    python tools/bench_plan.py [--gpu H200] [--tp 8] [--repeat 7] [--against DIR] [--process]

Per preset, ``kvstrategies.cli.main(["plan", preset, "--gpu", GPU, "--tp", TP, "--json"])`` in one
long-lived process (launch defaults, GPU budget, weight estimate, sizing, layout, breakdown,
fit, the fix search and the JSON document; output discarded):

* ``first``: the first call of that preset (caches of other presets warm, its own cold);
* ``cpu`` / ``wall``: the best of ``--repeat`` further calls, CPU time of the process
  (``time.process_time``: what other load on the machine does not inflate) and wall time.

``--against DIR`` times a second checkout (a folder holding ``kvstrategies/``, e.g. ``git
worktree add /tmp/base main``) the same way, preset by preset, interleaved with this one in
the same run, and prints ``DIR cpu / this cpu`` per preset. Each side runs in its own worker
process. ``--process`` adds one fresh ``python -m kvstrategies plan ...`` per preset
(interpreter start-up included: :mod:`tools.bench_cli` measures that properly).

Target: at most 10 ms of CPU per preset, fix search included; ``torch`` must not be in
``sys.modules`` after planning every preset (exit 1 otherwise). A preset whose plan is a user
error (weights larger than the GPU, say) still counts: the answer is the error, exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def plan_args(preset: str, gpu: str, tp: int) -> list[str]:
    return ["plan", preset, "--gpu", gpu, "--tp", str(tp), "--json"]


def _one(main: object, args: list[str]) -> tuple[float, float, int]:
    """``(cpu seconds, wall seconds, exit code)`` of one in-process call."""
    cpu, wall = time.process_time(), time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(args)  # type: ignore[operator]
    return time.process_time() - cpu, time.perf_counter() - wall, int(code)


def worker() -> int:
    """Read ``[args, repeat]`` lines on stdin, answer ``[first, best cpu, best wall, code]`` lines."""
    from kvstrategies.cli import main  # the entry point in every layout of the package

    for line in sys.stdin:
        args, repeat = json.loads(line)
        first, _, code = _one(main, args)
        runs = [_one(main, args) for _ in range(repeat)]
        answer = [first, min(r[0] for r in runs), min(r[1] for r in runs), code, "torch" in sys.modules]
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


class Side:
    """One checkout's worker process."""

    def __init__(self, tree: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=env, cwd=tree,
        )  # fmt: skip

    def time(self, args: list[str], repeat: int) -> list[float | int | bool]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps([args, repeat]) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit("a benchmark worker died; run it alone to see why")
        answer: list[float | int | bool] = json.loads(line)
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def fresh_process(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kvstrategies", *args], cwd=ROOT, capture_output=True, check=False)
    return time.perf_counter() - start


def run() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", default="H200")
    parser.add_argument("--tp", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--against", type=Path, default=None, metavar="DIR", help="a second checkout to compare")
    parser.add_argument("--process", action="store_true", help="also time one fresh process per preset")
    parser.add_argument("--only", default=None, help="comma list of presets (default: every preset)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        return worker()
    sys.path.insert(0, str(ROOT))
    from kvstrategies.presets import preset_names

    presets = preset_names() if options.only is None else [p.strip() for p in options.only.split(",") if p.strip()]
    ours = Side(ROOT)
    other = None if options.against is None else Side(options.against.resolve())
    head = f"{'preset':<24}{'exit':>5}{'first ms':>10}{'cpu ms':>9}{'wall ms':>9}"
    if other is not None:
        head += f"{'against cpu':>13}{'x':>7}"
    print(head + (f"{'process ms':>12}" if options.process else ""))
    worst, torch_seen, ratios = 0.0, False, []
    for preset in presets:
        args = plan_args(preset, options.gpu, options.tp)
        first, cpu, wall, code, torch = ours.time(args, options.repeat)
        torch_seen = torch_seen or bool(torch)
        worst = max(worst, float(cpu))
        line = f"{preset:<24}{code:>5}{float(first) * 1000:>10.1f}{float(cpu) * 1000:>9.2f}{float(wall) * 1000:>9.2f}"
        if other is not None:
            _, their_cpu, _, their_code, _ = other.time(args, options.repeat)
            ratios.append(float(their_cpu) / max(float(cpu), 1e-6))
            line += f"{float(their_cpu) * 1000:>13.2f}{ratios[-1]:>7.1f}"
            if their_code != code:
                line += f"  (exit {their_code} there)"
        if options.process:
            line += f"{fresh_process(args) * 1000:>12.0f}"
        print(line)
    ours.close()
    if other is not None:
        other.close()
    print(f"{'worst cpu':<24}{'':>5}{'':>10}{worst * 1000:>9.2f}")
    if ratios:
        ratios.sort()
        print(f"against / this, cpu: median {ratios[len(ratios) // 2]:.1f}x, least {ratios[0]:.1f}x")
    if torch_seen:
        print("FAIL: planning imported torch", file=sys.stderr)
        return 1
    print("torch imported: no")
    return 0


if __name__ == "__main__":
    sys.exit(run())
