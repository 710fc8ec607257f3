#!/usr/bin/env python3
"""Make a CPU virtual environment for one vLLM release and print its python.

    python tools/vllm_env.py 0.33.0 .venv-vllm                 # -> .venv-vllm/bin/python
    .venv-vllm/bin/kvstrategies verify --against vllm          # the catalog through vLLM's own sizing

The venv gets, in order: CPU torch (``torch==2.13.0``, pinned for every later install through
``.ci/torch-constraints.txt``), this checkout of kvstrategies (editable), the light packages vLLM's
import chain needs at the versions pinned in ``kvstrategies/vllm/bridge/requirements.py``,
then FlashInfer's Python package and vLLM itself with ``--no-deps`` (vLLM's own requirements pull a
CUDA torch). torchvision is never installed. An existing venv at DIR is reused (pip only adds what is
missing). Prints the venv's python on the last line of stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from env_args import ArgumentError, venv_dir  # noqa: E402

from kvstrategies.vllm.bridge.requirements import ENVIRONMENTS  # noqa: E402

TORCH = "torch==2.13.0"
CONSTRAINTS = ROOT / ".ci" / "torch-constraints.txt"


def _pip(python: Path, *args: str) -> None:
    env = {**os.environ, "PIP_CONSTRAINT": str(CONSTRAINTS), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    print("+ pip install " + " ".join(args), file=sys.stderr, flush=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *args], check=True, env=env)


def make_env(version: str, target: Path) -> Path:
    """Create (or complete) the venv at ``target`` for vLLM ``version``; return its python."""
    environment = ENVIRONMENTS[version]
    python = target / "bin" / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=True).create(target)
    _pip(python, TORCH)
    _pip(python, "--no-deps", "-e", str(ROOT))
    _pip(python, *environment.light_packages)
    _pip(python, "--no-deps", *environment.no_deps)
    return python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("version", help=f"a vLLM release: {', '.join(ENVIRONMENTS)}")
    parser.add_argument("dir", help="where the venv goes: a new folder, or an existing venv to complete")
    args = parser.parse_args(argv)
    try:
        if args.version not in ENVIRONMENTS:
            raise ArgumentError(f"VERSION {args.version!r} is not a vLLM release the bridge drives; "
                                f"supported: {', '.join(ENVIRONMENTS)}")  # fmt: skip
        target = venv_dir(args.dir)
    except ArgumentError as exc:
        print(f"vllm_env: {exc}", file=sys.stderr)
        return 2
    try:
        python = make_env(args.version, target)
    except subprocess.CalledProcessError as exc:
        print(f"vllm_env: pip failed ({exc.returncode}): {' '.join(exc.cmd)}", file=sys.stderr)
        return 1
    print(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
