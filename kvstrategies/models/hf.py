"""Reading HuggingFace ``config.json`` dicts: typed field access with clear errors."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..core.validate import MAX_LAYERS, finite_float, shown
from ..errors import KVCacheConfigError
from .architectures import with_nested_defaults

ConfigDict = Mapping[str, Any]

#: the largest integer a config field may hold (2**40, about 1.1e12): far above any real model's
#: dims, head counts or context length, low enough that products of a few fields stay finite floats
MAX_CONFIG_INT = 2**40


def text_config(config: ConfigDict) -> ConfigDict:
    """The language model's config: ``text_config`` (or ``llm_config``) when nested, with its config
    class's defaults for what it omits (:func:`~kvstrategies.models.architectures.with_nested_defaults`),
    else the root."""
    for key in ("text_config", "llm_config", "language_config"):
        nested = config.get(key)
        if isinstance(nested, Mapping) and nested:
            return with_nested_defaults(config, nested)
    return config


#: the most names an ``architectures`` list may hold (real configs: one)
MAX_ARCHITECTURES = 64


def architectures(config: ConfigDict) -> tuple[str, ...]:
    """The top-level ``architectures`` list (nested wrappers carry it at the root)."""
    archs = config.get("architectures")
    if archs is None:
        archs = text_config(config).get("architectures") or ()
    if isinstance(archs, str):
        archs = (archs,)
    if isinstance(archs, (list, tuple)) and len(archs) > MAX_ARCHITECTURES:
        raise KVCacheConfigError(
            f"config field 'architectures' lists {len(archs):,} names; a config names one (at most "
            f"{MAX_ARCHITECTURES}); fix config.json"
        )
    if not isinstance(archs, (list, tuple)) or not all(isinstance(a, str) and len(a) <= 256 for a in archs):
        raise KVCacheConfigError(f"config field 'architectures' must be a list of names, got {archs!r:.120}")
    return tuple(archs)


def get_int(
    cfg: ConfigDict, key: str, default: int | None = None, *, minimum: int = 0, maximum: int = MAX_CONFIG_INT
) -> int:
    """``cfg[key]`` as an int in ``[minimum, maximum]``; a missing key without default is an error."""
    value = cfg.get(key)
    if value is None:
        if default is None:
            raise KVCacheConfigError(
                f"config field {key!r} is missing; add it to config.json (it sizes the KV cache)"
            )
        return default
    return as_int(value, key, minimum=minimum, maximum=maximum)


def get_opt_int(cfg: ConfigDict, key: str, *, minimum: int = 0, maximum: int = MAX_CONFIG_INT) -> int | None:
    value = cfg.get(key)
    return None if value is None else as_int(value, key, minimum=minimum, maximum=maximum)


def as_int(value: Any, key: str, *, minimum: int = 0, maximum: int = MAX_CONFIG_INT) -> int:
    """Accept ints and integral floats (``128.0``); reject bools, strings, NaN, fractions, absurd sizes."""
    if isinstance(value, bool):
        raise KVCacheConfigError(f"config field {key!r} must be an integer, got {value!r}")
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise KVCacheConfigError(
            f"config field {key!r} must be an integer, got {shown(value)} ({type(value).__name__}); fix config.json"
        )
    if value < minimum:
        raise KVCacheConfigError(f"config field {key!r} must be >= {minimum}, got {shown(value)}; fix config.json")
    if value > maximum:
        raise KVCacheConfigError(
            f"config field {key!r} is {shown(value)}, above the largest value accepted ({maximum}); fix config.json"
        )
    return value


def as_float(value: Any, key: str, *, minimum: float = 0.0, maximum: float = float(MAX_CONFIG_INT)) -> float:
    """A finite number in ``(minimum, maximum]`` (ints accepted); bools, strings, NaN and infinities rejected."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KVCacheConfigError(
            f"config field {key!r} must be a number, got {shown(value)} ({type(value).__name__}); fix config.json"
        )
    number = finite_float(value)
    if not (math.isfinite(number) and minimum < number <= maximum):
        raise KVCacheConfigError(
            f"config field {key!r} must be a finite number in ({minimum}, {maximum}], got {shown(value)}; "
            "fix config.json"
        )
    return number


def first_present(cfg: ConfigDict, keys: tuple[str, ...]) -> tuple[str, Any] | None:
    """The first ``(key, value)`` among ``keys`` whose value is not None."""
    for key in keys:
        value = cfg.get(key)
        if value is not None:
            return key, value
    return None


def int_list(cfg: ConfigDict, key: str) -> tuple[int, ...] | None:
    """A list of ints, or None when absent."""
    value = cfg.get(key)
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise KVCacheConfigError(f"config field {key!r} must be a list of integers, got {value!r}")
    if len(value) > MAX_LAYERS + 16:
        raise KVCacheConfigError(
            f"config field {key!r} has {len(value)} entries, more than any model has layers "
            f"({MAX_LAYERS}); fix config.json"
        )
    return tuple(as_int(v, f"{key}[{i}]") for i, v in enumerate(value))


def str_list(cfg: ConfigDict, key: str) -> tuple[str, ...] | None:
    value = cfg.get(key)
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise KVCacheConfigError(f"config field {key!r} must be a list of strings, got {value!r:.80}")
    if len(value) > MAX_LAYERS + 16:
        raise KVCacheConfigError(
            f"config field {key!r} has {len(value)} entries, more than any model has layers "
            f"({MAX_LAYERS}); fix config.json"
        )
    return tuple(value)
