#!/usr/bin/env python3
"""SGLang's own sizing of one case against ``kvstrategies plan --case``, each a whole fresh process.

    python tools/bench_sglang.py [--runs 3] [--case cases/default-llama-3.1-8b-tp1-bf16-p1.json]
                                 [--sglang-python /tmp/venvs/0.5.23/bin/python]

SGLang's side is the bridge (:mod:`kvstrategies.sglang.bridge.engine`, ``run_one``) in an
interpreter where SGLang is installed: it imports SGLang and runs SGLang's own
``ServerArgs`` / ``ModelConfig`` / KV-cache configurator and pool constructors for the case (on
CPU, pools on ``meta``), which is what the engine pays to size it. The project's side is the
``kvstrategies plan --case CASE --json`` console script of this checkout, run from a copy of the
package as ``tools/bench_cli.py`` runs it: byte-compiled, or with ``--cold`` without bytecode.
Each round runs both once, interleaved; the figure is the median over rounds of ``SGLang's user
CPU / the project's`` (``os.wait4`` rusage of each child), with ``python -c pass`` of this
interpreter as a reference in the same rounds. Both sides must succeed (a failing case measures
nothing).

SGLang's interpreter runs in a scratch folder, so that it imports the ``kvstrategies`` installed
there, not this checkout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench_cli import child_usage, package_env

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "cases" / "default-llama-3.1-8b-tp1-bf16-p1.json"
SGLANG_PYTHON = Path("/tmp/venvs/0.5.23/bin/python")
SGLANG_SIDE = (
    "import sys, warnings\n"
    "from pathlib import Path\n"
    "warnings.simplefilter('ignore')\n"
    "from kvstrategies.sglang.bridge.engine import run_one\n"
    "result = run_one(Path(sys.argv[1]))\n"
    "sys.exit(0 if 'document' in result else 'SGLang: ' + str(result.get('error')))\n"
)


def run() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="rounds (each: SGLang, the project, python -c pass)")
    parser.add_argument("--case", type=Path, default=CASE, help="the case file both sides size")
    parser.add_argument("--sglang-python", type=Path, default=SGLANG_PYTHON, help="an interpreter with SGLang")
    parser.add_argument("--cold", action="store_true", help="the project's side without bytecode (bench_cli)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose plan --case is timed")
    options = parser.parse_args()
    case = options.case.resolve()
    script = shutil.which("kvstrategies", path=str(Path(sys.executable).parent))
    if script is None:
        raise SystemExit("no kvstrategies console script beside this Python; pip install -e . first")
    if not options.sglang_python.exists():
        raise SystemExit(f"{options.sglang_python} does not exist: give --sglang-python (a venv with SGLang)")
    ours_argv = [script, "plan", "--case", str(case), "--json"]
    sglang_argv = [str(options.sglang_python), "-c", SGLANG_SIDE, str(case)]
    baseline_argv = [sys.executable, "-c", "pass"]
    rows: dict[str, list[tuple[float, float]]] = {"sglang": [], "ours": [], "pass": []}
    with tempfile.TemporaryDirectory(prefix="kvs-bench-sglang-") as scratch, \
            tempfile.TemporaryDirectory(prefix="kvs-bench-sglang-pkg-") as package:
        ours_env = package_env(dict(os.environ), Path(package), cold=options.cold, tree=options.tree.resolve())
        sglang_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        child_usage(ours_argv, ours_env)  # warm the files both sides read
        for _ in range(options.runs):
            rows["sglang"].append(child_usage(sglang_argv, sglang_env, cwd=Path(scratch)))
            rows["ours"].append(child_usage(ours_argv, ours_env))
            rows["pass"].append(child_usage(baseline_argv, ours_env))
    ratio = statistics.median(s[0] / max(o[0], 1e-4) for s, o in zip(rows["sglang"], rows["ours"], strict=True))
    ours_x = statistics.median(o[0] / max(b[0], 1e-4) for o, b in zip(rows["ours"], rows["pass"], strict=True))
    mode = "cold (no bytecode for the package)" if options.cold else "warm (package byte-compiled)"
    print(f"case {case.name}, {options.runs} rounds, project side {mode} from {options.tree.resolve()}")
    for name, label in (("sglang", f"SGLang's sizing ({options.sglang_python})"),
                        ("ours", "kvstrategies plan --case --json"), ("pass", "python -c pass")):  # fmt: skip
        user = statistics.median(r[0] for r in rows[name]) * 1000
        wall = statistics.median(r[1] for r in rows[name]) * 1000
        print(f"  {label:<58} user {user:>9.1f} ms  wall {wall:>9.1f} ms")
    print(f"SGLang / project user CPU (median of per-round ratios): {ratio:.1f}x")
    print(f"project / python -c pass user CPU (same rounds): {ours_x:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(run())
