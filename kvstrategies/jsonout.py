"""JSON text the CLI prints: ``json.dumps(value, indent=2)``, byte for byte, without its cost.

The standard library encodes indented JSON in pure Python, one generator step per token (its
C encoder only writes compact JSON), which makes a 94-layer plan document (60 kB) cost more
than the plan. :func:`dumps` walks the value once and joins strings: the same text (keys in
insertion order, ``ensure_ascii``, ``NaN`` / ``Infinity`` as the standard library writes them,
``", "``-free separators of an indented dump), the same ``TypeError`` for a value JSON cannot
hold and the same ``ValueError`` for a circular reference.
"""

from __future__ import annotations

from json.encoder import encode_basestring_ascii
from typing import Any

_INF = float("inf")


def _float(value: float) -> str:
    """``json``'s ``floatstr`` with ``allow_nan``: ``NaN``, ``Infinity``, ``-Infinity``, else ``repr``."""
    if value != value:
        return "NaN"
    if value == _INF:
        return "Infinity"
    if value == -_INF:
        return "-Infinity"
    return float.__repr__(value)


def _key(key: Any) -> str:
    """A dict key as the standard encoder writes it (``skipkeys`` off): a string as itself, a
    number, bool or None as its JSON text in quotes."""
    if isinstance(key, str):
        return encode_basestring_ascii(key)
    text = _scalar(key)
    if text is None:
        raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")
    return '"' + text + '"'


def _scalar(value: Any) -> str | None:
    """The text of a JSON scalar, ``None`` for a container (or anything else)."""
    kind = type(value)
    if kind is int:  # the common exact types first; subclasses (IntEnum, bool, str enums) below
        return int.__repr__(value)
    if kind is str:
        return encode_basestring_ascii(value)
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float(value)
    return None


def _encode(value: Any, out: list[str], newline: str, markers: set[int]) -> None:
    text = _scalar(value)
    if text is not None:
        out.append(text)
        return
    if isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        if all(type(item) is int for item in value):  # a shape: one join
            out.append("[" + inner + ("," + inner).join(map(int.__repr__, value)) + newline + "]")
            return
        _enter(value, markers)
        separator = "[" + inner
        for item in value:
            out.append(separator)
            separator = "," + inner
            text = _scalar(item)
            if text is None:
                _encode(item, out, inner, markers)
            else:
                out.append(text)
        out.append(newline + "]")
        markers.discard(id(value))
        return
    if isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        _enter(value, markers)
        inner = newline + "  "
        separator = "{" + inner
        append = out.append
        for key, item in value.items():
            append(separator)
            separator = "," + inner
            append((encode_basestring_ascii(key) if type(key) is str else _key(key)) + ": ")
            kind = type(item)  # the exact common types inline; anything else through _scalar / _encode
            if kind is str:
                append(encode_basestring_ascii(item))
            elif kind is int:
                append(int.__repr__(item))
            elif item is None:
                append("null")
            else:
                text = _scalar(item)
                if text is None:
                    _encode(item, out, inner, markers)
                else:
                    append(text)
        append(newline + "}")
        markers.discard(id(value))
        return
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _enter(container: object, markers: set[int]) -> None:
    marker = id(container)
    if marker in markers:
        raise ValueError("Circular reference detected")
    markers.add(marker)


def dumps(value: Any) -> str:
    """``json.dumps(value, indent=2)`` (module doc)."""
    out: list[str] = []
    _encode(value, out, "\n", set())
    return "".join(out)
