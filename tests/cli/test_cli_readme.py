"""The README works as written: its ``kvstrategies`` commands run, and its Python snippets are
excerpts of ``examples/plan_and_build.py``, which runs."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kvstrategies.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PLANNER_DOC = (ROOT / "docs" / "planner.md").read_text(encoding="utf-8")
EXAMPLE = ROOT / "examples" / "plan_and_build.py"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def blocks(language: str, text: str = README) -> list[str]:
    return [body for lang, body in BLOCK.findall(text) if lang == language]


#: a README command documented to be refused carries this comment; it must exit 2, with output
REFUSED = "# exits 2"


def readme_commands() -> list[list[str]]:
    """Every ``kvstrategies ...`` command of the README's (and docs/planner.md's) bash blocks and
    ``$`` prompts. ``verify`` commands that need a live SGLang (all but ``--recorded``) are left
    to ``.ci/run``'s live step, which installs SGLang: importing it in-process would also
    replace Triton's interpreter state for the kernel tests."""
    lines = [line for text in (README, PLANNER_DOC) for body in blocks("bash", text) for line in body.splitlines()]
    lines += [line[2:] for body in blocks("text") for line in body.splitlines() if line.startswith("$ ")]
    commands = []
    for line in lines:
        if line.lstrip().startswith("kvstrategies "):
            argv = shlex.split(line, comments=True)[1:]
            if argv[0] == "verify" and "--recorded" not in argv:
                continue
            commands.append([*argv, REFUSED] if REFUSED in line else argv)
    return commands


def test_readme_has_commands() -> None:
    assert len(readme_commands()) >= 7


@pytest.mark.parametrize("argv", readme_commands(), ids=lambda argv: " ".join(argv)[:60])
def test_readme_command_runs(argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    if "--plot" in argv:
        pytest.importorskip("matplotlib")
    # a file the README writes under /tmp goes to this test's own folder (parallel runs, other users)
    argv = [str(tmp_path / arg.removeprefix("/tmp/")) if arg.startswith("/tmp/") else arg for arg in argv]
    refused = argv[-1:] == [REFUSED]
    code = main(argv[:-1] if refused else argv)
    assert code == (2 if refused else 0), capsys.readouterr().err
    assert capsys.readouterr().out


def test_readme_python_snippets_are_the_example_script() -> None:
    script = EXAMPLE.read_text(encoding="utf-8")
    snippets = blocks("python")
    assert len(snippets) == 2
    for snippet in snippets:
        assert snippet in script


def test_example_script_runs() -> None:
    pytest.importorskip("torch")
    result = subprocess.run([sys.executable, str(EXAMPLE)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "wrote (64, 1, 128) K/V for layer 0" in result.stdout
