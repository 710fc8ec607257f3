"""The ordered strategy registry: the first strategy whose ``is_applicable(ctx)`` holds wins.

Order follows SGLang's factory (sglang.srt.model_executor.pool_configurator.
create_memory_pool_configurator): DeepSeek-V4, the request-capped SWA pool, hybrid
SWA, then the Default family (hybrid linear, Ascend NPU, Default). Third parties add theirs
with :func:`register` (before a built-in by name, or first by default).
"""

from __future__ import annotations

from typing import TypeVar

from ..context import KVCacheContext
from ..errors import UnsupportedConfigurationError
from .base import PoolConfigurator, Strategy

_REGISTRY: list[type[Strategy]] = []
_S = TypeVar("_S", bound=type[Strategy])
#: the registry holds exactly the built-ins, in order (nothing registered or removed): selection
#: may then load only the strategies a context could select (:func:`.builtin.select_builtin`)
_BUILTINS_ONLY = True


def register(strategy: _S, *, before: str | None = None) -> _S:
    """Add ``strategy``; ``before`` names a registered class to insert ahead of (default: first).

    The built-ins are registered first, so ``before="DefaultPoolConfigurator"`` works in a fresh
    process (they would otherwise load lazily, at the first selection)."""
    global _BUILTINS_ONLY
    _ensure_builtins()
    _BUILTINS_ONLY = False
    if strategy in _REGISTRY:
        _REGISTRY.remove(strategy)
    if before is None:
        _REGISTRY.insert(0, strategy)
        return strategy
    for position, existing in enumerate(_REGISTRY):
        if existing.__name__ == before:
            _REGISTRY.insert(position, strategy)
            return strategy
    raise UnsupportedConfigurationError(
        f"cannot register {strategy.__name__} before {before!r}: no such strategy; "
        f"registered: {[s.__name__ for s in _REGISTRY]}"
    )


def unregister(strategy: type[Strategy]) -> None:
    global _BUILTINS_ONLY
    _ensure_builtins()
    if strategy in _REGISTRY:
        _REGISTRY.remove(strategy)
    from .builtin import builtin_order

    _BUILTINS_ONLY = list(builtin_order()) == _REGISTRY


def registered() -> tuple[type[Strategy], ...]:
    """The strategies in selection order."""
    _ensure_builtins()
    return tuple(_REGISTRY)


def serves(strategy: type[Strategy], ctx: KVCacheContext) -> bool:
    """The engine guard: a strategy sizes only its own engine's contexts (``Strategy.engine``)."""
    return strategy.engine == ctx.release.engine


def select_configurator_class(ctx: KVCacheContext) -> type[Strategy]:
    if _BUILTINS_ONLY:
        from .builtin import select_builtin

        found = select_builtin(ctx)
        if found is not None:
            return found
    for strategy in registered():
        if serves(strategy, ctx) and strategy.is_applicable(ctx):
            return strategy
    raise UnsupportedConfigurationError(
        f"no KV-cache strategy applies to {ctx.geometry.architectures or ctx.geometry.model_type!r} "
        f"on {ctx.device.value}; registered: {[s.__name__ for s in _REGISTRY]}"
    )


def select_configurator(ctx: KVCacheContext) -> Strategy:
    """An instance of the first applicable strategy for ``ctx`` (any engine)."""
    return select_configurator_class(ctx)(ctx)


def select_pool_configurator(ctx: KVCacheContext) -> PoolConfigurator:
    """The first applicable strategy for an SGLang-shaped ``ctx``: a :class:`PoolConfigurator`, else refused."""
    strategy = select_configurator(ctx)
    if not isinstance(strategy, PoolConfigurator):
        raise UnsupportedConfigurationError(
            f"{type(strategy).__name__} sizes {ctx.release.engine} contexts, not through SGLang's pool "
            "configurator steps; plan it with kvstrategies.plan"
        )
    return strategy


_BUILTINS_LOADED = False


def _ensure_builtins() -> None:
    """Register the built-in strategies once, in create_memory_pool_configurator order (last appended = last asked)."""
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    _BUILTINS_LOADED = True
    from .builtin import builtin_order

    for strategy in builtin_order():
        if strategy not in _REGISTRY:
            _REGISTRY.append(strategy)
