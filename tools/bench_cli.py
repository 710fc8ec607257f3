#!/usr/bin/env python3
"""Whole-process cost of ``kvstrategies`` commands, paired against ``python -c pass``.

    python tools/bench_cli.py [--runs 15] [--cold] [--only plan-case,plan-model] [--against DIR]

Each round runs ``python -c pass`` and then every command once, as fresh processes, in the same
order; the user CPU of each process is the ``os.wait4`` rusage of that child. A command's figure
is the median over rounds of ``its user CPU / the baseline's user CPU in the same round``: the
machine is shared and its load drifts, a ratio taken within one round cancels most of that.
Wall time is reported the same way (a ratio), and the baseline's own medians for reference.

Both modes run a copy of the package put first on ``PYTHONPATH`` (the baseline runs with the
same environment). By default the copy is byte-compiled first (``compileall``: what an installed
package, or a clone that has run once, pays). ``--cold`` leaves it without any ``__pycache__``
and sets ``PYTHONDONTWRITEBYTECODE=1``, so every start compiles the package again (what a fresh
clone pays, or any checkout where bytecode writing is off).

The commands run through the installed ``kvstrategies`` console script (as a user types them);
a command that exits non-zero stops the tool (a benchmark of an error path measures nothing).
``--against DIR`` runs every command from a second checkout (a folder holding ``kvstrategies/``)
too, in the same rounds against the same baseline: before and after in one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "cases" / "default-llama-3.1-8b-tp1-bf16-p1.json"

#: name -> arguments of the console script
COMMANDS: dict[str, list[str]] = {
    "plan-case": ["plan", "--case", str(CASE), "--json"],
    "plan-model": ["plan", "llama-3.1-8b", "--gpu", "H200", "--tp", "8", "--json"],
    "plan-model-text": ["plan", "qwen3-235b-a22b", "--gpu", "H200", "--tp", "8"],
    "sweep": ["sweep", "llama-3.1-8b", "--gpu", "H100,H200", "--tp", "1,2,4,8"],
    "presets": ["presets"],
    "gpus": ["gpus"],
}


def _script() -> str:
    found = shutil.which("kvstrategies", path=str(Path(sys.executable).parent))
    if found is None:
        raise SystemExit("no kvstrategies console script beside this Python; pip install -e . first")
    return found


def child_usage(argv: Sequence[str], env: dict[str, str], cwd: Path = ROOT) -> tuple[float, float]:
    """``(user CPU seconds, wall seconds)`` of one child process (its waited-for children included)."""
    with tempfile.TemporaryFile() as errors:  # a file, not a pipe: a chatty child cannot fill it and stall
        start = time.perf_counter()
        child = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=errors, env=env, cwd=cwd)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            errors.seek(0)
            tail = errors.read().decode(errors="replace").strip()[-600:]
            raise SystemExit(f"{' '.join(argv)[:200]} exited {child.returncode}: {tail}")
    return usage.ru_utime, wall


def package_env(base: dict[str, str], scratch: Path, *, cold: bool, tree: Path = ROOT) -> dict[str, str]:
    """``tree``'s package copied first on the path: byte-compiled, or (``cold``) without bytecode
    and with bytecode writing off."""
    shutil.copytree(tree / "kvstrategies", scratch / "kvstrategies", ignore=shutil.ignore_patterns("__pycache__"))
    if not cold:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(scratch / "kvstrategies")], check=True)
    return {**base, "PYTHONPATH": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}


def run() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="rounds (each: the baseline and every command once)")
    parser.add_argument("--cold", action="store_true", help="no bytecode for the package (see above)")
    parser.add_argument("--only", default=None, help=f"comma list of: {', '.join(COMMANDS)}")
    parser.add_argument("--against", type=Path, default=None, metavar="DIR",
                        help="also run every command from a second checkout, in the same rounds")  # fmt: skip
    options = parser.parse_args()
    names = list(COMMANDS) if options.only is None else [n.strip() for n in options.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in COMMANDS]
    if unknown:
        parser.error(f"unknown command names {unknown}; known: {', '.join(COMMANDS)}")
    script = _script()
    trees = {"this": ROOT} if options.against is None else {"this": ROOT, "against": options.against.resolve()}
    with tempfile.TemporaryDirectory(prefix="kvs-bench-cli-") as tmp:
        envs = {side: package_env(dict(os.environ), Path(tmp) / side, cold=options.cold, tree=tree)
                for side, tree in trees.items()}  # fmt: skip
        baseline = [sys.executable, "-c", "pass"]
        child_usage(baseline, envs["this"])  # warm the interpreter's own files once
        for name in names:
            for env in envs.values():
                child_usage([script, *COMMANDS[name]], env)
        base_user: list[float] = []
        base_wall: list[float] = []
        ratios: dict[tuple[str, str], list[float]] = {(n, side): [] for n in names for side in envs}
        wall_ratios: dict[tuple[str, str], list[float]] = {(n, side): [] for n in names for side in envs}
        for _ in range(options.runs):
            user, wall = child_usage(baseline, envs["this"])
            base_user.append(user)
            base_wall.append(wall)
            for name in names:
                for side, env in envs.items():
                    cmd_user, cmd_wall = child_usage([script, *COMMANDS[name]], env)
                    ratios[name, side].append(cmd_user / max(user, 1e-4))
                    wall_ratios[name, side].append(cmd_wall / max(wall, 1e-4))
    mode = "cold (no bytecode for the package)" if options.cold else "warm (package byte-compiled)"
    print(f"{options.runs} rounds, {mode}; python -c pass: median user {statistics.median(base_user) * 1000:.1f} ms, "
          f"wall {statistics.median(base_wall) * 1000:.1f} ms")  # fmt: skip
    if options.against is not None:
        print(f"against: {trees['against']}")
    print(f"{'command':<18}{'side':<9}{'user CPU x pass':>16}{'wall x pass':>13}   arguments")
    for name in names:
        for side in envs:
            user_x, wall_x = statistics.median(ratios[name, side]), statistics.median(wall_ratios[name, side])
            print(f"{name:<18}{side:<9}{user_x:>16.2f}{wall_x:>13.2f}   kvstrategies {' '.join(COMMANDS[name])}")
    return 0


if __name__ == "__main__":
    sys.exit(run())
