"""Small builders shared by the tests: a context from a preset and a few overrides."""

from __future__ import annotations

import sys
from pathlib import Path
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


TOOLS = Path(__file__).resolve().parents[1] / "tools"


def tool_module(name: str) -> Any:
    """``tools/NAME.py`` imported as a module (the tools are scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_kvs_tool_{name}", TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
