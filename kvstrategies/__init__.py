"""kvstrategies: plan and build SGLang-compatible KV-cache pools.

Planning (``plan``) is plain Python and never imports torch; ``build`` allocates exactly the
planned layout on any torch device, ``meta`` included.
"""

from __future__ import annotations

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
from .dtypes import DType, KVCacheDtype, resolve_kv_cache_dtype
from .errors import KVCacheConfigError
from .models import ModelGeometry, parse_hf_config
from .pools.build import KVPools
from .sizing import PoolSizes
from .strategies import PoolConfigurator, register, select_configurator

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
__version__ = "0.2.0"
