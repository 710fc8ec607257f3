"""Reading JSON files: the only way the library reads a case, a config.json or a preset.

Files are parsed as JSON and nothing else (never executed, never unpickled). ``Infinity``,
``-Infinity`` and ``NaN`` are accepted as NVIDIA publishes them (Nemotron-H's
``time_step_limit: [0.0, Infinity]``); a UTF-8 byte-order mark is skipped. Every failure is a
:class:`~kvstrategies.errors.KVCacheConfigError` naming the file and, for bad JSON, the line and
column (for bad UTF-8, the byte offset). Only regular files up to :data:`MAX_JSON_BYTES` are
read (never a device or a FIFO); a key repeated in one object is an error.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import KVCacheConfigError

#: the largest JSON file read (bytes); real configs and case files are under 1 MiB
MAX_JSON_BYTES = 64 * 2**20


class _DuplicateKeyError(ValueError):
    """A JSON object names one key twice (internal: becomes a KVCacheConfigError)."""


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: a dict, or an error on a repeated key (JSON would keep the last)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key)
        out[key] = value
    return out


def _check_strings(value: Any, source: str) -> None:
    """Refuse lone surrogates (``"\\udc80"``): text that cannot be printed or written as UTF-8."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise KVCacheConfigError(
                    f"{source}: a string holds a lone surrogate ({item!r:.60}), not text; fix the file"
                ) from exc
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def parse_json_text(text: str, source: str) -> Any:
    """``json.loads(text)``; errors name ``source`` (a path or a preset name) and the position.

    A key repeated in one object is an error (JSON parsers differ on which copy wins), and so
    is a string escape that makes a lone surrogate.
    """
    try:
        value = json.loads(text, object_pairs_hook=_unique_object)
    except _DuplicateKeyError as exc:
        raise KVCacheConfigError(
            f"{source}: key {exc.args[0]!r:.80} appears twice in one JSON object; keep one"
        ) from exc
    except json.JSONDecodeError as exc:
        raise KVCacheConfigError(
            f"{source}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}; fix the file"
        ) from exc
    except RecursionError as exc:
        raise KVCacheConfigError(f"{source}: JSON nested too deeply to read; fix the file") from exc
    except ValueError as exc:  # e.g. an integer literal longer than Python's 4300-digit limit
        raise KVCacheConfigError(f"{source}: unreadable JSON value ({exc}); fix the file") from exc
    _check_strings(value, source)
    return value


def read_text_file(path: str | Path) -> str:
    """The UTF-8 text of a regular file of at most :data:`MAX_JSON_BYTES` (a byte-order mark
    skipped); a folder, device, FIFO, symlink loop, oversized or non-UTF-8 file is an error naming it."""
    file = Path(path)
    data = _read_regular_file(file)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise KVCacheConfigError(
            f"{file}: not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x}); save it as UTF-8 JSON"
        ) from exc


def read_json_file(path: str | Path) -> Any:
    """Read and parse the JSON file at ``path`` (UTF-8); errors name the file."""
    return parse_json_text(read_text_file(path), str(Path(path)))


def _read_regular_file(file: Path) -> bytes:
    """The bytes of a JSON input ``file`` (:func:`read_regular_bytes` up to :data:`MAX_JSON_BYTES`)."""
    return read_regular_bytes(file, MAX_JSON_BYTES, "a JSON file", "far more than any config or case file")


def read_regular_bytes(file: Path, limit: int, kind: str, too_large: str) -> bytes:
    """The bytes of ``file``: a regular file of at most ``limit`` bytes (``kind`` names what it
    should be, ``too_large`` says why the limit is enough).

    Devices (``/dev/zero``), FIFOs and sockets are refused before opening (a read would never
    end or never start); the size is checked on the open handle and the read is bounded, so a
    file that grows meanwhile cannot exhaust memory either. A folder, a symlink loop and every
    OS error are one :class:`~kvstrategies.errors.KVCacheConfigError` naming the file.
    """
    try:
        mode = file.stat().st_mode
    except OSError as exc:
        raise KVCacheConfigError(f"cannot read {file}: {exc.strerror or exc}") from exc
    except ValueError as exc:  # an embedded NUL in the path
        raise KVCacheConfigError(f"cannot read {file!r:.80}: {exc}") from exc
    if stat.S_ISDIR(mode):
        raise KVCacheConfigError(f"cannot read {file}: it is a folder, not {kind}")
    if not stat.S_ISREG(mode):
        raise KVCacheConfigError(f"cannot read {file}: not a regular file (a device, pipe or socket); give {kind}")
    try:
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)  # never block on a FIFO swapped in after stat
        fd = os.open(file, flags)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise KVCacheConfigError(f"cannot read {file}: not a regular file; give {kind}")
            data = handle.read(limit + 1)
    except OSError as exc:
        raise KVCacheConfigError(f"cannot read {file}: {exc.strerror or exc}") from exc
    if len(data) > limit:
        size = f"{limit // 2**20} MiB" if limit >= 2**20 else f"{limit:,} bytes"
        raise KVCacheConfigError(f"cannot read {file}: larger than {size}, {too_large}")
    return data


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
