"""From allocated tensors to typed pools and an allocator: what ``kvstrategies.build`` returns.

:func:`typed_pool` picks the class by the layout's ``pool_class`` (composites recurse into their
``full.`` / ``swa.`` / ``main.`` parts), :func:`make_allocator` builds the token allocator an
:class:`~kvstrategies.pools.binding.AllocatorSpec` names, and :func:`build_typed_pools` does both
for a whole :class:`~kvstrategies.pools.layout.KVPoolsLayout`.
"""

from __future__ import annotations

from typing import Any

import torch

from ...allocators import (
    PagedTokenToKVPoolAllocator,
    PureSWATokenToKVPoolAllocator,
    SWATokenToKVPoolAllocator,
    TokenToKVPoolAllocator,
)
from ...core.dtypes import DType
from ...errors import KVCacheConfigError
from ..binding import AllocatorKind, AllocatorSpec, PoolBinding
from ..build import BuiltPool, KVPools, build_pool
from ..layout import KVPoolsLayout
from .base import ReadOnlyKVPool, TypedPool, sub_pool
from .composite import HybridLinearKVPool, MiniMaxSparseKVPool, SWAKVPool
from .dsa import DSATokenToKVPool
from .mamba import MambaPool
from .mha import MHATokenToKOnlyPool, MHATokenToKVPool
from .mla import MLATokenToKVPool, MLATokenToKVPoolFP4
from .quant_mha import MHATokenToKVPoolFP4, MHATokenToKVPoolMXFP8
from .requests import HybridReqToTokenPool, ReqToTokenPool

Allocator = (
    TokenToKVPoolAllocator | PagedTokenToKVPoolAllocator | SWATokenToKVPoolAllocator | PureSWATokenToKVPoolAllocator
)

_READ_ONLY = {
    "DeepSeekV4TokenToKVPool": "docs/write_path.md (DeepSeek-V4 pools)",
    "NPUMHATokenToKVPool": "docs/write_path.md (Ascend NPU pools)",
    "NPUMHATokenToKOnlyPool": "docs/write_path.md (Ascend NPU pools)",
    "NPUMLATokenToKVPool": "docs/write_path.md (Ascend NPU pools)",
    "NPUMiniMaxSparseKVPool": "docs/write_path.md (Ascend NPU pools)",
}
_HYBRID_REQ = ("HybridReqToTokenPool", "HybridMambaDecodeReqToTokenPool")


def typed_pool(
    built: BuiltPool,
    binding: PoolBinding,
    *,
    start_layer: int | None = None,
    mamba_pool: MambaPool | None = None,
    swa_side: bool = False,
    **options: Any,
) -> TypedPool:
    """The typed token-to-KV pool over ``built`` (``start_layer`` defaults to the binding's)."""
    cls = built.layout.pool_class
    start = binding.start_layer if start_layer is None else start_layer
    kv = binding.kv_dtype.to_torch()
    common: dict[str, Any] = {"start_layer": start, **options}
    if cls in _READ_ONLY:
        return ReadOnlyKVPool(built, section=_READ_ONLY[cls], **common)
    if cls == "MHATokenToKVPool":
        if built.layout.attributes and dict(built.layout.attributes).get("quant_method") is not None:
            return MHATokenToKVPoolFP4(built, kv_dtype=kv, **common)
        return MHATokenToKVPool(built, kv_dtype=kv, **common)
    if cls == "MHATokenToKOnlyPool":
        return MHATokenToKOnlyPool(built, kv_dtype=kv, **common)
    if cls == "MHATokenToKVPoolMXFP8":
        return MHATokenToKVPoolMXFP8(built, kv_dtype=kv, **common)
    if cls in ("MLATokenToKVPool", "MLATokenToKVPoolFP4", "DSATokenToKVPool", "NSATokenToKVPool"):
        rank, rope = binding.kv_lora_rank, binding.qk_rope_head_dim
        if swa_side:
            rank, rope = binding.swa_kv_lora_rank, binding.swa_qk_rope_head_dim
        if rank is None or rope is None:
            raise KVCacheConfigError(f"{cls} needs kv_lora_rank and qk_rope_head_dim (an MLA model)")
        mla_cls = {"MLATokenToKVPool": MLATokenToKVPool, "MLATokenToKVPoolFP4": MLATokenToKVPoolFP4,
                   "DSATokenToKVPool": DSATokenToKVPool, "NSATokenToKVPool": DSATokenToKVPool}[cls]
        return mla_cls(built, kv_dtype=kv, kv_lora_rank=rank, qk_rope_head_dim=rope, **common)
    if cls == "SWAKVPool":
        full = typed_pool(sub_pool(built, "full"), binding, start_layer=0, **options)
        swa = typed_pool(sub_pool(built, "swa"), binding, start_layer=0, swa_side=True, **options)
        return SWAKVPool(built, full_kv_pool=full, swa_kv_pool=swa, **options)
    if cls == "HybridLinearKVPool":
        full = typed_pool(sub_pool(built, "full"), binding, start_layer=0, **options)
        return HybridLinearKVPool(built, full_kv_pool=full, mamba_pool=mamba_pool, **options)
    if cls == "MiniMaxSparseKVPool":
        return _minimax(built, binding, start, options)
    return ReadOnlyKVPool(built, section=f"docs/write_path.md (no store for {cls})", **common)


def _minimax(built: BuiltPool, binding: PoolBinding, start: int, options: dict[str, Any]) -> MiniMaxSparseKVPool:
    layers = binding.minimax_layers
    if layers is None:
        raise KVCacheConfigError("MiniMaxSparseKVPool needs the MiniMax sparse layer groups (binding.minimax_layers)")
    index_dtype = DType.from_name(str(dict(built.layout.attributes).get("index_dtype", "bfloat16"))).to_torch()
    main = MHATokenToKVPool(sub_pool(built, "main"), kv_dtype=binding.kv_dtype.to_torch(), start_layer=start, **options)
    parts = {k.split(".", 1)[0] for k, _ in built.layout.attributes if "." in k}
    index_kv = index_k = None
    if "index_kv" in parts:
        index_kv = MHATokenToKVPool(sub_pool(built, "index_kv"), kv_dtype=index_dtype, **options)
    if "index_k" in parts:
        index_k = MHATokenToKOnlyPool(sub_pool(built, "index_k"), kv_dtype=index_dtype, **options)
    return MiniMaxSparseKVPool(built, main_pool=main, index_kv_pool=index_kv, index_k_pool=index_k, layers=layers,
                               start_layer=start, **options)


def typed_req_pool(built: BuiltPool, mamba_pool: MambaPool | None, **options: Any) -> ReqToTokenPool:
    """``ReqToTokenPool`` (and its decode variant) or ``HybridReqToTokenPool`` over the request table."""
    if built.layout.pool_class in _HYBRID_REQ:
        return HybridReqToTokenPool(built, mamba_pool=mamba_pool, **options)
    return ReqToTokenPool(built, **options)


def make_allocator(spec: AllocatorSpec, pool: TypedPool, device: str | torch.device) -> Allocator:
    """The token allocator ``spec`` names, serving ``pool`` (TokenToKVPoolAllocator, PagedTokenToKVPoolAllocator,
    SWATokenToKVPoolAllocator, PureSWATokenToKVPoolAllocator).

    SWA allocators own ``full_to_swa_index_mapping``; the pool's layout already accounts for that
    tensor, so the allocator adopts the pool's (zero-filled) buffer, initialised as its own,
    and registers it on the pool: planned bytes stay allocated bytes.
    """
    kind = spec.kind
    if kind is AllocatorKind.TOKEN:
        return TokenToKVPoolAllocator(spec.size, None, device, pool, spec.need_sort)
    if kind is AllocatorKind.PAGED:
        return PagedTokenToKVPoolAllocator(spec.size, spec.page_size, None, device, pool, spec.need_sort)
    size_swa = spec.size_swa if spec.size_swa is not None else spec.size
    allocator: SWATokenToKVPoolAllocator | PureSWATokenToKVPoolAllocator
    if kind is AllocatorKind.PURE_SWA:
        allocator = PureSWATokenToKVPoolAllocator(size_swa, spec.page_size, None, device, pool, spec.need_sort)
    else:
        allocator = SWATokenToKVPoolAllocator(spec.size, size_swa, spec.page_size, None, device, pool, spec.need_sort)
    own = pool.tensors.get("full_to_swa_index_mapping")
    if own is not None and own.shape == allocator.full_to_swa_index_mapping.shape:
        own.copy_(allocator.full_to_swa_index_mapping)
        allocator.full_to_swa_index_mapping = own
        register = getattr(pool, "register_mapping", None)
        if register is not None:
            register(own)
    return allocator


def build_typed_pools(
    layout: KVPoolsLayout,
    device: str,
    binding: PoolBinding,
    *,
    allocator: Any = None,
    use_triton: bool | None = None,
    check_bounds: bool = True,
) -> KVPools:
    """Allocate ``layout`` on ``device``; wrap every pool in its typed class; build the allocator.

    ``allocator``: reuse an existing one (a draft worker shares the target's,
    KVCacheConfigurator._build_token_to_kv_pool_allocator); otherwise the binding's :class:`AllocatorSpec` is built
    (none when it has none).
    """
    options: dict[str, Any] = {"use_triton": use_triton, "check_bounds": check_bounds}
    extra: list[BuiltPool] = []
    mamba: MambaPool | None = None
    for part in layout.extra:
        built = build_pool(part, device)
        if part.pool_class == "MambaPool" and mamba is None:
            mamba = MambaPool(built, **options)
            extra.append(mamba)
        else:
            extra.append(built)
    token_to_kv = typed_pool(build_pool(layout.token_to_kv, device), binding, mamba_pool=mamba, **options)
    req_to_token = typed_req_pool(build_pool(layout.req_to_token, device), mamba, **options)
    if allocator is None and binding.allocator is not None:
        allocator = make_allocator(binding.allocator, token_to_kv, device)
    return KVPools(
        layout=layout,
        req_to_token_pool=req_to_token,
        token_to_kv_pool=token_to_kv,
        extra=tuple(extra),
        allocator=allocator,
    )
