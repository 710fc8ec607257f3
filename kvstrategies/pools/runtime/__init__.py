"""Typed pools: the read/write API an engine uses on built tensors (write_path.md, ReqToTokenPool).

Importing this package imports torch; planning never does. ``kvstrategies.build(plan, device)``
returns :class:`~kvstrategies.pools.build.KVPools` whose pools are these classes.
"""

from .base import KVWriteLoc, ReadOnlyKVPool, TypedPool, sub_pool
from .composite import HybridLinearKVPool, MiniMaxSparseKVPool, SWAKVPool
from .dsa import DSATokenToKVPool, dequantize_packed_latent, quantize_packed_latent
from .factory import build_typed_pools, make_allocator, typed_pool, typed_req_pool
from .mamba import MambaPool
from .mha import MHATokenToKOnlyPool, MHATokenToKVPool
from .mla import MLATokenToKVPool, MLATokenToKVPoolFP4
from .quant_mha import MHATokenToKVPoolFP4, MHATokenToKVPoolMXFP8
from .requests import HybridReqToTokenPool, ReqToTokenPool

__all__ = [
    "DSATokenToKVPool",
    "HybridLinearKVPool",
    "HybridReqToTokenPool",
    "KVWriteLoc",
    "MHATokenToKOnlyPool",
    "MHATokenToKVPool",
    "MHATokenToKVPoolFP4",
    "MHATokenToKVPoolMXFP8",
    "MLATokenToKVPool",
    "MLATokenToKVPoolFP4",
    "MambaPool",
    "MiniMaxSparseKVPool",
    "ReadOnlyKVPool",
    "ReqToTokenPool",
    "SWAKVPool",
    "TypedPool",
    "build_typed_pools",
    "dequantize_packed_latent",
    "make_allocator",
    "quantize_packed_latent",
    "sub_pool",
    "typed_pool",
    "typed_req_pool",
]
