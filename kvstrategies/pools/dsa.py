"""``DSATokenToKVPool``: MLA latent KV plus the DSA indexer's keys (DSATokenToKVPool).

DeepSeek-V3.2 / GLM-5 sparse attention keeps, per layer, the MLA latent row (as :func:`.basic.mla_layout`) and a
page-major index-key buffer: one row per pool page holding ``p = P / index_kpool`` FP8 keys of
``index_head_dim`` bytes followed by their ``p`` fp32 scales (4 bytes per 128 values), stored as
uint8. Layers that reuse the previous layer's top-k keep a zero-row placeholder.

Bytes: latent ``(T + P) * kv_cache_dim * itemsize`` per layer; index ``num_index_pages *
p * 132`` per non-skipped layer with ``num_index_pages = (index_buf_size + P + 1) // P``
(note ``+ 1``), i.e. about ``T + P + 1`` tokens' worth, not ``T * 132``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.dtypes import DType
from ..core.releases import ReleaseRule, span
from ..errors import KVCacheConfigError
from .basic import mla_layout
from .layout import BufferRole, BufferSpec, PoolLayout

#: one fp32 scale per this many index-key values (SGLang ``quant_block_size``)
INDEX_QUANT_BLOCK = 128
#: the only index head dim SGLang's DSA pool accepts (one head of 128)
INDEX_HEAD_DIM = 128
#: the index page size CUDA kernels require
CUDA_INDEX_PAGE_SIZE = 64


#: index keys shared by ``index_kpool`` tokens and spread over the DCP group: the pool's index page
#: is ``P / index_kpool`` (``/ dcp`` for a replicated draft), a DCP target's index buffer covers the
#: group's widened space, and sizing prices the indexer ``/ index_kpool`` and ``x dcp``. Before it,
#: one index row per token page of ``P`` keys, ``index_buf_size = T``, no DCP factor anywhere.
DSA_INDEX_KPOOL_DCP = ReleaseRule(
    "dsa-index-kpool-dcp",
    span("0.5.22"),
    "DSA index keys: kpool-shared pages, DCP-widened target buffer, indexer cell / kpool x dcp",
    "sglang.srt.mem_cache.memory_pool.DSATokenToKVPool.__init__; sglang.srt.model_executor.pool_configurator."
    "DefaultPoolConfigurator.__init__ and _compute_dsa_indexer_cell_size",
)


def index_k_row_bytes(index_head_dim: int) -> int:
    """Bytes of one token's index key with its scales: ``D + D // 128 * 4`` (132 for 128)."""
    return index_head_dim + (index_head_dim // INDEX_QUANT_BLOCK) * 4


@dataclass(frozen=True)
class DSAIndexGeometry:
    """How the index-key buffers of one DSA pool are shaped.

    ``index_page_size = P / index_kpool`` (further ``/ dcp`` for a DCP-replicated draft pool);
    ``index_buf_size = T`` unless the pool is a DCP target (``dcp > 1``, not replicated), where
    it is ``(T + P) * dcp - P`` (the index keys are replicated across the DCP group).
    """

    size: int
    page_size: int
    index_head_dim: int
    index_kpool: int = 1
    dcp_size: int = 1
    dcp_replicated: bool = False
    #: :data:`DSA_INDEX_KPOOL_DCP` holds (else: one ``P``-key row per page, no DCP widening)
    kpool_dcp: bool = True

    @property
    def index_page_size(self) -> int:
        if not self.kpool_dcp:
            return self.page_size
        divisor = self.index_kpool * (self.dcp_size if self.dcp_replicated else 1)
        if self.page_size % divisor:
            raise KVCacheConfigError(
                f"DSA pool page_size {self.page_size} is not divisible by index_kpool x DCP ({divisor}); "
                f"use page_size = {CUDA_INDEX_PAGE_SIZE * divisor}"
            )
        return self.page_size // divisor

    @property
    def index_buf_size(self) -> int:
        if self.kpool_dcp and self.dcp_size > 1 and not self.dcp_replicated:
            return (self.size + self.page_size) * self.dcp_size - self.page_size
        return self.size

    @property
    def num_index_pages(self) -> int:
        """``(index_buf_size + P + 1) // P`` rows (SGLang adds 1, not ``P - 1``)."""
        return (self.index_buf_size + self.page_size + 1) // self.page_size

    @property
    def page_bytes(self) -> int:
        """One stored row: ``P / index_kpool`` keys then their scales.

        A DCP-replicated draft row holds ``dcp`` kernel pages of ``index_page_size`` keys
        (SGLang's ``IndexKeyCache._buffer_shape`` / ``_kernel_view``): P 128, DCP 2 -> 128 keys a
        row, viewed as two 64-key pages. Otherwise one row is one index page.
        """
        keys = self.page_size // self.index_kpool if self.kpool_dcp else self.page_size
        return keys * index_k_row_bytes(self.index_head_dim)


def validate_index_page_size(index_page_size: int, *, is_hip: bool) -> None:
    """CUDA kernels need 64-token index pages; HIP 1 or a multiple of 16 (DSATokenToKVPool)."""
    if is_hip:
        if index_page_size != 1 and index_page_size % 16:
            raise KVCacheConfigError(
                f"DSA on HIP needs an index page size of 1 or a multiple of 16, got {index_page_size}; "
                "change page_size"
            )
        return
    if index_page_size != CUDA_INDEX_PAGE_SIZE:
        raise KVCacheConfigError(
            f"DSA on CUDA needs an index page of {CUDA_INDEX_PAGE_SIZE} tokens, got {index_page_size}; "
            f"use page_size = {CUDA_INDEX_PAGE_SIZE} x index_kpool (SGLang forces it at launch)"
        )


def dsa_layout(
    *,
    size: int,
    page_size: int,
    kv_cache_dim: int,
    layer_num: int,
    store_dtype: DType,
    index: DSAIndexGeometry,
    skip_topk_layers: Sequence[bool] | None = None,
    compress_tails: tuple[int, int] | None = None,
    is_hip: bool = False,
    pool_class: str = "DSATokenToKVPool",
) -> PoolLayout:
    """``DSATokenToKVPool``: ``kv_buffer[l]`` then ``index_k_with_scale_buffer[l]`` per layer (``pool_class``: the
    name SGLang gives the class in the release, ``NSATokenToKVPool`` up to 0.5.12).

    ``skip_topk_layers[l]`` (pool-local) gives layer ``l`` a ``(0, page_bytes)`` placeholder.
    ``compress_tails = (rows, slots)`` adds the kpool-compression tails ``_compress_tail_k[l]`` /
    ``_compress_tail_score[l]`` of ``(rows, slots, index_head_dim)`` bf16 (0 rows when skipped).
    """
    if index.index_head_dim != INDEX_HEAD_DIM:
        raise KVCacheConfigError(
            f"index_head_dim {index.index_head_dim} is not supported by the DSA pool; SGLang requires "
            f"{INDEX_HEAD_DIM} (one index head)"
        )
    if skip_topk_layers is not None and len(skip_topk_layers) != layer_num:
        raise KVCacheConfigError(
            f"skip_topk_layers has {len(skip_topk_layers)} entries for a {layer_num}-layer DSA pool"
        )
    validate_index_page_size(index.index_page_size, is_hip=is_hip)
    latent = mla_layout(
        size=size, page_size=page_size, kv_cache_dim=kv_cache_dim, layer_num=layer_num, store_dtype=store_dtype
    )
    skips = list(skip_topk_layers) if skip_topk_layers is not None else [False] * layer_num
    width = index.page_bytes
    buffers = list(latent.buffers)
    for layer, skipped in enumerate(skips):
        rows = 0 if skipped else index.num_index_pages
        buffers.append(BufferSpec(f"index_k_with_scale_buffer[{layer}]", (rows, width), DType.UINT8))
    if compress_tails is not None:
        tail_rows, tail_slots = compress_tails
        for layer, skipped in enumerate(skips):
            shape = (0 if skipped else tail_rows, tail_slots, index.index_head_dim)
            buffers.append(BufferSpec(f"_compress_tail_k[{layer}]", shape, DType.BFLOAT16, role=BufferRole.STATE))
            buffers.append(BufferSpec(f"_compress_tail_score[{layer}]", shape, DType.BFLOAT16, role=BufferRole.STATE))
    attributes: tuple[tuple[str, int | str | None], ...] = (
        *latent.attributes,
        ("index_head_dim", index.index_head_dim),
        ("index_kpool", index.index_kpool),
        ("index_page_size", index.index_page_size),
        ("index_buf_size", index.index_buf_size),
        ("num_index_pages", index.num_index_pages),
        ("indexer_layers", sum(1 for s in skips if not s)),
    )
    return PoolLayout(pool_class, tuple(buffers), attributes)
