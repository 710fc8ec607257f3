"""Names a package exports, imported from their modules on first use (PEP 562).

``import kvstrategies`` (or ``kvstrategies.planner``) then costs only the package module: a
command that needs one submodule does not load the others through the package's imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module ``__getattr__`` and ``__dir__``: ``exports`` maps each public name to the
    module (its full dotted name) that defines it; a name read once is kept in ``namespace``."""

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *exports})

    return getattr_, dir_
