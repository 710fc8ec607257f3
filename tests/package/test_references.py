"""Every file the project's text cites ships with it.

Scanned: the docstrings and comments of every ``.py`` file of the package, ``tools/``, ``tests/``
and ``examples/``; every ``.md`` page; the ``--help`` of every command. A path such as
``docs/x.md``, ``tools/x.py``, ``kvstrategies/...``, ``golden/...`` or ``tests/...`` must exist in
the repository (a ``<version>`` or ``*`` part matches anything); a bare ``x.md`` must be a page of
the repository. SGLang's and vLLM's own paths (``sglang/srt/...``, ``srt/...``, ``vllm/...``) and
module names (``sglang.srt.x.y``) are fine: they are the sources a maintainer is pointed to. A
reference into a sibling checkout (``../x``), a spec folder or an issue tracker id of the spec
(``OPEN-`` and a number) fails, wherever it is.

Nor does any line of the package, ``tools/``, ``tests/`` or a page cite a specification that does
not ship: a section sign with a number, a ``QUIRK`` marker or numbered quirk, a lettered section
(``5.2 b)``), an ``OPEN`` marker, the "spec README" or a name "after the spec's name". A comment
says what SGLang does and names the function (:data:`SPEC_STYLE`).
"""

from __future__ import annotations

import ast
import io
import os
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvstrategies.cli.app import COMMANDS, build_parser
from tests.source_trees import parsed

ROOT = Path(__file__).resolve().parents[2]
#: top-level folders of this repository: a path starting with one of them must exist
OWN_ROOTS = ("kvstrategies", "tools", "tests", "cases", "docs", "golden", "examples", ".ci")
#: a path-like token ending in a file suffix, optionally with folders before it
PATH = re.compile(
    r"(?<![\w./<>*{}-])((?:\.\./|\./)?[\w.<>*{}-]+(?:/[\w.<>*{}-]+)*\.(?:md|py|jsonl|json|toml|ini|txt|png))\b"
)
#: folder references of this repository (``golden/sglang-<version>/``, ``kvstrategies/pools/``)
FOLDER = re.compile(r"(?<![\w./-])((?:" + "|".join(re.escape(r) for r in OWN_ROOTS) + r")/[\w.<>*{}/-]*/)")
#: the spec's open-item ids and anything outside the repository
FORBIDDEN = re.compile(r"\bOPEN-[A-Z]*\d+\b|\.\./shared|/work/shared|\bshared/spec\b|(?<![\w.-])spec/[\w.-]+\.md")
#: citations of the specification the code was first written from, which does not ship
SPEC_STYLE = re.compile(
    r"§\s*\d|\bQUIRK\b|(?i:\bquirks? \d)|(?i:\bspec README\b)|\bOPEN\b(?!-)|\b\d+\.\d+ [a-z]\)|(?i:\bthe spec's name\b)"
)
SKIP_PARTS = {".venv", ".tox", ".ci-venv", "__pycache__", "build", ".git", "cases"}
#: files outside the repository that a page names as a published source, with where they are
EXTERNAL = {"GLM-5-FP8-MI355X-SGLANG-ERROR.md": "a start-up log in the public GitHub repository ajith-sirra-amd/Issues"}


def _repository_files() -> list[Path]:
    """The repository's files: tracked or not ignored (``git ls-files``), else a walk that skips
    virtual environments, caches and the catalog."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=False)  # fmt: skip
    if listed.returncode == 0 and listed.stdout.strip():
        found = [ROOT / line for line in listed.stdout.splitlines()]
    else:
        found = []
        for folder, dirs, names in os.walk(ROOT):
            dirs[:] = [d for d in dirs if d not in SKIP_PARTS and not d.startswith(".venv")]
            found += [Path(folder) / name for name in names]
    return sorted(p for p in found if p.is_file() and not SKIP_PARTS & set(p.relative_to(ROOT).parts))


FILES = _repository_files()


def _tracked(suffix: str) -> list[Path]:
    return [p for p in FILES if p.name.endswith(suffix)]


PAGES = {path.name for path in _tracked(".md")}


def _exists(reference: str, here: Path) -> bool:
    """Whether ``reference`` (a path with ``<...>``, ``{...}`` or ``*`` parts allowed) is in the repository."""
    pattern = re.sub(r"<[^>]*>|\{[^}]*\}|\.{3,}|\b(?:NAME|VERSION|FILE)\b", "*", reference).rstrip("/")
    pattern = re.sub(r"\*+", "*", pattern)
    for base in (ROOT, here.parent):
        if "*" in pattern:
            if next(iter(base.glob(pattern)), None) is not None:
                return True
        elif (base / pattern).exists():
            return True
    return False


def problems(text: str, here: Path) -> list[str]:
    """The references of ``text`` (found in the file ``here``) that do not resolve in this repository."""
    bad = [m.group(0) for m in FORBIDDEN.finditer(text)]
    for match in PATH.finditer(text):
        reference = match.group(1)
        if reference.startswith("../"):
            bad.append(reference)
            continue
        reference = reference.removeprefix("./")
        first = reference.split("/", 1)[0]
        if "/" not in reference:
            page = reference.endswith(".md")
            if page and reference not in PAGES and reference not in EXTERNAL and not _exists(reference, here):
                bad.append(reference)
        elif first in OWN_ROOTS and not _exists(reference, here):
            bad.append(reference)
    bad += [m.group(1) for m in FOLDER.finditer(text) if not _exists(m.group(1), here)]
    return bad


def python_text(path: Path) -> Iterator[tuple[int, str]]:
    """``(line, text)`` of every comment and docstring of a Python file."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(parsed(path)):
        # a bare string statement: the docstring of a module, class or function, or of an attribute
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            yield node.lineno, node.value.value


def python_files() -> list[Path]:
    return [
        p for p in _tracked(".py") if p.relative_to(ROOT).parts[0] in ("kvstrategies", "tools", "tests", "examples")
    ]


def test_the_checker_finds_what_it_must() -> None:
    here = ROOT / "kvstrategies" / "api.py"
    assert problems("see docs/maintainers.md and tools/record_golden.py", here) == []
    assert problems("golden/sglang-<version>/ and cases/*.json", here) == []
    assert problems("``tools/NAME.py``, cases/<family>-<model>-....json", here) == []
    assert problems("sglang/srt/mem_cache/memory_pool.py, `sglang.srt.configs.model_config`", here) == []
    assert problems("[the releases](sglang-releases.md), README.md", ROOT / "docs" / "golden.md") == []
    assert problems("as sizing.md 5.2 says", here) == ["sizing.md"]
    assert problems("(DESIGN.md, CHANGES.md)", here) == ["DESIGN.md", "CHANGES.md"]
    assert set(problems("(layouts.md 13.2; OPEN-L2)", here)) == {"OPEN-L2", "layouts.md"}
    assert problems("docs/nowhere.md and tools/nothing.py", here) == ["docs/nowhere.md", "tools/nothing.py"]
    assert "../shared" in problems("../shared/spec/resolve.md", here)
    assert "spec/sglang_bridge.md" in problems("Facts: spec/sglang_bridge.md 2-4", here)
    assert problems("kvstrategies/pools/ and golden/nowhere/", here) == ["golden/nowhere/"]


#: every Python file but this one, whose examples name missing files on purpose
CHECKED_PYTHON_FILES = [path for path in python_files() if path.name != "test_references.py"]


@pytest.mark.parametrize("path", CHECKED_PYTHON_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_comments_and_docstrings_cite_files_that_ship(path: Path) -> None:
    if not problems(path.read_text(encoding="utf-8"), path):
        return  # nothing in the whole file, so nothing in its comments and docstrings (they are part of it)
    bad = [f"{path.relative_to(ROOT)}:{n}: {ref}" for n, text in python_text(path) for ref in problems(text, path)]
    assert bad == [], "\n".join(bad)


@pytest.mark.parametrize("path", _tracked(".md"), ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_cite_files_that_ship(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    bad = [f"{path.relative_to(ROOT)}:{n}: {ref}" for n, text in enumerate(lines, 1) for ref in problems(text, path)]
    assert bad == [], "\n".join(bad)


def _helps() -> Iterator[tuple[str, str]]:
    """``kvstrategies --help`` and every sub-command's ``--help`` text."""
    parser = build_parser()
    yield "kvstrategies", parser.format_help()
    for name in COMMANDS:
        for action in build_parser(name)._subparsers._group_actions if build_parser(name)._subparsers else ():
            for sub in (getattr(action, "choices", None) or {}).values():
                yield f"kvstrategies {name}", sub.format_help()


def test_command_help_cites_files_that_ship() -> None:
    here = ROOT / "kvstrategies" / "cli" / "app.py"
    helps = list(_helps())
    assert len(helps) >= 5
    bad = [f"{command} --help: {ref}" for command, text in helps for ref in problems(text, here)]
    assert bad == [], "\n".join(bad)


#: files that name the patterns on purpose: this checker and the CLI output check's examples
SPEC_CHECKERS = {"tests/package/test_references.py", "tests/cli/test_cli_output.py"}


def spec_style_citations(text: str) -> list[str]:
    """The citations of the unshipped specification in ``text`` (:data:`SPEC_STYLE`)."""
    return [m.group(0) for m in SPEC_STYLE.finditer(text)]


def _spec_checked_files() -> list[Path]:
    own = [p for p in python_files() if p.relative_to(ROOT).parts[0] != "examples"] + _tracked(".md")
    return [p for p in own if p.relative_to(ROOT).as_posix() not in SPEC_CHECKERS]


def test_the_spec_citation_check_finds_what_it_must() -> None:
    assert spec_style_citations("cited to the release's module (§6.2)") == ["§6"]
    assert spec_style_citations("# QUIRK ServerArgs.resolve_once: ...") == ["QUIRK"]
    assert spec_style_citations("(quirk 12.4) and (QUIRK 3)") == ["quirk 1", "QUIRK"]
    assert spec_style_citations("the DSA indexer term (5.2 b).") == ["5.2 b)"]
    assert spec_style_citations("finalised (spec README: what sizes means)") == ["spec README"]
    assert spec_style_citations("Decisions (OPEN; the spec names families)") == ["OPEN"]
    assert spec_style_citations("def nF(self) -> int:  # noqa: N802 - the spec's name") == ["the spec's name"]
    clean = (
        "SGLang's quirks are kept; ratio (0.8); OPEN-L2 is the other check's; 3.5 s import; "
        "``mem_fraction_static`` (sglang.srt.arg_groups.memory_hook.handle_gpu_memory_settings); docs/golden.md"
    )
    assert spec_style_citations(clean) == []


@pytest.mark.parametrize("path", _spec_checked_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_citation_of_the_unshipped_spec(path: Path) -> None:
    name = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    bad = [f"{name}:{n}: {found}" for n, line in enumerate(lines, 1) for found in spec_style_citations(line)]
    assert bad == [], "\n".join(bad)
