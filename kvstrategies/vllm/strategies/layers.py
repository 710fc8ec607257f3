"""A model's layers as vLLM's per-layer KV cache specs (global layer index -> spec), before grouping.

What each layer is follows the model code vLLM runs (``vllm/model_executor/models``):

* softmax attention with ``max(1, H_kv // tp)`` heads per rank (``ModelConfig.get_num_kv_heads``),
  ``head_dim`` for K and ``v_head_dim`` for V; MLA layers one latent row of
  ``kv_lora_rank + qk_rope_head_dim``;
* sliding-window layers: the hybrid split of the config (``layer_types``: GPT-OSS), Gemma-2's even
  layers, Gemma-3's ``(i + 1) % 6 != 0`` layers, or every layer of a model whose config sets
  ``sliding_window`` (Mistral, Phi-3), each with the config's window as given;
* Mamba hybrids: the state layers of :class:`~kvstrategies.models.mamba.MambaGeometry` with vLLM's
  state shapes (the conv window first: ``(K - 1, conv_dim / tp)``; Mamba-1's SSM state
  ``(intermediate / tp, state)``) and dtypes (conv: the model dtype; SSM: NemotronH float32,
  Qwen3.5 its config's ``mamba_ssm_dtype``, else the conv dtype: ``model_executor/models/config.py``);
* the KV dtype: ``auto`` the model dtype, ``bfloat16``/``float16`` as named, fp8 names one byte
  (``uint8`` storage).

Layers are split over pipeline stages by vLLM's ``distributed/utils.py get_pp_indices``: the
remainder of ``layers / pp`` goes to the stages before the last, from the last but one down.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...core.dtypes import DType
from ...core.releases import NEWEST_VLLM, VLLM, ByRelease, EngineRelease, ReleaseRule, parse_release, span
from ...errors import UnsupportedConfigurationError
from ...models import ModelGeometry
from ...models.architectures import VLLM_MODEL_RULES, vllm_model_rule
from ...models.geometry import DSAGeometry
from ...models.mamba import KDAMixer, Mamba1Mixer, Mamba2Mixer, MixerKind
from .backends import DIFFKV_ATTENTION
from .specs import (
    MAMBA_CACHE_MODE,
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
    SparseMLALayerSpec,
)

#: vLLM's ``--kv-cache-dtype`` names and their storage dtype (``vllm/utils/torch_utils.py``)
KV_STORAGE: dict[str, DType | None] = {
    "auto": None,
    "bfloat16": DType.BFLOAT16,
    "float16": DType.FLOAT16,
    "fp8": DType.UINT8,
    "fp8_e4m3": DType.UINT8,
    "fp8_e5m2": DType.UINT8,
    "nvfp4": DType.UINT8,
}
#: names vLLM validates (``config/cache.py CacheDType``) but these strategies do not size
VLLM_ONLY_KV_DTYPES = ("fp8_inc", "fp8_ds_mla", "nvfp4_ds_mla", "nvfp4_4over6", "int8_per_token_head",
                       "fp8_per_token_head", "int4_per_token_head", "ultraquant_4bit")  # fmt: skip


def pp_indices(
    num_layers: int, pp_rank: int, pp_size: int, partition: tuple[int, ...] | None = None
) -> tuple[int, int]:
    """``[start, end)`` of a stage's layers (vLLM's ``get_pp_indices``; ``partition``: ``VLLM_PP_LAYER_PARTITION``'s
    layer counts, one a stage)."""
    if partition is not None:
        start = sum(partition[:pp_rank])
        return start, start + partition[pp_rank]
    base = num_layers // pp_size
    parts = [base] * pp_size
    for i in range(2, num_layers % pp_size + 2):
        parts[-i] += 1
    start = sum(parts[:pp_rank])
    return start, start + parts[pp_rank]


def model_rule_releases(field: str) -> dict[str, EngineRelease]:
    """The model types whose ``VLLMModelRule`` names a release in ``field``, and that release."""
    return {model_type: parse_release(getattr(rule, field), VLLM, field=field)
            for model_type, rule in VLLM_MODEL_RULES.items() if getattr(rule, field) is not None}  # fmt: skip


def per_release_rules(
    by_type: dict[str, EngineRelease], name: str, change: str, source: str, topic: str = "sizing"
) -> tuple[ReleaseRule, ...]:
    """One rule per release of ``by_type`` for the listings: ``{name}-{release}``, holding from it, that says which
    model types ``change`` there."""
    return tuple(
        ReleaseRule(f"{name}-{first.text}", span(first.text, engine=VLLM),
                    f"{', '.join(sorted(t for t, r in by_type.items() if r == first))}: {change}", source, topic=topic)
        for first in sorted(set(by_type.values()))
    )  # fmt: skip


#: the model types whose attention vLLM builds without the cache config before a release
#: (``VLLMModelRule.cache_config_from``), and that release, one rule per release for the listings
CACHE_CONFIG_FROM = model_rule_releases("cache_config_from")
CACHE_CONFIG_RULES = per_release_rules(
    CACHE_CONFIG_FROM, "vllm-attention-cache-config",
    "the attention takes --kv-cache-dtype (before this release vLLM builds it without the cache config: the model "
    "dtype)", "VLLMModelRule.cache_config_from; vllm/model_executor/models (the model's decoder layer __init__)",
)  # fmt: skip


#: from vLLM 0.12.0 a layer's spec takes its own attention's cache dtype (``vllm/v1/worker/gpu/attn_utils.py
#: get_kv_cache_spec``: ``attn_module.kv_cache_dtype``); 0.11.0's ``GPUModelRunner.get_kv_cache_spec`` gives every
#: layer the runner's, from the cache config, so an attention built without the cache config (Falcon's rotary one)
#: still stores an fp8 cache in one byte (Falcon-7B fp8: 163,840 blocks of 64 where 0.12.0 has 81,920)
LAYER_OWN_CACHE_DTYPE = ReleaseRule(
    "vllm-layer-own-cache-dtype",
    span("0.12.0", engine=VLLM),
    "a layer's spec takes its own attention's cache dtype (before: the model runner's, from --kv-cache-dtype, for "
    "every layer)",
    "vllm/v1/worker/gpu/attn_utils.py get_kv_cache_spec; vllm/v1/worker/gpu_model_runner.py "
    "GPUModelRunner.get_kv_cache_spec (0.11.0: self.kv_cache_dtype)",
    topic="sizing",
)


def layer_kv_dtype(geometry: ModelGeometry, kv_cache_dtype: str, release: EngineRelease | None = None) -> str:
    """The cache dtype name a model's layers are built with: ``auto`` where vLLM builds its attention
    without the cache config (``VLLMModelRule.kv_in_model_dtype``: Falcon's rotary attention; before
    ``cache_config_from``: MiMo-V2 on vLLM 0.31.0), from :data:`LAYER_OWN_CACHE_DTYPE` on."""
    if release is not None and not LAYER_OWN_CACHE_DTYPE.holds(release):
        return kv_cache_dtype
    if vllm_model_rule(geometry.model_type).kv_in_model_dtype:
        return "auto"
    first = CACHE_CONFIG_FROM.get(geometry.model_type)
    if first is not None and release is not None and release < first:
        return "auto"
    return kv_cache_dtype


def kv_storage_dtype(kv_cache_dtype: str, model_dtype: DType, sparse_mla: bool = False) -> DType:
    """The dtype a layer's page is stored in (one byte for fp8; a sparse-MLA latent's ``fp8_ds_mla`` bytes too,
    whose page :class:`~.specs.MLAAttentionSpec` sizes)."""
    if sparse_mla and kv_cache_dtype == "fp8_ds_mla":
        return DType.UINT8
    if kv_cache_dtype in VLLM_ONLY_KV_DTYPES:
        raise UnsupportedConfigurationError(
            f"kv_cache_dtype {kv_cache_dtype!r}: vLLM packs it its own way (its backend's customize_spec); "
            "the vLLM strategies size auto, bfloat16, float16 and fp8 caches"
        )
    return KV_STORAGE[kv_cache_dtype] or model_dtype


#: vLLM 0.33.0's ``--kv-cache-dtype`` names, in its order (``config/cache.py CacheDType``)
VLLM_KV_CACHE_DTYPES: tuple[str, ...] = (
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "nvfp4_ds_mla",
    "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc", "octave_k3v4",
    "octave_k3v3", "octave_k3v3_compact", "ultraquant_4bit", "int4_per_token_head", "int8_per_token_head",
    "fp8_per_token_head", "nvfp4", "nvfp4_4over6",
)  # fmt: skip
#: the names each release takes (0.32.0 has no octave_*, 0.31.0 no ultraquant_4bit either, 0.19.1 none after
#: fp8_ds_mla), and how it refuses
#: another: 0.31.0's and 0.32.0's ``CacheDType``
#: is a pydantic ``Literal`` ("Input should be ..."), 0.33.0's ``CacheConfig._validate_cache_dtype`` says
#: "Invalid kv_cache_dtype"
KV_CACHE_DTYPE_NAMES: ByRelease[tuple[tuple[str, ...], str]] = ByRelease(
    "vllm-kv-cache-dtypes",
    (("0.11.0", (VLLM_KV_CACHE_DTYPES[:VLLM_KV_CACHE_DTYPES.index("fp8_ds_mla") + 1], "literal")),
     ("0.20.2", (tuple(n for n in VLLM_KV_CACHE_DTYPES if not n.startswith("octave_") and n != "ultraquant_4bit"),
                 "literal")),
     ("0.32.0", (tuple(n for n in VLLM_KV_CACHE_DTYPES if not n.startswith("octave_")), "literal")),
     ("0.33.0", (VLLM_KV_CACHE_DTYPES, "validator"))),
    "the --kv-cache-dtype names and how another is refused (a pydantic Literal, then a validator)",
    "vllm/config/cache.py CacheDType, CacheConfig._validate_cache_dtype",
    topic="launch",
    engine=VLLM,
)  # fmt: skip


#: from vLLM 0.21.0 ``VllmConfig`` refuses an nvfp4 cache for an MLA model; 0.20.2 has no such check, and its
#: attention selector finds no MLA backend for it
NVFP4_MLA_CONFIG_CHECK = ReleaseRule(
    "vllm-nvfp4-mla-config-check",
    span("0.21.0", engine=VLLM),
    "VllmConfig refuses an nvfp4 KV cache for an MLA model (0.20.2: the selector finds no backend for it)",
    "vllm/config/vllm.py VllmConfig.__post_init__",
    topic="launch",
)


def check_kv_cache_dtype(kv_cache_dtype: str, geometry: ModelGeometry, version: str) -> None:
    """vLLM's launch refusals of a cache dtype (``CacheConfig`` validation, then ``VllmConfig``'s MLA check)."""
    names, style = KV_CACHE_DTYPE_NAMES.at(parse_release(version, VLLM))
    if kv_cache_dtype not in names:
        if style == "literal":
            listed = ", ".join(repr(n) for n in names[:-1]) + f" or {names[-1]!r}"
            raise UnsupportedConfigurationError(
                f"vLLM {version} refuses: 1 validation error for CacheConfig cache_dtype Input should be {listed} "
                "(vllm/config/cache.py CacheDType)"
            )
        raise UnsupportedConfigurationError(
            f"vLLM {version} refuses: Invalid kv_cache_dtype: {kv_cache_dtype!r}. Valid values are: "
            f"{list(names)} (vllm/config/cache.py CacheConfig._validate_cache_dtype)"
        )
    mla_check = NVFP4_MLA_CONFIG_CHECK.holds(parse_release(version, VLLM))
    if kv_cache_dtype.startswith("nvfp4") and kv_cache_dtype != "nvfp4_ds_mla" and geometry.use_mla and mla_check:
        raise UnsupportedConfigurationError(
            f"vLLM {version} refuses: nvfp4 KV cache is not supported with MLA (Multi-head Latent Attention) "
            "backends. Use a different --kv-cache-dtype (vllm/config/vllm.py VllmConfig)"
        )


def chunked_local_layers(geometry: ModelGeometry) -> tuple[int, frozenset[int]]:
    """Llama-4's chunked local attention: ``(attention_chunk_size, the layers that use it)`` -- the RoPE
    layers (``vllm/model_executor/models/llama4.py Llama4Attention``: ``no_rope_layers`` marks the
    global NoPE layers, every fourth); ``(0, empty)`` for other models."""
    swa = geometry.hybrid_swa
    if swa is None or swa.sliding_window_size is None or not geometry.model_type.startswith("llama4"):
        return 0, frozenset()
    return swa.sliding_window_size, frozenset(swa.swa_attention_layer_ids)


def sliding_layers(geometry: ModelGeometry) -> tuple[int, ...]:
    """The layers vLLM builds with a sliding window (see module doc)."""
    n = geometry.num_hidden_layers
    if geometry.config_sliding_window is None:
        return ()
    if geometry.hybrid_swa is not None and geometry.hybrid_swa.swa_attention_layer_ids:
        return geometry.hybrid_swa.swa_attention_layer_ids
    rule = vllm_model_rule(geometry.model_type).sliding_layers
    if rule == "even":
        return tuple(i for i in range(n) if i % 2 == 0)
    if rule == "not_every_sixth":
        return tuple(i for i in range(n) if (i + 1) % 6 != 0)
    return tuple(range(n))


@dataclass(frozen=True)
class StateLayout:
    """One Mamba layer's state as vLLM shapes it, with its backend."""

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[DType, ...]
    backend: str


#: from vLLM 0.23.0 a KDA layer keeps one conv state over q, k and v; 0.22.1 keeps three (v's ``proj / tp`` wide,
#: then k's and q's ``proj_k / tp``). The bytes are the same
KDA_FUSED_CONV = ReleaseRule(
    "vllm-kda-fused-conv-state",
    span("0.23.0", engine=VLLM),
    "a KDA layer's q, k and v conv states are one tensor (0.22.1: three); the page is the same",
    "vllm/model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator.kda_state_shape",
    topic="sizing",
)


#: from vLLM 0.27.1 a KDA layer's conv window holds the speculative lookahead (``kda_state_shape``:
#: ``conv_kernel_size - 1 + num_spec``); 0.26.0's ``kda_state_shape`` takes ``num_spec`` and leaves it out, so the
#: window is ``conv_kernel_size - 1`` whatever the draft (recorded by 0.25.1: Kimi-Linear + a latent EAGLE head of 3
#: tokens, conv rows 3 where 0.27.1 has 6)
KDA_CONV_LOOKAHEAD = ReleaseRule(
    "vllm-kda-conv-lookahead",
    span("0.27.1", engine=VLLM),
    "a KDA layer's conv window holds the speculative lookahead (before: the kernel's window alone)",
    "vllm/model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator.kda_state_shape (num_spec)",
    topic="sizing",
)


def mamba_state(geometry: ModelGeometry, tp: int, release: EngineRelease | None = None,
                lookahead: int = 0) -> StateLayout:  # fmt: skip
    """vLLM's state shapes and dtypes of one Mamba layer on a TP rank in ``release`` (the newest when ``None``);
    ``lookahead``: the speculative tokens a conv window also holds (``conv_kernel - 1 + num_spec``,
    ``vllm/model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator``; Mamba-1 takes none, KDA none
    before :data:`KDA_CONV_LOOKAHEAD`)."""
    mamba = geometry.mamba
    if mamba is None:  # pragma: no cover - callers check
        raise UnsupportedConfigurationError("not a Mamba hybrid")
    shapes = mamba.state_shapes(tp)
    conv = shapes.conv if shapes.conv_window_axis == 0 else tuple((w, c) for c, w in shapes.conv)
    if mamba.is_kda and not KDA_CONV_LOOKAHEAD.holds(release or NEWEST_VLLM):
        lookahead = 0
    if not isinstance(mamba.mixer, Mamba1Mixer):
        conv = tuple((w + lookahead, c) for w, c in conv)
    conv_dtype = geometry.model_dtype
    if mamba.is_kda:  # KimiGatedDeltaNetAttention: one conv over q, k, v; a float32 recurrent state
        # (mamba_utils.py MambaStateShapeCalculator.kda_state_shape, MambaStateDtypeCalculator.kda_state_dtype)
        if isinstance(mamba.mixer, KDAMixer) and not KDA_FUSED_CONV.holds(release or NEWEST_VLLM):
            (window, _), = conv
            v, k = mamba.mixer.num_heads * mamba.mixer.head_dim, mamba.mixer.num_k_heads * mamba.mixer.head_k_dim
            split = ((window, v // tp), (window, k // tp), (window, k // tp))
            return StateLayout((*split, shapes.temporal), (conv_dtype,) * 3 + (DType.FLOAT32,), "GDN_ATTN")
        return StateLayout((*conv, shapes.temporal), (conv_dtype, DType.FLOAT32), "GDN_ATTN")
    rule = vllm_model_rule(geometry.model_type).ssm_dtype
    ssm_dtype = DType.FLOAT32 if rule == "float32" else mamba.ssm_dtype if rule == "config" else conv_dtype
    if isinstance(mamba.mixer, Mamba1Mixer):
        channels, _, state = shapes.temporal
        return StateLayout((*conv, (channels, state)), (conv_dtype, ssm_dtype), "MAMBA1_ATTN")
    if not isinstance(mamba.mixer, Mamba2Mixer) or mamba.kind is not MixerKind.MAMBA2:
        raise UnsupportedConfigurationError(
            f"{mamba.family}: vLLM's {mamba.kind.value} state layers are not modelled by the vLLM strategies"
        )
    backend = "GDN_ATTN" if mamba.family == "gdn" else "MAMBA2_ATTN"
    return StateLayout((*conv, shapes.temporal), (conv_dtype, ssm_dtype), backend)


#: from vLLM 0.25.1 to 0.29.0 a sliding-window layer takes its backend's smallest kernel block, whatever
#: ``--block-size`` (``vllm/model_executor/layers/attention/attention.py Attention.get_kv_cache_spec``,
#: ``_largest_kernel_block_within`` without a padded page), and ``unify_kv_cache_spec_page_size`` scales it
#: up to the other layers' page; from 0.30.0 it takes the primary block when its backend runs it
SLIDING_OWN_BLOCK = ReleaseRule(
    "vllm-sliding-window-own-block",
    span("0.25.1", "0.29.0", engine=VLLM),
    "sliding-window layers take their backend's smallest kernel block (not --block-size); a model of "
    "sliding-window layers only runs on that block",
    "vllm/model_executor/layers/attention/attention.py Attention.get_kv_cache_spec (_largest_kernel_block_within)",
    topic="sizing",
)


#: up to vLLM 0.27.1 an MLA spec (a latent, or a DeepSeek sparse-attention indexer's keys) records ``head_size_v``
#: as its ``head_size`` (``AttentionSpec``'s default); from 0.28.0 ``MLAAttentionSpec`` records 0 (no V row). The
#: page is the row either way
MLA_HEAD_SIZE_V_ZERO = ReleaseRule(
    "vllm-mla-head-size-v-zero",
    span("0.28.0", engine=VLLM),
    "an MLA latent spec records head_size_v 0 (before: its head_size); the page is the latent row either way",
    "vllm/v1/kv_cache_interface.py MLAAttentionSpec.head_size_v",
    topic="sizing",
)


#: from vLLM 0.24.0 a DeepSeek sparse-attention layer that reuses the previous layer's top-k (``index_topk_freq``,
#: ``index_topk_pattern``) builds no indexer, so it holds no index keys; 0.23.0 builds one in every layer
DSA_INDEXER_BY_LAYER = ReleaseRule(
    "vllm-dsa-indexer-by-layer",
    span("0.24.0", engine=VLLM),
    "a sparse-attention layer that reuses the previous top-k holds no indexer keys (0.23.0: every layer holds them)",
    "vllm/model_executor/models/deepseek_v2.py DeepseekV2MLAAttention.__init__ (_skip_topk)",
    topic="sizing",
)


#: vLLM 0.31.0 has the sparse backends that read the cache as flat rows (FLASHINFER_MLA_SPARSE, and FLASHMLA_SPARSE
#: off its fp8_ds_mla layout) align a block's bytes to one latent row (``MLAAttention.get_kv_cache_spec``:
#: ``block_stride_alignment = state_content_size_bytes``); 0.32.0 moved the alignment into the backends'
#: ``customize_spec``, where it does not round the block this way, and 0.30.0 has none
FLAT_SPARSE_ALIGNMENT = ReleaseRule(
    "vllm-flat-sparse-block-alignment",
    span("0.31.0", "0.31.0", engine=VLLM),
    "a flat sparse-MLA cache rounds a block's bytes up to a multiple of one latent row",
    "vllm/model_executor/layers/attention/mla_attention.py MLAAttention.get_kv_cache_spec (_uses_flat_kv_cache); "
    "vllm/v1/core/kv_cache_utils.py _get_kv_cache_bytes_per_block",
    topic="sizing",
)
#: the backends ``MLAAttention._uses_flat_kv_cache`` names (FLASHMLA_SPARSE only off ``fp8_ds_mla``)
FLAT_SPARSE_BACKENDS = ("FLASHINFER_MLA_SPARSE", "FLASHMLA_SPARSE")


def flat_sparse_alignment(backend: str, latent: MLAAttentionSpec, release: EngineRelease) -> int | None:
    """The latent's ``block_stride_alignment`` in bytes, one token's row (:data:`FLAT_SPARSE_ALIGNMENT`;
    ``None``: none)."""
    flat = backend in FLAT_SPARSE_BACKENDS and latent.cache_dtype_str != "fp8_ds_mla"
    return latent.state_content_size_bytes if flat and FLAT_SPARSE_ALIGNMENT.holds(release) else None


#: from vLLM 0.26.0 an MLA latent spec records its cache's quantization (``kv_quant_mode``); 0.25.1's records none
MLA_KV_QUANT_MODE = ReleaseRule(
    "vllm-mla-kv-quant-mode",
    span("0.26.0", engine=VLLM),
    "an MLA latent spec records kv_quant_mode (FP8_PER_TENSOR for an fp8 cache); the page is the same",
    "vllm/model_executor/layers/attention/mla_attention.py MLAAttention.get_kv_cache_spec",
    topic="sizing",
)
#: from vLLM 0.14.1 a full-attention spec (and an MLA one, its subclass) records its V width (``head_size_v``,
#: ``AttentionSpec.__post_init__`` setting it to ``head_size`` when not given); 0.13.0's has no such field
ATTENTION_HEAD_SIZE_V = ReleaseRule(
    "vllm-attention-head-size-v",
    span("0.14.1", engine=VLLM),
    "a full-attention and an MLA spec record head_size_v (the page is the same)",
    "vllm/v1/kv_cache_interface.py FullAttentionSpec.head_size_v (0.14.1)",
    topic="sizing",
)
#: vLLM 0.28.0's ``ChunkedLocalAttentionSpec`` records its V width (``head_size_v``); 0.27.1's has no such field
CHUNKED_HEAD_SIZE_V = ReleaseRule(
    "vllm-chunked-local-head-size-v",
    span("0.28.0", engine=VLLM),
    "a chunked-local attention spec records head_size_v (the page is K and V rows either way)",
    "vllm/v1/kv_cache_interface.py ChunkedLocalAttentionSpec",
    topic="sizing",
)


#: from vLLM 0.20.2 a ``SlidingWindowSpec`` records its V width (``head_size_v``); 0.19.1's has no such field
SLIDING_HEAD_SIZE_V = ReleaseRule(
    "vllm-sliding-window-head-size-v",
    span("0.20.2", engine=VLLM),
    "a sliding-window attention spec records head_size_v (the page is K and V rows either way)",
    "vllm/v1/kv_cache_interface.py SlidingWindowSpec",
    topic="sizing",
)
#: from vLLM 0.20.2 a softmax-attention spec records its cache's quantization (``kv_quant_mode``: FP8_PER_TENSOR
#: for an fp8 cache); 0.19.1's records none (its caches are 16-bit or fp8, the page one byte an element)
ATTENTION_KV_QUANT_MODE = ReleaseRule(
    "vllm-attention-kv-quant-mode",
    span("0.20.2", engine=VLLM),
    "a softmax-attention spec records kv_quant_mode (FP8_PER_TENSOR for an fp8 cache); the page is the same",
    "vllm/model_executor/layers/attention/attention.py Attention.get_kv_cache_spec",
    topic="sizing",
)
def kv_quant_mode(kv_cache_dtype: str) -> str | None:
    """The quantization mode a quantized cache records (``FP8_PER_TENSOR``, ``NVFP4``; ``None``: none)."""
    return "FP8_PER_TENSOR" if kv_cache_dtype.startswith("fp8") else "NVFP4" if kv_cache_dtype == "nvfp4" else None


def attention_kv_quant_mode(kv_cache_dtype: str, release: EngineRelease) -> str | None:
    """What a softmax-attention layer's spec records as its cache quantization (:data:`ATTENTION_KV_QUANT_MODE`)."""
    return kv_quant_mode(kv_cache_dtype) if ATTENTION_KV_QUANT_MODE.holds(release) else None


def attention_specs(
    geometry: ModelGeometry, tp: int, kv_dtype: DType, block_size: int, kv_cache_dtype: str,
    sliding_block: int | None = None, release: EngineRelease | None = None,
) -> Mapping[int, KVCacheSpec]:
    """Every softmax-attention layer's spec (global index -> spec), sliding-window ones included;
    ``sliding_block``: the sliding-window layers' own block where it is not ``block_size``
    (:data:`SLIDING_OWN_BLOCK`); ``release``: what the specs record (the newest release when ``None``)."""
    release = release or NEWEST_VLLM
    heads = geometry.num_kv_heads(tp)
    if geometry.mamba is not None:
        layers: tuple[int, ...] = geometry.mamba.full_attention_layer_ids
    else:
        layers = tuple(range(geometry.num_hidden_layers))
    out: dict[int, KVCacheSpec] = {}
    quant = kv_quant_mode(kv_cache_dtype)
    attention_quant = attention_kv_quant_mode(kv_cache_dtype, release)
    if geometry.use_mla:
        assert geometry.mla is not None
        # the cache dtype as the launch resolved it, ``auto`` included (mla_attention.py MLAAttention.__init__)
        v_recorded = 0 if MLA_HEAD_SIZE_V_ZERO.holds(release) else geometry.mla.latent_dim
        mla_quant = quant if MLA_KV_QUANT_MODE.holds(release) else None
        records_v = ATTENTION_HEAD_SIZE_V.holds(release)
        latent = MLAAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=geometry.mla.latent_dim,
                                  head_size_v=v_recorded, dtype=kv_dtype, cache_dtype_str=kv_cache_dtype,
                                  kv_quant_mode=mla_quant, records_head_size_v=records_v)  # fmt: skip
        dsa = geometry.dsa
        if dsa is None:
            return {layer: latent for layer in layers}
        # the indexer's key cache beside each latent, where the layer keeps its own top-k
        indexer_width = indexer_head_size(dsa)
        indexer = MLAAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=indexer_width,
                                   head_size_v=0 if MLA_HEAD_SIZE_V_ZERO.holds(release) else indexer_width,
                                   dtype=DType.UINT8, records_head_size_v=records_v)  # fmt: skip
        by_layer = DSA_INDEXER_BY_LAYER.holds(release)
        return {layer: SparseMLALayerSpec(block_size=block_size, latent=latent,
                                          indexer=None if by_layer and dsa.skips_topk(layer) else indexer)
                for layer in layers}  # fmt: skip
    window = geometry.config_sliding_window
    sliding = set(sliding_layers(geometry))
    chunk, chunked = chunked_local_layers(geometry)
    # the sliding layers' own heads and dims where the config gives them (MiMo-V2's swa_*, Gemma-4's
    # global layers' wider head): vLLM builds each layer type's Attention with its own
    # the sliding layers' own heads only where the model class reads them (VLLMModelRule.own_sliding_kv_heads)
    own = vllm_model_rule(geometry.model_type).own_sliding_kv_heads
    swa_heads = geometry.num_swa_kv_heads(tp) if own else heads
    swa_dims = (geometry.swa_head_dim or geometry.head_dim, geometry.swa_v_head_dim or geometry.v_head_dim)
    pad_v = vllm_model_rule(geometry.model_type).diffkv_backend and not DIFFKV_ATTENTION.holds(release)
    for layer in layers:
        local = layer in sliding and window is not None
        head, head_v = swa_dims if local else (geometry.head_dim, geometry.v_head_dim)
        common = dict(block_size=sliding_block or block_size if local else block_size,
                      num_kv_heads=swa_heads if local else heads, head_size=head,
                      head_size_v=head if pad_v else head_v, dtype=kv_dtype, kv_quant_mode=attention_quant)  # fmt: skip
        if layer in chunked:
            recorded_v = CHUNKED_HEAD_SIZE_V.holds(release)
            out[layer] = ChunkedLocalAttentionSpec(attention_chunk_size=chunk, records_head_size_v=recorded_v,
                                                   **common)  # type: ignore[arg-type]
        elif local:
            recorded_v = SLIDING_HEAD_SIZE_V.holds(release)
            out[layer] = SlidingWindowSpec(sliding_window=window,  # type: ignore[arg-type]
                                           records_head_size_v=recorded_v, **common)  # type: ignore[arg-type]
        else:
            out[layer] = FullAttentionSpec(records_head_size_v=ATTENTION_HEAD_SIZE_V.holds(release),
                                           **common)  # type: ignore[arg-type]
    return out


#: the indexer quantizes its keys to fp8 with one float32 scale per 128 values
#: (``vllm/model_executor/models/deepseek_v2.py Indexer.__init__``: ``quant_block_size``)
INDEXER_QUANT_BLOCK = 128


def indexer_head_size(dsa: DSAGeometry) -> int:
    """Bytes a token of an indexer's key cache (uint8): ``D + D // 128 x 4`` (``DeepseekV32IndexerCache``)."""
    return dsa.index_head_dim + dsa.index_head_dim // INDEXER_QUANT_BLOCK * 4


#: vLLM's ``MambaSpec`` counts prefill checkpoint blocks from 0.29.0 (``num_prefill_checkpoint_blocks``)
CHECKPOINT_BLOCKS_FIELD = ReleaseRule(
    "vllm-mamba-checkpoint-blocks-field",
    span("0.29.0", engine=VLLM),
    "a Mamba layer's spec carries its prefill checkpoint block count (0 when it takes none)",
    "vllm/v1/kv_cache_interface.py MambaSpec",
    topic="sizing",
)


def state_specs(
    geometry: ModelGeometry, tp: int, block_size: int, mode: str, padded: int | None, alignment: int | None,
    release: EngineRelease | None = None, lookahead: int = 0,
) -> Mapping[int, KVCacheSpec]:
    """Every Mamba layer's spec (global index -> spec) for the block size and padded page.

    ``alignment``: the layers' prefill checkpoint alignment (None: they take no checkpoints); one
    checkpoint block is held per request when there is one. ``lookahead``: the speculative tokens, which
    lengthen the conv window and are held as that many more state blocks a request
    (``vllm/model_executor/layers/mamba/abstract.py MambaBase.get_kv_cache_spec``: ``num_speculative_blocks``).
    """
    if geometry.mamba is None:
        return {}
    state = mamba_state(geometry, tp, release, lookahead)
    from .backends import mamba_type

    checkpoints: int | None = 1 if alignment is not None else 0
    if not CHECKPOINT_BLOCKS_FIELD.holds(release or NEWEST_VLLM):
        checkpoints = None
    spec = MambaSpec(block_size=block_size, shapes=state.shapes, dtypes=state.dtypes,
                     mamba_type=mamba_type(state.backend, release or NEWEST_VLLM),
                     mamba_cache_mode=mode if MAMBA_CACHE_MODE.holds(release or NEWEST_VLLM) else None,
                     page_size_padded=padded, num_speculative_blocks=lookahead,
                     num_prefill_checkpoint_blocks=checkpoints,
                     prefill_checkpoint_alignment=alignment if checkpoints else None)  # fmt: skip
    return {layer: spec for layer in geometry.mamba.mamba_layer_ids}
