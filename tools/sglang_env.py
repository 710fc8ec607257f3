#!/usr/bin/env python3
"""Make a CPU virtual environment for one SGLang release and print its python.

    python tools/sglang_env.py 0.5.18 /tmp/sglang-0.5.18      # -> /tmp/sglang-0.5.18/bin/python
    /tmp/sglang-0.5.18/bin/kvstrategies verify --against sglang  # the catalog under 0.5.18
    python tools/sglang_env.py 0.5.18 /tmp/sglang-0.5.18 --check  # and re-record: golden/sglang-0.5.18 current?

The venv gets, in order: CPU torch (``torch==2.13.0``, pinned for every later install through
``.ci/torch-constraints.txt``), this checkout of kvstrategies (editable), the light packages the
release's sizing import chain needs at the versions pinned in
``kvstrategies/sglang/bridge/bridge_releases.py`` (the transformers release that SGLang
release pins among them), then SGLang itself with ``--no-deps`` (its own requirements pull a CUDA
torch). torchvision is never installed. An existing venv at DIR is reused (pip only adds what is
missing). Prints the venv's python on the last line of stdout; progress goes to stderr.

``--check`` then runs ``tools/record_golden.py --engine sglang --check`` in the venv: the live
release answers every catalog case as its committed ``golden/sglang-<version>/`` says (plain
``python -m pytest`` compares the project with those folders), exit 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from env_args import ArgumentError, venv_dir  # noqa: E402

from kvstrategies.errors import KVCacheConfigError  # noqa: E402
from kvstrategies.sglang.bridge.bridge_releases import (  # noqa: E402
    BRIDGE_RELEASES,
    BridgeRelease,
    bridge_release,
    install_requirements,
)

TORCH = "torch==2.13.0"
CONSTRAINTS = ROOT / ".ci" / "torch-constraints.txt"


def _pip(python: Path, *args: str) -> None:
    env = {**os.environ, "PIP_CONSTRAINT": str(CONSTRAINTS), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    command = [str(python), "-m", "pip", "install", "--quiet", *args]
    print("+ pip install " + " ".join(args), file=sys.stderr, flush=True)
    subprocess.run(command, check=True, env=env)


def check_version(version: str) -> BridgeRelease:
    """VERSION's bridge row (``0.5.15.post1`` -> 0.5.15); an unsupported release is an :class:`ArgumentError`."""
    try:
        return bridge_release(version)
    except KVCacheConfigError as exc:
        supported = ", ".join(row.line for row in BRIDGE_RELEASES)
        raise ArgumentError(f"VERSION {version!r} is not an SGLang release the bridge supports; "
                            f"supported: {supported}") from exc  # fmt: skip


def make_env(version: str, target: Path) -> Path:
    """Create (or complete) the venv at ``target`` for SGLang ``version``; return its python."""
    row = bridge_release(version)
    python = target / "bin" / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=True).create(target)
    with_deps, no_deps = install_requirements(row, version)
    _pip(python, TORCH)
    _pip(python, "-e", str(ROOT))
    _pip(python, *with_deps)
    _pip(python, "--no-deps", *no_deps)
    return python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("version", help="an SGLang release, e.g. 0.5.18 or 0.5.15.post1")
    parser.add_argument("dir", help="where the venv goes: a new folder, or an existing venv to complete")
    parser.add_argument("--check", action="store_true",
                        help="then re-record the catalog live and compare with golden/sglang-<version>/")
    args = parser.parse_args(argv)
    try:
        check_version(args.version)
        target = venv_dir(args.dir)
    except ArgumentError as exc:
        print(f"sglang_env: {exc}", file=sys.stderr)
        return 2
    try:
        python = make_env(args.version, target)
    except KVCacheConfigError as exc:
        print(f"sglang_env: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"sglang_env: pip failed ({exc.returncode}): {' '.join(exc.cmd)}", file=sys.stderr)
        return 1
    print(python)
    if not args.check:
        return 0
    started = time.monotonic()
    record = [str(python), str(ROOT / "tools" / "record_golden.py"), "--engine", "sglang", "--check", "-q"]
    done = subprocess.run(record, check=False)
    verdict = "current" if done.returncode == 0 else "STALE or failed"
    took = time.monotonic() - started
    print(f"sglang_env: SGLang {args.version}: recordings {verdict} ({took:.0f} s)", file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
