"""Parsed Python sources shared by the tests that read the code itself (import graph, literal scans,
references): each file's text is parsed once per process, keyed by the text, so an edited file is
parsed again."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def _parse(text: str, filename: str) -> ast.Module:
    return ast.parse(text, filename=filename)


def parsed(path: Path) -> ast.Module:
    """``ast.parse`` of ``path`` (read it; do not change the tree: it is shared)."""
    return _parse(path.read_text(encoding="utf-8"), str(path))
