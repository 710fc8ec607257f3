"""Shipped HF ``config.json`` files of real models, addressable by short name or HF id.

``index.json`` maps each short name (the file's stem) to the model's Hugging Face id.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from ..core.jsonio import parse_json_text, require_object
from ..errors import KVCacheConfigError

#: the package folder (the files ship beside this module, as the checkpoints' do)
_HERE = Path(__file__).resolve().parent


@cache
def preset_index() -> dict[str, str]:
    """``{short name: HF id}`` for every shipped preset."""
    text = (_HERE / "index.json").read_text(encoding="utf-8")
    return require_object(parse_json_text(text, "presets/index.json"), "presets/index.json", "the preset index")


def preset_names() -> tuple[str, ...]:
    return tuple(sorted(preset_index()))


def _normalise(name: str) -> str:
    return str(name).strip().lower().replace("_", "-")


def resolve_preset_name(name: str) -> str | None:
    """The short name for ``name`` (a short name or a HF id, any case), or None."""
    key = _normalise(name)
    index = preset_index()
    if key in index:
        return key
    for short, hf_id in index.items():
        if _normalise(hf_id) == key or _normalise(hf_id.split("/", 1)[-1]) == key:
            return short
    return None


def load_preset_config(name: str) -> dict[str, Any]:
    """The raw config dict of a preset; an unknown name lists the known ones. A fresh dict per call."""
    return _read_preset(_short_name(name))


def shared_preset_config(name: str) -> Mapping[str, Any]:
    """:func:`load_preset_config`'s config, read once per process and shared: the planner reads a
    preset's config many times per plan (the fix search, a sweep) and never changes it."""
    return _read_preset_once(_short_name(name))


def _short_name(name: str) -> str:
    short = resolve_preset_name(name)
    if short is None:
        raise KVCacheConfigError(
            f"unknown preset {name!r}; known presets: {', '.join(preset_names())} "
            "(or pass a path to a config.json or a model folder)"
        )
    return short


def _read_preset(short: str) -> dict[str, Any]:
    source = f"preset {short} (presets/{short}.json)"
    text = (_HERE / f"{short}.json").read_text(encoding="utf-8")
    return require_object(parse_json_text(text, source), source, "a model config")


@cache
def _read_preset_once(short: str) -> Mapping[str, Any]:
    return _read_preset(short)
