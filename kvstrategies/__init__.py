"""kvstrategies: plan and build SGLang-compatible KV-cache pools.

Planning (``plan``) is plain Python and never imports torch; ``build`` allocates exactly the
planned layout on any torch device, ``meta`` included. The names below load on first use
(PEP 562), so ``import kvstrategies.cli.app`` or one submodule pays only for what it reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .core.lazy_exports import lazy_exports

__version__ = "0.2.0"

#: public name -> the module that defines it
_EXPORTS = {
    "Plan": "kvstrategies.api",
    "build": "kvstrategies.api",
    "plan": "kvstrategies.api",
    "AttentionBackends": "kvstrategies.context",
    "DeviceKind": "kvstrategies.context",
    "EngineKnobs": "kvstrategies.context",
    "KVCacheContext": "kvstrategies.context",
    "KVCacheSettings": "kvstrategies.context",
    "ParallelLayout": "kvstrategies.context",
    "Platform": "kvstrategies.context",
    "SchedulingConfig": "kvstrategies.context",
    "SpecAlgorithm": "kvstrategies.context",
    "SpeculativeConfig": "kvstrategies.context",
    "DType": "kvstrategies.core.dtypes",
    "KVCacheDtype": "kvstrategies.core.dtypes",
    "resolve_kv_cache_dtype": "kvstrategies.core.dtypes",
    "KVCacheConfigError": "kvstrategies.errors",
    "ModelGeometry": "kvstrategies.models",
    "parse_hf_config": "kvstrategies.models",
    "KVPools": "kvstrategies.pools.build",
    "PoolSizes": "kvstrategies.core.sizing",
    "PoolConfigurator": "kvstrategies.strategies",
    "register": "kvstrategies.strategies",
    "select_configurator": "kvstrategies.strategies",
}

if TYPE_CHECKING:
    from .api import Plan, build, plan
    from .context import (
        AttentionBackends,
        DeviceKind,
        EngineKnobs,
        KVCacheContext,
        KVCacheSettings,
        ParallelLayout,
        Platform,
        SchedulingConfig,
        SpecAlgorithm,
        SpeculativeConfig,
    )
    from .core.dtypes import DType, KVCacheDtype, resolve_kv_cache_dtype
    from .core.sizing import PoolSizes
    from .errors import KVCacheConfigError
    from .models import ModelGeometry, parse_hf_config
    from .pools.build import KVPools
    from .strategies import PoolConfigurator, register, select_configurator


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "AttentionBackends",
    "DType",
    "DeviceKind",
    "EngineKnobs",
    "KVCacheConfigError",
    "KVCacheContext",
    "KVCacheDtype",
    "KVCacheSettings",
    "KVPools",
    "ModelGeometry",
    "ParallelLayout",
    "Plan",
    "Platform",
    "PoolConfigurator",
    "PoolSizes",
    "SchedulingConfig",
    "SpecAlgorithm",
    "SpeculativeConfig",
    "build",
    "parse_hf_config",
    "plan",
    "register",
    "resolve_kv_cache_dtype",
    "select_configurator",
]
