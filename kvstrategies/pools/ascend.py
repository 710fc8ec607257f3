"""Ascend NPU pool layouts (memory_pool_npu): stacked over layers, page-major, MLA nope/rope split.

Every NPU pool allocates **one tensor per buffer for all its layers**,
``[L, pages, P, heads, dim]`` (memory_pool_npu stacked tensors), with ``pages = T // P + pad``: the floor of the
usable slots plus padding pages (page 0 is the padding page, as on CUDA). With ``T`` a page
multiple and ``pad = 1`` a buffer holds ``(T + P) * row_bytes * L`` bytes, the CUDA figure;
unlike CUDA there is no fused K/V storage rounded up to a page and no aux pointer tensors.

Snapshot names (a decision: engine-facing tensors and their backing storage): the stacked
allocation carries SGLang's attribute name (``k_buffer``) and each layer's slice is listed as a
view ``k_buffer[l]`` (pool-local layer index, what ``get_key_buffer(layer)`` returns), so CUDA
and NPU snapshots name the same per-layer tensors.

Not modelled: the ``ASCEND_USE_FIA`` per-layer ``(pages * P, 1, H, D)`` views (same storage,
same bytes), the sparse-KV offload pool (out of scope, README) and the packed-FP8 Hadamard-128
matrix (below).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.dtypes import DType
from ..errors import KVCacheConfigError
from .layout import BufferSpec, PoolLayout, ViewOf, combine

NPU_MHA_POOL = "NPUMHATokenToKVPool"
NPU_K_ONLY_POOL = "NPUMHATokenToKOnlyPool"
NPU_MLA_POOL = "NPUMLATokenToKVPool"
NPU_MINIMAX_SPARSE_POOL = "NPUMiniMaxSparseKVPool"

Attributes = tuple[tuple[str, int | str | None], ...]


def npu_num_pages(size: int, page_size: int, pad: int = 1) -> int:
    """``T // P + pad`` pages per layer: floored usable pages plus ``pad`` padding pages (14)."""
    if page_size < 1:
        raise KVCacheConfigError(f"NPU pools need a positive page_size, got {page_size}")
    return size // page_size + pad


def stacked_buffer(
    name: str,
    shape: tuple[int, ...],
    dtype: DType,
    *,
    view_layers: Sequence[int] | None = None,
) -> tuple[BufferSpec, ...]:
    """One stacked allocation ``name`` of ``shape`` (leading dim = layers or indexer slots)
    and its per-slot views ``name[l]``; ``view_layers[slot]`` names slot ``slot`` (default:
    the slot itself)."""
    labels = range(shape[0]) if view_layers is None else view_layers
    if len(labels) != shape[0]:
        raise KVCacheConfigError(f"{name}: {len(labels)} layer labels for {shape[0]} stacked slots")
    views = tuple(
        BufferSpec(f"{name}[{label}]", shape[1:], dtype, view=ViewOf(name, (slot,)))
        for slot, label in enumerate(labels)
    )
    return (BufferSpec(name, shape, dtype), *views)


# ---- NPUMHATokenToKVPool / NPUMHATokenToKOnlyPool (NPUMHATokenToKVPool, NPUMHATokenToKOnlyPool) ----------------------


def npu_mha_layout(
    *,
    size: int,
    page_size: int,
    head_num: int,
    head_dim: int,
    v_head_dim: int,
    layer_num: int,
    store_dtype: DType,
    pool_class: str = NPU_MHA_POOL,
) -> PoolLayout:
    """``NPUMHATokenToKVPool``: ``k_buffer`` ``(L, T // P + 1, P, H, D)`` and ``v_buffer``
    ``(L, T // P + 1, P, H, Dv)``, both in the store dtype (NPUMHATokenToKVPool).

    Arguments are the pool's *effective* geometry (SGLang's ``swa_head_num`` /
    ``swa_head_dim`` / ``swa_v_head_dim`` already applied by the caller). Bytes:
    ``L * (T // P + 1) * P * H * (D + Dv) * itemsize``; Llama-3.1-8B bf16, T = 1024, P = 128:
    ``32 * 9 * 128 * 8 * 256 * 2 = 150,994,944``. Hybrid SWA on NPU builds two of these
    (KVCacheConfigurator._build_token_to_kv_pool), which is why this is a plain function.
    """
    pages = npu_num_pages(size, page_size)
    buffers = (
        *stacked_buffer("k_buffer", (layer_num, pages, page_size, head_num, head_dim), store_dtype),
        *stacked_buffer("v_buffer", (layer_num, pages, page_size, head_num, v_head_dim), store_dtype),
    )
    attributes: Attributes = (
        ("size", size),
        ("page_size", page_size),
        ("head_num", head_num),
        ("head_dim", head_dim),
        ("v_head_dim", v_head_dim),
        ("layer_num", layer_num),
        ("num_pages", pages),
    )
    return PoolLayout(pool_class, buffers, attributes)


def npu_k_only_layout(
    *,
    size: int,
    page_size: int,
    head_num: int,
    head_dim: int,
    layer_num: int,
    store_dtype: DType,
) -> PoolLayout:
    """``NPUMHATokenToKOnlyPool``: ``k_buffer`` ``(L, T // P + 1, P, H, D)`` only (NPUMHATokenToKOnlyPool)."""
    pages = npu_num_pages(size, page_size)
    attributes: Attributes = (
        ("size", size),
        ("page_size", page_size),
        ("head_num", head_num),
        ("head_dim", head_dim),
        ("layer_num", layer_num),
        ("num_pages", pages),
    )
    buffers = stacked_buffer("k_buffer", (layer_num, pages, page_size, head_num, head_dim), store_dtype)
    return PoolLayout(NPU_K_ONLY_POOL, buffers, attributes)


# ---- NPUMLATokenToKVPool (NPUMLATokenToKVPool) --------------------------------------------------------------


@dataclass(frozen=True)
class NPUIndexer:
    """The DSA index-K cache of an NPU MLA pool (_build_ascend_*_kv_pool arguments).

    ``index_size`` is ``T * dcp`` on a target (the index keys are replicated across the DCP
    group while the latent is sharded) and ``T`` on a draft; ``index_page_size`` is the
    scheduler page size; ``layer_ids`` are the global ids of the layers that own index keys
    (all stage layers, or only those not reusing the previous top-k under index-K elision).
    """

    index_head_dim: int
    index_size: int
    index_page_size: int
    layer_ids: tuple[int, ...]


def packed_fp8_dsa_dim(kv_lora_rank: int, qk_rope_head_dim: int) -> int:
    """``rank + rank // 128 * 4 + 2 * rope`` bytes: fp8 latent, bf16 rope, fp32 scales (656 for DeepSeek)."""
    return kv_lora_rank + (kv_lora_rank // 128) * 4 + 2 * qk_rope_head_dim


def npu_mla_layout(
    *,
    size: int,
    page_size: int,
    kv_lora_rank: int,
    qk_rope_head_dim: int,
    layer_num: int,
    dtype: DType,
    start_layer: int = 0,
    dcp_size: int = 1,
    is_draft_worker: bool = False,
    indexer: NPUIndexer | None = None,
    kv_cache_dim: int | None = None,
) -> PoolLayout:
    """``NPUMLATokenToKVPool``; ``dtype`` is the logical KV dtype.

    * ``kv_pad = dcp`` for a DCP draft, else 1; ``idx_pad = dcp`` with an indexer under DCP.
    * Packed FP8 DSA (``dsa_fp8``): an indexer, ``dtype`` float8_e4m3fn and ``kv_cache_dim``
      given (the builder passes it only on an arch35 NPU). The record
      ``[latent fp8 | rope bf16 bytes | fp32 scales]`` (memory_pool_npu set_kv_buffer, a different byte
      order from CUDA's packed row) lives whole in ``k_buffer`` (``Kd = kv_cache_dim``, store
      dtype float8_e4m3fn); ``v_buffer`` is a zero-width bf16 placeholder; index keys are fp8
      with a float32 ``index_k_scale_buffer`` beside them.
    * Otherwise ``k_buffer`` holds the nope part (``Kd = kv_lora_rank``) and ``v_buffer`` the
      rope part (``Rd = qk_rope_head_dim``), both in the generic store dtype (uint8 for fp8).

    | buffer | shape |
    | --- | --- |
    | ``k_buffer`` | ``(L, T // P + kv_pad, P, 1, Kd)`` |
    | ``v_buffer`` | ``(L, T // P + kv_pad, P, 1, Rd)`` |
    | ``index_k_buffer`` | ``(n_idx, index_size // index_page_size + idx_pad, index_page_size, 1, index_head_dim)`` |
    | ``index_k_scale_buffer`` | ``(n_idx, same pages, index_page_size, 1)`` float32, dsa_fp8 with n_idx > 0 |

    Decision: the packed-FP8 Hadamard-128 rotation matrix is not part of the layout.
    It is a model constant (independent of ``T``, not counted by SGLang's
    ``get_kv_size_bytes``) whose shape and dtype SGLang's sizing never reads; the attribute
    ``hadamard`` records that it is left out.
    """
    dsa_fp8 = indexer is not None and dtype is DType.FLOAT8_E4M3FN and kv_cache_dim is not None
    if dsa_fp8 and kv_cache_dim != packed_fp8_dsa_dim(kv_lora_rank, qk_rope_head_dim):
        raise KVCacheConfigError(
            f"packed FP8 DSA row of {kv_cache_dim} bytes; the NPU pool needs "
            f"{packed_fp8_dsa_dim(kv_lora_rank, qk_rope_head_dim)} (kv_lora_rank + kv_lora_rank/128*4 + "
            "2*qk_rope_head_dim)"
        )
    k_dtype = DType.FLOAT8_E4M3FN if dsa_fp8 else dtype.kv_store_dtype
    v_dtype = DType.BFLOAT16 if dsa_fp8 else k_dtype
    k_dim = kv_cache_dim if dsa_fp8 and kv_cache_dim is not None else kv_lora_rank
    rope_dim = 0 if dsa_fp8 else qk_rope_head_dim
    dcp = dcp_size
    kv_pad = dcp if is_draft_worker and dcp > 1 else 1
    pages = npu_num_pages(size, page_size, kv_pad)
    buffers: list[BufferSpec] = [
        *stacked_buffer("k_buffer", (layer_num, pages, page_size, 1, k_dim), k_dtype),
        *stacked_buffer("v_buffer", (layer_num, pages, page_size, 1, rope_dim), v_dtype),
    ]
    attributes: list[tuple[str, int | str | None]] = [
        ("size", size),
        ("page_size", page_size),
        ("kv_lora_rank", kv_lora_rank),
        ("qk_rope_head_dim", qk_rope_head_dim),
        ("layer_num", layer_num),
        ("num_pages", pages),
        ("kv_cache_dim", k_dim),
        ("dsa_kv_cache_store_fp8", int(dsa_fp8)),
    ]
    if indexer is not None:
        end_layer = start_layer + layer_num
        outside = [layer for layer in indexer.layer_ids if not start_layer <= layer < end_layer]
        if outside or list(indexer.layer_ids) != sorted(set(indexer.layer_ids)):
            raise KVCacheConfigError(
                f"indexer layer ids {list(indexer.layer_ids)} must be increasing, unique and inside the "
                f"stage range [{start_layer}, {end_layer})"
            )
        idx_pad = dcp if dcp > 1 else 1
        index_pages = npu_num_pages(indexer.index_size, indexer.index_page_size, idx_pad)
        labels = [layer - start_layer for layer in indexer.layer_ids]
        row = (len(labels), index_pages, indexer.index_page_size, 1)
        buffers.extend(stacked_buffer("index_k_buffer", (*row, indexer.index_head_dim), k_dtype, view_layers=labels))
        if dsa_fp8 and labels:
            buffers.extend(stacked_buffer("index_k_scale_buffer", row, DType.FLOAT32, view_layers=labels))
        attributes += [
            ("index_head_dim", indexer.index_head_dim),
            ("index_size", indexer.index_size),
            ("index_page_size", indexer.index_page_size),
            ("index_num_pages", index_pages),
            ("num_indexer_layers", len(labels)),
        ]
        if dsa_fp8:
            attributes.append(("hadamard", "not modelled"))
    return PoolLayout(NPU_MLA_POOL, tuple(buffers), tuple(attributes))


# ---- NPUMiniMaxSparseKVPool (NPUMiniMaxSparseKVPool) ----------------------------------------------------------


def npu_minimax_sparse_layout(
    *,
    size: int,
    page_size: int,
    head_num: int,
    head_dim: int,
    idx_head_dim: int,
    num_local_layers: int,
    num_kv_sparse_layers: int,
    num_k_only_layers: int,
    store_dtype: DType,
    index_store_dtype: DType,
) -> PoolLayout:
    """``NPUMiniMaxSparseKVPool``: MiniMaxSparseKVPool with NPU sub-pool classes.

    ``main.`` = NPU MHA over all local layers (``H``, ``D``, V uses ``D``); ``index_kv.`` =
    NPU MHA with one head of ``idx_head_dim`` over the K/V-indexed sparse layers (if any);
    ``index_k.`` = NPU K-only over the K-only sparse layers (if any); index pools in the index
    dtype (the model dtype on NPU, _build_ascend_*_kv_pool).
    """
    parts = {
        "main": npu_mha_layout(
            size=size,
            page_size=page_size,
            head_num=head_num,
            head_dim=head_dim,
            v_head_dim=head_dim,
            layer_num=num_local_layers,
            store_dtype=store_dtype,
        )
    }
    if num_kv_sparse_layers:
        parts["index_kv"] = npu_mha_layout(
            size=size,
            page_size=page_size,
            head_num=1,
            head_dim=idx_head_dim,
            v_head_dim=idx_head_dim,
            layer_num=num_kv_sparse_layers,
            store_dtype=index_store_dtype,
        )
    if num_k_only_layers:
        parts["index_k"] = npu_k_only_layout(
            size=size,
            page_size=page_size,
            head_num=1,
            head_dim=idx_head_dim,
            layer_num=num_k_only_layers,
            store_dtype=index_store_dtype,
        )
    return combine(NPU_MINIMAX_SPARSE_POOL, parts)
