"""Build the kvstrategies web page into OUT_DIR: ``python tools/build_web.py OUT_DIR``.

The folder is static (host it anywhere, or serve it locally: ``python -m http.server -d OUT_DIR``;
a ``file://`` page cannot fetch the wheel) and holds:

* ``index.html``, ``app.js``, ``style.css``: the hand-written page (``web/``);
* ``kvstrategies-<version>-py3-none-any.whl``: this project's wheel (pure Python, no torch:
  planning needs none), unpacked by Pyodide in the browser; ``wheel.json`` names it;
* ``pyodide/``: Pyodide's runtime files from its npm package, at the version ``web/package.json``
  and ``web/package-lock.json`` pin, installed with ``npm ci`` into a build cache
  (``--cache``, default ``.web-cache/``), or taken from an installed ``node_modules``
  (``--node-modules web/node_modules`` after ``npm ci`` in ``web/``); nothing is downloaded from
  anywhere but the npm registry.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT / "web"
#: the page's own files, copied as they are
PAGE_FILES = ("index.html", "app.js", "style.css")
#: Pyodide's runtime: what loadPyodide fetches (the packages of pyodide-lock.json are not needed)
PYODIDE_FILES = ("pyodide.mjs", "pyodide.js", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
                 "pyodide-lock.json", "package.json")  # fmt: skip


def npm_install(cache: Path) -> Path:
    """``npm ci`` of web/'s lock file in ``cache`` (skipped when the lock is unchanged); the
    installed ``node_modules`` folder."""
    cache.mkdir(parents=True, exist_ok=True)
    lock = (WEB / "package-lock.json").read_text(encoding="utf-8")
    stamp = cache / "installed-lock.json"
    modules = cache / "node_modules"
    if not (stamp.is_file() and stamp.read_text(encoding="utf-8") == lock and (modules / "pyodide").is_dir()):
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(WEB / name, cache / name)
        subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=cache, check=True)
        stamp.write_text(lock, encoding="utf-8")
    return modules


#: what the wheel is built from (pyproject.toml's package-data names the data files inside)
WHEEL_SOURCES = ("pyproject.toml", "README.md", "kvstrategies")


def build_wheel(out: Path) -> Path:
    """The project's wheel (no dependencies bundled), built from a copy of the working tree's
    sources in a scratch folder, so setuptools' ``build/`` and ``*.egg-info`` never land in the
    tree and two builds at once (parallel test workers) do not share them."""
    with tempfile.TemporaryDirectory() as tmp:
        source, wheels = Path(tmp) / "source", Path(tmp) / "wheels"
        source.mkdir()
        for name in WHEEL_SOURCES:
            path = ROOT / name
            if path.is_dir():
                shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copyfile(path, source / name)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "--wheel-dir", str(wheels), str(source)], check=True)  # fmt: skip
        (wheel,) = wheels.glob("kvstrategies-*.whl")
        target = out / wheel.name
        shutil.copyfile(wheel, target)
    return target


def build(out: Path, cache: Path, node_modules: Path | None = None) -> None:
    """Write the page into ``out`` (replaced); Pyodide from ``node_modules`` when given, else
    from :func:`npm_install` into ``cache``."""
    modules = npm_install(cache) if node_modules is None else node_modules.resolve()
    if not (modules / "pyodide" / "pyodide.mjs").is_file():
        raise SystemExit(f"build_web: {modules} has no pyodide package; run `npm ci` in web/, or leave out "
                         "--node-modules")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / "pyodide").mkdir()
    for name in PYODIDE_FILES:
        shutil.copyfile(modules / "pyodide" / name, out / "pyodide" / name)
    for name in PAGE_FILES:
        shutil.copyfile(WEB / name, out / name)
    wheel = build_wheel(out)
    version = json.loads((modules / "pyodide" / "package.json").read_text(encoding="utf-8"))["version"]
    (out / "wheel.json").write_text(json.dumps({"wheel": wheel.name, "pyodide": version}) + "\n", encoding="utf-8")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"build_web: wrote {out} ({size / 2**20:.1f} MiB; {wheel.name}, Pyodide {version})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder to write (replaced)")
    parser.add_argument("--cache", type=Path, default=ROOT / ".web-cache", help="npm build cache (default .web-cache/)")
    parser.add_argument("--node-modules", type=Path, default=None,
                        help="use this installed node_modules (e.g. web/node_modules after `npm ci` in web/) "
                        "instead of installing into the cache")  # fmt: skip
    args = parser.parse_args(argv)
    build(args.out.resolve(), args.cache.resolve(), args.node_modules)
    return 0


if __name__ == "__main__":
    sys.exit(main())
