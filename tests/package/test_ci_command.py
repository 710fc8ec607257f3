"""CI runs exactly the README's test command: ``.ci/run`` holds the README's install-and-test line."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_test_command() -> str:
    """The Set-up block's ``pip install -e '.[test]' && python -m pytest ...`` line."""
    lines = [line.strip() for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()]
    found = [line for line in lines if line.startswith("pip install -e '.[test]'") and "python -m pytest" in line]
    assert len(found) == 1, found
    return found[0]


def test_ci_runs_the_readme_test_command() -> None:
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert readme_test_command() in ci


def test_the_test_extra_has_the_plugins_the_command_uses() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^test = \[(.*?)^\]", pyproject, re.S | re.M)
    assert block is not None
    names = set(re.findall(r'^\s*"([A-Za-z0-9_.-]+)', block.group(1), re.M))
    command = readme_test_command()
    assert "pytest" in names
    if re.search(r"\s-n\s", command + " "):
        assert "pytest-xdist" in names, names
