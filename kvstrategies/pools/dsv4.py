"""``DeepSeekV4TokenToKVPool``, CUDA default path (DeepSeekV4TokenToKVPool), as pure data.

One pool holds, per pipeline stage:

* ``swa.kv_buffer[l]``, every stage layer ``l`` (pool-local): the sliding-window latent cache;
* ``c4.kv_buffer[j]`` / ``c128.kv_buffer[j]``: compressed caches, dense over the stage's
  ratio-4 / ratio-128 layers in layer order;
* ``c4_indexer.index_k_with_scale_buffer[j]``: fp8 indexer keys of the ratio-4 layers;
* ``state[g].kv_score`` (ratio-4 and ratio-128 layers) and ``indexer_state[g].kv_score``
  (ratio-4 layers): compression state rows ``[kv | score]``, keyed by the *global* layer id.

Paged buffers are ``(pages, page_bytes)`` uint8 (fp8 latent + bf16 rope + scales in one
page, :class:`KVPageLayout`); their page count is ``ceil_div(size + P, p)`` where ``p`` is the
buffer's own (physical) page and ``P`` the logical 256-token page kept as padding even for the
compressed pools (DeepSeekV4TokenToKVPool). State buffers have ``ceil_align(S + ring + 1, ratio)``
rows.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from ..core.dtypes import DType
from ..core.releases import ReleaseRule, span
from ..core.sizing import ceil_align, ceil_div
from .layout import BufferRole, BufferSpec, PoolLayout

#: SGLang's ``c4_logical_size = c128_size * 32`` (sizes the indexer, DeepSeekV4TokenToKVPool)
C4_LOGICAL_PER_C128 = 32


class KVPageLayout(enum.Enum):
    """A DSV4 page format: ``(name, data bytes, scale bytes, page alignment)`` (DeepSeekV4TokenToKVPool).

    ``page_bytes(p) = ceil_align(p * (data + scale), align)``; V4 at p = 256 is
    ``ceil_align(149,504, 576) = 149,760`` (585.0 B/token), at p = 2 it is 1,728 (864.0).
    The V4.1 formats are not modelled.
    """

    V4 = ("v4", 576, 8, 576)  # 448 fp8 nope + 64 bf16 rope = 576 B, 7 ue8m0 scales + 1 pad
    UNIFORM_FP8 = ("uniform_fp8", 512, 0, 512)  # trtllm backend: raw fp8 head row

    @property
    def label(self) -> str:
        return str(self.value[0])

    @property
    def bytes_per_token(self) -> int:
        """Data plus scale bytes of one token (584 for V4)."""
        return int(self.value[1]) + int(self.value[2])

    @property
    def align(self) -> int:
        return int(self.value[3])

    def page_bytes(self, tokens_per_page: int) -> int:
        """Bytes of one page of ``tokens_per_page`` tokens, padded to the alignment."""
        return ceil_align(tokens_per_page * self.bytes_per_token, self.align)

    @property
    def store_dtype(self) -> DType:
        """uint8 for the packed V4 page; float8_e4m3fn for the trtllm uniform pool."""
        return DType.FLOAT8_E4M3FN if self is KVPageLayout.UNIFORM_FP8 else DType.UINT8


#: the c4 indexer pool counts its pages as the KV pool of its ratio does (the allocator reserves
#: one page at the model-wide page size): ``ceil((size + P) / (P / 4))``; before, its own page
#: ``p = P / 4``: ``(size + p + 1) // p``
DSV4_INDEXER_PAGES_AT_GLOBAL_PAGE = ReleaseRule(
    "dsv4-indexer-pages-at-global-page",
    span("0.5.22"),
    "DeepSeek-V4 c4 indexer rows: ceil((size + P) / (P/4)) (before: (size + P/4 + 1) // (P/4))",
    "sglang.srt.mem_cache.deepseek_v4_memory_pool.DeepSeekV4IndexerPool._create_buffer",
)


def c4_indexer_pages(c4_logical: int, page_size: int, *, at_global_page: bool) -> int:
    """Rows of one c4 indexer buffer for ``c4_logical`` tokens (:data:`DSV4_INDEXER_PAGES_AT_GLOBAL_PAGE`)."""
    index_page = page_size // 4
    if at_global_page:
        return ceil_div(c4_logical + page_size, index_page)
    return (c4_logical + index_page + 1) // index_page


def compress_state_rows(size: int, ring: int, ratio: int) -> int:
    """Rows of a compression-state buffer: ``ceil_align(size + ring + 1, ratio)`` (last row = sink)."""
    return ceil_align(size + ring + 1, ratio)


def compress_state_last_dim(ratio: int, head_dim: int) -> int:
    """``2 * (1 + overlap) * head_dim`` with ``overlap = ratio == 4``: a ``[kv | score]`` row."""
    return 2 * (1 + (1 if ratio == 4 else 0)) * head_dim


#: a paged KV buffer counts its pages from the allocator's reserved page at the model-wide page
#: size: ``ceil((size + P) / p)`` for physical page ``p``; before, ``(size + p + 1) // p``
DSV4_KV_PAGES_AT_GLOBAL_PAGE = ReleaseRule(
    "dsv4-kv-pages-at-global-page",
    span("0.5.21"),
    "DeepSeek-V4 compressed KV rows: ceil((size + P) / p) (before: (size + p + 1) // p)",
    "sglang.srt.mem_cache.deepseek_v4_memory_pool.DeepSeekV4SingleKVPool.__init__ (_num_dsv4_physical_kv_pages)",
)


#: the ratio-128 state buffer holds at least one ring per request slot: ``max(size, slots * ring128)`` rows
#: before rounding; before, exactly the configurator's ``c128_state_pool_size`` (which then follows the SWA pool)
DSV4_C128_STATE_REQUEST_FLOOR = ReleaseRule(
    "dsv4-c128-state-request-floor",
    span("0.5.15"),
    "DeepSeek-V4 ratio-128 state buffer: max(c128_state_pool_size, num_req_slots * ring128) rows before rounding "
    "(before: c128_state_pool_size)",
    "sglang.srt.mem_cache.deepseek_v4_memory_pool.DeepSeekV4TokenToKVPool.__init__",
)


def physical_pages(size: int, logical_page: int, physical_page: int, *, at_global_page: bool) -> int:
    """Rows of a paged DSV4 buffer of ``size`` tokens (:data:`DSV4_KV_PAGES_AT_GLOBAL_PAGE`)."""
    if at_global_page:
        return ceil_div(size + logical_page, physical_page)
    return (size + physical_page + 1) // physical_page


def _paged(
    name: str, size: int, logical_page: int, physical_page: int, layout: KVPageLayout, *, at_global_page: bool = True
) -> BufferSpec:
    pages = physical_pages(size, logical_page, physical_page, at_global_page=at_global_page)
    return BufferSpec(name, (pages, layout.page_bytes(physical_page)), layout.store_dtype)


def dsv4_layout(
    *,
    swa_size: int,
    c4_size: int,
    c128_size: int,
    c4_state_pool_size: int,
    c128_state_pool_size: int,
    num_req_slots: int,
    page_size: int,
    stage_start: int,
    stage_ratios: Sequence[int],
    ring_sizes: tuple[int, int],
    qk_nope_head_dim: int,
    qk_rope_head_dim: int,
    indexer_head_dim: int,
    indexer_bytes_per_token: int,
    c4_state_dtype: DType,
    c128_state_dtype: DType,
    kv_layout: KVPageLayout = KVPageLayout.V4,
    mapping_length: int | None = None,
    indexer_pages_at_global_page: bool = True,
    kv_pages_at_global_page: bool = True,
    c128_state_request_floor: bool = True,
) -> PoolLayout:
    """Every buffer of ``DeepSeekV4TokenToKVPool``.

    ``mapping_length``: the target's SWA allocator registers its ``full_to_swa_index_mapping``
    (``full + P + 1`` int64 entries, as for ``SWAKVPool``) on the pool; a draft passes ``None``.

    ``stage_ratios[i]`` is the ratio of global layer ``stage_start + i`` (a draft worker passes
    all zeros: it holds only SWA buffers); ``ring_sizes = (ring4, ring128)``; the ratio-128
    state holds ``max(c128_state_pool_size, num_req_slots * ring128)`` rows before rounding
    (``c128_state_pool_size`` alone without ``c128_state_request_floor``, :data:`DSV4_C128_STATE_REQUEST_FLOOR`).
    """
    ring4, ring128 = ring_sizes
    head_dim = qk_nope_head_dim + qk_rope_head_dim
    c4_layers = [stage_start + i for i, r in enumerate(stage_ratios) if r == 4]
    c128_layers = [stage_start + i for i, r in enumerate(stage_ratios) if r == 128]
    c4_logical = C4_LOGICAL_PER_C128 * c128_size
    c128_state_size = (
        max(c128_state_pool_size, num_req_slots * ring128) if c128_state_request_floor else c128_state_pool_size
    )

    buffers: list[BufferSpec] = [
        _paged(f"swa.kv_buffer[{layer}]", swa_size, page_size, page_size, kv_layout)
        for layer in range(len(stage_ratios))
    ]
    buffers += [
        _paged(f"c4.kv_buffer[{j}]", c4_size, page_size, page_size // 4, kv_layout,
               at_global_page=kv_pages_at_global_page)  # fmt: skip
        for j in range(len(c4_layers))
    ]
    buffers += [
        _paged(f"c128.kv_buffer[{j}]", c128_size, page_size, page_size // 128, kv_layout,
               at_global_page=kv_pages_at_global_page)  # fmt: skip
        for j in range(len(c128_layers))
    ]
    index_page = page_size // 4
    index_pages = c4_indexer_pages(c4_logical, page_size, at_global_page=indexer_pages_at_global_page)
    buffers += [
        BufferSpec(
            f"c4_indexer.index_k_with_scale_buffer[{j}]",
            (index_pages, index_page * indexer_bytes_per_token),
            DType.UINT8,
        )
        for j in range(len(c4_layers))
    ]
    for layer, ratio in enumerate(stage_ratios, start=stage_start):
        if ratio == 4:
            rows = compress_state_rows(c4_state_pool_size, ring4, 4)
            buffers.append(
                BufferSpec(
                    f"state[{layer}].kv_score",
                    (rows, compress_state_last_dim(4, head_dim)),
                    c4_state_dtype,
                    BufferRole.STATE,
                )
            )
            buffers.append(
                BufferSpec(
                    f"indexer_state[{layer}].kv_score",
                    (rows, compress_state_last_dim(4, indexer_head_dim)),
                    c4_state_dtype,
                    BufferRole.STATE,
                )
            )
        elif ratio == 128:
            rows = compress_state_rows(c128_state_size, ring128, 128)
            buffers.append(
                BufferSpec(
                    f"state[{layer}].kv_score",
                    (rows, compress_state_last_dim(128, head_dim)),
                    c128_state_dtype,
                    BufferRole.STATE,
                )
            )
    if mapping_length is not None:
        buffers.append(BufferSpec("full_to_swa_index_mapping", (mapping_length,), DType.INT64, BufferRole.INDEX))
    attributes: tuple[tuple[str, int | str | None], ...] = (
        ("swa_size", swa_size),
        ("c4_size", c4_size),
        ("c4_logical_size", c4_logical),
        ("c128_size", c128_size),
        ("c4_state_pool_size", c4_state_pool_size),
        ("c128_state_pool_size", c128_state_size),
        ("num_req_slots", num_req_slots),
        ("page_size", page_size),
        ("swa_page_size", page_size),
        ("ring_size_c4", ring4),
        ("ring_size_c128", ring128),
        ("start_layer", stage_start),
        ("end_layer", stage_start + len(stage_ratios)),
        ("layer_num", len(stage_ratios)),
        ("kv_layout", kv_layout.label),
        ("c4_state_dtype", str(c4_state_dtype)),
        ("c128_state_dtype", str(c128_state_dtype)),
    )
    return PoolLayout("DeepSeekV4TokenToKVPool", tuple(buffers), attributes)
