"""KV cache groups: which layers share one block table (``vllm/v1/core/kv_cache_planning.py get_kv_cache_groups``).

1. With the hybrid allocator off (``--disable-hybrid-kv-cache-manager``) and full and
   sliding-window layers both present, every sliding-window layer is kept as full attention
   (``unify_hybrid_kv_cache_specs``).
2. Every layer the same spec: one group (``_get_kv_cache_groups_uniform_spec``).
3. Otherwise (hybrid): pages are unified -- a smaller attention page takes a proportionally
   larger block (``unify_kv_cache_spec_page_size``) -- then layers are bucketed by spec, and each
   bucket is split into groups of ``group_size`` layers, ``group_size`` being the smallest
   bucket (or the largest, when the largest is under 1.5 x the smallest); bucket ``b`` of ``n``
   layers becomes ``cdiv(n, group_size)`` groups ``layers[i::num_groups]``. A group with fewer than
   ``group_size`` layers is padded (vLLM: "Add N padding layers"): its missing layers still cost
   page bytes in every block (``_get_kv_cache_groups_uniform_page_size``).
4. Layers of one spec type and block size but different pages (checked before the hybrid split):
   one group whose spec is ``UniformTypeKVCacheSpecs`` (``_get_kv_cache_groups_uniform_type``) --
   a sparse-MLA model's MLA latent and indexer key cache of every layer (DeepSeek-V3.2, GLM-5), or
   full-attention layers of different heads (MiMo-V2 with the hybrid manager off).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ...core.releases import VLLM, ReleaseRule, parse_release, span
from ...core.sizing import ceil_div
from ...errors import UnsupportedConfigurationError
from .specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
    SparseMLALayerSpec,
    UniformTypeKVCacheSpecs,
)


@dataclass(frozen=True)
class KVCacheGroup:
    """Layers (global indices) that share one block table, with their (merged) spec."""

    layers: tuple[int, ...]
    spec: KVCacheSpec


#: from vLLM 0.27.1 promoted local layers take the full-attention layers' block; 0.26.0 keeps their own
PROMOTED_TAKE_FULL_BLOCK = ReleaseRule(
    "vllm-promoted-take-full-block",
    span("0.27.1", engine=VLLM),
    "with the hybrid manager off, promoted local layers take the full-attention layers' block (before: their own, "
    "and vLLM refuses layers of different blocks)",
    "vllm/v1/core/kv_cache_utils.py _promote_local_kv_cache_specs",
    topic="sizing",
)


#: from vLLM 0.21.0 a promoted local layer keeps its own V width; 0.20.2 builds the full-attention spec without
#: ``head_size_v``, so V takes K's width (MiMo-V2's sliding layers: K 192, V 128 -> 192)
PROMOTED_KEEP_HEAD_SIZE_V = ReleaseRule(
    "vllm-promoted-keep-head-size-v",
    span("0.21.0", engine=VLLM),
    "with the hybrid manager off, a promoted local layer keeps its V width (0.20.2: V as wide as K)",
    "vllm/v1/core/kv_cache_utils.py unify_hybrid_kv_cache_specs",
    topic="sizing",
)


def _promote(specs: Mapping[int, KVCacheSpec], *, to_full_block: bool = True,
             keep_head_size_v: bool = True) -> dict[int, KVCacheSpec]:  # fmt: skip
    """``_promote_local_kv_cache_specs``: local layers kept as full attention, on the full-attention
    layers' block when they have one block size and ``to_full_block`` (else their own)."""
    kinds = {type(s) for s in specs.values()}
    if FullAttentionSpec in kinds and (SlidingWindowSpec in kinds or ChunkedLocalAttentionSpec in kinds):
        local = (SlidingWindowSpec, ChunkedLocalAttentionSpec)
        full_blocks = {s.block_size for s in specs.values() if isinstance(s, FullAttentionSpec)}
        block = full_blocks.pop() if len(full_blocks) == 1 and to_full_block else None
        return {k: s.as_full_attention(keep_head_size_v).with_block_size(block or s.block_size)
                if isinstance(s, local) else s for k, s in specs.items()}  # fmt: skip
    return dict(specs)


#: from vLLM 0.12.0 the layer specs come in the model's layer order (``vllm/v1/worker/gpu/attn_utils.py
#: get_kv_cache_spec``; a sparse-MLA layer's indexer cache before its latent); 0.11.0's ``GPUModelRunner.
#: get_kv_cache_spec`` lists every attention layer's spec, then every Mamba layer's, then every sparse indexer
#: cache's, so the groups, the tensors and the listed specs start with the attention layers (Qwen3-Next: its
#: full-attention group first; DeepSeek-V3.2: every latent, then every indexer cache)
RUNNER_SPEC_ORDER = ReleaseRule(
    "vllm-runner-spec-order",
    span(last="0.11.0", engine=VLLM),
    "the layer specs come attention layers first, then Mamba layers, then sparse indexer caches (from 0.12.0: in "
    "the model's layer order)",
    "vllm/v1/worker/gpu_model_runner.py GPUModelRunner.get_kv_cache_spec (0.11.0)",
    topic="sizing",
)


def spec_entries(specs: Mapping[int, KVCacheSpec], version: str = "") -> list[tuple[int, KVCacheSpec]]:
    """Each layer's caches as ``(layer, spec)`` in vLLM's order (a sparse-MLA layer's two apart, indexer first),
    reordered by kind before :data:`RUNNER_SPEC_ORDER` ends (attention, then Mamba, then indexer caches)."""
    entries = [(layer, part, 2 if isinstance(whole, SparseMLALayerSpec) and part is whole.indexer
                else 1 if isinstance(part, MambaSpec) else 0)
               for layer, whole in specs.items()
               for part in (whole.parts if isinstance(whole, SparseMLALayerSpec) else (whole,))]  # fmt: skip
    if RUNNER_SPEC_ORDER.holds(parse_release(version or None, VLLM, field="--vllm-version")):
        entries.sort(key=lambda entry: entry[2])  # stable: the layers' order within a kind
    return [(layer, part) for layer, part, _ in entries]


def _merge_key(spec: KVCacheSpec) -> KVCacheSpec:
    """Full-attention specs that differ only in their recorded window merge (``FullAttentionSpec.merge``)."""
    if type(spec) is FullAttentionSpec and (spec.sliding_window is not None or spec.attention_chunk_size is not None):
        return replace(spec, sliding_window=None, attention_chunk_size=None)
    return spec


def _unify_pages(specs: Mapping[int, KVCacheSpec]) -> dict[int, KVCacheSpec]:
    pages = {s.page_size_bytes for s in specs.values()}
    if len(pages) <= 1:
        return dict(specs)
    largest = max(pages)
    out: dict[int, KVCacheSpec] = {}
    for layer, spec in specs.items():
        page = spec.page_size_bytes
        if page == largest:
            out[layer] = spec
        elif isinstance(spec, MambaSpec) or largest % page:
            raise UnsupportedConfigurationError(
                f"layer {layer}: a page of {page} bytes next to {largest}-byte pages; vLLM pads such pages "
                "(unify_kv_cache_spec_page_size), which the vLLM strategies do not model"
            )
        else:
            out[layer] = spec.with_block_size(spec.block_size * (largest // page))
    return out


def kv_cache_groups(
    specs: Mapping[int, KVCacheSpec], *, disable_hybrid: bool, promote_to_full_block: bool = True, version: str = ""
) -> list[KVCacheGroup]:
    """The groups of the whole model's layers (every stage's), in vLLM's order."""
    if specs and all(isinstance(s, SparseMLALayerSpec) for s in specs.values()):
        return [_uniform_type_group(specs, version)]
    if disable_hybrid:
        keep_v = PROMOTED_KEEP_HEAD_SIZE_V.holds(parse_release(version or None, VLLM, field="--vllm-version"))
        specs = _promote(specs, to_full_block=promote_to_full_block, keep_head_size_v=keep_v)
        promoted = {k: _merge_key(s) for k, s in specs.items()}
        if len(set(promoted.values())) > 1 and not _uniform_type(promoted):
            raise UnsupportedConfigurationError(
                f"vLLM {version} refuses: Hybrid KV cache manager is disabled but failed to convert the KV cache "
                "specs to one unified type (vllm/v1/core/kv_cache_utils.py unify_hybrid_kv_cache_specs: the promoted "
                "layers keep blocks of different sizes); leave the hybrid KV cache manager on"
            )
    merged = {k: _merge_key(s) for k, s in specs.items()}
    if len(set(merged.values())) > 1 and _uniform_type(merged):
        return [_uniform_type_group(specs, version)]
    if len(set(merged.values())) == 1:
        layers = tuple(specs)
        first = specs[layers[0]]
        windows = {s.sliding_window for s in specs.values() if isinstance(s, FullAttentionSpec) and s.sliding_window}
        chunks = {s.attention_chunk_size for s in specs.values()
                  if isinstance(s, FullAttentionSpec) and s.attention_chunk_size}  # fmt: skip
        spec = merged[layers[0]]
        if isinstance(first, FullAttentionSpec) and len(windows) == 1 and isinstance(spec, FullAttentionSpec):
            spec = replace(spec, sliding_window=windows.pop())
        # FullAttentionSpec.merge keeps the one chunk size the promoted chunked-local layers carry
        if isinstance(first, FullAttentionSpec) and len(chunks) == 1 and isinstance(spec, FullAttentionSpec):
            spec = replace(spec, attention_chunk_size=chunks.pop())
        return [KVCacheGroup(layers, spec)]
    unified = _unify_pages(merged)
    buckets: dict[KVCacheSpec, list[int]] = {}
    for layer, spec in spec_entries(unified, version):
        buckets.setdefault(spec, []).append(layer)
    sizes = [len(v) for v in buckets.values()]
    group_size = min(sizes)
    if max(sizes) < group_size * 1.5:
        group_size = max(sizes)
    groups: list[KVCacheGroup] = []
    for spec, members in buckets.items():
        count = ceil_div(len(members), group_size)
        groups.extend(KVCacheGroup(tuple(members[i::count]), spec) for i in range(count))
    return groups


def _uniform_type(specs: Mapping[int, KVCacheSpec]) -> bool:
    """``UniformTypeKVCacheSpecs.is_uniform_type``: every layer a full-attention spec (an MLA latent is one:
    ``KVCacheSpecRegistry.get_uniform_type_base_spec``) of one block size, whatever their heads (MiMo-V2's layers
    with the hybrid manager off, sliding ones promoted; an EAGLE head's layers beside an MLA model's)."""
    kinds = {type(s) for s in specs.values()}
    return kinds <= {FullAttentionSpec, MLAAttentionSpec} and len({s.block_size for s in specs.values()}) == 1


def _uniform_type_group(specs: Mapping[int, KVCacheSpec], version: str = "") -> KVCacheGroup:
    """The one group of layers whose specs are of one type (``UniformTypeKVCacheSpecs.from_specs``): a
    sparse-MLA model's latent and indexer caches, or full-attention layers of different heads; every layer
    once per cache it holds, in layer order (:func:`spec_entries`)."""
    entries = tuple((layer, part) for layer, part in spec_entries(dict(sorted(specs.items())), version)
                    if isinstance(part, AttentionSpec))  # fmt: skip
    block = entries[0][1].block_size
    spec = UniformTypeKVCacheSpecs(block_size=block, entries=entries)
    return KVCacheGroup(tuple(layer for layer, _ in entries), spec)


def padding_layers(groups: list[KVCacheGroup]) -> int:
    """Layer slots a block holds for no layer (vLLM's "Add N padding layers")."""
    width = max(len(g.layers) for g in groups)
    return sum(width - len(g.layers) for g in groups)
