"""vLLM's attention backend tables (``tools/list_vllm_backends.py``): the newest release line in full,
each older line as its changes to the next newer line, so an entry is written once."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from . import (  # fmt: skip
    v0_11_0,
    v0_12_0,
    v0_13_0,
    v0_14_1,
    v0_15_1,
    v0_16_0,
    v0_17_1,
    v0_18_1,
    v0_19_1,
    v0_20_2,
    v0_21_0,
    v0_22_1,
    v0_23_0,
    v0_24_0,
    v0_25_1,
    v0_26_0,
    v0_27_1,
    v0_28_0,
    v0_29_0,
    v0_30_0,
    v0_31_0,
    v0_32_0,
    v0_33_0,
    v0_34_0,
)

Backend = tuple[tuple[int, ...], int, tuple[str, ...] | None]


@dataclass(frozen=True)
class BackendTable:
    """One release line's ``selections`` (GPU profile -> valid backends, best first) and ``backends``
    (``"<major>.<minor>|backend"`` -> kernel block sizes, preferred block, KV layouts); keys as in
    ``v0_34_0.py``'s docstring."""

    version: str
    selections: dict[str, tuple[str, ...]]
    backends: dict[str, Backend]


def _tables(modules: tuple[ModuleType, ...]) -> dict[str, BackendTable]:
    """Each line's full table, oldest first: the newest as written, each older one as its changes
    applied to the next newer line's resolved table (``BASE``)."""
    tables: dict[str, BackendTable] = {}
    for module in reversed(modules):
        if not hasattr(module, "BASE"):  # the newest line, in full
            tables[module.VERSION] = BackendTable(module.VERSION, dict(module.SELECTIONS), dict(module.BACKENDS))
            continue
        base = tables[module.BASE]
        selections = {k: v for k, v in base.selections.items() if k not in module.SELECTIONS_REMOVED}
        backends = {k: v for k, v in base.backends.items() if k not in module.BACKENDS_REMOVED}
        tables[module.VERSION] = BackendTable(module.VERSION, {**selections, **module.SELECTIONS},
                                              {**backends, **module.BACKENDS})  # fmt: skip
    return {module.VERSION: tables[module.VERSION] for module in modules}


#: the release lines' modules, oldest first
_MODULES = (v0_11_0, v0_12_0, v0_13_0, v0_14_1, v0_15_1, v0_16_0, v0_17_1, v0_18_1, v0_19_1, v0_20_2, v0_21_0, v0_22_1,
            v0_23_0, v0_24_0, v0_25_1, v0_26_0, v0_27_1, v0_28_0, v0_29_0, v0_30_0, v0_31_0, v0_32_0, v0_33_0,
            v0_34_0)  # fmt: skip
#: release line -> its table
TABLES: dict[str, BackendTable] = _tables(_MODULES)
