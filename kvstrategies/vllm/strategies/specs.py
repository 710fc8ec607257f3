"""Per-layer KV cache specs that own their page bytes, as vLLM states them (``vllm/v1/kv_cache_interface.py``).

A spec says how one layer stores its cache in a block of ``block_size`` tokens (its page) and how
many bytes one request can hold at most (what sizes the pool per request):

* :class:`FullAttentionSpec` -- ``page = block x H x (D + Dv) x es`` (an NVFP4 cache:
  ``block x 2H x (D / 2 + D / 16)``); a request holds
  ``cdiv(L, block)`` pages (``FullAttentionSpec.max_memory_usage_bytes``);
* :class:`SlidingWindowSpec` -- the same page; a request holds
  ``cdiv(min(W - 1 + in_flight, L), block) + 1`` pages (``SlidingWindowSpec.max_admission_blocks_per_request``:
  the window, the tokens scheduled but not yet freed, and one page the window may straddle);
* :class:`MLAAttentionSpec` -- one latent row per token: ``page = block x 1 x (kv_lora_rank + rope) x es``;
* :class:`MambaSpec` -- a fixed state per request, ``page = sum(prod(shape) x es)`` (or padded to the
  attention page); a request holds ``2 + speculative + checkpoint`` pages with prefix caching
  ("align" mode), else ``1 + speculative`` (``MambaSpec.max_memory_usage_bytes``).

``L`` is vLLM's ``max_model_len``, ``in_flight`` its ``max_in_flight_tokens``, ``es`` the bytes of the
cache dtype (fp8: 1). Every spec is a frozen value; equal specs group together.
"""

from __future__ import annotations

import math
from collections.abc import Container
from dataclasses import dataclass, replace
from typing import Any

from ...core.dtypes import DType
from ...core.releases import VLLM, ReleaseRule, span
from ...core.sizing import ceil_div

#: a token of FlashMLA's sparse ``fp8_ds_mla`` latent: 512 fp8 values, 4 float32 scales, 64 bf16 RoPE values
#: (``vllm/v1/kv_cache_interface.py MLAAttentionSpec.real_page_size_bytes``)
FP8_DS_MLA_TOKEN_BYTES = 512 + 4 * 4 + 64 * 2


def nvfp4_full_dim(head_size: int) -> int:
    """Bytes of one head's K (or V) row in an NVFP4 cache: ``D / 2`` packed fp4 values and one fp8 scale
    per 16 (``vllm/utils/torch_utils.py nvfp4_kv_cache_full_dim``; the page as FlashInfer lays it,
    ``FlashInferBackend.customize_spec``: ``2 x H`` head slots)."""
    return head_size // 2 + head_size // 16


#: from vLLM 0.15.1 ``CacheConfig`` has ``mamba_cache_mode`` (``none`` / ``align`` / ``all``); 0.14.1 has none
#: (its Mamba state is one block a request, or under prefix caching a block of every ``block_size`` tokens):
#: the settings record ``None``
MAMBA_CACHE_MODE = ReleaseRule(
    "vllm-mamba-cache-mode",
    span("0.15.1", engine=VLLM),
    "CacheConfig.mamba_cache_mode exists (none / align / all); before, no such setting",
    "vllm/config/cache.py CacheConfig.mamba_cache_mode (0.15.1)",
    topic="launch",
)


@dataclass(frozen=True)
class CacheLimits:
    """What a request's cache can grow to: ``max_model_len`` and ``max_in_flight_tokens`` (vLLM's names); ``dcp``:
    ``--decode-context-parallel-size``, over whose ranks an attention cache's token positions are spread."""

    max_model_len: int
    max_in_flight_tokens: int
    mamba_cache_mode: str = "none"
    dcp: int = 1

    @property
    def rank_len(self) -> int:
        """The tokens of a request at ``max_model_len`` one rank's attention cache holds: ``cdiv(L, dcp)``
        (``vllm/v1/kv_cache_interface.py FullAttentionSpec.max_memory_usage_bytes``, ``dcp_sharded``)."""
        return ceil_div(self.max_model_len, self.dcp)


@dataclass(frozen=True, kw_only=True)
class KVCacheSpec:
    """One layer's cache format in blocks of ``block_size`` tokens."""

    block_size: int

    @property
    def kind(self) -> str:
        """vLLM's class name for this spec."""
        return type(self).__name__

    @property
    def page_size_bytes(self) -> int:
        raise NotImplementedError

    def max_memory_usage_bytes(self, limits: CacheLimits) -> int:
        raise NotImplementedError

    def blocks_per_request(self, limits: CacheLimits) -> int:
        """``cdiv(max_memory_usage_bytes, page_size_bytes)``: pages one request takes at most."""
        return ceil_div(self.max_memory_usage_bytes(limits), self.page_size_bytes)

    def with_block_size(self, block_size: int) -> KVCacheSpec:
        return replace(self, block_size=block_size)

    def document(self) -> dict[str, Any]:
        """The spec as the vLLM plan document lists it (vLLM's field names)."""
        return {"kind": self.kind, "block_size": self.block_size, "page_size_bytes": self.page_size_bytes}


@dataclass(frozen=True, kw_only=True)
class AttentionSpec(KVCacheSpec):
    """Per-head K and V rows: ``page = block x H x (D + Dv) x es`` (or ``page_size_padded``)."""

    num_kv_heads: int
    head_size: int
    head_size_v: int
    dtype: DType
    page_size_padded: int | None = None
    #: vLLM's ``KVQuantMode`` name of a quantized cache (``FP8_PER_TENSOR`` for the fp8 names)
    kv_quant_mode: str | None = None
    #: ``False``: the release's spec records no V width (vLLM 0.19.1's ``SlidingWindowSpec``, 0.27.1's
    #: ``ChunkedLocalAttentionSpec``); the page is K and V rows either way
    records_head_size_v: bool = True

    @property
    def unpadded_page_size_bytes(self) -> int:
        if self.kv_quant_mode == "NVFP4":  # K and V in their own head slots, each packed fp4 plus fp8 scales
            return self.block_size * 2 * self.num_kv_heads * nvfp4_full_dim(self.head_size)
        return self.block_size * self.num_kv_heads * (self.head_size + self.head_size_v) * self.dtype.itemsize

    @property
    def page_size_bytes(self) -> int:
        return self.page_size_padded if self.page_size_padded is not None else self.unpadded_page_size_bytes

    def document(self) -> dict[str, Any]:
        out = super().document()
        out.update(num_kv_heads=self.num_kv_heads, head_size=self.head_size, head_size_v=self.head_size_v,
                   dtype=self.dtype.torch_name)  # fmt: skip
        if self.page_size_padded is not None:
            out["page_size_padded"] = self.page_size_padded
        if self.kv_quant_mode is not None:
            out["kv_quant_mode"] = self.kv_quant_mode
        if not self.records_head_size_v:
            del out["head_size_v"]
        return out


@dataclass(frozen=True, kw_only=True)
class FullAttentionSpec(AttentionSpec):
    """Every token's K/V kept: ``cdiv(L, block)`` pages a request. ``sliding_window`` is set when
    the hybrid allocator is off and a sliding-window layer is kept as full attention."""

    sliding_window: int | None = None
    #: set when a chunked-local layer is kept as full attention (the hybrid allocator off)
    attention_chunk_size: int | None = None

    def max_memory_usage_bytes(self, limits: CacheLimits) -> int:
        return ceil_div(limits.rank_len, self.block_size) * self.page_size_bytes

    def document(self) -> dict[str, Any]:
        out = super().document()
        if self.sliding_window is not None:
            out["sliding_window"] = self.sliding_window
        if self.attention_chunk_size is not None:
            out["attention_chunk_size"] = self.attention_chunk_size
        return out


@dataclass(frozen=True, kw_only=True)
class MLAAttentionSpec(FullAttentionSpec):
    """One latent row per token (``head_size`` = kv_lora_rank + rope dims, no separate V); a sparse-MLA
    indexer's key cache is one too (``cache_dtype_str`` unset: vLLM gives it none)."""

    head_size_v: int = 0
    cache_dtype_str: str | None = None
    #: a block's bytes are a multiple of this (``AttentionSpec.block_stride_alignment``; ``None``: none), which
    #: vLLM 0.31.0 sets to :attr:`state_content_size_bytes` on the flat sparse caches
    #: (``vllm.strategies.layers.FLAT_SPARSE_ALIGNMENT``); vLLM records no such field in a document
    block_stride_alignment: int | None = None
    #: ``AttentionSpec.max_tp_shards`` (vLLM 0.31.0 on; ``None``: unset): it changes no page, only which specs merge
    #: into one bucket (``drafts.LATENT_HEAD_OWN_BUCKET``); vLLM records no such field in a document
    max_tp_shards: int | None = None

    @property
    def state_content_size_bytes(self) -> int:
        """One token's row: ``(head_size + head_size_v) x es`` bytes (``AttentionSpec.state_content_size_bytes``;
        an MLA latent records ``head_size_v`` 0 from vLLM 0.28.0, so the row is the latent)."""
        return (self.head_size + self.head_size_v) * self.dtype.itemsize

    @property
    def unpadded_page_size_bytes(self) -> int:
        """``block x H x head_size x es``: the latent row only, whatever ``head_size_v`` records (vLLM 0.27.1
        records the latent width there: ``MLAAttentionSpec.real_page_size_bytes`` ignores it)."""
        if self.kv_quant_mode == "NVFP4":
            return super().unpadded_page_size_bytes
        if self.cache_dtype_str == "fp8_ds_mla":  # MLAAttentionSpec.real_page_size_bytes: 656 bytes a token
            return self.block_size * FP8_DS_MLA_TOKEN_BYTES
        return self.block_size * self.num_kv_heads * self.head_size * self.dtype.itemsize

    def document(self) -> dict[str, Any]:
        out = super().document()
        if self.cache_dtype_str is not None:
            out["cache_dtype_str"] = self.cache_dtype_str
        return out


@dataclass(frozen=True, kw_only=True)
class SparseMLALayerSpec(KVCacheSpec):
    """A DeepSeek sparse-attention layer's two caches before grouping: its indexer's key cache
    (``None`` on a layer that reuses the previous layer's top-k) and its MLA latent, in vLLM's
    registration order (indexer first). Grouped, they become entries of one
    :class:`UniformTypeKVCacheSpecs`; ``page`` is both pages."""

    indexer: MLAAttentionSpec | None
    latent: MLAAttentionSpec

    @property
    def parts(self) -> tuple[MLAAttentionSpec, ...]:
        return (self.latent,) if self.indexer is None else (self.indexer, self.latent)

    @property
    def page_size_bytes(self) -> int:
        return sum(part.page_size_bytes for part in self.parts)

    def max_memory_usage_bytes(self, limits: CacheLimits) -> int:
        return ceil_div(limits.rank_len, self.block_size) * self.page_size_bytes


@dataclass(frozen=True, kw_only=True)
class UniformTypeKVCacheSpecs(KVCacheSpec):
    """One group of layers whose specs are of one type and block size, pages apart (``vllm/v1/kv_cache_interface.py
    UniformTypeKVCacheSpecs``: every MLA latent and indexer cache of a sparse-MLA model): a block
    holds one page of every entry, so ``page = sum of the entries' pages`` and a request
    ``cdiv(L, block)`` blocks. ``entries``: ``(layer, spec)`` in vLLM's layer-name order."""

    entries: tuple[tuple[int, AttentionSpec], ...]

    @property
    def page_size_bytes(self) -> int:
        return sum(spec.page_size_bytes for _, spec in self.entries)

    @property
    def block_bytes(self) -> int:
        """A block's bytes: the page rounded up to the lcm of the entries' ``block_stride_alignment``
        (``kv_cache_utils.py _get_kv_cache_bytes_per_block``; the page itself where none is set)."""
        alignments = [a for _, spec in self.entries if (a := getattr(spec, "block_stride_alignment", None))]
        if not alignments:
            return self.page_size_bytes
        alignment = math.lcm(*alignments)
        return ceil_div(self.page_size_bytes, alignment) * alignment

    def max_memory_usage_bytes(self, limits: CacheLimits) -> int:
        """``UniformTypeKVCacheSpecs.max_memory_usage_bytes``: the most pages any entry needs, times the page."""
        pages = max((spec.blocks_per_request(limits) for _, spec in self.entries), default=0)
        return pages * self.page_size_bytes

    @property
    def merges_as_full_attention(self) -> bool:
        """Whether vLLM reads the entries as one full-attention spec (``kv_cache_utils.py get_kv_cache_groups``:
        ``is_kv_cache_spec_uniform``, ``FullAttentionSpec.merge``): plain full-attention entries, a chunk kept as
        full attention beside none, of one block, head count, head size and dtype. vLLM then groups them under one
        layer's spec, whose block is a stage's own layers' pages."""
        specs = [spec for _, spec in self.entries]
        if not specs or any(type(spec) is not FullAttentionSpec for spec in specs):
            return False
        first = specs[0]
        key = (first.block_size, first.num_kv_heads, first.head_size, first.dtype)
        return all((s.block_size, s.num_kv_heads, s.head_size, s.dtype) == key for s in specs)

    def restricted(self, layers: Container[int]) -> UniformTypeKVCacheSpecs:
        """The entries of ``layers`` only (one pipeline stage's)."""
        return replace(self, entries=tuple((layer, spec) for layer, spec in self.entries if layer in layers))

    def document(self) -> dict[str, Any]:
        out = super().document()
        distinct: list[AttentionSpec] = []
        for _, spec in self.entries:
            if spec not in distinct:
                distinct.append(spec)
        out["specs"] = [spec.document() for spec in distinct]
        return out


@dataclass(frozen=True, kw_only=True)
class SlidingWindowSpec(AttentionSpec):
    """A window of ``sliding_window`` tokens kept; ``cdiv(min(W - 1 + in_flight, L), block) + 1`` pages."""

    sliding_window: int

    def max_memory_usage_bytes(self, limits: CacheLimits) -> int:
        tokens = min(self.sliding_window - 1 + limits.max_in_flight_tokens, limits.max_model_len)
        return (ceil_div(tokens, self.block_size) + 1) * self.page_size_bytes

    def as_full_attention(self, keep_head_size_v: bool = True) -> FullAttentionSpec:
        """vLLM's promotion when the hybrid allocator is off (``_promote_local_kv_cache_specs``); without
        ``keep_head_size_v`` V takes K's width (vLLM 0.20.2's ``unify_hybrid_kv_cache_specs``)."""
        return FullAttentionSpec(block_size=self.block_size, num_kv_heads=self.num_kv_heads, head_size=self.head_size,
                                 head_size_v=self.head_size_v if keep_head_size_v else self.head_size, dtype=self.dtype,
                                 page_size_padded=self.page_size_padded, kv_quant_mode=self.kv_quant_mode,
                                 sliding_window=self.sliding_window)  # fmt: skip

    def document(self) -> dict[str, Any]:
        out = super().document()
        out["sliding_window"] = self.sliding_window
        return out


@dataclass(frozen=True, kw_only=True)
class SlidingWindowMLASpec(SlidingWindowSpec):
    """A sliding window of MLA-format rows (DeepSeek-V4's sliding caches and compressor states): one vector a
    token, no separate V (``head_size_v`` 0); the page is given (``page_size_padded``)."""

    head_size_v: int = 0
    cache_dtype_str: str | None = None

    def document(self) -> dict[str, Any]:
        out = super().document()
        if self.cache_dtype_str is not None:
            out["cache_dtype_str"] = self.cache_dtype_str
        return out


@dataclass(frozen=True, kw_only=True)
class ChunkedLocalAttentionSpec(AttentionSpec):
    """Llama-4's chunked local attention: a request holds ``cdiv(min(C + in_flight, L), block)`` pages
    (``vllm/v1/kv_cache_interface.py ChunkedLocalAttentionSpec.max_admission_blocks_per_request``: one
    chunk of ``C = attention_chunk_size`` tokens plus the tokens in flight, no extra block)."""

    attention_chunk_size: int

    def max_memory_usage_bytes(self, limits: CacheLimits) -> int:
        tokens = min(self.attention_chunk_size + limits.max_in_flight_tokens, limits.max_model_len)
        return ceil_div(tokens, self.block_size) * self.page_size_bytes

    def as_full_attention(self, keep_head_size_v: bool = True) -> FullAttentionSpec:
        """vLLM's promotion when the hybrid allocator is off (``_promote_local_kv_cache_specs``); without
        ``keep_head_size_v`` V takes K's width (vLLM 0.20.2's ``unify_hybrid_kv_cache_specs``)."""
        return FullAttentionSpec(block_size=self.block_size, num_kv_heads=self.num_kv_heads, head_size=self.head_size,
                                 head_size_v=self.head_size_v if keep_head_size_v else self.head_size, dtype=self.dtype,
                                 page_size_padded=self.page_size_padded, kv_quant_mode=self.kv_quant_mode,
                                 attention_chunk_size=self.attention_chunk_size)  # fmt: skip

    def document(self) -> dict[str, Any]:
        out = super().document()
        out["attention_chunk_size"] = self.attention_chunk_size
        return out


@dataclass(frozen=True, kw_only=True)
class MambaSpec(KVCacheSpec):
    """A recurrent state per request: conv and SSM tensors (``shapes`` with their ``dtypes``)."""

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[DType, ...]
    mamba_type: str = "mamba2"
    #: ``None``: the release's ``MambaSpec`` has no such field (0.14.1: :data:`MAMBA_CACHE_MODE`)
    mamba_cache_mode: str | None = "none"
    page_size_padded: int | None = None
    num_speculative_blocks: int = 0
    #: ``None``: the release's ``MambaSpec`` has no such field (0.28.0: :data:`~.layers.CHECKPOINT_BLOCKS_FIELD`)
    num_prefill_checkpoint_blocks: int | None = 0
    prefill_checkpoint_alignment: int | None = None

    @property
    def state_bytes(self) -> int:
        return sum(math.prod(shape) * dtype.itemsize for shape, dtype in zip(self.shapes, self.dtypes, strict=True))

    @property
    def page_size_bytes(self) -> int:
        return self.page_size_padded if self.page_size_padded is not None else self.state_bytes

    def max_memory_usage_bytes(self, limits: CacheLimits) -> int:
        if limits.mamba_cache_mode == "align":
            pages = 2 + self.num_speculative_blocks + (self.num_prefill_checkpoint_blocks or 0)
        else:
            pages = 1 + self.num_speculative_blocks
        return self.page_size_bytes * pages

    def document(self) -> dict[str, Any]:
        out = super().document()
        out.update(shapes=[list(s) for s in self.shapes], dtypes=[d.torch_name for d in self.dtypes],
                   mamba_type=self.mamba_type, num_speculative_blocks=self.num_speculative_blocks)  # fmt: skip
        if self.mamba_cache_mode is not None:
            out["mamba_cache_mode"] = self.mamba_cache_mode
        if self.num_prefill_checkpoint_blocks is not None:
            out["num_prefill_checkpoint_blocks"] = self.num_prefill_checkpoint_blocks
        if self.page_size_padded is not None:
            out["page_size_padded"] = self.page_size_padded
        if self.prefill_checkpoint_alignment is not None:
            out["prefill_checkpoint_alignment"] = self.prefill_checkpoint_alignment
        return out
