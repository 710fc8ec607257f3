"""``AscendPoolConfigurator``: Default's numbers, Ascend NPU pools (create_memory_pool_configurator;
KVCacheConfigurator._build_token_to_kv_pool).

Cost model: exactly :class:`DefaultPoolConfigurator`'s :attr:`~DefaultPoolConfigurator.cost`
``available_bytes = max_total_num_tokens * cell`` (inverse ``T = align(max(available, 0) // cell, P)``)
with the NPU branches of DefaultPoolConfigurator switched on by ``ctx.device`` inside Default itself: the
bf16 DSA indexer (``per_tok = index_head_dim``, ``esz = es(kv)`` unless the KV cache is
float8_e4m3fn, DefaultPoolConfigurator._compute_dsa_indexer_cell_size) and no index-K elision under PD
disaggregation or hierarchical cache.
Nothing about the token counts is overridden here; only the pools differ (memory_pool_npu):
stacked over layers, page-major ``[L, T // P + pad, P, heads, dim]``, MLA nope and rope in
separate buffers, the DSA index keys in a page-major ``index_k_buffer``.

Selection: ``device`` NPU (the Ascend attention backend is the only one SGLang runs there,
arg_groups.model_overrides) and a model that is none of DeepSeek-V4, hybrid SWA, Mamba-ish. Those
keep their own strategies, which build NPU sub-pools through :mod:`kvstrategies.pools.ascend`.

Decisions where SGLang has no NPU pool to follow:

* FP4 (``nvfp4``, ``fp4_mx_block16``) and ``mxfp8`` KV on NPU are rejected: SGLang's FP4 and
  MXFP8 pools are CUDA classes and the NPU builders (_build_ascend_*_kv_pool) have no such variant.
* The packed-FP8 DSA row needs an arch35 NPU (``platform.is_npu_arch35``); elsewhere an
  ``fp8_e4m3`` DSA pool stores the raw nope/rope split in uint8. As in SGLang, sizing still
  prices the packed 656-byte row there (calculate_mla_kv_cache_dim has no NPU branch), so the pool uses
  576 of the 656 bytes reserved per layer and token.
"""

from __future__ import annotations

from typing import ClassVar

from ..context import KVCacheContext, is_hybrid_swa
from ..core.dtypes import DType, KVRecipe
from ..core.sizing import PoolSizes
from ..errors import KVCacheConfigError, UnsupportedConfigurationError
from ..pools.ascend import NPUIndexer, npu_mha_layout, npu_minimax_sparse_layout, npu_mla_layout
from ..pools.layout import PoolLayout
from .checks import is_ascend_device
from .default import DefaultPoolConfigurator


class AscendPoolConfigurator(DefaultPoolConfigurator):
    """Default sizing on an Ascend NPU; builds the NPU MHA / MLA (+DSA) / MiniMax-sparse pools."""

    family: ClassVar[str] = "ascend"

    def __init__(self, ctx: KVCacheContext) -> None:
        super().__init__(ctx)
        kv = ctx.kv_cache_dtype
        if kv.is_fp4 or kv.recipe is KVRecipe.MXFP8:
            raise UnsupportedConfigurationError(
                f"kv_cache_dtype {kv.name!r} has no Ascend NPU pool (FP4 and MXFP8 KV caches are CUDA-only); "
                "use 'auto'/'bf16' or 'fp8_e4m3' on device 'npu'"
            )

    @classmethod
    def is_applicable(cls, ctx: KVCacheContext) -> bool:
        geometry = ctx.geometry
        return (
            is_ascend_device(ctx)
            and geometry.dsv4 is None
            and not is_hybrid_swa(ctx)
            and geometry.mamba is None
        )

    # ---- pools (KVCacheConfigurator._build_token_to_kv_pool, _build_ascend_*_kv_pool) --------------------------------
    def token_to_kv_layout(self, sizes: PoolSizes) -> PoolLayout:
        """The NPU branches of _build_token_to_kv_pool, in its order: MiniMax sparse, MLA (with DSA index keys),
        MHA."""
        geometry = self.ctx.geometry
        if geometry.minimax_sparse is not None and not geometry.use_mla:
            return self.ascend_minimax_sparse_layout(sizes)
        if geometry.use_mla:
            return self.ascend_mla_layout(sizes)
        return self.ascend_mha_layout(sizes)

    def ascend_mha_layout(self, sizes: PoolSizes) -> PoolLayout:
        """``NPUMHATokenToKVPool(T, pool_page_size, H (with dcp), head_dim, L)``; V uses head_dim.

        The builder passes no ``v_head_dim`` (_build_ascend_*_kv_pool), so V rows are ``head_dim`` wide
        even where the cell prices ``v_head_dim`` (equal for every preset model).
        """
        geometry = self.ctx.geometry
        return npu_mha_layout(
            size=self.pool_tokens(sizes),
            page_size=self.pool_page_size,
            head_num=self.kv_heads,
            head_dim=geometry.head_dim,
            v_head_dim=geometry.head_dim,
            layer_num=self.pool_layer_num,
            store_dtype=self.mha_store_dtype(),
        )

    def npu_indexer_layer_ids(self) -> tuple[int, ...]:
        """Global ids of the layers owning index keys: the stage's layers that do not reuse the
        previous top-k when index-K elision applies, else every stage layer (_build_ascend_*_kv_pool)."""
        dsa = self.ctx.geometry.dsa
        assert dsa is not None
        start, end = self.layer_range
        if not self.index_k_elision:
            return tuple(range(start, end))
        return tuple(layer for layer in range(start, end) if not dsa.skips_topk(layer))

    def npu_packed_kv_cache_dim(self) -> int | None:
        """``calculate_mla_kv_cache_dim`` only for float8_e4m3fn KV on an arch35 NPU, else None."""
        if self.ctx.kv_cache_dtype.dtype is DType.FLOAT8_E4M3FN and self.ctx.platform.is_npu_arch35:
            return self.mla_kv_cache_dim()
        return None

    def ascend_mla_layout(self, sizes: PoolSizes) -> PoolLayout:
        """``NPUMLATokenToKVPool`` (_build_ascend_*_kv_pool): scheduler page size, not ``pool_page_size``.

        DSA adds index keys for ``index_size = T * dcp`` slots on a target (replicated across
        the DCP group) and ``T`` on a draft (whose ``T`` already spans the DCP-widened ids),
        with ``index_page_size = page_size``; a draft indexes every one of its layers.
        """
        geometry = self.ctx.geometry
        mla = geometry.mla
        if mla is None:
            raise KVCacheConfigError(f"{geometry.architectures} is an MLA model without MLA dims")
        tokens = self.pool_tokens(sizes)
        page_size = self.ctx.page_size
        indexer = None
        if geometry.dsa is not None:
            indexer = NPUIndexer(
                index_head_dim=geometry.dsa.index_head_dim,
                index_size=tokens if self.ctx.is_draft_worker else tokens * self.dcp,
                index_page_size=page_size,
                layer_ids=self.npu_indexer_layer_ids(),
            )
        return npu_mla_layout(
            size=tokens,
            page_size=page_size,
            kv_lora_rank=mla.kv_lora_rank,
            qk_rope_head_dim=mla.qk_rope_head_dim,
            layer_num=self.pool_layer_num,
            dtype=self.ctx.kv_cache_dtype.dtype,
            start_layer=self.layer_range[0],
            dcp_size=self.dcp,
            is_draft_worker=self.ctx.is_draft_worker,
            indexer=indexer,
            kv_cache_dim=self.npu_packed_kv_cache_dim(),
        )

    def ascend_minimax_sparse_layout(self, sizes: PoolSizes) -> PoolLayout:
        """``NPUMiniMaxSparseKVPool``: scheduler page size, index dtype = model dtype,
        ``head_num = get_num_kv_heads(tp)`` without DCP, no HiSparse (_build_ascend_*_kv_pool)."""
        geometry = self.ctx.geometry
        sparse = geometry.minimax_sparse
        assert sparse is not None
        local = sparse.local(*self.layer_range)
        return npu_minimax_sparse_layout(
            size=self.pool_tokens(sizes),
            page_size=self.ctx.page_size,
            head_num=geometry.num_kv_heads(self.ctx.parallel.attn_tp_size),
            head_dim=geometry.head_dim,
            idx_head_dim=sparse.sparse_index_dim,
            num_local_layers=local.num_layers,
            num_kv_sparse_layers=len(local.kv_sparse),
            num_k_only_layers=len(local.k_only),
            store_dtype=self.mha_store_dtype(),
            index_store_dtype=geometry.model_dtype,
        )
