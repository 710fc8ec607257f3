"""The golden tools read a stored snapshot as any JSON input is read: a folder, FIFO, symlink
loop, non-UTF-8 or deeply nested file is one clean report and a failing exit, never a traceback
or a hang (``tools/diff_golden.py --dirs``, ``tools/record_golden.py --check``)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from .helpers import tool_module

ROOT = Path(__file__).resolve().parents[1]
CASE = "default-llama-3.1-8b-tp1-bf16-p1"
KINDS = ("folder", "fifo", "link-loop", "non-utf8", "deep", "list", "device-link", "empty")


def _tool(name: str) -> Any:
    return tool_module(name)


def plant(path: Path, kind: str) -> None:
    """Replace ``path`` (a snapshot) with a hostile file of ``kind``."""
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-loop":
        path.symlink_to(path.name)
    elif kind == "non-utf8":
        path.write_bytes(b'{"name": "\xff\xfe"}')
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "list":
        path.write_text("[1, 2]")
    elif kind == "device-link":
        path.symlink_to("/dev/zero")
    elif kind == "empty":
        path.write_text("")


def run(tool: Any, argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = tool.main(argv)
    return code, out.getvalue()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("kind", KINDS)
def test_diff_golden_dirs_reports_a_hostile_snapshot(tmp_path: Path, kind: str) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        folder.mkdir()
        shutil.copy(ROOT / "golden" / f"{CASE}.json", folder / f"{CASE}.json")
    plant(b / f"{CASE}.json", kind)
    code, out = run(_tool("diff_golden"), ["--dirs", str(a), str(b)])
    assert code == 2 and "Traceback" not in out
    assert "diff_golden: not a snapshot: " in out and f"{CASE}.json" in out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("kind", KINDS)
def test_record_golden_check_reports_a_hostile_snapshot(tmp_path: Path, kind: str) -> None:
    golden = tmp_path / "golden"
    golden.mkdir()
    shutil.copy(ROOT / "golden" / f"{CASE}.json", golden / f"{CASE}.json")
    plant(golden / f"{CASE}.json", kind)
    code, out = run(_tool("record_golden"), ["--check", "--golden", str(golden), "-k", CASE])
    assert code == 1 and "Traceback" not in out
    assert f"DRIFT {CASE}" in out and "the stored snapshot is unreadable" in out
