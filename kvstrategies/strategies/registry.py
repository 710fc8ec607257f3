"""The ordered strategy registry: the first strategy whose ``is_applicable(ctx)`` holds wins.

Order follows SGLang's factory (sglang.srt.model_executor.pool_configurator.
create_memory_pool_configurator): DeepSeek-V4, the request-capped SWA pool, hybrid
SWA, then the Default family (hybrid linear, Ascend NPU, Default). Third parties add theirs
with :func:`register` (before a built-in by name, or first by default).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TypeVar

from ..context import KVCacheContext, is_hybrid_swa
from ..errors import UnsupportedConfigurationError
from .base import PoolConfigurator, Strategy, require_pool_configurator
from .checks import is_ascend_device, is_vllm, uses_dsv4_pools, uses_mamba_pools


class _Builtin:
    """A built-in strategy not imported yet: its module, its
    class name, and the family predicate its ``is_applicable`` starts with (``None``: every context).

    A strategy's module loads its family's pools and geometry, which a plan of another family never
    reads; where the predicate fails, the strategy cannot apply, so it is not imported to be asked.
    """

    __slots__ = ("module", "name", "family")

    def __init__(self, module: str, name: str, family: Callable[[KVCacheContext], bool] | None) -> None:
        self.module = module
        self.name = name
        self.family = family

    def load(self) -> type[Strategy]:
        strategy: type[Strategy] = getattr(importlib.import_module(self.module), self.name)
        return strategy


#: the built-in strategies in selection order, each with its family predicate
BUILTINS: tuple[_Builtin, ...] = (
    _Builtin("kvstrategies.vllm.strategies.strategies", "VLLMDeepSeekV4Strategy", is_vllm),  # VLLM_STRATEGIES order
    _Builtin("kvstrategies.vllm.strategies.strategies", "VLLMUnmodelledStrategy", is_vllm),
    _Builtin("kvstrategies.vllm.strategies.strategies", "VLLMMambaHybridStrategy", is_vllm),
    _Builtin("kvstrategies.vllm.strategies.strategies", "VLLMAttentionStrategy", is_vllm),
    _Builtin("kvstrategies.strategies.dsv4", "DSV4PoolConfigurator", uses_dsv4_pools),
    _Builtin("kvstrategies.strategies.dsv4", "RatioOnlyDSV4PoolConfigurator", uses_dsv4_pools),
    _Builtin("kvstrategies.strategies.hybrid_swa", "SWAChunkCapPoolConfigurator", is_hybrid_swa),
    _Builtin("kvstrategies.strategies.hybrid_swa", "HybridSWAPoolConfigurator", is_hybrid_swa),
    _Builtin("kvstrategies.strategies.hybrid_linear", "HybridLinearPoolConfigurator", uses_mamba_pools),
    _Builtin("kvstrategies.strategies.ascend", "AscendPoolConfigurator", is_ascend_device),
    _Builtin("kvstrategies.strategies.default", "DefaultPoolConfigurator", None),
)
#: the strategies in selection order; a built-in is imported (and replaced by its class) the first
#: time its family predicate holds, or when the whole list is read
_REGISTRY: list[type[Strategy] | _Builtin] = list(BUILTINS)


_S = TypeVar("_S", bound=type[Strategy])


def _name(entry: type[Strategy] | _Builtin) -> str:
    return entry.name if isinstance(entry, _Builtin) else entry.__name__


def registered() -> tuple[type[Strategy], ...]:
    """The strategies in selection order (imports every built-in)."""
    loaded = [entry.load() if isinstance(entry, _Builtin) else entry for entry in _REGISTRY]
    _REGISTRY[:] = loaded
    return tuple(loaded)


def register(strategy: _S, *, before: str | None = None) -> _S:
    """Add ``strategy``; ``before`` names a registered class to insert ahead of (default: first)."""
    unregister(strategy)
    if before is None:
        _REGISTRY.insert(0, strategy)
        return strategy
    for position, existing in enumerate(_REGISTRY):
        if _name(existing) == before:
            _REGISTRY.insert(position, strategy)
            return strategy
    raise UnsupportedConfigurationError(
        f"cannot register {strategy.__name__} before {before!r}: no such strategy; "
        f"registered: {[s.__name__ for s in registered()]}"
    )


def unregister(strategy: type[Strategy]) -> None:
    if strategy in registered():
        _REGISTRY.remove(strategy)


def serves(strategy: type[Strategy], ctx: KVCacheContext) -> bool:
    """The engine guard: a strategy sizes only its own engine's contexts (``Strategy.engine``)."""
    return strategy.engine == ctx.release.engine


def select_configurator_class(ctx: KVCacheContext) -> type[Strategy]:
    for position, entry in enumerate(_REGISTRY):
        if isinstance(entry, _Builtin):
            if entry.family is not None and not entry.family(ctx):
                continue
            entry = _REGISTRY[position] = entry.load()
        if serves(entry, ctx) and entry.is_applicable(ctx):
            return entry
    raise UnsupportedConfigurationError(
        f"no KV-cache strategy applies to {ctx.geometry.architectures or ctx.geometry.model_type!r} "
        f"on {ctx.device.value}; registered: {[_name(s) for s in _REGISTRY]}"
    )


def select_configurator(ctx: KVCacheContext) -> Strategy:
    """An instance of the first applicable strategy for ``ctx`` (any engine)."""
    return select_configurator_class(ctx)(ctx)


def select_pool_configurator(ctx: KVCacheContext) -> PoolConfigurator:
    """The first applicable strategy for an SGLang-shaped ``ctx``: a :class:`PoolConfigurator`, else refused."""
    return require_pool_configurator(select_configurator(ctx))
