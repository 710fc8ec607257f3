"""The package's import graph has no cycle (every import statement, lazy and TYPE_CHECKING ones too),
and its layers hold: the core at the bottom, the library under the planner layer, the bridges and
the CLI on top, and neither engine's folder reaching into the other's (:func:`layer_violations`)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.source_trees import parsed

PACKAGE = Path(__file__).resolve().parents[2] / "kvstrategies"


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


# ---- the layers (docs/maintainers.md, "The tree") ----------------------------------------------------

#: the operator tool: the engine-neutral planner and each engine's launch rules, flags, budget and
#: planning front (the SGLang knob table below aside)
PLANNER_LAYER = (
    "kvstrategies.planner", "kvstrategies.sglang", "kvstrategies.vllm.planner", "kvstrategies.vllm.arguments",
    "kvstrategies.vllm.tables",
)
#: the bridges that run an engine's own code; only the CLI (and each other) may import them
BRIDGES = ("kvstrategies.sglang.bridge", "kvstrategies.vllm.bridge")
CLI = ("kvstrategies.cli", "kvstrategies.__main__")
#: what the library may read of the SGLang folder: a case file may set SGLang's environment knobs
LIBRARY_MAY_READ = (
    "kvstrategies.sglang.knobs", "kvstrategies.sglang.tables.knobs", "kvstrategies.sglang.server_arguments"
)


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _edges(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((module, target) for module, targets in graph.items() for target in targets)


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that breaks a layer rule, as ``rule: module -> target``:

    - ``core``: :mod:`kvstrategies.core` imports only itself and :mod:`kvstrategies.errors`;
    - ``library``: the library (strategies, pools, models, the public API, ...) imports neither the
      planner layer, nor a bridge, nor the CLI (SGLang's knob table aside);
    - ``planner``: the planner layer imports no bridge and not the CLI;
    - ``engines``: SGLang's folder never imports vLLM's, and vLLM's strategies never import SGLang's folder.
    """
    found = []
    upper = PLANNER_LAYER + BRIDGES + CLI
    core = ("kvstrategies.core", "kvstrategies.errors")
    for module, target in _edges(graph):
        if _within(module, ("kvstrategies.core",)) and not _within(target, core):
            found.append(f"core: {module} -> {target}")
        if not _within(module, upper) and _within(target, upper) and target not in LIBRARY_MAY_READ:
            found.append(f"library: {module} -> {target}")
        if _within(module, PLANNER_LAYER) and not _within(module, BRIDGES) and _within(target, BRIDGES + CLI):
            found.append(f"planner: {module} -> {target}")
        if (_within(module, ("kvstrategies.sglang",)) and _within(target, ("kvstrategies.vllm",))) or (
            _within(module, ("kvstrategies.vllm.strategies",)) and _within(target, ("kvstrategies.sglang",))
        ):
            found.append(f"engines: {module} -> {target}")
    return found


def test_the_layers_hold() -> None:
    graph = import_graph(PACKAGE)
    assert {"kvstrategies.core.sizing", "kvstrategies.planner.weights", "kvstrategies.sglang.bridge.verify",
            "kvstrategies.vllm.strategies.specs", "kvstrategies.cli.app"} <= set(graph)  # fmt: skip
    assert layer_violations(graph) == []


def test_the_planner_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE)
    planner = {m: {t for t in ts if _within(t, PLANNER_LAYER)} for m, ts in graph.items() if _within(m, PLANNER_LAYER)}
    assert len(planner) > 20
    assert cycles(planner) == []


def test_the_layer_rules_find_what_they_must(tmp_path: Path) -> None:
    """Not vacuous: each rule names an import that breaks it (eager or lazy), and allows its exceptions."""
    package = tmp_path / "kvstrategies"
    for folder in ("core", "planner", "sglang/bridge", "vllm/strategies", "cli"):
        (package / folder).mkdir(parents=True, exist_ok=True)
    for name in ("__init__.py", "core/__init__.py", "planner/__init__.py", "planner/gpus.py", "sglang/__init__.py",
                 "sglang/bridge/__init__.py", "vllm/__init__.py", "vllm/strategies/__init__.py", "cli/__init__.py",
                 "errors.py"):  # fmt: skip
        (package / name).write_text("")
    (package / "core" / "sizing.py").write_text("from ..errors import E\nfrom ..api import plan\n")
    (package / "case.py").write_text("def f():\n    from .planner.gpus import parse_bytes\nfrom .sglang import knobs\n")
    (package / "sglang" / "knobs.py").write_text("")
    (package / "api.py").write_text("from kvstrategies.planner import gpus\n")
    (package / "planner" / "fit.py").write_text("from ..sglang.bridge import verify\n")
    (package / "sglang" / "bridge" / "verify.py").write_text("from ...planner import gpus\n")
    (package / "sglang" / "budget.py").write_text("from ..vllm.strategies import specs\n")
    (package / "vllm" / "strategies" / "specs.py").write_text("from ...sglang import knobs\n")
    (package / "cli" / "app.py").write_text("from ..sglang.bridge import verify\n")
    assert layer_violations(import_graph(package)) == [
        "library: kvstrategies.api -> kvstrategies.planner.gpus",
        "library: kvstrategies.case -> kvstrategies.planner.gpus",
        "core: kvstrategies.core.sizing -> kvstrategies.api",
        "planner: kvstrategies.planner.fit -> kvstrategies.sglang.bridge.verify",
        "engines: kvstrategies.sglang.budget -> kvstrategies.vllm.strategies.specs",
        "engines: kvstrategies.vllm.strategies.specs -> kvstrategies.sglang.knobs",
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
