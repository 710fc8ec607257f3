"""A readable diff of two golden documents: which size moved and by how much, which buffer changed.

Works on documents as they are stored (JSON data; floats as ``repr`` strings, see
:mod:`kvstrategies.golden.snapshot`). Buffers are matched by name; per-layer buffers that change the same
way are reported once (``v_buffer[0..31] (32 buffers): shape [..] -> [..]``). Output order:
strategy and cell first, then sizes, then pools, then totals, then anything else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

_ORDER = (
    "case",
    "golden_format",
    "configurator",
    "cell_size",
    "available_bytes",
    "sizes",
    "sizes_from_max_tokens",
    "pool_sizes",
    "resolved",
    "pools",
    "planned_bytes",
    "allocated_bytes",
    "totals",
)
_LAYER = re.compile(r"^(?P<stem>.*)\[(?P<index>\d+)\](?P<rest>.*)$")
_BUFFER_FIELDS = ("shape", "dtype", "nbytes", "role", "view_of", "view_index", "view_length", "engine_facing", "device")


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def describe_change(old: Any, new: Any) -> str:
    """``old -> new`` with the signed delta (and percentage) when both are numbers."""
    text = f"{_show(old)} -> {_show(new)}"
    a, b = _number(old), _number(new)
    if a is None or b is None:
        return text
    delta = b - a
    if isinstance(delta, int) and delta.bit_length() > 256:  # a damaged snapshot: no exact delta to show
        return text
    shown = f"{delta:+d}" if isinstance(delta, int) else f"{delta:+.6g}"
    if a:
        try:
            return f"{text} ({shown}, {delta / a * 100:+.3g}%)"
        except OverflowError:
            return f"{text} ({shown})"
    return f"{text} ({shown})"


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in sorted(value.items())) + "}"
    return str(value)


def _ordered_keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    keys = set(old) | set(new)
    first = [k for k in _ORDER if k in keys]
    return first + sorted(keys - set(first))


def _generic(path: str, old: Any, new: Any, out: list[str]) -> None:
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in _ordered_keys(old, new):
            sub = f"{path}.{key}" if path else key
            if key not in old:
                out.append(f"{sub}: added {_show(new[key])}")
            elif key not in new:
                out.append(f"{sub}: removed (was {_show(old[key])})")
            else:
                _generic(sub, old[key], new[key], out)
        return
    out.append(f"{path}: {describe_change(old, new)}")


def _ranges(indices: Iterable[int]) -> str:
    values = sorted(indices)
    parts: list[str] = []
    start = prev = values[0]
    for value in values[1:]:
        if value == prev + 1:
            prev = value
            continue
        parts.append(f"{start}..{prev}" if prev > start else f"{start}")
        start = prev = value
    parts.append(f"{start}..{prev}" if prev > start else f"{start}")
    return ",".join(parts)


def _grouped(items: list[tuple[str, str]]) -> list[str]:
    """Merge ``(buffer name, description)`` pairs that differ only in a layer index."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    singles: list[tuple[str, str]] = []
    order: list[tuple[str, str, str] | tuple[str, str]] = []
    for name, text in items:
        match = _LAYER.match(name)
        if match is None:
            singles.append((name, text))
            order.append((name, text))
            continue
        key = (match["stem"], match["rest"], text)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(match["index"]))
    lines = []
    for entry in order:
        if len(entry) == 2:
            lines.append(f"{entry[0]}: {entry[1]}")
            continue
        stem, rest, text = entry
        indices = groups[(stem, rest, text)]
        count = f" ({len(indices)} buffers)" if len(indices) > 1 else ""
        lines.append(f"{stem}[{_ranges(indices)}]{rest}{count}: {text}")
    return lines


def _buffer_summary(buf: Mapping[str, Any]) -> str:
    """``shape [4] torch.bfloat16 8 B, view of X``; SGLang's recorded buffers carry no bytes, so none are said."""
    text = f"shape {_show(buf.get('shape'))} {buf.get('dtype')}"
    if buf.get("nbytes") is not None:
        text += f" {buf['nbytes']} B"
    if buf.get("view_of") is not None:
        text += f", view of {buf['view_of']}"
    return text


def _buffer_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    parts = []
    for key in _BUFFER_FIELDS:
        if old.get(key) != new.get(key):
            parts.append(f"{key} {describe_change(old.get(key), new.get(key))}")
    extra = sorted((set(old) | set(new)) - set(_BUFFER_FIELDS) - {"name"})
    for key in extra:
        if old.get(key) != new.get(key):
            parts.append(f"{key} {describe_change(old.get(key), new.get(key))}")
    return "; ".join(parts)


def diff_buffers(pool: str, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    """Removed, added and changed buffers of one pool (matched by name), per-layer grouped."""
    before = {b["name"]: b for b in old}
    after = {b["name"]: b for b in new}
    removed = [(n, f"removed ({_buffer_summary(before[n])})") for n in before if n not in after]
    added = [(n, f"added ({_buffer_summary(after[n])})") for n in after if n not in before]
    changed = [(n, _buffer_changes(before[n], after[n])) for n in before if n in after and before[n] != after[n]]
    lines = [f"pools.{pool}: {line}" for line in _grouped(changed) + _grouped(removed) + _grouped(added)]
    if not lines and [b["name"] for b in old] != [b["name"] for b in new]:
        lines.append(f"pools.{pool}: buffer order changed")
    return lines


def _pool_summary(pool: Mapping[str, Any]) -> str:
    """``MHATokenToKVPool (64 buffers, 1024 B)``; a recorded SGLang pool has no planned bytes to say."""
    size = "" if pool.get("planned_bytes") is None else f", {pool['planned_bytes']} B"
    return f"{pool.get('pool_class')} ({len(pool.get('buffers', []))} buffers{size})"


def _diff_pools(old: Mapping[str, Any], new: Mapping[str, Any], out: list[str]) -> None:
    for name in sorted(set(old) | set(new)):
        if name not in old:
            out.append(f"pools.{name}: added {_pool_summary(new[name])}")
            continue
        if name not in new:
            out.append(f"pools.{name}: removed {_pool_summary(old[name])}")
            continue
        a, b = old[name], new[name]
        keys = set(a) | set(b)
        first = [k for k in ("pool_class", "attributes", "buffers", "planned_bytes") if k in keys]
        for key in first + sorted(keys - set(first)):
            if key == "buffers":
                out.extend(diff_buffers(name, a.get("buffers", []), b.get("buffers", [])))
            else:
                _generic(f"pools.{name}.{key}", a.get(key), b.get(key), out)


#: keys that describe the recording, not the answer: two releases' snapshots of one case differ
#: in ``engine`` alone when SGLang's answer did not move
RECORDING_KEYS = frozenset({"engine"})


def diff_documents(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Lines describing how ``new`` differs from ``old`` (empty when they are equal).

    The recording's ``engine`` (``sglang 0.5.15``) is not part of the answer and is not compared.
    """
    out: list[str] = []
    for key in _ordered_keys(old, new):
        if key in RECORDING_KEYS:
            continue
        if key not in old:
            out.append(f"{key}: added {_show(new[key])}")
        elif key not in new:
            out.append(f"{key}: removed (was {_show(old[key])})")
        elif key == "pools" and isinstance(old[key], dict) and isinstance(new[key], dict):
            _diff_pools(old[key], new[key], out)
        else:
            _generic(key, old[key], new[key], out)
    return out
