"""Write a generated source file, or (``--check``) say whether the committed one is current."""

from __future__ import annotations

from pathlib import Path


def write_or_check(target: Path, text: str, tool: str, *, check: bool) -> int:
    """Write ``text`` to ``target`` (exit code 0), or with ``check`` compare: 0 current, 1 stale."""
    if check:
        same = target.read_text(encoding="utf-8") == text
        print(f"{target.name} is current" if same else f"{target.name} is stale: run {tool}")
        return 0 if same else 1
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}")
    return 0
