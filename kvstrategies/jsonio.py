"""Reading JSON files: the only way the library reads a case, a config.json or a preset.

Files are parsed as JSON and nothing else (never executed, never unpickled). ``Infinity``,
``-Infinity`` and ``NaN`` are accepted as NVIDIA publishes them (Nemotron-H's
``time_step_limit: [0.0, Infinity]``); a UTF-8 byte-order mark is skipped. Every failure is a
:class:`~kvstrategies.errors.KVCacheConfigError` naming the file and, for bad JSON, the line and
column (for bad UTF-8, the byte offset).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import KVCacheConfigError


def parse_json_text(text: str, source: str) -> Any:
    """``json.loads(text)``; errors name ``source`` (a path or a preset name) and the position."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise KVCacheConfigError(
            f"{source}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}; fix the file"
        ) from exc
    except RecursionError as exc:
        raise KVCacheConfigError(f"{source}: JSON nested too deeply to read; fix the file") from exc
    except ValueError as exc:  # e.g. an integer literal longer than Python's 4300-digit limit
        raise KVCacheConfigError(f"{source}: unreadable JSON value ({exc}); fix the file") from exc


def read_json_file(path: str | Path) -> Any:
    """Read and parse the JSON file at ``path`` (UTF-8); errors name the file."""
    file = Path(path)
    try:
        data = file.read_bytes()
    except IsADirectoryError as exc:
        raise KVCacheConfigError(f"cannot read {file}: it is a folder, not a JSON file") from exc
    except OSError as exc:
        raise KVCacheConfigError(f"cannot read {file}: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise KVCacheConfigError(
            f"{file}: not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x}); save it as UTF-8 JSON"
        ) from exc
    return parse_json_text(text, str(file))


def require_object(value: Any, source: str, what: str) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an error saying ``what`` ``source`` should hold."""
    if not isinstance(value, Mapping):
        raise KVCacheConfigError(
            f"{source}: {what} must be a JSON object ({{...}}), got a JSON {_json_kind(value)}"
        )
    return dict(value)


def read_json_object(path: str | Path, what: str) -> dict[str, Any]:
    """:func:`read_json_file` that also requires a top-level object (``what`` names its role)."""
    return require_object(read_json_file(path), str(path), what)


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "null"
    return type(value).__name__
