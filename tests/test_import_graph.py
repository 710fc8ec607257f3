"""The package's import graph has no cycle (every import statement, lazy and TYPE_CHECKING ones too),
and the core library never imports the operator tool (``kvstrategies.planner``)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.source_trees import parsed

PACKAGE = Path(__file__).resolve().parents[1] / "kvstrategies"


def _modules(package: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package ``__init__``)."""
    out = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: set[str]) -> list[str]:
    """The package modules one import statement names (a submodule, else the module it is read from)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level else []
    source = ".".join(base + ([node.module] if node.module else []))
    submodules = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in known]
    return submodules if len(submodules) == len(node.names) else [source, *submodules]


def import_graph(package: Path) -> dict[str, set[str]]:
    modules = _modules(package)
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for module, (path, is_package) in modules.items():
        tree = parsed(path)
        imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        graph[module] = {
            t for n in imports for t in _targets(module, is_package, n, known) if t in known and t != module
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_package_import_graph_has_no_cycle() -> None:
    graph = import_graph(PACKAGE)
    assert "kvstrategies.models.geometry" in graph and "kvstrategies.planner.fixes" in graph
    assert cycles(graph) == []


#: the operator tool's front end and the engine bridges may use the planner; nothing else may
PLANNER_USERS = ("kvstrategies.planner", "kvstrategies.cli", "kvstrategies.integrations")


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def core_imports_of_the_planner(graph: dict[str, set[str]]) -> list[str]:
    """``module -> planner module`` for every core module (outside :data:`PLANNER_USERS`) importing one."""
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if not _within(module, PLANNER_USERS)
        for target in targets
        if _within(target, ("kvstrategies.planner",))
    )


def test_the_core_library_does_not_import_the_planner() -> None:
    graph = import_graph(PACKAGE)
    assert {"kvstrategies.planner.gpus", "kvstrategies.planner.weights"} <= set(graph)
    assert core_imports_of_the_planner(graph) == []


def test_the_planner_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE)
    planner = {m: {t for t in ts if _within(t, ("kvstrategies.planner",))}
               for m, ts in graph.items() if _within(m, ("kvstrategies.planner",))}  # fmt: skip
    assert len(planner) > 20
    assert cycles(planner) == []


def test_the_planner_rule_finds_a_core_import(tmp_path: Path) -> None:
    """Not vacuous: a core module importing a planner module (eagerly or lazily) is named."""
    package = tmp_path / "kvstrategies"
    (package / "planner").mkdir(parents=True)
    (package / "integrations").mkdir()
    for name in ("__init__.py", "planner/__init__.py", "planner/gpus.py", "integrations/__init__.py"):
        (package / name).write_text("")
    (package / "case.py").write_text("def f():\n    from .planner.gpus import parse_bytes\n")
    (package / "api.py").write_text("from kvstrategies.planner import gpus\n")
    (package / "cli.py").write_text("from .planner.gpus import parse_bytes\n")
    (package / "integrations" / "bridge.py").write_text("from ..planner import gpus\n")
    assert core_imports_of_the_planner(import_graph(package)) == [
        "kvstrategies.api -> kvstrategies.planner.gpus",
        "kvstrategies.case -> kvstrategies.planner.gpus",
    ]


def test_the_cycle_check_finds_a_circle(tmp_path: Path) -> None:
    """Not vacuous: a TYPE_CHECKING-only back edge (the old planner circle) is a cycle."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .b import f\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import g\n")
    (package / "c.py").write_text("from . import a\n")
    assert cycles(import_graph(package)) == [["pkg.a", "pkg.b"]]


@pytest.mark.parametrize("module", ["kvstrategies.models.geometry", "kvstrategies.planner.fixes"])
def test_a_former_cycle_member_imports_first_in_a_fresh_interpreter(module: str) -> None:
    command = [sys.executable, "-c", f"import {module}"]
    done = subprocess.run(command, cwd=PACKAGE.parent, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
