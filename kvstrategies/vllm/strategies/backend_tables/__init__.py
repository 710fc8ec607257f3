"""vLLM's attention backend tables (``tools/list_vllm_backends.py``): the newest release line in full,
each older line as its changes to it, so a table is written once."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from . import v0_31_0, v0_32_0, v0_33_0, v0_34_0

Backend = tuple[tuple[int, ...], int, tuple[str, ...] | None]


@dataclass(frozen=True)
class BackendTable:
    """One release line's ``selections`` (GPU profile -> valid backends, best first) and ``backends``
    (``"<major>.<minor>|backend"`` -> kernel block sizes, preferred block, KV layouts); keys as in
    ``v0_34_0.py``'s docstring."""

    version: str
    selections: dict[str, tuple[str, ...]]
    backends: dict[str, Backend]


def _table(module: ModuleType, newest: ModuleType) -> BackendTable:
    if not hasattr(module, "BASE"):  # the newest line, in full
        return BackendTable(module.VERSION, dict(module.SELECTIONS), dict(module.BACKENDS))
    selections = {k: v for k, v in newest.SELECTIONS.items() if k not in module.SELECTIONS_REMOVED}
    backends = {k: v for k, v in newest.BACKENDS.items() if k not in module.BACKENDS_REMOVED}
    return BackendTable(module.VERSION, {**selections, **module.SELECTIONS}, {**backends, **module.BACKENDS})


#: release line -> its table
TABLES: dict[str, BackendTable] = {m.VERSION: _table(m, v0_34_0) for m in (v0_31_0, v0_32_0, v0_33_0, v0_34_0)}
