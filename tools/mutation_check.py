#!/usr/bin/env python3
"""Mutation check: do the golden and hand-computed tests notice a wrong formula?

Applies one AST mutation at a time to ``kvstrategies/strategies/*.py`` and
``kvstrategies/pools/*.py`` in a scratch copy of the repository (the working tree is never
touched, so other people's test runs are safe), runs a fast test subset there (``-x -q`` with a
timeout), and reports each mutant as killed (a test failed, or the mutant broke the import or
timed out) or survived, with the kill rate.

Mutations (outside error messages, f-strings, asserts, annotations and docstrings):
``+`` <-> ``-`` (also ``+=``/``-=``), ``*`` <-> ``//``, an integer constant ``c`` -> ``c + 1``,
a sum ``a + b`` -> ``a`` and -> ``b`` (drop a term), ``align_down / ceil_div / ceil_align``
off by one (``f(x, p) + 1`` and ``f(x + 1, p)``), comparison boundaries ``<`` <-> ``<=`` and
``>`` <-> ``>=``.

    python tools/mutation_check.py                                  # every mutant
    python tools/mutation_check.py --sample 40 --seed 1             # 40 random mutants
    python tools/mutation_check.py --files kvstrategies/strategies/default.py --list
    python tools/mutation_check.py --tests tests/test_default.py -j 8 --timeout 60

Tests that already fail before any mutation (work in progress) are deselected and named.
Exit 0 when the kill rate reaches ``--min-kill-rate`` (default 0: report only), else 1.
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FILES = ("kvstrategies/strategies/*.py", "kvstrategies/pools/*.py")
# the golden snapshots plus the hand-computed strategy tests (whichever exist)
DEFAULT_TESTS = (
    "tests/test_golden.py::test_golden_snapshot",
    "tests/test_golden.py::test_meta_build",
    "tests/test_default*.py",
    "tests/test_foundation.py",
    "tests/test_hybrid*.py",
    "tests/test_swa*.py",
    "tests/test_dsv4*.py",
    "tests/test_ascend*.py",
    "tests/test_npu*.py",
    "tests/test_mamba*.py",
    "tests/test_layout*.py",
    "tests/test_examples*.py",
)
ROUNDING = {"align_down", "ceil_div", "ceil_align"}
IGNORE = shutil.ignore_patterns(
    ".git", ".venv", ".ci-venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache",
    ".hypothesis", ".benchmarks", "*.egg-info", ".tox",
)


# ---- mutants ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutant:
    file: str  # repository-relative path
    index: int  # site number within the file (the walk order of MutationWalker)
    line: int
    kind: str
    before: str
    after: str

    def label(self) -> str:
        return f"{self.file}:{self.line} {self.kind}: {self.before}  ->  {self.after}"


def _shielded(tree: ast.AST) -> set[int]:
    """ids of nodes never mutated: messages, f-strings, asserts, annotations, docstrings."""
    skip: set[int] = set()

    def cover(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Raise, ast.Assert, ast.JoinedStr)):
            cover(node)
        elif isinstance(node, ast.arg):
            cover(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            cover(node.returns)
        elif isinstance(node, ast.AnnAssign):
            cover(node.annotation)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                cover(first)
    return skip


def _call_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


Make = Callable[[], ast.AST]
_SWAP_BIN: dict[type[ast.operator], tuple[type[ast.operator], str]] = {
    ast.Add: (ast.Sub, "+ -> -"),
    ast.Sub: (ast.Add, "- -> +"),
    ast.Mult: (ast.FloorDiv, "* -> //"),
    ast.FloorDiv: (ast.Mult, "// -> *"),
}
_SWAP_CMP: dict[type[ast.cmpop], tuple[type[ast.cmpop], str]] = {
    ast.Lt: (ast.LtE, "< -> <="),
    ast.LtE: (ast.Lt, "<= -> <"),
    ast.Gt: (ast.GtE, "> -> >="),
    ast.GtE: (ast.Gt, ">= -> >"),
}


def _candidates(node: ast.AST) -> Iterator[tuple[str, Make]]:
    """Every mutation of one node, in a fixed order."""
    if isinstance(node, ast.BinOp) and type(node.op) in _SWAP_BIN:
        new_op, kind = _SWAP_BIN[type(node.op)]
        yield kind, lambda: ast.BinOp(node.left, new_op(), node.right)
        if isinstance(node.op, ast.Add):
            yield "drop right term", lambda: node.left
            yield "drop left term", lambda: node.right
    elif isinstance(node, ast.AugAssign) and type(node.op) in _SWAP_BIN:
        new_op, kind = _SWAP_BIN[type(node.op)]
        yield kind.replace(" -> ", "= -> ") + "=", lambda: ast.AugAssign(node.target, new_op(), node.value)
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        value: int = node.value
        yield "c -> c+1", lambda: ast.Constant(value + 1)
    elif isinstance(node, ast.Call) and _call_name(node) in ROUNDING and node.args:
        yield "rounding result +1", lambda: ast.BinOp(node, ast.Add(), ast.Constant(1))
        yield "rounding argument +1", lambda: ast.Call(
            node.func, [ast.BinOp(node.args[0], ast.Add(), ast.Constant(1)), *node.args[1:]], node.keywords
        )
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _SWAP_CMP:
        new_cmp, kind = _SWAP_CMP[type(node.ops[0])]
        yield kind, lambda: ast.Compare(node.left, [new_cmp()], node.comparators)


class MutationWalker(ast.NodeTransformer):
    """Enumerates mutation sites (``target=None``) or applies the ``target``-th one."""

    def __init__(self, skip: set[int], target: int | None = None) -> None:
        self.skip = skip
        self.target = target
        self.sites: list[tuple[int, str, str, str]] = []  # (line, kind, before, after)
        self.applied = False

    def visit(self, node: ast.AST) -> ast.AST:
        if self.applied or id(node) in self.skip:
            return node
        for kind, make in _candidates(node):
            index = len(self.sites)
            replacement = make()
            ast.copy_location(replacement, node)
            ast.fix_missing_locations(replacement)
            self.sites.append((getattr(node, "lineno", 0), kind, _src(node), _src(replacement)))
            if index == self.target:
                self.applied = True
                return replacement
        return self.generic_visit(node)


def _src(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 70 else text[:67] + "..."


def enumerate_mutants(rel: str) -> list[Mutant]:
    tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
    walker = MutationWalker(_shielded(tree))
    walker.visit(tree)
    return [Mutant(rel, i, line, kind, before, after) for i, (line, kind, before, after) in enumerate(walker.sites)]


def mutated_source(source: str, index: int) -> str:
    tree = ast.parse(source)
    walker = MutationWalker(_shielded(tree), target=index)
    mutated = walker.visit(tree)
    if not walker.applied:
        raise ValueError(f"no mutation site {index}")
    return ast.unparse(ast.fix_missing_locations(mutated)) + "\n"


# ---- running the tests -----------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    status: str  # killed, survived
    why: str  # failed test, import error, timeout, or "" when survived
    seconds: float


def _copy_repository(scratch: Path, name: str) -> Path:
    target = scratch / name
    shutil.copytree(ROOT, target, ignore=IGNORE, symlinks=True)
    return target


def _pytest(
    copy: Path, tests: list[str], deselect: list[str], timeout: float, *, stop_first: bool = True
) -> tuple[int | None, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("KVSTRATEGIES_GOLDEN_DIR", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", *tests]
    if stop_first:
        command.insert(4, "-x")
    for node in deselect:
        command += ["--deselect", node]
    try:
        run = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    return run.returncode, run.stdout + run.stderr


_FAILED = re.compile(r"^(FAILED|ERROR) (\S+)")


def _failed_nodes(output: str) -> list[str]:
    return [m.group(2) for m in map(_FAILED.match, output.splitlines()) if m]


def _first_failure(output: str) -> str:
    nodes = _failed_nodes(output)
    if nodes:
        return nodes[0]
    for line in output.splitlines():
        if "Error" in line:
            return line.strip()[:100]
    return "tests failed"


def run_mutant(copy: Path, mutant: Mutant, tests: list[str], deselect: list[str], timeout: float) -> Outcome:
    path = copy / mutant.file
    original = path.read_text(encoding="utf-8")
    start = time.perf_counter()
    try:
        path.write_text(mutated_source(original, mutant.index), encoding="utf-8")
        code, output = _pytest(copy, tests, deselect, timeout)
    finally:
        path.write_text(original, encoding="utf-8")
    seconds = time.perf_counter() - start
    if code is None:
        return Outcome(mutant, "killed", "timeout", seconds)
    if code == 0:
        return Outcome(mutant, "survived", "", seconds)
    if code == 5:
        raise SystemExit(f"mutation_check: no tests collected by {tests}")
    return Outcome(mutant, "killed", _first_failure(output), seconds)


def _expand(patterns: list[str]) -> list[str]:
    out: list[str] = []
    for pattern in patterns:
        path_part, sep, node = pattern.partition("::")
        matches = sorted(ROOT.glob(path_part)) if any(c in path_part for c in "*?[") else [ROOT / path_part]
        for match in matches:
            if match.exists():
                out.append(str(match.relative_to(ROOT)) + (sep + node if sep else ""))
    return list(dict.fromkeys(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="AST mutation check of the strategy and pool formulas.")
    parser.add_argument("--files", nargs="+", default=list(DEFAULT_FILES), help="files or globs to mutate")
    parser.add_argument("--tests", nargs="+", default=list(DEFAULT_TESTS), help="pytest paths / node ids / globs")
    parser.add_argument("--sample", type=int, default=None, help="run N randomly chosen mutants")
    parser.add_argument("--seed", type=int, default=0, help="random seed for --sample (default 0)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant run (default 120)")
    parser.add_argument("-j", "--jobs", type=int, default=min(4, os.cpu_count() or 1),
                        help="parallel workers (default: CPU count, at most 4)")
    parser.add_argument("--list", action="store_true", help="only list the mutants")
    parser.add_argument("--min-kill-rate", type=float, default=0.0, help="exit 1 below this kill rate (0..1)")
    args = parser.parse_args(argv)

    files = [f for f in _expand(args.files) if f.endswith(".py") and not f.endswith("__init__.py")]
    mutants = [m for f in files for m in enumerate_mutants(f)]
    if args.sample is not None and args.sample < len(mutants):
        mutants = sorted(random.Random(args.seed).sample(mutants, args.sample), key=lambda m: (m.file, m.index))
    if args.list:
        for mutant in mutants:
            print(mutant.label())
        print(f"{len(mutants)} mutants in {len(files)} files")
        return 0
    tests = _expand(args.tests)
    if not tests or not mutants:
        print("mutation_check: nothing to do (no tests or no mutants)", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="kvs-mutation-"))
    try:
        jobs = max(1, min(args.jobs, len(mutants)))
        copies = [_copy_repository(scratch, f"w{i}") for i in range(jobs)]
        start = time.perf_counter()
        code, output = _pytest(copies[0], tests, [], args.timeout * 3, stop_first=False)
        deselect = _failed_nodes(output) if code else []
        if code not in (0, 1) or (code == 1 and not deselect):
            print(f"mutation_check: the unmutated test run fails (exit {code}):\n{output[-3000:]}", file=sys.stderr)
            return 2
        print(f"tests: {' '.join(tests)}")
        print(f"baseline: passed in {time.perf_counter() - start:.1f}s"
              + (f"; {len(deselect)} failing before mutation, deselected: {' '.join(deselect)}" if deselect else ""))
        print(f"{len(mutants)} mutants in {len(files)} files, {jobs} workers, timeout {args.timeout:.0f}s")
        free = list(copies)
        outcomes: list[Outcome] = []

        def work(mutant: Mutant) -> Outcome:
            copy = free.pop()
            try:
                return run_mutant(copy, mutant, tests, deselect, args.timeout)
            finally:
                free.append(copy)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for outcome in pool.map(work, mutants):
                outcomes.append(outcome)
                mark = "KILLED  " if outcome.status == "killed" else "SURVIVED"
                why = f"  [{outcome.why}]" if outcome.why else ""
                print(f"{mark} {outcome.mutant.label()}{why}", flush=True)
        killed = sum(1 for o in outcomes if o.status == "killed")
        rate = killed / len(outcomes)
        print(f"\n{killed} killed, {len(outcomes) - killed} survived of {len(outcomes)} mutants: "
              f"kill rate {rate:.1%} ({time.perf_counter() - start:.0f}s)")
        by_file: dict[str, list[int]] = {}
        for outcome in outcomes:
            counts = by_file.setdefault(outcome.mutant.file, [0, 0])
            counts[0 if outcome.status == "killed" else 1] += 1
        for file, (k, s) in sorted(by_file.items()):
            print(f"  {file:<44} {k:>4} killed {s:>4} survived  {k / (k + s):.0%}")
        return 0 if rate >= args.min_kill_rate else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
