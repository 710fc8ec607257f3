"""The built-in strategies in SGLang's selection order (create_memory_pool_configurator); first applicable wins.

1. DeepSeek-V4 and hybrid SWA -> DSV4PoolConfigurator (SGLang up to 0.5.20: RatioOnlyDSV4PoolConfigurator)
2. hybrid SWA with the request cap conditions -> SWAChunkCapPoolConfigurator
3. hybrid SWA -> HybridSWAPoolConfigurator
4. otherwise the Default family (same numbers): HybridLinear (Mamba-ish), Ascend (NPU), Default.

The vLLM strategies (:mod:`.vllm.strategies`) come first; the registry asks each strategy only
about contexts of its own engine (``registry.serves``), so the two engines never mix.

A strategy's module loads its family's pools and geometry, which a plan of another family never
reads, so each built-in is imported only when a context could select it: :data:`_ENTRIES` pairs
it with a condition its ``is_applicable`` implies (the geometry field of its family, the NPU
device). :func:`select_builtin` asks them in order and, where the condition holds, the strategy
itself, so it answers as asking every strategy would (``tests/test_strategy_registry.py`` checks
both on the catalog).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from ..context import DeviceKind, KVCacheContext
from ..releases import VLLM
from .base import PoolConfigurator


def _vllm(ctx: KVCacheContext) -> bool:
    return ctx.release.engine == VLLM  # VLLMStrategy.is_applicable


def _dsv4(ctx: KVCacheContext) -> bool:
    return ctx.geometry.dsv4 is not None  # uses_dsv4_pools


def _hybrid_swa(ctx: KVCacheContext) -> bool:
    return ctx.geometry.hybrid_swa is not None  # HybridSWAPoolConfigurator.is_applicable


def _mamba(ctx: KVCacheContext) -> bool:
    return ctx.geometry.mamba is not None  # HybridLinearPoolConfigurator.is_applicable


def _npu(ctx: KVCacheContext) -> bool:
    return ctx.device is DeviceKind.NPU  # is_ascend_device


def _always(ctx: KVCacheContext) -> bool:
    return True


#: ``(module, class, condition its is_applicable implies)``, in selection order
_ENTRIES: tuple[tuple[str, str, Callable[[KVCacheContext], bool]], ...] = (
    ("vllm.strategies", "VLLMUnmodelledStrategy", _vllm),  # vllm.strategies.VLLM_STRATEGIES order
    ("vllm.strategies", "VLLMMambaHybridStrategy", _vllm),
    ("vllm.strategies", "VLLMAttentionStrategy", _vllm),
    ("dsv4", "DSV4PoolConfigurator", _dsv4),
    ("dsv4", "RatioOnlyDSV4PoolConfigurator", _dsv4),
    ("hybrid_swa", "SWAChunkCapPoolConfigurator", _hybrid_swa),
    ("hybrid_swa", "HybridSWAPoolConfigurator", _hybrid_swa),
    ("hybrid_linear", "HybridLinearPoolConfigurator", _mamba),
    ("ascend", "AscendPoolConfigurator", _npu),
    ("default", "DefaultPoolConfigurator", _always),
)


def _load(module: str, name: str) -> type[PoolConfigurator]:
    strategy: type[PoolConfigurator] = getattr(importlib.import_module(f"{__package__}.{module}"), name)
    return strategy


def builtin_order() -> tuple[type[PoolConfigurator], ...]:
    """Every built-in strategy, in selection order (imports them all)."""
    return tuple(_load(module, name) for module, name, _ in _ENTRIES)


def select_builtin(ctx: KVCacheContext) -> type[PoolConfigurator] | None:
    """The first built-in strategy applicable to ``ctx``, loading only those it could be."""
    for module, name, may_apply in _ENTRIES:
        if may_apply(ctx):
            strategy = _load(module, name)
            if strategy.engine == ctx.release.engine and strategy.is_applicable(ctx):  # registry.serves
                return strategy
    return None


def __getattr__(name: str) -> Any:
    if name == "BUILTIN_ORDER":  # the tuple of classes, as this module exported it (loads them all)
        return builtin_order()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
