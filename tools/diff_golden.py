#!/usr/bin/env python3
"""Refactor verification: run the golden catalog at two git revisions and list what changed.

    python tools/diff_golden.py REV_A REV_B [-k SUBSTRING] [--cases DIR] [-v]
    python tools/diff_golden.py HEAD WORKTREE      # uncommitted changes against the last commit
    python tools/diff_golden.py --dirs DIR_A DIR_B  # two recorded folders (e.g. SGLang before/after)

Each revision is checked out into a temporary ``git worktree`` (``WORKTREE`` means this
working tree as it is, uncommitted edits included) and its catalog is planned by this venv's
python with ``PYTHONPATH`` pointing at that checkout, so each side runs its own library code.
Both sides are serialised by *this* tree's :mod:`kvstrategies.golden.snapshot` (like is compared with
like even when the serialiser changed between the revisions). By default each side plans its
own ``cases/`` (a revision from before the catalog moved: the ``cases`` folder under ``tests``);
``--cases DIR`` plans one catalog on both sides. The table lists every case
whose plan or layout differs, was added or removed, or fails to plan; ``-v`` adds the full
per-case diff. Exit 0 when behaviour is unchanged, 1 when anything differs, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORKTREE = "WORKTREE"


# ---- child: plan one checkout's catalog --------------------------------------------------------


def emit(cases_dir: Path, out: Path, substrings: list[str]) -> int:
    """Child mode: plan every case with the ``kvstrategies`` on PYTHONPATH; write {name: text|error}."""
    import importlib
    import importlib.util

    import kvstrategies  # the checkout's package (PYTHONPATH)

    golden: Any
    if not (Path(kvstrategies.__file__).parent / "golden" / "snapshot.py").is_file():
        # a checkout from before the package was sorted by engine: its own serialiser (``kvstrategies.golden``),
        # which writes the same documents over the library it was written for
        golden = importlib.import_module("kvstrategies.golden")
        if not hasattr(golden, "golden_text"):  # the package's first sorted layout named it golden.document
            golden = importlib.import_module("kvstrategies.golden.document")
    else:
        serialiser = ROOT / "kvstrategies" / "golden" / "snapshot.py"
        spec = importlib.util.spec_from_file_location("kvstrategies.golden.snapshot", serialiser)
        assert spec is not None and spec.loader is not None
        golden = importlib.util.module_from_spec(spec)
        sys.modules["kvstrategies.golden.snapshot"] = golden  # this tree's serialiser over the checkout's library
        spec.loader.exec_module(golden)
    results: dict[str, Any] = {"_package": str(Path(kvstrategies.__file__).parent)}
    for path in sorted(cases_dir.glob("*.json")) if cases_dir.is_dir() else []:
        if substrings and not any(s in path.stem for s in substrings):
            continue
        try:
            results[path.stem] = {"text": golden.golden_text(golden.load_catalog_case(path))}
        except Exception as exc:  # every failure is a result to compare, not a crash
            results[path.stem] = {"error": f"{type(exc).__name__}: {exc}"}
    out.write_text(json.dumps(results), encoding="utf-8")
    return 0


# ---- parent: check out, run, compare -----------------------------------------------------------


def _git(*args: str) -> str:
    run = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise SystemExit(f"diff_golden: git {' '.join(args)} failed: {run.stderr.strip()}")
    return run.stdout.strip()


def _checkout(rev: str, scratch: Path, label: str) -> tuple[Path, str]:
    """(source root, description) for a revision; a temporary worktree unless ``WORKTREE``."""
    if rev == WORKTREE:
        return ROOT, "working tree"
    sha = _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    path = scratch / label
    _git("worktree", "add", "--detach", "--quiet", str(path), sha)
    return path, f"{rev} ({sha[:10]})"


def _catalog(source: Path) -> Path:
    """The catalog folder of a checkout: ``cases/``, or the ``cases`` folder under ``tests`` at revisions
    from before the catalog moved to the top level."""
    moved = source / "cases"
    return moved if moved.is_dir() else source / "tests" / "cases"


def _run_side(source: Path, cases: Path, out: Path, substrings: list[str]) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(source), *filter(None, [env.get("PYTHONPATH")])])
    command = [sys.executable, str(Path(__file__).resolve()), "--emit", str(cases), str(out)]
    for sub in substrings:
        command += ["-k", sub]
    return subprocess.Popen(
        command, env=env, cwd=str(source), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _summary(status: str, lines: list[str], width: int) -> str:
    if not lines:
        return "same content, different bytes" if status == "changed" else ""
    text = lines[0]
    if len(lines) > 1:
        text += f"; +{len(lines) - 1} more"
    return text if len(text) <= width else text[: width - 3] + "..."


def _answer(document: Any) -> Any:
    """A snapshot without what names its recording (two releases' recordings of one answer differ there)."""
    from kvstrategies.golden.diff import RECORDING_KEYS

    return {k: v for k, v in document.items() if k not in RECORDING_KEYS} if isinstance(document, dict) else document


def compare(a: dict[str, Any], b: dict[str, Any], verbose: bool) -> int:
    sys.path.insert(0, str(ROOT))
    from kvstrategies.golden.diff import diff_documents

    names = sorted((set(a) | set(b)) - {"_package"})
    rows: list[tuple[str, str, list[str]]] = []
    for name in names:
        left, right = a.get(name), b.get(name)
        if left is None:
            rows.append((name, "only in B", [right.get("error", "")] if right and "error" in right else []))
        elif right is None:
            rows.append((name, "only in A", [left.get("error", "")] if "error" in left else []))
        elif "error" in left or "error" in right:
            if left.get("error") == right.get("error"):
                rows.append((name, "error in both", [left["error"]]))
            else:
                rows.append((name, "error", [f"A: {left.get('error', 'ok')}", f"B: {right.get('error', 'ok')}"]))
        elif left["text"] != right["text"]:
            old, new = json.loads(left["text"]), json.loads(right["text"])
            lines = diff_documents(old, new)
            if lines or _answer(old) != _answer(new):  # not just a different recording (``engine``)
                rows.append((name, "changed", lines))
    unchanged = len(names) - len(rows)
    if rows:
        width = max(len(r[0]) for r in rows)
        print(f"{'case':<{width}}  {'status':<13}  what differs")
        for name, status, lines in rows:
            print(f"{name:<{width}}  {status:<13}  {_summary(status, lines, 100)}")
            if verbose:
                for line in lines:
                    print(f"{'':<{width}}    {line}")
    counts: dict[str, int] = {}
    for _, status, _ in rows:
        counts[status] = counts.get(status, 0) + 1
    detail = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(f"{len(names)} cases: {unchanged} unchanged" + (f", {detail}" if detail else ""))
    return 1 if rows else 0


def compare_dirs(argv: list[str]) -> int:
    """``--dirs A B``: diff two folders of recorded snapshots (e.g. two SGLang recordings)."""
    parser = argparse.ArgumentParser(prog="diff_golden.py --dirs",
                                     description="Compare two folders of golden snapshots, case by case.")
    parser.add_argument("dir_a", type=Path)
    parser.add_argument("dir_b", type=Path)
    parser.add_argument("-k", dest="substrings", action="append", default=[], metavar="SUBSTRING")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every difference of every case")
    args = parser.parse_args(argv)
    from kvstrategies.errors import KVCacheConfigError
    from kvstrategies.golden.snapshot import read_snapshot

    sides = []
    for folder in (args.dir_a, args.dir_b):
        if not folder.is_dir():
            print(f"diff_golden: no folder {folder}", file=sys.stderr)
            return 2
        data: dict[str, Any] = {"_package": str(folder)}
        for path in sorted(folder.glob("*.json")):
            if path.name.startswith("_") or (args.substrings and not any(s in path.stem for s in args.substrings)):
                continue
            try:  # a folder, FIFO, link loop, non-UTF-8 or deeply nested file is refused, never hangs
                text, snapshot = read_snapshot(path)
            except KVCacheConfigError as exc:
                print(f"diff_golden: not a snapshot: {exc}", file=sys.stderr)
                return 2
            data[path.stem] = {"error": snapshot["error"]} if "error" in snapshot else {"text": text}
        print(f"{'AB'[len(sides)]}: {folder}: {len(data) - 1} snapshots")
        sides.append(data)
    return compare(sides[0], sides[1], args.verbose)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--dirs"]:
        return compare_dirs(argv[1:])
    if argv[:1] == ["--emit"]:
        child = argparse.ArgumentParser()
        child.add_argument("--emit", nargs=2, type=Path)
        child.add_argument("-k", dest="substrings", action="append", default=[])
        args = child.parse_args(argv)
        return emit(args.emit[0], args.emit[1], args.substrings)
    parser = argparse.ArgumentParser(
        description="Compare the golden catalog's plans at two git revisions.",
        epilog="diff_golden.py --dirs DIR_A DIR_B [-k S] [-v]: compare two folders of recorded snapshots "
        "(e.g. golden/sglang-0.5.15 golden/sglang-0.5.16).",
    )
    parser.add_argument("rev_a", help="base revision (any git rev, or WORKTREE)")
    parser.add_argument("rev_b", help="revision to compare (any git rev, or WORKTREE for uncommitted changes)")
    parser.add_argument("-k", dest="substrings", action="append", default=[], metavar="SUBSTRING",
                        help="only cases whose name contains SUBSTRING (repeatable)")
    parser.add_argument("--cases", type=Path, default=None, help="plan this catalog folder on both sides")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every difference of every case")
    parser.add_argument("--keep", action="store_true", help="keep the temporary worktrees (prints where)")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="kvs-diff-golden-"))
    worktrees: list[Path] = []
    try:
        sides = []
        for label, rev in (("A", args.rev_a), ("B", args.rev_b)):
            source, description = _checkout(rev, scratch, label)
            if source != ROOT:
                worktrees.append(source)
            cases = args.cases.resolve() if args.cases else _catalog(source)
            sides.append((label, source, description, cases, scratch / f"{label}.json"))
        procs = [_run_side(src, cases, out, args.substrings) for _, src, _, cases, out in sides]
        results = []
        for (label, _, description, cases, out), proc in zip(sides, procs, strict=True):
            _, stderr = proc.communicate()
            if proc.returncode != 0 or not out.exists():
                print(f"diff_golden: side {label} ({description}) failed:\n{stderr}", file=sys.stderr)
                return 2
            data = json.loads(out.read_text(encoding="utf-8"))
            print(f"{label}: {description}: {len(data) - 1} cases from {cases}")
            results.append(data)
        return compare(results[0], results[1], args.verbose)
    finally:
        if args.keep:
            print(f"worktrees kept under {scratch}")
        else:
            for path in worktrees:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)],
                               capture_output=True, check=False)
            subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], capture_output=True, check=False)
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
