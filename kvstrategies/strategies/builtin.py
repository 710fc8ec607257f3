"""The built-in strategies in SGLang's selection order (sizing.md 9); first applicable wins.

1. DeepSeek-V4 and hybrid SWA -> DSV4PoolConfigurator (SGLang up to 0.5.20: RatioOnlyDSV4PoolConfigurator)
2. hybrid SWA with the request cap conditions -> SWAChunkCapPoolConfigurator
3. hybrid SWA -> HybridSWAPoolConfigurator
4. otherwise the Default family (same numbers): HybridLinear (Mamba-ish), Ascend (NPU), Default.

The vLLM strategies (:mod:`.vllm.strategies`) come first; the registry asks each strategy only
about contexts of its own engine (``registry.serves``), so the two engines never mix.
"""

from __future__ import annotations

from .ascend import AscendPoolConfigurator
from .base import PoolConfigurator
from .default import DefaultPoolConfigurator
from .dsv4 import DSV4PoolConfigurator, RatioOnlyDSV4PoolConfigurator
from .hybrid_linear import HybridLinearPoolConfigurator
from .hybrid_swa import HybridSWAPoolConfigurator, SWAChunkCapPoolConfigurator
from .vllm.strategies import VLLM_STRATEGIES

BUILTIN_ORDER: tuple[type[PoolConfigurator], ...] = (
    *VLLM_STRATEGIES,
    DSV4PoolConfigurator,
    RatioOnlyDSV4PoolConfigurator,
    SWAChunkCapPoolConfigurator,
    HybridSWAPoolConfigurator,
    HybridLinearPoolConfigurator,
    AscendPoolConfigurator,
    DefaultPoolConfigurator,
)
