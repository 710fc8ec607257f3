"""DeepSeek-V4's KV caches as vLLM builds them, and their block-outermost packing.

Each decoder layer ``i`` with compress ratio ``r = compress_ratios[i]`` registers these caches, in this order
(``vllm/models/deepseek_v4/attention.py DeepseekV4Attention.__init__``: the indexer, the sliding-window cache,
the attention itself, its compressor):

* ``r = 4``: the indexer's key cache, ``MLAAttentionSpec(block B, head index_head_dim + 4, uint8)`` with one state
  per 4 tokens (``DeepseekV4IndexerCache``), and the indexer compressor's state;
* every layer: its sliding-window cache, ``SlidingWindowMLASpec(block 64, window = sliding_window, head 512)``
  (``v1/attention/backends/mla/sparse_swa.py DeepseekV4SWACache``);
* ``r > 1``: the compressed KV, ``MLAAttentionSpec(block B, head 512)`` with one state per ``r`` tokens, and the
  KV compressor's state;
* a compressor's state (``compressor.py CompressorStateCache``): ``SlidingWindowMLASpec`` in float32 of
  ``2 x coff x d`` values a token (score and KV; ``coff = 2`` for ``r = 4``, else 1; ``d`` the indexer's or the
  KV head width), window ``coff x r``, block 4 (``r = 4``) or 8 (``r = 128``).

The KV caches (sliding and compressed) use the ``fp8_ds_mla`` format: 584 B a token (448 B fp8 NoPE, 128 B bf16
RoPE, 8 B scales; ``--kv-cache-dtype`` auto or any fp8 name resolves to it, bf16 is refused:
``_resolve_dsv4_kv_cache_dtype``). A page holds ``block / tokens_per_state`` states, rounded up to 576 B
(``kv_cache_interface.py _apply_alignment_padding``).

The caches form groups of mixed page sizes, packed so that one block ID addresses a block of every group at
``block_stride`` = the widest group's page (``kv_cache_planning.py _get_packed_kv_cache_groups``, the layout
``BLHNC`` of the DeepSeek-V4 backends): see :func:`packed_groups` and :func:`block_outermost_tensors`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...core.dtypes import DType
from ...core.sizing import ceil_div
from ...errors import UnsupportedConfigurationError
from ...models import ModelGeometry
from .grouping import KVCacheGroup
from .sizing import KVCacheTensor, SharedKVCacheTensor
from .specs import (
    AttentionSpec,
    CacheLimits,
    FullAttentionSpec,
    KVCacheSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
)

#: ``fp8_ds_mla``: one token's row, 448 B fp8 NoPE + 64 x 2 B bf16 RoPE + 8 B UE8M0 scales (``attention.py
#: DeepseekV4Attention.get_kv_cache_spec``: ``state_content_bytes=584``)
FP8_DS_MLA_ROW_BYTES = 584
#: the page alignment of the ``fp8_ds_mla`` layout (FlashMLA's packing)
FP8_DS_MLA_PAGE_ALIGNMENT = 576
#: the indexer key's fp8 scale bytes beside its ``index_head_dim`` fp8 values (``DeepseekV4Indexer``)
INDEXER_SCALE_BYTES = 4
#: the sliding-window cache's block (``DeepseekV4SWACache``: ``block_size=64``)
SWA_BLOCK = 64
#: the compressor states' block per ratio (``DeepseekCompressor``: "[256 // 4, 584] KV blocks" fix them)
STATE_BLOCK = {4: 4, 128: 8}
#: vLLM's layout name for the DeepSeek-V4 backends (block-outermost)
LAYOUT = "BLHNC"
SWA_BACKEND = "DEEPSEEK_SPARSE_SWA"
INDEXER_BACKEND = "DEEPSEEK_V4_INDEXER"
COMPRESSOR_BACKEND = "CompressorBackend"


def attention_backend(capability: tuple[int, int]) -> str:
    """``nvidia/model.py _select_dsv4_attn_cls`` without ``--attention-backend``: FlashInfer's on SM12, else
    FlashMLA's (the same caches either way)."""
    return "FLASHINFER_MLA_SPARSE_DSV4" if capability[0] == 12 else "FLASHMLA_SPARSE_DSV4"


def aligned(nbytes: int) -> int | None:
    """``page_size_padded``: ``nbytes`` rounded up to 576 B, ``None`` where it is a multiple already."""
    padded = ceil_div(nbytes, FP8_DS_MLA_PAGE_ALIGNMENT) * FP8_DS_MLA_PAGE_ALIGNMENT
    return padded if padded != nbytes else None


#: the compressed caches' kernel block (``models/deepseek_v4/sparse_mla.py get_supported_kernel_block_sizes``)
KERNEL_BLOCK = 256


def check_block_size(block: int) -> None:
    """Blocks the model covers: those the 256-token kernel block divides evenly into (128, 256). For any other
    block vLLM pads the block stride to the lcm of the compressed caches' pages at ``gcd(256, block)`` tokens
    (``AttentionSpec.get_block_stride_alignment``), and a block under 128 tokens holds no ratio-128 state."""
    if KERNEL_BLOCK % block or block < 128:
        raise UnsupportedConfigurationError(
            f"block_size: DeepSeek-V4 with --block-size {block}: vLLM pads the block stride to the caches' pages at "
            f"its {KERNEL_BLOCK}-token kernel block (AttentionSpec.get_block_stride_alignment), which the vLLM "
            f"strategies do not model; give --block-size 256 (the default) or 128"
        )


def _states(block: int, ratio: int) -> int:
    states = block // ratio
    if states < 1:
        raise UnsupportedConfigurationError(
            f"block_size: a block of {block} tokens holds no state of a layer compressing {ratio} tokens into one "
            f"(vLLM divides by block_size // compress_ratio); give --block-size {ratio} or a multiple of it"
        )
    return states


def _compressed(block: int, ratio: int, head: int, row: int, cache_dtype: str | None, v_zero: bool) -> MLAAttentionSpec:
    """A cache of one ``row``-byte state per ``ratio`` tokens (uint8 storage); ``v_zero``: the release records
    ``head_size_v`` 0 (else ``head``: :data:`~.layers.MLA_HEAD_SIZE_V_ZERO`)."""
    unpadded = _states(block, ratio) * row
    return MLAAttentionSpec(block_size=block, num_kv_heads=1, head_size=head, dtype=DType.UINT8,
                            head_size_v=0 if v_zero else head,
                            page_size_padded=aligned(unpadded) or unpadded, cache_dtype_str=cache_dtype,
                            kv_quant_mode="FP8_PER_TENSOR" if cache_dtype else None)  # fmt: skip


def _state(ratio: int, width: int, v_zero: bool) -> SlidingWindowMLASpec:
    """A compressor's float32 state: ``2 x coff x width`` values a token, window ``coff x ratio``."""
    coff = 2 if ratio == 4 else 1
    block, head = STATE_BLOCK[ratio], 2 * coff * width
    unpadded = block * head * DType.FLOAT32.itemsize
    page = aligned(unpadded) or unpadded
    return SlidingWindowMLASpec(block_size=block, num_kv_heads=1, head_size=head, dtype=DType.FLOAT32,
                                sliding_window=coff * ratio, page_size_padded=page,
                                records_head_size_v=v_zero)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class DSV4LayerSpec(KVCacheSpec):
    """One DeepSeek-V4 layer's caches in registration order, with their vLLM backends in the order they are
    first met (the attention's backend holds no cache of its own on a sliding-only layer)."""

    parts: tuple[AttentionSpec, ...]
    backends: tuple[str, ...]

    @property
    def page_size_bytes(self) -> int:
        return sum(part.page_size_bytes for part in self.parts)

    def max_memory_usage_bytes(self, limits: CacheLimits) -> int:
        return sum(part.max_memory_usage_bytes(limits) for part in self.parts)


def layer_specs(
    geometry: ModelGeometry, block: int, capability: tuple[int, int], *, v_zero: bool = True, draft_layers: int = 0
) -> dict[int, DSV4LayerSpec]:
    """Every decoder layer's caches (module doc); ``block``: the compressed caches' block (``--block-size``);
    ``v_zero``: the release records MLA rows with ``head_size_v`` 0 (vLLM 0.27.1: MLA specs record their
    ``head_size``, the sliding MLA specs no V width); ``draft_layers``: the MTP draft's layers after the target's,
    each compressing as ``compress_ratios`` says past the decoder layers (0 when it ends: a sliding cache only; the
    published configs give their one MTP layer 0)."""
    dsv4 = geometry.dsv4
    if dsv4 is None:
        raise UnsupportedConfigurationError("model: not a DeepSeek-V4 config (no compress_ratios)")
    head = dsv4.kv_lora_rank
    row = SWA_BLOCK * FP8_DS_MLA_ROW_BYTES
    swa = SlidingWindowMLASpec(block_size=SWA_BLOCK, num_kv_heads=1, head_size=head, dtype=DType.UINT8,
                               sliding_window=dsv4.window_size, page_size_padded=aligned(row) or row,
                               cache_dtype_str="fp8_ds_mla", kv_quant_mode="FP8_PER_TENSOR",
                               records_head_size_v=v_zero)  # fmt: skip
    attention = attention_backend(capability)
    out: dict[int, DSV4LayerSpec] = {}
    for layer in range(geometry.num_hidden_layers + draft_layers):
        ratio = dsv4.compress_ratios[layer] if layer < len(dsv4.compress_ratios) else 0
        parts: list[AttentionSpec] = []
        backends: list[str] = []
        if ratio == 4:
            indexer_row = dsv4.index_head_dim + INDEXER_SCALE_BYTES
            parts += [_compressed(block, ratio, indexer_row, indexer_row, None, v_zero),
                      _state(ratio, dsv4.index_head_dim, v_zero)]
            backends += [INDEXER_BACKEND, COMPRESSOR_BACKEND]
        parts.append(swa)
        backends += [SWA_BACKEND, attention]
        if ratio > 1:
            if ratio not in STATE_BLOCK:
                raise UnsupportedConfigurationError(
                    f"compress_ratios: layer {layer} compresses {ratio} tokens; vLLM's DeepSeek-V4 compressor takes "
                    "4 or 128 (compressor.py CompressorStateCache)"
                )
            parts += [_compressed(block, ratio, head, FP8_DS_MLA_ROW_BYTES, "fp8_ds_mla", v_zero),
                      _state(ratio, head, v_zero)]
            backends.append(COMPRESSOR_BACKEND)
        out[layer] = DSV4LayerSpec(block_size=block, parts=tuple(parts), backends=tuple(backends))
    return out


def backends(specs: Mapping[int, DSV4LayerSpec]) -> tuple[str, ...]:
    """The backends in the order the layers first meet them."""
    seen: dict[str, None] = {}
    for spec in specs.values():
        seen.update(dict.fromkeys(spec.backends))
    return tuple(seen)


# ---- packing mixed page sizes (block-outermost) --------------------------------------------------------------------
def _same_type(first: AttentionSpec, spec: AttentionSpec) -> bool:
    """``UniformTypeKVCacheSpecs.is_uniform_type``: one block size, and one kind (a sliding window of one size, or
    full attention)."""
    if first.block_size != spec.block_size:
        return False
    if isinstance(first, SlidingWindowSpec):
        return isinstance(spec, SlidingWindowSpec) and spec.sliding_window == first.sliding_window
    return isinstance(first, FullAttentionSpec) and isinstance(spec, FullAttentionSpec)


def approximate_gcd(values: Sequence[int], lower_bound: int) -> int:
    """``kv_cache_planning.py _approximate_gcd``: the ``d`` in ``[lower_bound, max(values)]`` that pads the values
    least when each is rounded up to a multiple of ``d`` (ties: the larger ``d``)."""
    low = max(1, lower_bound)
    best, best_pad = low, None
    for d in range(low, max(values) + 1):
        pad = sum((d - value % d) % d for value in values)
        if best_pad is None or pad <= best_pad:
            best, best_pad = d, pad
    return best


@dataclass(frozen=True)
class _Bucket:
    entries: tuple[tuple[int, AttentionSpec], ...]

    @property
    def by_page(self) -> dict[int, list[tuple[int, AttentionSpec]]]:
        pages: dict[int, list[tuple[int, AttentionSpec]]] = {}
        for entry in self.entries:
            pages.setdefault(entry[1].page_size_bytes, []).append(entry)
        return pages

    @property
    def balanced(self) -> bool:
        return len({len(v) for v in self.by_page.values()}) == 1

    @property
    def repeats(self) -> int:
        """``get_max_layers_per_page_size``."""
        return Counter(spec.page_size_bytes for _, spec in self.entries).most_common(1)[0][1]


def _buckets(entries: Sequence[tuple[int, AttentionSpec]]) -> list[_Bucket]:
    """The caches bucketed by type (:func:`_same_type`) in order of first appearance."""
    buckets: list[list[tuple[int, AttentionSpec]]] = []
    for entry in entries:
        for bucket in buckets:
            if _same_type(bucket[0][1], entry[1]):
                bucket.append(entry)
                break
        else:
            buckets.append([entry])
    return [_Bucket(tuple(b)) for b in buckets]


def _split(kind: _Bucket, count: int) -> list[KVCacheGroup]:
    """``kind`` as ``count`` groups, group ``i`` taking every ``count``-th repeat of its page-size pattern from
    ``i`` (one group: the bucket whole, in its own order)."""
    repeats = list(zip(*kind.by_page.values(), strict=True)) if count > 1 else [kind.entries]
    groups = []
    for i in range(count):
        members = tuple(entry for repeat in repeats[i::count] for entry in repeat)
        spec = UniformTypeKVCacheSpecs(block_size=members[0][1].block_size, entries=members)
        groups.append(KVCacheGroup(tuple(layer for layer, _ in members), spec))
    return groups


def packed_groups(entries: Sequence[tuple[int, AttentionSpec]]) -> list[KVCacheGroup]:
    """``_get_packed_kv_cache_groups``: the caches bucketed by type in order of first appearance; a bucket of
    equally many caches of each page size (balanced) is a repeating pattern, split into groups of
    ``repeats_per_group`` repeats (the approximate gcd of the balanced buckets' repeats, at least the largest
    mixed-page balanced bucket's), taking every ``n``-th repeat; any other bucket is one group."""
    kinds = _buckets(entries)
    floor = max((b.repeats for b in kinds if b.balanced and len(b.by_page) > 1), default=0)
    if not floor:
        raise UnsupportedConfigurationError(
            "model: no cache pattern mixes page sizes; vLLM packs such a model otherwise (state buckets), which the "
            "vLLM strategies do not model"
        )
    per_group = approximate_gcd([b.repeats for b in kinds if b.balanced], floor)
    return [group for kind in kinds
            for group in _split(kind, ceil_div(kind.repeats, per_group) if kind.balanced else 1)]  # fmt: skip


def layer_tuple_groups(entries: Sequence[tuple[int, AttentionSpec]]) -> list[KVCacheGroup]:
    """vLLM 0.28.0's ``_get_kv_cache_groups_uniform_groups``: the full-attention (MLA) caches one group, first;
    each sliding bucket split into ``cdiv(repeats, n)`` groups of every ``n``-th repeat, ``n`` the approximate gcd
    of every bucket's repeats (``get_num_layer_tuples``) from the MLA group's."""
    kinds = _buckets(entries)
    full = [k for k in kinds if not isinstance(k.entries[0][1], SlidingWindowSpec)]
    sliding = [k for k in kinds if isinstance(k.entries[0][1], SlidingWindowSpec)]
    if len(full) != 1 or not all(k.balanced for k in sliding):
        raise UnsupportedConfigurationError(
            "model: vLLM 0.28.0 groups DeepSeek-V4's caches as one MLA group and balanced sliding ones; this "
            "config's caches do not fall so (kv_cache_utils.py _get_kv_cache_groups_uniform_groups asserts it)"
        )
    per_group = approximate_gcd([k.repeats for k in (*full, *sliding)], full[0].repeats)
    split = (group for kind in sliding for group in _split(kind, ceil_div(kind.repeats, per_group)))
    return [*_split(full[0], 1), *split]


def offset_tensors(groups: Sequence[KVCacheGroup], num_blocks: int) -> tuple[SharedKVCacheTensor, ...]:
    """vLLM 0.28.0's ``_get_kv_cache_config_packed``: each group's caches back to back in a block (its own
    offsets, cache by cache), and one tensor per distinct offset, in ascending order, shared by the cache of each
    group that starts there; every tensor is the whole ``num_blocks x stride`` allocation."""
    by_offset: dict[int, list[int]] = {}
    stride = 0
    for group in groups:  # a stage's group without its layers keeps the whole spec but holds nothing
        held = group.spec.entries if isinstance(group.spec, UniformTypeKVCacheSpecs) and group.layers else ()
        offset = 0
        for layer, part in held:
            by_offset.setdefault(offset, []).append(layer)
            offset += part.page_size_bytes
        stride = max(stride, offset)
    return tuple(SharedKVCacheTensor(num_blocks * stride, tuple(by_offset[offset]), True, offset, stride)
                 for offset in sorted(by_offset))  # fmt: skip


def block_outermost_tensors(groups: Sequence[KVCacheGroup], num_blocks: int) -> tuple[KVCacheTensor, ...]:
    """One allocation of ``num_blocks x stride`` bytes, ``stride`` the widest group's page; each group lays its
    caches of one page size side by side in a block, page sizes in order of first appearance (``offset``), and
    every group addresses the same allocation (a block ID belongs to one group at a time)."""
    specs = [g.spec for g in groups if isinstance(g.spec, UniformTypeKVCacheSpecs) and g.layers]
    stride = max((spec.page_size_bytes for spec in specs), default=0)
    out: list[KVCacheTensor] = []
    for spec in specs:
        by_page: dict[int, list[int]] = {}
        for layer, part in spec.entries:
            by_page.setdefault(part.page_size_bytes, []).append(layer)
        offset = 0
        for page, layers in by_page.items():
            out.append(KVCacheTensor(num_blocks * stride, tuple(layers), page, stride, offset))
            offset += page * len(layers)
    return tuple(out)


def entries(specs: Mapping[int, DSV4LayerSpec]) -> tuple[tuple[int, AttentionSpec], ...]:
    """Every cache of every layer, ``(layer, spec)``, in registration order."""
    return tuple((layer, part) for layer, spec in specs.items() for part in spec.parts)


def check_kv_cache_dtype(kv_cache_dtype: str, release_text: str, allows_auto: bool) -> None:
    """``_resolve_dsv4_kv_cache_dtype``: the fp8_ds_mla layout takes auto (from vLLM 0.30.0) or an fp8 name."""
    if kv_cache_dtype.startswith("fp8") or (kv_cache_dtype == "auto" and allows_auto):
        return
    given = "bfloat16" if kv_cache_dtype == "auto" else kv_cache_dtype
    raise UnsupportedConfigurationError(
        f"vLLM {release_text} refuses: DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got {given}. "
        "Please set `--kv-cache-dtype fp8` (vllm/models/deepseek_v4/attention.py _resolve_dsv4_kv_cache_dtype)"
    )
