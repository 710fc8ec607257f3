"""Small builders shared by the tests: a context from a preset and a few overrides."""

from __future__ import annotations

from typing import Any

from kvstrategies.case import parse_case
from kvstrategies.context import KVCacheSettings

GIB = 2**30


def case_settings(preset_or_config: str | dict[str, Any], **fields: Any) -> KVCacheSettings:
    """``KVCacheSettings`` for a preset name (or an inline HF config) plus case-file fields."""
    case: dict[str, Any] = {"available_bytes": 1, **fields}
    if isinstance(preset_or_config, str):
        case["preset"] = preset_or_config
    else:
        case["hf_config"] = preset_or_config
    return parse_case(case).settings
