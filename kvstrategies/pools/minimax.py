"""``MiniMaxSparseKVPool``: MiniMax-M3 main K/V plus the lightning indexer's caches (MiniMaxSparseKVPool).

Three sub-pools over the same ``size`` token slots (names prefixed ``main.``, ``index_kv.``,
``index_k.``):

* ``main``: an ``MHATokenToKVPool`` over every local layer (dense and sparse), ``H`` heads of
  ``D`` (V uses ``D``), in the KV dtype, indexed by ``layer_id - start_layer``;
* ``index_kv`` (when a local sparse layer keeps indexer values): an ``MHATokenToKVPool`` of one
  head of ``Di = sparse_index_dim`` over those layers, in the index dtype;
* ``index_k`` (when a local sparse layer keeps indexer keys only): an ``MHATokenToKOnlyPool``, ``k_buffer[l]``
``(T + P, 1, Di)``, in the index dtype.

Bytes per token slot (the sizing cell, DefaultPoolConfigurator._compute_cell_size, no HiSparse):
``(n_dense + n_sparse) * 2 * H * D * es(kv) + (2 * n_kv_sparse + n_k_only) * Di * es(index)``.
"""

from __future__ import annotations

from ..core.dtypes import DType
from ..models.minimax import MiniMaxLocalLayers
from .basic import mha_layout
from .layout import BufferSpec, PoolLayout, combine


def minimax_index_dtype(
    kv_dtype: DType,
    model_dtype: DType,
    *,
    fp8_attention_gemm: bool = False,
    cuda_sm90: bool = False,
    gfx95_fp8_index_cache: bool = False,
) -> DType:
    """The indexer cache dtype (DefaultPoolConfigurator._compute_cell_size, MiniMaxSparseKVPool).

    The KV dtype under MiniMax fp8-attention-GEMM mode or on CUDA SM90 with an fp8-e4m3 KV cache;
    fp8-e4m3 on gfx95 with ``SGLANG_OPT_MINIMAX_M3_FP8_INDEX_CACHE`` (default on); else the model dtype.
    """
    if fp8_attention_gemm or (cuda_sm90 and kv_dtype is DType.FLOAT8_E4M3FN):
        return kv_dtype
    if gfx95_fp8_index_cache:
        return DType.FLOAT8_E4M3FN
    return model_dtype


def minimax_sparse_cell_bytes(
    layers: MiniMaxLocalLayers,
    *,
    head_num: int,
    head_dim: int,
    kv_itemsize: int,
    index_dim: int,
    index_itemsize: int,
    hisparse_ratio: int = 1,
) -> int:
    """``(n_dense * r + n_sparse) * 2 * H * D * kv + ((2 * n_kv_idx + n_k_only) * Di * ie) * r``.

    As in SGLang's DefaultPoolConfigurator._compute_cell_size, the HiSparse ratio ``r`` multiplies the dense main-pool
    layers, not the sparse ones (``r`` is 1 here: HiSparse is out of scope).
    """
    main = (len(layers.dense) * hisparse_ratio + len(layers.sparse)) * 2 * head_num * head_dim * kv_itemsize
    index = ((len(layers.kv_sparse) * 2 + len(layers.k_only)) * index_dim * index_itemsize) * hisparse_ratio
    return main + index


def k_only_layout(
    *, size: int, page_size: int, head_num: int, head_dim: int, layer_num: int, store_dtype: DType
) -> PoolLayout:
    """``MHATokenToKOnlyPool``: per layer ``k_buffer[l]`` ``(T + P, H, D)``, no V."""
    rows = size + page_size
    buffers = tuple(
        BufferSpec(f"k_buffer[{layer}]", (rows, head_num, head_dim), store_dtype) for layer in range(layer_num)
    )
    attributes: tuple[tuple[str, int | str | None], ...] = (
        ("size", size),
        ("page_size", page_size),
        ("head_num", head_num),
        ("head_dim", head_dim),
        ("layer_num", layer_num),
    )
    return PoolLayout("MHATokenToKOnlyPool", buffers, attributes)


def minimax_sparse_layout(
    *,
    size: int,
    page_size: int,
    head_num: int,
    head_dim: int,
    index_dim: int,
    layers: MiniMaxLocalLayers,
    store_dtype: DType,
    index_dtype: DType,
    fused: bool = True,
) -> PoolLayout:
    """The composite pool; an index sub-pool is absent when no local layer needs it.

    ``store_dtype`` is the main pool's storage dtype; the index pools store ``index_dtype`` by the
    base rule (uint8 for fp8). ``fused``: the MHA sub-pools keep K/V in one tensor per layer
    (:data:`~kvstrategies.pools.basic.FUSED_KV_STORAGE`).
    """
    index_store_dtype = DType.UINT8 if index_dtype.is_fp8 else index_dtype
    parts: dict[str, PoolLayout] = {
        "main": mha_layout(
            size=size,
            page_size=page_size,
            head_num=head_num,
            head_dim=head_dim,
            v_head_dim=head_dim,
            layer_num=layers.num_layers,
            store_dtype=store_dtype,
            fused=fused,
        )
    }
    if layers.kv_sparse:
        parts["index_kv"] = mha_layout(
            size=size,
            page_size=page_size,
            head_num=1,
            head_dim=index_dim,
            v_head_dim=index_dim,
            layer_num=len(layers.kv_sparse),
            store_dtype=index_store_dtype,
            fused=fused,
        )
    if layers.k_only:
        parts["index_k"] = k_only_layout(
            size=size,
            page_size=page_size,
            head_num=1,
            head_dim=index_dim,
            layer_num=len(layers.k_only),
            store_dtype=index_store_dtype,
        )
    pool = combine("MiniMaxSparseKVPool", parts)
    attributes = (
        *pool.attributes,
        ("dense_layers", len(layers.dense)),
        ("sparse_layers", len(layers.sparse)),
        ("k_only_sparse_layers", len(layers.k_only)),
        ("index_dtype", str(index_dtype)),
    )
    return PoolLayout(pool.pool_class, pool.buffers, attributes)
