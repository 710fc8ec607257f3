"""Layouts of the plain pools: MHA K/V (MHATokenToKVPool), MLA latent (MLATokenToKVPool), request table
(ReqToTokenPool)."""

from __future__ import annotations

from ..core.dtypes import DType
from ..core.releases import ReleaseRule, span
from ..core.sizing import ceil_align
from .layout import BufferRole, BufferSpec, PoolLayout, ViewOf, layer_names

#: the request pool keeps a per-row reuse counter, ``req_generation`` (int64, on the CPU)
REQ_GENERATION_COUNTER = ReleaseRule(
    "req-generation-counter",
    span("0.5.16"),
    "ReqToTokenPool holds req_generation, a per-row int64 reuse counter on the CPU",
    "sglang.srt.mem_cache.memory_pool.ReqToTokenPool.__init__",
)
#: the request table keeps row 0 for cuda-graph padding: ``R + 1 (+ pre_alloc)`` rows, free rows from 1
#: (before: ``R (+ pre_alloc)`` rows from 0)
REQ_PADDING_ROW = ReleaseRule(
    "req-padding-row",
    span("0.5.11"),
    "ReqToTokenPool keeps row 0 for padded batches: R + 1 (+ pre_alloc) rows (before: R (+ pre_alloc))",
    "sglang.srt.mem_cache.memory_pool.ReqToTokenPool.__init__ (disaggregation.decode.DecodeReqToTokenPool)",
)
#: with ``D == Dv`` K and V are the halves of one fused ``(2, ceil_align(N, P), H, D)`` tensor per
#: layer (before: two tensors of ``N`` rows each, nothing padded)
FUSED_KV_STORAGE = ReleaseRule(
    "fused-kv-storage",
    span("0.5.23"),
    "MHATokenToKVPool keeps K and V (D == Dv) as views of one (2, ceil_align(T + P, P), H, D) tensor per layer",
    "sglang.srt.mem_cache.memory_pool.MHATokenToKVPool._create_buffers_normal",
)


def mha_layout(
    *,
    size: int,
    page_size: int,
    head_num: int,
    head_dim: int,
    v_head_dim: int,
    layer_num: int,
    store_dtype: DType,
    pool_class: str = "MHATokenToKVPool",
    prefix: str = "",
    fused: bool = True,
) -> PoolLayout:
    """``MHATokenToKVPool``, NHD layout: per layer K ``(N, H, D)`` and V ``(N, H, Dv)``, ``N = T + P``.

    With ``D == Dv`` and ``fused`` (:data:`FUSED_KV_STORAGE`, the newest release's layout) SGLang
    allocates one fused ``(2, ceil_align(N, P), H, D)`` tensor per layer and K/V are views of its
    halves, so allocated bytes exceed ``N * cell`` when ``N`` is not a page multiple
    (Llama-3.1-8B bf16: T=1000, P=16 allocates 1024 rows, addresses 1016); without it K and V are
    two ``N``-row tensors. ``prefix``: the sub-pool name the buffers are named under (``full`` ->
    ``full.k_buffer[0]``), as :meth:`~kvstrategies.pools.layout.PoolLayout.prefixed` would name them.
    """
    rows = size + page_size
    buffers: list[BufferSpec] = []
    if fused and head_dim == v_head_dim:
        padded = ceil_align(rows, page_size)
        storage = BufferSpec("kv_storage[0]", (2, padded, head_num, head_dim), store_dtype, engine_facing=False)
        k_view, v_view = ViewOf("kv_storage[0]", (0,), rows), ViewOf("kv_storage[0]", (1,), rows)
        k = BufferSpec("k_buffer[0]", (rows, head_num, head_dim), store_dtype, view=k_view)
        v = BufferSpec("v_buffer[0]", (rows, head_num, head_dim), store_dtype, view=v_view)
        for storage_name, k_name, v_name in layer_names(prefix, ("kv_storage", "k_buffer", "v_buffer"), layer_num):
            buffers += (storage.renamed(storage_name), k.renamed(k_name, k_view.of(storage_name)),
                        v.renamed(v_name, v_view.of(storage_name)))  # fmt: skip
    else:
        k = BufferSpec("k_buffer[0]", (rows, head_num, head_dim), store_dtype)
        v = BufferSpec("v_buffer[0]", (rows, head_num, v_head_dim), store_dtype)
        for k_name, v_name in layer_names(prefix, ("k_buffer", "v_buffer"), layer_num):
            buffers += (k.renamed(k_name), v.renamed(v_name))
    attributes: tuple[tuple[str, int | str | None], ...] = (
        ("size", size),
        ("page_size", page_size),
        ("head_num", head_num),
        ("head_dim", head_dim),
        ("v_head_dim", v_head_dim),
        ("layer_num", layer_num),
    )
    return PoolLayout(pool_class, tuple(buffers), attributes)


def mla_layout(
    *,
    size: int,
    page_size: int,
    kv_cache_dim: int,
    layer_num: int,
    store_dtype: DType,
    pool_class: str = "MLATokenToKVPool",
) -> PoolLayout:
    """``MLATokenToKVPool``: per layer ``kv_buffer[l]`` of ``(T + P, 1, kv_cache_dim)``.

    The row is ``[nope (kv_lora_rank) | rope (qk_rope_head_dim)]``; "V" is a view of the first
    ``kv_lora_rank`` columns, not a buffer. Allocated = ``(T + P) * kv_cache_dim * L * itemsize``.
    """
    rows = size + page_size
    first = BufferSpec("kv_buffer[0]", (rows, 1, kv_cache_dim), store_dtype) if layer_num > 0 else None
    buffers = tuple(
        first.renamed(f"kv_buffer[{layer}]") if layer else first for layer in range(layer_num) if first is not None
    )
    attributes: tuple[tuple[str, int | str | None], ...] = (
        ("size", size),
        ("page_size", page_size),
        ("kv_cache_dim", kv_cache_dim),
        ("layer_num", layer_num),
    )
    return PoolLayout(pool_class, buffers, attributes)


def req_to_token_layout(
    *,
    max_running_requests: int,
    max_context_len: int,
    pre_alloc_size: int = 0,
    pool_class: str = "ReqToTokenPool",
    generation_counter: bool = True,
    padding_row: bool = True,
) -> PoolLayout:
    """``ReqToTokenPool``: ``req_to_token (R + 1 + pre_alloc, max_context_len)`` int32 (row 0 pads;
    ``padding_row``, :data:`REQ_PADDING_ROW`; without it ``R + pre_alloc`` rows).

    ``req_generation`` (``generation_counter``, :data:`REQ_GENERATION_COUNTER`) is a per-row reuse
    counter that SGLang keeps on the CPU.
    """
    rows = max_running_requests + pre_alloc_size + int(padding_row)
    buffers: tuple[BufferSpec, ...] = (
        BufferSpec("req_to_token", (rows, max_context_len), DType.INT32, role=BufferRole.INDEX),
    )
    if generation_counter:
        buffers += (BufferSpec("req_generation", (rows,), DType.INT64, role=BufferRole.INDEX, device="cpu"),)
    attributes: tuple[tuple[str, int | str | None], ...] = (
        ("size", max_running_requests),
        ("max_context_len", max_context_len),
        ("pre_alloc_size", pre_alloc_size),
    )
    return PoolLayout(pool_class, buffers, attributes)
