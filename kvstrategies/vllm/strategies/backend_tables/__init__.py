"""vLLM's attention backend tables, one generated module per release line (``tools/list_vllm_backends.py``)."""

from __future__ import annotations

from types import ModuleType

from . import v0_32_0, v0_33_0, v0_34_0

#: release line -> its generated table module (``SELECTIONS``, ``BACKENDS``)
TABLES: dict[str, ModuleType] = {module.VERSION: module for module in (v0_32_0, v0_33_0, v0_34_0)}
