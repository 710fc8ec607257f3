"""What building needs beyond a layout: the allocator choice and the pool's logical facts (torch-free).

A :class:`~kvstrategies.pools.layout.PoolLayout` says which tensors exist; it does not say which
token allocator serves them (KVCacheConfigurator._build_token_to_kv_pool_allocator), which global layer id a pool's
first buffer belongs to (``start_layer``), or which logical dtype a ``uint8`` buffer holds (fp8 e4m3 or e5m2,
KVCache.__init__ store dtype). :func:`pool_binding` computes those facts from the context and the final sizes,
as plain data, so a plan carries them and ``build`` only has to allocate.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..context import DeviceKind, DisaggregationMode, KVCacheContext, is_hybrid_swa, stage_layer_range
from ..core.dtypes import DType
from ..core.sizing import PoolSizes
from ..errors import KVCacheConfigError
from ..models.minimax import MiniMaxLocalLayers


class AllocatorKind(enum.Enum):
    """The token allocator classes of sglang.srt.mem_cache.allocator (value: the SGLang class name)."""

    TOKEN = "TokenToKVPoolAllocator"
    PAGED = "PagedTokenToKVPoolAllocator"
    SWA = "SWATokenToKVPoolAllocator"
    PURE_SWA = "PureSWATokenToKVPoolAllocator"


@dataclass(frozen=True)
class AllocatorSpec:
    """One fresh token allocator (KVCacheConfigurator._build_token_to_kv_pool_allocator): class, token slots, page size
    in tokens.

    ``size`` is the full-side (or only) slot count, ``size_swa`` the SWA side's (SWA kinds only);
    ``page_size`` is the scheduler page size (times DCP for the paged allocators); ``need_sort`` is true in
    the PD-disaggregation prefill/decode roles; ``rule`` says which branch of SGLang's choice picked it.
    """

    kind: AllocatorKind
    size: int
    size_swa: int | None = None
    page_size: int = 1
    need_sort: bool = False
    rule: str = ""


def select_allocator_spec(ctx: KVCacheContext, sizes: PoolSizes) -> AllocatorSpec | None:
    """KVCacheConfigurator._build_token_to_kv_pool_allocator ; ``None`` for a draft worker (it reuses
    the target's).

    SGLang's branches for DSV4 encoder replay, HiSparse and logical-page sharding are out of scope: no
    setting selects them. NPU: the Ascend backend is the only one SGLang runs there,
    so every NPU deployment takes them; the NPU paged allocator's int32 returns are not modelled
    (the CUDA class is used, int64).
    """
    if ctx.is_draft_worker:
        return None
    page, dcp = ctx.page_size, ctx.parallel.dcp_size
    need_sort = ctx.scheduling.disaggregation_mode is not DisaggregationMode.NULL
    tokens = sizes.max_total_num_tokens
    swa = is_hybrid_swa(ctx)
    if swa:
        full, swa_tokens = sizes.full_max_total_num_tokens, sizes.swa_max_total_num_tokens
        if full is None or swa_tokens is None:
            raise KVCacheConfigError(
                "a hybrid-SWA allocator needs full_max_total_num_tokens and swa_max_total_num_tokens; "
                "plan the sizes with the hybrid-SWA (or DeepSeek-V4) strategy"
            )
        if ctx.device is DeviceKind.NPU:
            return AllocatorSpec(AllocatorKind.SWA, full, swa_tokens, page, need_sort, "hybrid SWA on NPU")
        if full == 0:
            return AllocatorSpec(
                AllocatorKind.PURE_SWA, swa_tokens, swa_tokens, page, need_sort, "hybrid SWA, no full layers"
            )
        return AllocatorSpec(AllocatorKind.SWA, full, swa_tokens, page, need_sort, "hybrid SWA")
    if ctx.device is DeviceKind.NPU:
        return AllocatorSpec(AllocatorKind.PAGED, tokens * dcp, None, page * dcp, need_sort, "NPU, paged")
    if page == 1 and dcp == 1:
        return AllocatorSpec(AllocatorKind.TOKEN, tokens, None, 1, need_sort, "page 1, no DCP")
    return AllocatorSpec(AllocatorKind.PAGED, tokens * dcp, None, page * dcp, need_sort, "paged (page > 1 or DCP)")


@dataclass(frozen=True)
class PoolBinding:
    """Facts a built pool needs that its layout does not carry.

    * ``start_layer``: global id of the pool's first layer; plain pools address buffer
      ``layer_id - start_layer`` (KVCache.set_kv_buffer). Composite pools map ids through their
      layout attributes instead.
    * ``kv_dtype``: the logical KV dtype (``uint8`` storage holds fp8 e4m3 or e5m2 bytes).
    * ``kv_lora_rank`` / ``qk_rope_head_dim`` (and the SWA sub-pool's): MLA row split.
    * ``minimax_layers``: MiniMax-sparse layer groups of this stage (global ids).
    * ``allocator``: the token allocator to build, or ``None`` (draft worker: pass the target's).
    """

    start_layer: int
    kv_dtype: DType
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    swa_kv_lora_rank: int | None = None
    swa_qk_rope_head_dim: int | None = None
    minimax_layers: MiniMaxLocalLayers | None = None
    allocator: AllocatorSpec | None = None


def pool_binding(ctx: KVCacheContext, sizes: PoolSizes) -> PoolBinding:
    """The binding of the pools laid out for ``sizes`` (final sizes, requests resolved)."""
    start, end = stage_layer_range(ctx)
    geometry = ctx.geometry
    mla = geometry.mla
    minimax = geometry.minimax_sparse.local(start, end) if geometry.minimax_sparse is not None else None
    return PoolBinding(
        start_layer=start,
        kv_dtype=ctx.kv_cache_dtype.dtype,
        kv_lora_rank=mla.kv_lora_rank if mla is not None else None,
        qk_rope_head_dim=mla.qk_rope_head_dim if mla is not None else None,
        swa_kv_lora_rank=mla.swa_kv_lora_rank if mla is not None else None,
        swa_qk_rope_head_dim=mla.swa_qk_rope_head_dim if mla is not None else None,
        minimax_layers=minimax,
        allocator=select_allocator_spec(ctx, sizes),
    )
