"""``SWAKVPool``: a full-attention sub-pool and a sliding-window sub-pool (SWAKVPool).

Both sub-pools are dense (pool-local layer index ``0..n-1``, no ``start_layer``): the full one
holds ``len(full_attention_layer_ids)`` layers of ``size`` tokens, the SWA one
``len(swa_attention_layer_ids)`` layers of ``size_swa`` tokens. ``layers_mapping[g] =
(dense index, is_swa)`` routes a global layer id to its sub-pool. Buffers are the sub-pools'
under ``full.`` / ``swa.`` prefixes, allocated full first.

``full_to_swa_index_mapping`` (int64) translates a full-pool location to its SWA peer. SGLang's
allocator owns it and registers it on the pool; it is listed here so a plan accounts for it:
``(size + P + 1,)`` for ``SWATokenToKVPoolAllocator`` (zeros = "no SWA peer", last entry -1 so a
``last_loc`` of -1 translates to -1), ``(size_swa + P + 1,)`` (identity plus the -1 sentinel) for
``PureSWATokenToKVPoolAllocator`` when there is no full layer (SWATokenToKVPoolAllocator, PureSWATokenToKVPoolAllocator;
that allocator requires page size 1, the pool itself accepts any page).

Bytes: ``(size + P) * full_cell + (size_swa + P) * swa_cell`` (+ fused K/V page padding per
sub-pool) ``+ 8 * mapping_length``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.dtypes import DType
from .basic import mha_layout
from .layout import BufferRole, BufferSpec, PoolLayout, combine
from .mxfp8 import mxfp8_layout

SWA_KV_POOL = "SWAKVPool"
SWA_ALLOCATOR = "SWATokenToKVPoolAllocator"
PURE_SWA_ALLOCATOR = "PureSWATokenToKVPoolAllocator"
MAPPING_NAME = "full_to_swa_index_mapping"


def full_to_swa_mapping_length(size: int, size_swa: int, page_size: int) -> int:
    """Entries of ``full_to_swa_index_mapping``: ``size + P + 1`` (pure SWA: ``size_swa + P + 1``)."""
    return (size_swa if size == 0 else size) + page_size + 1


def mha_sub_pool(
    *,
    size: int,
    page_size: int,
    head_num: int,
    head_dim: int,
    v_head_dim: int,
    layer_num: int,
    store_dtype: DType,
    mxfp8: bool = False,
    prefix: str = "",
    fused: bool = True,
) -> PoolLayout:
    """One MHA sub-pool: ``MHATokenToKVPool`` or ``MHATokenToKVPoolMXFP8``,
    its buffers named under ``prefix`` when given (:meth:`PoolLayout.prefixed`); ``fused``: K/V
    in one tensor per layer (:data:`~kvstrategies.pools.basic.FUSED_KV_STORAGE`)."""
    if mxfp8:
        layout = mxfp8_layout(
            size=size,
            page_size=page_size,
            head_num=head_num,
            head_dim=head_dim,
            v_head_dim=v_head_dim,
            layer_num=layer_num,
        )
        return layout.prefixed(prefix) if prefix else layout
    return mha_layout(
        size=size,
        page_size=page_size,
        head_num=head_num,
        head_dim=head_dim,
        v_head_dim=v_head_dim,
        layer_num=layer_num,
        store_dtype=store_dtype,
        prefix=prefix,
        fused=fused,
    )


def _ids(values: Sequence[int]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def swa_kv_pool_layout(
    *,
    full: PoolLayout,
    swa: PoolLayout,
    size: int,
    size_swa: int,
    page_size: int,
    full_attention_layer_ids: Sequence[int],
    swa_attention_layer_ids: Sequence[int],
    allocator_page_size: int | None = None,
    owns_mapping: bool = True,
    parts_prefixed: bool = False,
) -> PoolLayout:
    """``SWAKVPool`` over two sub-pool layouts, plus the full-to-SWA index mapping.

    ``full_attention_layer_ids`` / ``swa_attention_layer_ids`` are this stage's global ids, in
    order: the ``i``-th id is dense layer ``i`` of its sub-pool. ``allocator_page_size`` (the
    scheduler page size, default ``page_size``) sizes the mapping. ``owns_mapping`` false (a
    draft worker): the pool registers the *target* allocator's mapping, so it is not listed here.
    ``parts_prefixed``: the sub-pools' buffers are already named ``full.*`` / ``swa.*``.
    """
    mapping_page = page_size if allocator_page_size is None else allocator_page_size
    length = full_to_swa_mapping_length(size, size_swa, mapping_page)
    mapping = BufferSpec(MAPPING_NAME, (length,), DType.INT64, role=BufferRole.INDEX)
    extra = (mapping,) if owns_mapping else ()
    layers = sorted(
        [(g, f"full[{i}]") for i, g in enumerate(full_attention_layer_ids)]
        + [(g, f"swa[{i}]") for i, g in enumerate(swa_attention_layer_ids)]
    )
    attributes: tuple[tuple[str, int | str | None], ...] = (
        ("size", size),
        ("size_swa", size_swa),
        ("page_size", page_size),
        ("full_attention_layer_ids", _ids(full_attention_layer_ids)),
        ("swa_attention_layer_ids", _ids(swa_attention_layer_ids)),
        *((f"layers_mapping[{g}]", where) for g, where in layers),
        ("allocator_class", PURE_SWA_ALLOCATOR if size == 0 else SWA_ALLOCATOR),
        *(() if owns_mapping else (("index_mapping", "the target allocator's"),)),
    )
    parts = {"full": full, "swa": swa}
    return combine(SWA_KV_POOL, parts, extra=extra, attributes_first=attributes, prefixed=parts_prefixed)
