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

from kvstrategies.core.jsonio import MAX_JSON_BYTES, read_json_file, read_regular_bytes
from kvstrategies.errors import KVCacheConfigError

from ..helpers import HOSTILE_FILES, plant_hostile_file, tool_module

ROOT = Path(__file__).resolve().parents[2]
CASE = "default-llama-3.1-8b-tp1-bf16-p1"
KINDS = tuple(kind for kind in HOSTILE_FILES if kind not in ("bytes", "nan"))  # unreadable ones


def _tool(name: str) -> Any:
    return tool_module(name)


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
    plant_hostile_file(b / f"{CASE}.json", kind)
    code, out = run(_tool("diff_golden"), ["--dirs", str(a), str(b)])
    assert code == 2 and "Traceback" not in out
    assert "diff_golden: not a snapshot: " in out and f"{CASE}.json" in out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("kind", KINDS)
def test_record_golden_check_reports_a_hostile_snapshot(tmp_path: Path, kind: str) -> None:
    golden = tmp_path / "golden"
    golden.mkdir()
    shutil.copy(ROOT / "golden" / f"{CASE}.json", golden / f"{CASE}.json")
    plant_hostile_file(golden / f"{CASE}.json", kind)
    code, out = run(_tool("record_golden"), ["--check", "--golden", str(golden), "-k", CASE])
    assert code == 1 and "Traceback" not in out
    assert f"DRIFT {CASE}" in out and "the stored snapshot is unreadable" in out


# ---- the JSON reader's size limit (kvstrategies/core/jsonio.py) -------------------------------------------------


def _sparse(path: Path, size: int) -> Path:
    with path.open("wb") as handle:
        handle.truncate(size)  # a sparse file: no disk written
    return path


def test_a_json_input_may_hold_64_mib_and_not_one_byte_more(tmp_path: Path) -> None:
    assert MAX_JSON_BYTES == 64 * 2**20
    with pytest.raises(KVCacheConfigError) as at_limit:
        read_json_file(_sparse(tmp_path / "limit.json", 64 * 2**20))  # read whole: NUL bytes are no JSON
    assert "larger than" not in str(at_limit.value)
    with pytest.raises(KVCacheConfigError, match="larger than 64 MiB, far more than any config or case file"):
        read_json_file(_sparse(tmp_path / "over.json", 64 * 2**20 + 1))


def test_a_file_one_byte_over_the_limit_is_refused_and_the_limit_is_said_in_its_unit(tmp_path: Path) -> None:
    data = tmp_path / "data.bin"
    data.write_bytes(b"x" * (2**20 + 1))
    assert read_regular_bytes(data, 2**20 + 1, "a file", "why") == b"x" * (2**20 + 1)
    with pytest.raises(KVCacheConfigError, match=r"larger than 1 MiB, why"):  # 2**20: said in MiB
        read_regular_bytes(data, 2**20, "a file", "why")
    with pytest.raises(KVCacheConfigError, match=r"larger than 1,048,575 bytes, why"):  # below 1 MiB: in bytes
        read_regular_bytes(data, 2**20 - 1, "a file", "why")
