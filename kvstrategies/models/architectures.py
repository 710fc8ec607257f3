"""One table of every per-architecture fact the project reads (sizing, parsing, launch, weights).

Two kinds of rows, keyed the way SGLang and transformers branch:

* :class:`Architecture`: one row per entry of a config's ``architectures`` list (SGLang's
  ``EntryClass`` names, ``sglang/srt/models/*.py``) that SGLang 0.5.23 serves and the project
  knows. It says what is true of the model (attention kind, DSA, hybrid-SWA layer rule and
  window rule, linear-attention kind, launch-rule memberships, ...); the modules decide what
  each fact means.
* :class:`ModelType`: one row per HF ``model_type`` whose config conventions a module reads
  (transformers config-class defaults, KV-head conventions, weight-layout quirks).

Every module asks here instead of comparing names; ``tests/models/test_architectures.py`` fails on an
architecture name or model type written as a string literal anywhere else in the package.
Adding a model is one :class:`Architecture` row (``docs/adding-a-model.md``).

Where the launch rules (ServerArgs.resolve_once) list a family differently from the sizing rules
(ModelConfig._derive_model_shapes), both memberships are kept as separate ``launch_*`` fields: SGLang reads the
two lists in different places (``server_args.py`` vs ``configs/model_config.py``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..core.releases import SGLANG_TRANSFORMERS, VLLM, ByRelease, EngineRelease, ReleaseRule, parse_release, span
from ..errors import UnsupportedConfigurationError


class Attention(enum.Enum):
    """How SGLang's ``ModelConfig`` sets ``attention_arch`` for the architecture (ModelConfig._derive_model_shapes)."""

    MHA = "mha"  # MHA / GQA / MQA (the default)
    MLA = "mla"  # always latent attention
    MLA_IF_LORA = "mla-if-kv-lora-rank"  # MLA when the text config carries ``kv_lora_rank``
    MLA_UNLESS_DISABLED = "mla-unless-use-mla-false"  # MLA unless the config says ``use_mla: false``


class HybridSWAGate(enum.Enum):
    """Membership in SGLang's ``is_hybrid_swa_model`` set and its extra condition (model_config.is_hybrid_swa_model,
    get_hybrid_layer_ids)."""

    ALWAYS = "always"
    IF_SLIDING_WINDOW = "if-sliding-window"  # only with a non-zero ``sliding_window`` (Laguna)
    IF_SLIDING_LAYER = "if-sliding-layer"  # only when ``layer_types`` has a sliding layer (Beam)


class SWALayerSplit(enum.Enum):
    """Which config field splits full from sliding-window layers (get_hybrid_layer_ids).

    Declaration order is the precedence when a config lists several architectures.
    """

    EVERY_FOURTH_FULL = "every-4th-full"  # Llama-4: layer l is full iff (l + 1) % 4 == 0
    DRAFT_ONE_SWA = "draft-one-swa"  # MTP drafts: one SWA layer, no full layer
    HYBRID_LAYER_PATTERN = "hybrid_layer_pattern"  # 1 = SWA, 0 = full (MiMo-V2)
    LAYER_TYPES_CAPPED = "layer_types-capped"  # layer_types, first num_hidden_layers entries (Step-3.5)
    GEMMA4 = "gemma4"  # layer_types (or sliding_window_pattern), last layer forced full
    LAYER_TYPES = "layer_types"  # full_attention / sliding_attention per layer
    LOCAL_LAYER_IDS = "local_layer_ids"  # the listed layers are SWA (Inkling)
    ALL_SWA = "all-swa"  # every layer is SWA (UnlimitedOCR)


class SWAWindow(enum.Enum):
    """How the engine's sliding window follows from the config (model_config.is_hybrid_swa_model,
    get_hybrid_layer_ids)."""

    FIRST_KEY = "first-key"  # sliding_window_size, sliding_window, window_size, attention_chunk_size
    INCLUSIVE_MINUS_ONE = "minus-one"  # HF's inclusive sliding_window - 1
    CONFIG_VALUE = "config-value"  # sliding_window unchanged (DeepSeek-V4)


class LinearAttention(enum.Enum):
    """The linear-state family of a Mamba-ish hybrid (sglang.srt.configs.mamba_utils); order = parse precedence."""

    GDN = "gdn"  # Gated DeltaNet (Qwen3-Next, Qwen3.5): Mamba2 state shapes
    NEMOTRON_H = "nemotron_h"  # Mamba2 layers by hybrid_override_pattern
    FALCON_H1 = "falcon_h1"  # attention and Mamba2 side by side in every layer
    JAMBA = "jamba"  # Mamba-1 (SGLang 0.5.23 serves it through the generic fallback)
    KIMI_LINEAR = "kimi_linear"  # Kimi Delta Attention


class SWAMemoryOff(enum.Enum):
    """SGLang's forced ``--disable-hybrid-swa-memory`` (arg_groups.overrides)."""

    NEVER = "never"
    ALWAYS = "always"
    WITH_SLIDING_WINDOW_PATTERN = "with-sliding_window_pattern"  # Exaone-4


class LaunchBackendRule(enum.Enum):
    """The per-architecture attention-backend rule of the launch defaults (arg_groups.model_overrides).

    Declaration order is the order SGLang tries them.
    """

    GPT_OSS = "gpt-oss"
    LLAMA4 = "llama4"
    MIMO_V2 = "mimo-v2"
    QWEN3_NEXT = "qwen3-next"
    GEMMA4 = "gemma4"
    NEMOTRON_H = "nemotron-h"
    FALCON_H1 = "falcon-h1"
    GRANITE_HYBRID = "granite-hybrid"


class LaunchBackendCheck(enum.Enum):
    """SGLang's check of the resolved attention backend after the model overrides (SGLang:
    ``arg_groups.model_hook.handle_model_specific_adjustments``; arg_groups.model_overrides)."""

    LLAMA4 = "llama4"  # the attention backend is one of Llama-4's
    GEMMA4 = "gemma4"  # the prefill and decode backends are both among Gemma-4's


class SGLangModel(enum.Enum):
    """How SGLang 0.5.23 loads the architecture."""

    NATIVE = "native"  # an ``EntryClass`` of ``sglang/srt/models`` (the registry)
    TRANSFORMERS_FALLBACK = "transformers"  # no native class: the generic Transformers backend
    # no native class, and the transformers class is not backend-compatible: SGLang refuses it with
    # --model-impl auto (model_loader/utils.py resolve_transformers_arch; recorded: golden/sglang-*-weights)
    TRANSFORMERS_INCOMPATIBLE = "transformers-incompatible"
    RULE_ONLY = "rule-only"  # named by SGLang's config / launch rules, no model class to load


class Gemma4KVHeads(enum.Enum):
    """Where a Gemma-4-family model type takes its full-attention KV heads (ModelConfig._derive_model_shapes)."""

    SLIDING = "sliding"  # the sliding layers' num_key_value_heads
    GLOBAL_IF_K_EQ_V = "global-if-k-eq-v"  # num_global_key_value_heads when attention_k_eq_v
    GLOBAL_OR_ONE = "global-or-one"  # num_global_key_value_heads, default 1
    GLOBAL_OR_SLIDING = "global-or-sliding"  # num_global_key_value_heads, default the sliding count


@dataclass(frozen=True)
class Architecture:
    """What is true of one served architecture; every field defaults to "nothing special".

    ``sglang_model``: how SGLang loads it (:func:`is_served` is False only for rule-only names).

    Sizing / parsing:
    ``attention``: latent or per-head KV. ``dsa_if_index_topk``: DeepSeek sparse attention when
    the config has ``index_topk``. ``dsa_cli_factor``: the indexer reads ``cli_factor``.
    ``pp_layers_per_layer``: layers the pipeline split counts per hidden layer (LongCat: 2).
    ``mla_swa_dims``: MLA with separate ``swa_kv_lora_rank`` / ``swa_qk_rope_head_dim``.
    ``mla_nope_flag``: ``use_mla_nope`` zeroes the rope dim. ``mla_forced_head_dim``: SGLang's
    dummy ``head_dim`` of an MLA model (read only by the MXFP8 scale quirk). ``dsv4``: DeepSeek-V4
    compressed attention. ``minimax_sparse``: MiniMax-M3 sparse layers. ``hybrid_swa``: in SGLang's
    hybrid-SWA set (with its gate); ``hybrid_swa_listed``: the release's set names it (GPT-OSS and Llama-4
    from 0.5.8: 0.5.7's ``is_hybrid_model`` names MiMo-V2 alone, and Llama-4 under
    ``--hybrid-kvcache-ratio``, which the planner does not take); ``swa_layer_split`` /
    ``swa_window``: its layer and window rules. ``swa_compress``: SWA layers keep their own KV heads /
    head dims (first entry only).
    ``swa_full_tokens_ratio``: the model's default ratio. ``gemma4_family``: Gemma-4 config rewrite.
    ``linear_attention``: the Mamba-ish family. ``is_draft``: an MTP / NextN / EAGLE draft head.
    ``draft_architecture``: the row SGLang's ``ModelConfig._config_draft_model`` renames this one to
    for a draft worker, where that changes the hybrid-SWA layer split (MiMo-V2, Step-3.5).
    ``draft_num_layers``: the layers that renamed draft holds whatever the config says (its
    ``num_nextn_predict_layers`` set to 1, or a one-layer MTP head: ``_compute_model_num_layers``);
    ``draft_renamed``: the release renames the draft (Qwen3-MoE's ``Qwen3MoeForCausalLMMTP`` from 0.5.13).
    ``mtp_local_draft_by_name``: SGLang 0.5.16 to 0.5.18 price this architecture's ``mtp_local_layer_ids``
    draft layers as SWA rings (``HybridSWAPoolConfigurator.__init__`` names it; from 0.5.19 any model).

    Launch defaults:
    ``launch_mla`` / ``launch_deepseek_family`` (DSA with ``index_topk``, trtllm_mla rule) /
    ``launch_dsv4`` / ``launch_hybrid_swa``: the launch rules' own lists. ``mamba_radix``: SGLang's
    Mamba radix cache serves it; ``mamba_extra_buffer``: with the extra-buffer strategy;
    ``mamba_cache``: the radix cache holds its state (SGLang turns the radix cache off otherwise:
    ``support_mamba_cache=False`` in ``ServerArgs._handle_mamba_radix_cache``).
    ``kda_from_linear_attn_config``: ``linear_attn_config.kda_layers`` means KDA layers.
    ``multimodal_opt_in`` / ``breakable_multimodal``: multimodal handling. ``hybrid_swa_memory_off``:
    forced ``--disable-hybrid-swa-memory``. ``attention_sinks``. ``audio_encoder_decoder``: Whisper.
    ``launch_backend_rule``: its attention-backend override. ``block_diffusion``: a block-diffusion
    variant (the Gemma-4 rule then keeps ``triton`` on SM100 too). ``launch_backend_check``: the
    model hook's check of the resolved backend. ``piecewise_graph_off``: on SGLang's
    ``configs.model_config.piecewise_cuda_graph_disabled_model_archs`` (no ``tc_piecewise`` prefill
    graph). ``late_trtllm_mla_prefill_graph``: the
    prefill graph is disabled after the trtllm_mla prefill choice. ``wide_speculative_defaults``:
    the wider EAGLE auto steps. ``eagle_spec_v2``: the model's launch override turns spec v2 on
    for EAGLE (multi-layer EAGLE; what matters where spec v2 is off by default, up to 0.5.10).
    ``trtllm_disables_hybrid_swa``: the model's override turns hybrid-SWA memory off with the trtllm_mha backend
    (GPT-OSS up to 0.5.9). ``legacy_mamba_block``: SGLang 0.5.8 attaches its Mamba radix-cache block to this
    model's override (GLM-4 MoE: the no_buffer block turns the overlap scheduler off).

    Weights: ``moe_block`` names the module that holds a decoder layer's MoE in SGLang's model
    (``block_sparse_moe`` for Mixtral, MiniMax-M2 and Grok), which quantization exclusion lists
    are matched against; ``single_block``: each decoder layer holds one block under this name, its
    attention, Mamba mixer, MLP or MoE alike (Nemotron-H's ``mixer``), an ungated MLP's projection named
    ``up_proj``; ``hf_weight_prefixes``: the model class's ``hf_to_sglang_mapper`` prefixes, which SGLang
    applies to a ModelOpt config's module lists before matching them (``apply_weight_name_mapper``);
    ``router_fp32``: the router is built in float32 (``Grok1MoE.gate``,
    ``MiniMaxM2MoE.gate``, ``Glm4MoeGate``, MiMo-V2's ``MoEGate`` unless the config names another
    ``moe_router_dtype``: ``sglang/srt/models/grok.py``, ``minimax_m2.py``, ``glm4_moe.py``,
    ``mimo_v2.py``).
    ``sm100_trtllm_moe``: the ``--quantization`` values (``none``: a 16-bit checkpoint;
    ``kimi-int4``: the Kimi INT4 recipe) for which SGLang picks the FlashInfer TRT-LLM MoE runner on
    SM100 by itself (``arg_groups/overrides.py`` ``_deepseek_moe_quant_resolution``;
    ``arg_groups/model_overrides/qwen3_moe.py`` and ``glm4_moe.py``);
    ``sm100_trtllm_moe_unquantized``: the release's rule takes a 16-bit checkpoint too (GLM-4.5's
    ``_glm4_moe_overrides`` from 0.5.15; ``modelopt_fp4`` only before).
    ``lm_head_fp32``: the model class casts its LM head to float32 (Qwen3-Next up to 0.5.5,
    ``qwen3_next.py``, ``Qwen3NextForCausalLM.__init__``).
    ``sm100_moe_override``: the release has the model's SM100 MoE-runner override at all (Qwen3-MoE's
    and Qwen3-Next's from 0.5.6, GLM-4.5's from 0.5.8, MiniMax-M2's routed one from 0.5.18; before, the
    runner stays ``auto``); ``sm100_moe_flag_only``: the override reads only a given ``--quantization
    modelopt_fp4``, never the checkpoint (DeepSeek-V3 up to 0.5.4,
    ``ServerArgs._handle_model_specific_adjustments``).
    ``sm100_trtllm_routed_moe``: the same for its routed variant (``flashinfer_trtllm_routed``:
    ``arg_groups/model_overrides/minimax_m2.py`` for MiniMax-M2 with ``modelopt_fp4``).
    ``lm_head_every_stage``: the model class builds its untied ``lm_head`` on every pipeline stage,
    not only the last (its ``__init__`` does not test ``pp_group.is_last_rank``: ``llama.py``'s
    ``LlamaForCausalLM`` and its subclasses, ``qwen3_moe.py``, ``glm4_moe.py``, ``mixtral.py``,
    ``gpt_oss.py``, ``gemma3_causal.py``). ``skips_block_check``: linear layers (the module's last
    name) the class builds with ``skip_block_quant_check=True``, so block-FP8 shapes are not
    validated for them (``mimo_v2.py``, ``MiMoV2Attention.__init__``: ``qkv_proj``).

    Releases: ``releases``: the facts of this row that hold for some SGLang releases only, as
    ``(fact, first, last)`` (``None``: unbounded); a fact is a boolean field of the row
    (``breakable_multimodal``, ``mamba_extra_buffer``, ``mamba_cache``: on SGLang's allow-list from ``first``) or
    ``piecewise_multimodal`` (on SGLang's
    ``configs.model_config.multimodal_piecewise_cuda_graph_supported_model_archs``; MiniMax-M3's
    span ends where SGLang's breakable list takes it, 0.5.22, so it never moves after). The
    boolean fields above are the newest release's answers.
    """

    name: str
    sglang_model: SGLangModel = SGLangModel.NATIVE
    attention: Attention = Attention.MHA
    dsa_if_index_topk: bool = False
    dsa_cli_factor: bool = False
    pp_layers_per_layer: int = 1
    mla_swa_dims: bool = False
    mla_nope_flag: bool = False
    mla_forced_head_dim: int | None = None
    dsv4: bool = False
    minimax_sparse: bool = False
    hybrid_swa: HybridSWAGate | None = None
    swa_layer_split: SWALayerSplit | None = None
    swa_window: SWAWindow = SWAWindow.FIRST_KEY
    swa_compress: bool = False
    swa_full_tokens_ratio: float | None = None
    gemma4_family: bool = False
    linear_attention: LinearAttention | None = None
    is_draft: bool = False
    draft_architecture: str | None = None
    draft_num_layers: int | None = None
    draft_renamed: bool = True
    mtp_local_draft_by_name: bool = False
    launch_mla: bool = False
    launch_deepseek_family: bool = False
    launch_dsv4: bool = False
    launch_hybrid_swa: bool = False
    mamba_radix: bool = False
    mamba_extra_buffer: bool = True
    mamba_cache: bool = True
    kda_from_linear_attn_config: bool = True
    multimodal_opt_in: bool = False
    breakable_multimodal: bool = False
    hybrid_swa_memory_off: SWAMemoryOff = SWAMemoryOff.NEVER
    attention_sinks: bool = False
    audio_encoder_decoder: bool = False
    launch_backend_rule: LaunchBackendRule | None = None
    block_diffusion: bool = False
    launch_backend_check: LaunchBackendCheck | None = None
    late_trtllm_mla_prefill_graph: bool = False
    piecewise_graph_off: bool = False
    wide_speculative_defaults: bool = False
    eagle_spec_v2: bool = False
    trtllm_disables_hybrid_swa: bool = False
    legacy_mamba_block: bool = False
    moe_block: str = "mlp"
    single_block: str = ""
    hf_weight_prefixes: tuple[tuple[str, str], ...] = ()
    router_fp32: bool = False
    sm100_trtllm_moe: frozenset[str] = frozenset()
    sm100_trtllm_routed_moe: frozenset[str] = frozenset()
    sm100_trtllm_moe_unquantized: bool = True
    sm100_moe_override: bool = True
    sm100_moe_flag_only: bool = False
    lm_head_fp32: bool = False
    lm_head_every_stage: bool = False
    skips_block_check: frozenset[str] = frozenset()
    hybrid_swa_listed: bool = True
    releases: tuple[tuple[str, str | None, str | None], ...] = ()

    @property
    def family(self) -> str:
        """A short label for listings (the facts that pick its strategy)."""
        if self.dsv4:
            return "dsv4"
        if self.hybrid_swa is not None:
            return "hybrid-swa"
        if self.linear_attention is not None:
            return f"hybrid-linear ({self.linear_attention.value})"
        if self.minimax_sparse:
            return "minimax-sparse"
        if self.attention is not Attention.MHA:
            return "mla+dsa" if self.dsa_if_index_topk else "mla"
        return "mha"


@dataclass(frozen=True)
class ModelType:
    """Config conventions of one HF ``model_type``.

    ``geometry_defaults`` / ``weight_defaults``: transformers config-class defaults for fields
    published configs omit, as read by the geometry parser and the weight estimate.
    ``launch_context_default``: the context length the launch facts assume without a length key.
    ``multi_query_unless_new_decoder``: ``multi_query`` means 1 KV head unless
    ``new_decoder_architecture`` (Falcon). ``kv_heads_in_attn_config``: ``attn_config.kv_n_heads``.
    ``gemma4_kv_heads`` (Gemma-4 family when set) and ``max_context_len``. ``linear_attention``.
    Weights: ``norms_per_layer`` (hidden-size vectors), ``layernorm_bias`` (final norm has a
    bias), ``gated_mlp``, ``attn_output_gate``, ``qkv_bias``, ``o_proj_bias`` (with the qkv bias),
    ``qk_norm`` (per-head-dim q/k norms), ``qk_norm_weightless`` (``use_qk_norm`` without weights),
    ``attention_sinks``, ``moe_expert_bias``, ``moe_router_bias``, ``moe_shared_expert``,
    ``replicated_embedding`` (the embedding is a plain ``nn.Embedding``: every rank holds the
    whole vocabulary, e.g. ``sglang/srt/models/gemma3_causal.py``, ``Gemma3TextScaledWordEmbedding``),
    ``vision_gated_mlp`` (the vision blocks' MLP is gated: ``gate_up_proj`` + ``down_proj``, e.g.
    ``sglang/srt/models/qwen2_5_vl.py``, ``Qwen2_5_VLMLP``).
    ``dsv4_swa_ratio_override``: DeepSeek-V4's launch override of the SWA ratio applies.
    ``rope_per_layer_type``: transformers 5.19 (SGLang 0.5.23's pin) keeps this type's rope
    parameters per attention type, so SGLang's context length sees no top-level rope factor.
    ``large_hopper_vl_overrides``: Qwen3-VL's large-Hopper serving rules apply (decode graph up to
    the request cap, flashinfer decode). ``vision_config_defaults``: the vision-config class
    defaults SGLang fills in when the raw ``vision_config`` omits a field. ``first_release``: the
    first SGLang release that loads the config (``ModelConfig`` -> ``AutoConfig``). ``all_sliding``:
    every attention layer is sliding-window (DeepSeek-OCR's ``unlimited-ocr`` text model).
    ``head_dim_none_default``: the transformers config class leaves ``head_dim`` None when config.json
    omits it (5.6-5.8: Mixtral, Ministral, MiniMax, Hunyuan v1); ``head_dim_none_transformers4``: only
    transformers 4.x's class does (4.57.1, SGLang 0.5.9's pin: Mistral).
    ``config_aliases``: ``(field, name)`` pairs: the config class SGLang loads gives ``field`` the value
    config.json stores under ``name`` (its ``attribute_map`` or ``__init__``), read by
    :func:`with_config_aliases`. ``derived_fields``: ``(field, rule)`` pairs: the config class (or the model
    class SGLang builds) computes ``field`` from other fields whatever config.json says; ``rule(text)`` gives
    that value, or None where the config lacks what it needs (also :func:`with_config_aliases`).
    ``nested_defaults``: ``(text model_type, defaults)`` pairs of a wrapper type: its config class builds a
    nested ``text_config`` of that model type with that type's config class
    (``CONFIG_MAPPING[model_type](**text_config)``), whose defaults fill the fields the nested dict omits;
    read by :func:`with_nested_defaults`. ``mlp_bias``: the dense MLP's linears carry biases (``2 I`` on the
    fused gate/up projection, ``h`` on the down projection).
    """

    name: str
    geometry_defaults: tuple[tuple[str, Any], ...] = ()
    weight_defaults: tuple[tuple[str, Any], ...] = ()
    launch_context_default: int | None = None
    multi_query_unless_new_decoder: bool = False
    kv_heads_in_attn_config: bool = False
    gemma4_kv_heads: Gemma4KVHeads | None = None
    max_context_len: int | None = None
    linear_attention: LinearAttention | None = None
    norms_per_layer: int = 2
    layernorm_bias: bool = False
    gated_mlp: bool = True
    attn_output_gate: bool = False
    qkv_bias: bool = False
    o_proj_bias: bool = True
    qk_norm: bool = False
    qk_norm_weightless: bool = False
    attention_sinks: bool = False
    moe_expert_bias: bool = False
    moe_router_bias: bool = False
    moe_shared_expert: bool = False
    replicated_embedding: bool = False
    vision_gated_mlp: bool = False
    dsv4_swa_ratio_override: bool = True
    rope_per_layer_type: bool = False
    large_hopper_vl_overrides: bool = False
    vision_config_defaults: tuple[tuple[str, int], ...] = ()
    #: the first SGLang release that can load this ``config.json`` (its pinned transformers or its
    #: own config classes know the model type); None: every supported release
    first_release: str | None = None
    all_sliding: bool = False
    head_dim_none_default: bool = False
    head_dim_none_transformers4: bool = False
    config_aliases: tuple[tuple[str, str], ...] = ()
    derived_fields: tuple[tuple[str, Callable[[Mapping[str, Any]], Any]], ...] = ()
    nested_defaults: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    mlp_bias: bool = False
    #: vLLM's model class asks ``get_rope`` for a float32 cache whatever the model dtype
    #: (``vllm/model_executor/models/gpt_oss.py OAIAttention.__init__``: ``dtype=torch.float32``)
    vllm_rope_float32: bool = False
    #: the routed experts vLLM's config class gives a config.json that names none (``get_num_experts``: vLLM reads
    #: ``deepseek_v3`` and ``deepseek_v32`` with transformers' ``DeepseekV3Config``, ``n_routed_experts`` 256)
    vllm_default_experts: int = 0

    @property
    def gemma4_family(self) -> bool:
        return self.gemma4_kv_heads is not None


def _positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def minicpm3_v_head_dim(text: Mapping[str, Any]) -> int | None:
    """MiniCPM3's V head width: ``hidden_size // num_attention_heads``, as SGLang's model builds its attention
    (``sglang/srt/models/minicpm3.py`` ``MiniCPM3DecoderLayer.__init__``: ``v_head_dim=self.hidden_size //
    config.num_attention_heads``; the published configs have no ``v_head_dim``, and the model reads none)."""
    hidden, heads = _positive_int(text.get("hidden_size")), _positive_int(text.get("num_attention_heads"))
    return hidden // heads if hidden and heads else None


#: ``layers_block_type`` entries -> ``hybrid_override_pattern`` characters (SGLang's
#: ``NemotronHConfig._list_to_pattern``)
NEMOTRON_H_BLOCK_CODES = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def _block_types(text: Mapping[str, Any]) -> list[str] | None:
    blocks = text.get("layers_block_type")
    return blocks if isinstance(blocks, list) and blocks and all(isinstance(b, str) for b in blocks) else None


def nemotron_h_num_layers(text: Mapping[str, Any]) -> int | None:
    """Nemotron-H's layer count: ``len(layers_block_type)`` when config.json lists the blocks (SGLang's own
    ``sglang/srt/configs/nemotron_h.py`` ``NemotronHConfig.num_hidden_layers`` property; its ``num_hidden_layers``
    argument is deprecated and ignored: Nemotron-3-Ultra's config.json has none)."""
    blocks = _block_types(text)
    return len(blocks) if blocks is not None else None


def nemotron_h_pattern(text: Mapping[str, Any]) -> str | None:
    """Nemotron-H's ``hybrid_override_pattern`` spelled from ``layers_block_type`` when config.json lists the
    blocks (``NemotronHConfig.hybrid_override_pattern`` property, ``_list_to_pattern``; Nemotron-3-Ultra and
    Nemotron-3.5-Lightning publish only the list). None for an entry it does not know (the parser refuses it)."""
    blocks = _block_types(text)
    if blocks is None or not set(blocks) <= NEMOTRON_H_BLOCK_CODES.keys():
        return None
    return "".join(NEMOTRON_H_BLOCK_CODES[b] for b in blocks)


#: transformers 5.19's ``LlamaConfig`` class defaults for the fields that size a model
#: (``transformers/models/llama/configuration_llama.py``); ``num_key_value_heads`` defaults to None, i.e. the
#: attention heads, as the readers already take it
LLAMA_CONFIG_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("vocab_size", 32000),
    ("hidden_size", 4096),
    ("intermediate_size", 11008),
    ("num_hidden_layers", 32),
    ("num_attention_heads", 32),
    ("hidden_act", "silu"),
    ("max_position_embeddings", 2048),
    ("tie_word_embeddings", False),
    ("attention_bias", False),
    ("mlp_bias", False),
)

_A = Architecture
_DS_TRTLLM = frozenset({"fp8", "modelopt_fp8", "modelopt_fp4", "modelopt_mixed", "none", "kimi-int4"})
_QWEN_TRTLLM = frozenset({"fp8", "modelopt_fp4", "modelopt_mixed", "none"})
_M = ModelType
_MLA = Attention.MLA
_SWA = HybridSWAGate.ALWAYS
_SWA_IF_WINDOW = HybridSWAGate.IF_SLIDING_WINDOW
_SWA_IF_LAYER = HybridSWAGate.IF_SLIDING_LAYER
_FALLBACK = SGLangModel.TRANSFORMERS_FALLBACK
_RULE_ONLY = SGLangModel.RULE_ONLY
_GDN = LinearAttention.GDN

# ---- the architecture rows ------------------------------------------------------------------
ARCHITECTURES: tuple[Architecture, ...] = (
    _A("BailingMoeForCausalLMNextN", attention=Attention.MLA_IF_LORA, is_draft=True),
    _A("BailingMoeV2_5ForCausalLM", attention=_MLA, launch_mla=True, mamba_radix=True, piecewise_graph_off=True),
    _A(
        "BailingMoeV3ForCausalLM",
        attention=_MLA,
        mla_nope_flag=True,
        launch_mla=True,
        mamba_radix=True,
        releases=(("mamba_extra_buffer", "0.5.19", None),),
    ),
    _A("BailingMoeV3VLForConditionalGeneration", attention=_MLA, mla_nope_flag=True),
    _A(
        "BeamForCausalLM",
        hybrid_swa=_SWA_IF_LAYER,
        swa_layer_split=SWALayerSplit.LAYER_TYPES,
        swa_window=SWAWindow.INCLUSIVE_MINUS_ONE,
    ),
    _A(
        "Cohere2VisionForConditionalGeneration",
        breakable_multimodal=True,
        releases=(("breakable_multimodal", "0.5.19", None), ("piecewise_multimodal", "0.5.14", "0.5.18")),
    ),
    _A("DeepseekV2ForCausalLM", attention=_MLA, mla_forced_head_dim=256, launch_mla=True),
    _A(
        "DeepseekV32ForCausalLM",
        sm100_trtllm_moe=_DS_TRTLLM,
        attention=_MLA,
        dsa_if_index_topk=True,
        draft_architecture="DeepseekV3ForCausalLMNextN",
        mla_forced_head_dim=256,
        launch_mla=True,
        launch_deepseek_family=True,
        releases=(("piecewise_graph_off", None, "0.5.12"),),
    ),
    _A(
        "DeepseekV3ForCausalLM",
        sm100_trtllm_moe=_DS_TRTLLM,
        attention=_MLA,
        dsa_if_index_topk=True,
        draft_architecture="DeepseekV3ForCausalLMNextN",
        mla_forced_head_dim=256,
        launch_mla=True,
        launch_deepseek_family=True,
        late_trtllm_mla_prefill_graph=True,
        releases=(("mtp_paged_flashinfer_refused", None, "0.5.1"), ("sm100_moe_flag_only", None, "0.5.4")),
    ),
    _A(
        "DeepseekV3ForCausalLMNextN",
        attention=_MLA,
        dsa_if_index_topk=True,
        mla_forced_head_dim=256,
        is_draft=True,
        launch_mla=True,
        launch_deepseek_family=True,
        releases=(("dsa_if_index_topk", "0.5.4", None),),
    ),
    _A(
        "DeepseekV4ForCausalLM",
        piecewise_graph_off=True,
        dsv4=True,
        hybrid_swa=_SWA,
        swa_window=SWAWindow.CONFIG_VALUE,
        swa_full_tokens_ratio=0.1,
        launch_dsv4=True,
        launch_hybrid_swa=True,
    ),
    _A(
        "DeepseekV4ForCausalLMDSpark",
        dsv4=True,
        hybrid_swa=_SWA,
        swa_window=SWAWindow.CONFIG_VALUE,
        swa_full_tokens_ratio=0.1,
        is_draft=True,
    ),
    _A(
        "DeepseekV4ForCausalLMNextN",
        piecewise_graph_off=True,
        dsv4=True,
        hybrid_swa=_SWA,
        swa_window=SWAWindow.CONFIG_VALUE,
        swa_full_tokens_ratio=0.1,
        is_draft=True,
    ),
    _A("DeepseekVL2ForCausalLM", attention=Attention.MLA_UNLESS_DISABLED, mla_forced_head_dim=256, launch_mla=True),
    _A(
        "DiffusionGemmaForBlockDiffusion",
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.GEMMA4,
        swa_window=SWAWindow.INCLUSIVE_MINUS_ONE,
        swa_compress=True,
        gemma4_family=True,
        launch_backend_rule=LaunchBackendRule.GEMMA4,
        block_diffusion=True,
    ),
    _A(
        "Dots3NoteForCausalLM",
        sm100_trtllm_moe=_DS_TRTLLM,
        attention=_MLA,
        dsa_if_index_topk=True,
        mla_swa_dims=True,
        swa_layer_split=SWALayerSplit.LAYER_TYPES,
        launch_mla=True,
        launch_deepseek_family=True,
    ),
    _A(
        "Dots3NoteForCausalLMNextN",
        attention=_MLA,
        dsa_if_index_topk=True,
        mla_swa_dims=True,
        swa_layer_split=SWALayerSplit.LAYER_TYPES,
        is_draft=True,
    ),
    _A("DotsVLMForCausalLM", attention=_MLA, mla_forced_head_dim=256, launch_mla=True),
    _A("Eagle3DeepseekV2ForCausalLM", attention=_MLA, mla_forced_head_dim=256, is_draft=True, launch_mla=True),
    _A(
        "EmbeddingGemma2Model",
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.GEMMA4,
        swa_window=SWAWindow.INCLUSIVE_MINUS_ONE,
        swa_compress=True,
        gemma4_family=True,
    ),
    _A("Exaone4ForCausalLM", hybrid_swa_memory_off=SWAMemoryOff.WITH_SLIDING_WINDOW_PATTERN),
    _A("FalconForCausalLM", sglang_model=SGLangModel.TRANSFORMERS_INCOMPATIBLE),
    _A(
        "FalconH1ForCausalLM",
        linear_attention=LinearAttention.FALCON_H1,
        mamba_radix=True,
        launch_backend_rule=LaunchBackendRule.FALCON_H1,
    ),
    _A("Gemma2ForCausalLM", hybrid_swa_memory_off=SWAMemoryOff.ALWAYS),
    _A("Gemma3ForCausalLM", hybrid_swa_memory_off=SWAMemoryOff.ALWAYS, lm_head_every_stage=True),
    _A("Gemma3ForConditionalGeneration", multimodal_opt_in=True, hybrid_swa_memory_off=SWAMemoryOff.ALWAYS),
    _A("Gemma3nForCausalLM", hybrid_swa_memory_off=SWAMemoryOff.ALWAYS),
    _A("Gemma3nForConditionalGeneration", hybrid_swa_memory_off=SWAMemoryOff.ALWAYS),
    _A(
        "Gemma4ForCausalLM",
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.GEMMA4,
        swa_window=SWAWindow.INCLUSIVE_MINUS_ONE,
        swa_compress=True,
        gemma4_family=True,
        launch_backend_rule=LaunchBackendRule.GEMMA4,
        launch_backend_check=LaunchBackendCheck.GEMMA4,
    ),
    _A(
        "Gemma4ForConditionalGeneration",
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.GEMMA4,
        swa_window=SWAWindow.INCLUSIVE_MINUS_ONE,
        swa_compress=True,
        gemma4_family=True,
        launch_backend_rule=LaunchBackendRule.GEMMA4,
        launch_backend_check=LaunchBackendCheck.GEMMA4,
    ),
    _A(
        "Gemma4UnifiedForConditionalGeneration",
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.GEMMA4,
        swa_window=SWAWindow.INCLUSIVE_MINUS_ONE,
        swa_compress=True,
        gemma4_family=True,
        launch_backend_rule=LaunchBackendRule.GEMMA4,
        launch_backend_check=LaunchBackendCheck.GEMMA4,
    ),
    _A("GigaChat35ForCausalLM", attention=_MLA, launch_mla=True),
    _A("GigaChat35ForCausalLMNextN", attention=_MLA, is_draft=True),
    _A(
        "Glm4MoeForCausalLM",
        router_fp32=True,
        sm100_trtllm_moe=frozenset({"modelopt_fp4", "none"}),
        lm_head_every_stage=True,
        releases=(
            ("sm100_trtllm_moe_unquantized", "0.5.15", None),
            ("mtp_paged_flashinfer_refused", None, "0.5.1"),
            ("router_fp32", "0.5.19", None),  # before: Glm4MoeGate.weight in the model dtype
            ("sm100_moe_override", "0.5.8", None),
        ),
        legacy_mamba_block=True,
    ),
    _A("Glm4MoeLiteForCausalLM", attention=_MLA, mla_forced_head_dim=256, launch_mla=True),
    _A("Glm4MoeLiteForCausalLMNextN", attention=_MLA, mla_forced_head_dim=256, is_draft=True),
    _A(
        "Glm5NextForConditionalGeneration",
        sm100_trtllm_moe=_DS_TRTLLM,
        attention=_MLA,
        dsa_if_index_topk=True,
        launch_mla=True,
        launch_deepseek_family=True,
        mamba_radix=True,
        kda_from_linear_attn_config=False,
        breakable_multimodal=True,
        releases=(("breakable_multimodal", "0.5.20", None), ("mamba_extra_buffer", "0.5.20", None)),
    ),
    _A("Glm5NextForConditionalGenerationNextN", attention=_MLA, dsa_if_index_topk=True, is_draft=True),
    _A(
        "GlmMoeDsaForCausalLM",
        sm100_trtllm_moe=_DS_TRTLLM,
        attention=_MLA,
        dsa_if_index_topk=True,
        mla_forced_head_dim=256,
        launch_mla=True,
        launch_deepseek_family=True,
        releases=(("piecewise_graph_off", None, "0.5.12"),),
    ),
    _A("GlmMoeDsaForCausalLMNextN", attention=_MLA, dsa_if_index_topk=True, is_draft=True),
    _A(
        "GptOssForCausalLM",
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.LAYER_TYPES,
        swa_window=SWAWindow.INCLUSIVE_MINUS_ONE,
        launch_hybrid_swa=True,
        attention_sinks=True,
        launch_backend_rule=LaunchBackendRule.GPT_OSS,
        lm_head_every_stage=True,
        trtllm_disables_hybrid_swa=True,
        releases=(("hybrid_swa_listed", "0.5.8", None),),
    ),
    _A("GraniteMoeHybridForCausalLM", mamba_radix=True, launch_backend_rule=LaunchBackendRule.GRANITE_HYBRID),
    _A("GraniteMoeSWAForCausalLM", hybrid_swa=_SWA, swa_layer_split=SWALayerSplit.LAYER_TYPES),
    _A("GraniteSWAForCausalLM", hybrid_swa=_SWA, swa_layer_split=SWALayerSplit.LAYER_TYPES),
    _A("Grok1ForCausalLM", wide_speculative_defaults=True, moe_block="block_sparse_moe", router_fp32=True),
    _A("Grok1VForCausalLM", wide_speculative_defaults=True, sglang_model=_RULE_ONLY),
    _A(
        "HYV4ForCausalLM",
        sm100_trtllm_moe=_DS_TRTLLM,
        draft_num_layers=1,
        attention=_MLA,
        dsa_if_index_topk=True,
        launch_mla=True,
        launch_deepseek_family=True,
    ),
    _A("HYV4ForCausalLMNextN", attention=_MLA, dsa_if_index_topk=True, is_draft=True),
    _A("IQuestQ1ForCausalLM", hybrid_swa=_SWA, swa_layer_split=SWALayerSplit.LAYER_TYPES),
    _A(
        "InklingForCausalLM",
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.LOCAL_LAYER_IDS,
        swa_full_tokens_ratio=0.1,
        sglang_model=_RULE_ONLY,
    ),
    _A(
        "InklingForConditionalGeneration",
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.LOCAL_LAYER_IDS,
        swa_compress=True,
        swa_full_tokens_ratio=0.1,
        mtp_local_draft_by_name=True,
    ),
    _A(
        "InklingForConditionalGenerationMTP",
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.DRAFT_ONE_SWA,
        swa_compress=True,
        swa_full_tokens_ratio=0.1,
        is_draft=True,
    ),
    _A("JambaForCausalLM", linear_attention=LinearAttention.JAMBA, sglang_model=_FALLBACK),
    _A(
        "JetNemotronForCausalLM",
        mamba_radix=True,
        mamba_extra_buffer=False,
        launch_backend_rule=LaunchBackendRule.FALCON_H1,
    ),
    _A("JetVLMForConditionalGeneration", mamba_radix=True, mamba_extra_buffer=False),
    _A(
        "KimiK25ForConditionalGeneration",
        sm100_trtllm_moe=_DS_TRTLLM,
        attention=_MLA,
        mla_forced_head_dim=256,
        launch_mla=True,
        launch_deepseek_family=True,
        breakable_multimodal=True,
        releases=(("breakable_multimodal", "0.5.18", None), ("piecewise_multimodal", "0.5.16", None)),
    ),
    _A(
        "KimiK3ForConditionalGeneration",
        attention=_MLA,
        launch_mla=True,
        mamba_radix=True,
        breakable_multimodal=True,
        releases=(("breakable_multimodal", "0.5.18", None), ("mamba_extra_buffer", "0.5.17", None)),
    ),
    _A("KimiK3LinearForCausalLM", attention=_MLA, launch_mla=True, mamba_radix=True),
    _A(
        "KimiLinearForCausalLM",
        attention=_MLA,
        mla_forced_head_dim=72,
        linear_attention=LinearAttention.KIMI_LINEAR,
        launch_mla=True,
        mamba_radix=True,
        releases=(("mamba_extra_buffer", "0.5.16", None), ("mamba_cache", "0.5.14", None)),
    ),
    _A("KimiVLForConditionalGeneration", attention=_MLA, mla_forced_head_dim=256, launch_mla=True),
    _A("LagunaForCausalLM", hybrid_swa=_SWA_IF_WINDOW, swa_layer_split=SWALayerSplit.LAYER_TYPES),
    _A("Lfm2ForCausalLM", mamba_radix=True, mamba_extra_buffer=False),
    _A("Lfm2MoeForCausalLM", mamba_radix=True, mamba_extra_buffer=False),
    _A(
        "Llama4ForCausalLM",
        launch_hybrid_swa=True,
        launch_backend_rule=LaunchBackendRule.LLAMA4,
        launch_backend_check=LaunchBackendCheck.LLAMA4,
        releases=(("hybrid_swa_listed", "0.5.8", None),),
    ),
    _A(
        "Llama4ForConditionalGeneration",
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.EVERY_FOURTH_FULL,
        launch_hybrid_swa=True,
        multimodal_opt_in=True,
        launch_backend_rule=LaunchBackendRule.LLAMA4,
        launch_backend_check=LaunchBackendCheck.LLAMA4,
        releases=(("hybrid_swa_listed", "0.5.8", None),),
    ),
    _A("LlamaForCausalLM", wide_speculative_defaults=True, lm_head_every_stage=True),
    _A(
        "LongcatFlashForCausalLM",
        attention=_MLA,
        dsa_if_index_topk=True,
        dsa_cli_factor=True,
        pp_layers_per_layer=2,
        mla_forced_head_dim=256,
        launch_mla=True,
        launch_deepseek_family=True,
    ),
    _A(
        "LongcatFlashForCausalLMNextN",
        attention=_MLA,
        dsa_if_index_topk=True,
        dsa_cli_factor=True,
        pp_layers_per_layer=2,
        mla_forced_head_dim=256,
        is_draft=True,
    ),
    _A(
        "MellumForCausalLM",
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.LAYER_TYPES,
        swa_window=SWAWindow.INCLUSIVE_MINUS_ONE,
    ),
    _A(
        "MiMoV2FlashForCausalLM",
        draft_num_layers=1,
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.HYBRID_LAYER_PATTERN,
        draft_architecture="MiMoV2MTP",
        swa_compress=True,
        launch_hybrid_swa=True,
        launch_backend_rule=LaunchBackendRule.MIMO_V2,
        skips_block_check=frozenset({"qkv_proj"}),
        router_fp32=True,
        eagle_spec_v2=True,
    ),
    _A(
        "MiMoV2ForCausalLM",
        draft_num_layers=1,
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.HYBRID_LAYER_PATTERN,
        draft_architecture="MiMoV2MTP",
        swa_compress=True,
        launch_hybrid_swa=True,
        launch_backend_rule=LaunchBackendRule.MIMO_V2,
        skips_block_check=frozenset({"qkv_proj"}),
        router_fp32=True,
    ),
    _A("MiMoV2MTP", hybrid_swa=_SWA, swa_layer_split=SWALayerSplit.DRAFT_ONE_SWA, swa_compress=True, is_draft=True),
    _A("MiniCPM3ForCausalLM", attention=_MLA, mla_forced_head_dim=128, launch_mla=True),
    _A(
        "MiniMaxM2ForCausalLM",
        moe_block="block_sparse_moe",
        router_fp32=True,
        sm100_trtllm_routed_moe=frozenset({"modelopt_fp4"}),
        releases=(("sm100_moe_override", "0.5.18", None),),
    ),
    _A("MiniMaxM3SparseForCausalLM", minimax_sparse=True, releases=(("piecewise_multimodal", "0.5.16", "0.5.21"),)),
    _A(
        "MiniMaxM3SparseForConditionalGeneration",
        minimax_sparse=True,
        releases=(("piecewise_multimodal", "0.5.16", "0.5.21"),),
    ),
    _A("MistralForCausalLM", lm_head_every_stage=True),
    _A(
        "MistralLarge3ForCausalLM",
        sm100_trtllm_moe=_DS_TRTLLM,
        attention=_MLA,
        dsa_if_index_topk=True,
        mla_forced_head_dim=256,
        launch_mla=True,
        launch_deepseek_family=True,
    ),
    _A("MistralLarge3ForCausalLMEagle", attention=_MLA, mla_forced_head_dim=256, is_draft=True),
    _A("MixtralForCausalLM", moe_block="block_sparse_moe", lm_head_every_stage=True),
    _A(
        "MuseGlimmerForCausalLM",
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.LAYER_TYPES,
        swa_window=SWAWindow.INCLUSIVE_MINUS_ONE,
    ),
    # the vendor's multimodal export of the model above (same window rule); on SGLang's breakable
    # multimodal list
    _A(
        "MuseGlimmerForConditionalGeneration",
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.LAYER_TYPES,
        swa_window=SWAWindow.INCLUSIVE_MINUS_ONE,
        breakable_multimodal=True,
        releases=(("breakable_multimodal", "0.5.18", None),),
    ),
    _A(
        "NemotronHForCausalLM",
        draft_num_layers=1,
        linear_attention=LinearAttention.NEMOTRON_H,
        mamba_radix=True,
        launch_backend_rule=LaunchBackendRule.NEMOTRON_H,
        # sglang/srt/models/nemotron_h.py: every decoder layer's one block is self.mixer (NemotronHAttention,
        # MambaMixer2, NemotronHMLP with up_proj / down_proj, NemotronHMoE); hf_to_sglang_mapper backbone. -> model.
        single_block="mixer",
        hf_weight_prefixes=(("backbone.", "model."),),
    ),
    _A("Olmo2ForCausalLM", hybrid_swa_memory_off=SWAMemoryOff.ALWAYS),
    _A("Olmo3ForCausalLM", hybrid_swa_memory_off=SWAMemoryOff.ALWAYS, sglang_model=_FALLBACK),
    _A(
        "PaddleOCRVLForConditionalGeneration",
        breakable_multimodal=True,
        releases=(("breakable_multimodal", "0.5.19", None),),
    ),
    _A("Phi3ForCausalLM"),
    _A(
        "PixtralForConditionalGeneration",
        sm100_trtllm_moe=_DS_TRTLLM,
        attention=Attention.MLA_IF_LORA,
        dsa_if_index_topk=True,
        mla_forced_head_dim=256,
        launch_deepseek_family=True,
    ),
    _A("Qwen2ForCausalLM"),
    _A("Qwen3ForCausalLM"),
    _A(
        "Qwen3MoeForCausalLM",
        draft_num_layers=1,
        sm100_trtllm_moe=_QWEN_TRTLLM,
        lm_head_every_stage=True,
        releases=(("draft_renamed", "0.5.13", None), ("sm100_moe_override", "0.5.6", None)),
    ),
    _A(
        "Qwen3NextForCausalLM",
        piecewise_graph_off=True,
        sm100_trtllm_moe=_QWEN_TRTLLM,
        draft_num_layers=1,
        linear_attention=LinearAttention.GDN,
        mamba_radix=True,
        launch_backend_rule=LaunchBackendRule.QWEN3_NEXT,
        releases=(("sm100_moe_override", "0.5.6", None), ("lm_head_fp32", None, "0.5.5")),
    ),
    _A(
        "Qwen3_5ForCausalLM",
        draft_num_layers=1,
        linear_attention=LinearAttention.GDN,
        mamba_radix=True,
        launch_backend_rule=LaunchBackendRule.QWEN3_NEXT,
        releases=(("mamba_extra_buffer", "0.5.19", None),),
    ),
    _A(
        "Qwen3_5ForConditionalGeneration",
        sm100_trtllm_moe=_QWEN_TRTLLM,
        draft_num_layers=1,
        linear_attention=LinearAttention.GDN,
        mamba_radix=True,
        breakable_multimodal=True,
        launch_backend_rule=LaunchBackendRule.QWEN3_NEXT,
    ),
    _A(
        "Qwen3_5MoeForCausalLM",
        draft_num_layers=1,
        linear_attention=LinearAttention.GDN,
        mamba_radix=True,
        launch_backend_rule=LaunchBackendRule.QWEN3_NEXT,
        releases=(("mamba_extra_buffer", "0.5.19", None),),
    ),
    _A(
        "Qwen3_5MoeForConditionalGeneration",
        sm100_trtllm_moe=_QWEN_TRTLLM,
        draft_num_layers=1,
        linear_attention=LinearAttention.GDN,
        mamba_radix=True,
        breakable_multimodal=True,
        launch_backend_rule=LaunchBackendRule.QWEN3_NEXT,
    ),
    _A("SarvamMLAForCausalLM", attention=_MLA, launch_mla=True),
    _A("Step3VLForConditionalGeneration", multimodal_opt_in=True),
    _A(
        "Step3p5ForCausalLM",
        draft_num_layers=1,
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.LAYER_TYPES_CAPPED,
        draft_architecture="Step3p5MTP",
        eagle_spec_v2=True,
    ),
    _A("Step3p5MTP", hybrid_swa=_SWA, swa_layer_split=SWALayerSplit.DRAFT_ONE_SWA, is_draft=True),
    _A(
        "Step3p7ForConditionalGeneration",
        draft_num_layers=1,
        hybrid_swa=_SWA,
        swa_layer_split=SWALayerSplit.LAYER_TYPES_CAPPED,
        draft_architecture="Step3p5MTP",
    ),
    _A("UnlimitedOCRForCausalLM", hybrid_swa=_SWA, swa_layer_split=SWALayerSplit.ALL_SWA),
    _A("WhisperForConditionalGeneration", audio_encoder_decoder=True),
    _A("ZayaForCausalLM", mamba_radix=True, mamba_extra_buffer=False),
)

# ---- the model-type rows --------------------------------------------------------------------
MODEL_TYPES: tuple[ModelType, ...] = (
    # config classes transformers 5.12.1 (SGLang's pin up to 0.5.21) does not have; SGLang's own
    # sglang/srt/configs/muse_glimmer.py registers muse_glimmer from 0.5.18; transformers 5.8.1
    # (0.5.14's pin) lacks diffusion_gemma, gemma4_unified(_assistant) and unlimited-ocr too; transformers 5.3.0
    # (0.5.10's pin) lacks gemma4, gemma4_text and gemma4_assistant
    _M("mimo_v2_flash", first_release="0.5.22"),
    # SGLang 0.5.12 registers these as DeepseekV3Config aliases (utils/hf_transformers/common.py _CONFIG_REGISTRY)
    _M("deepseek_v4", first_release="0.5.12", vllm_rope_float32=True),
    # SGLang 0.5.3 loads deepseek_v32 as deepseek_v3 (hf_transformers_utils._load_deepseek_v32_model); 0.5.2 does not
    _M("deepseek_v32", first_release="0.5.3", vllm_default_experts=256),
    _M("deepseek_v3", vllm_default_experts=256),
    # transformers 4.57.1 (0.5.9's pin) has neither, and SGLang 0.5.9 registers no config class for them
    _M("minimax_m2", first_release="0.5.10"),
    _M("glm_moe_dsa", first_release="0.5.10"),
    _M("kimi_k2", first_release="0.5.12"),
    _M("muse_glimmer", first_release="0.5.18"),
    _M("unlimited-ocr", first_release="0.5.15", all_sliding=True),
    # transformers 5.8.1's config classes whose head_dim defaults to None (MixtralConfig().head_dim)
    _M("mixtral", head_dim_none_default=True),
    _M("mistral", head_dim_none_transformers4=True),
    _M("ministral", head_dim_none_default=True),
    _M("minimax", head_dim_none_default=True),
    _M("hunyuan_v1_dense", head_dim_none_default=True),
    _M("hunyuan_v1_moe", head_dim_none_default=True),
    _M("dbrx", kv_heads_in_attn_config=True),
    # SGLang's own ChatGLMConfig (sglang/srt/configs/chatglm.py): attribute_map num_hidden_layers -> num_layers and
    # n_head_kv -> multi_query_group_num, vocab_size = padded_vocab_size, max_position_embeddings = seq_length;
    # sglang/srt/models/chatglm.py GLMAttention: query_key_value bias = add_bias_linear or add_qkv_bias, dense bias =
    # add_bias_linear (false in every published ChatGLM2/3 and GLM-4 config)
    _M(
        "chatglm",
        config_aliases=(("num_hidden_layers", "num_layers"), ("n_head_kv", "multi_query_group_num"),
                        ("vocab_size", "padded_vocab_size"), ("max_position_embeddings", "seq_length"),
                        ("attention_bias", "add_qkv_bias")),
        o_proj_bias=False,
    ),  # fmt: skip
    _M("deepseek_v41", dsv4_swa_ratio_override=False, first_release="0.5.21"),
    # EXAONE 3 / 3.5: SGLang's own ExaoneConfig (sglang/srt/configs/exaone.py): attribute_map num_hidden_layers ->
    # num_layers, tie_word_embeddings defaults to True
    _M(
        "exaone",
        config_aliases=(("num_hidden_layers", "num_layers"),),
        weight_defaults=(("tie_word_embeddings", True),),
    ),
    _M("diffusion_gemma", gemma4_kv_heads=Gemma4KVHeads.GLOBAL_OR_SLIDING, first_release="0.5.15"),
    _M("embedding_gemma2", gemma4_kv_heads=Gemma4KVHeads.GLOBAL_OR_ONE, max_context_len=8192, first_release="0.5.22"),
    _M(
        "falcon",
        geometry_defaults=(("max_position_embeddings", 2048),),
        weight_defaults=(("tie_word_embeddings", True),),
        multi_query_unless_new_decoder=True,
        layernorm_bias=True,
        gated_mlp=False,
    ),
    _M("falcon_h1", linear_attention=LinearAttention.FALCON_H1),
    _M("gemma", weight_defaults=(("tie_word_embeddings", True),)),
    _M(
        "gemma2",
        geometry_defaults=(("max_position_embeddings", 8192),),
        weight_defaults=(("tie_word_embeddings", True),),
        norms_per_layer=4,
    ),
    _M("gemma3", norms_per_layer=4, qk_norm=True, rope_per_layer_type=True, replicated_embedding=True),
    _M(
        "gemma3_text",
        rope_per_layer_type=True,
        replicated_embedding=True,
        geometry_defaults=(("max_position_embeddings", 131072), ("sliding_window_pattern", 6)),
        weight_defaults=(("vocab_size", 262208), ("tie_word_embeddings", True)),
        launch_context_default=131072,
        norms_per_layer=4,
        qk_norm=True,
    ),
    _M("gemma3n", norms_per_layer=4, qk_norm=True),
    _M("gemma3n_text", norms_per_layer=4, qk_norm=True),
    _M("gemma4", gemma4_kv_heads=Gemma4KVHeads.GLOBAL_IF_K_EQ_V, first_release="0.5.11"),
    _M("gemma4_assistant", gemma4_kv_heads=Gemma4KVHeads.SLIDING, first_release="0.5.11"),
    _M("gemma4_text", gemma4_kv_heads=Gemma4KVHeads.GLOBAL_IF_K_EQ_V, first_release="0.5.11"),
    _M("gemma4_unified", gemma4_kv_heads=Gemma4KVHeads.GLOBAL_IF_K_EQ_V, first_release="0.5.15"),
    _M("gemma4_unified_assistant", gemma4_kv_heads=Gemma4KVHeads.SLIDING, first_release="0.5.15"),
    _M("glm4_moe", o_proj_bias=False, moe_router_bias=True),
    _M("glm4_moe_lite", moe_router_bias=True),
    _M("gpt_oss", attention_sinks=True, moe_expert_bias=True, vllm_rope_float32=True),
    _M("jamba", linear_attention=LinearAttention.JAMBA),
    # Grok-2's config.json names model_type "git"; Grok1DecoderLayer has four RMSNorms
    # (pre/post attention, pre/post MoE: sglang/srt/models/grok.py)
    _M("git", norms_per_layer=4),
    # configs.kimi_k25.KimiK25VisionConfig
    _M("kimi_k25", vision_config_defaults=(("num_hidden_layers", 27), ("hidden_size", 1152)), first_release="0.5.9"),
    # SGLang 0.5.5 registers the Kimi-Linear config class (transformers 4.57.1 has none)
    _M("kimi_linear", linear_attention=LinearAttention.KIMI_LINEAR, first_release="0.5.5"),
    _M("llama4_text", qk_norm_weightless=True, moe_shared_expert=True),
    # LLaVA-1.5 (llava-hf): LlavaConfig builds its text_config with CONFIG_MAPPING[model_type](**text_config), its
    # model_type "llama" by default (transformers/models/llava/configuration_llava.py LlavaConfig.__post_init__);
    # llava-1.5-7b-hf's text_config names only what differs from LlamaConfig's defaults
    _M("llava", nested_defaults=(("llama", LLAMA_CONFIG_DEFAULTS),)),
    _M("mpt", kv_heads_in_attn_config=True),
    _M(
        "nemotron_h",
        linear_attention=LinearAttention.NEMOTRON_H,
        norms_per_layer=1,
        first_release="0.5.4",
        derived_fields=(("num_hidden_layers", nemotron_h_num_layers), ("hybrid_override_pattern", nemotron_h_pattern)),
    ),
    # MiniCPM3's remote-code config class: tie_word_embeddings is PretrainedConfig's default True (MiniCPM3-4B's
    # config.json names none; sglang/srt/models/minicpm3.py MiniCPM3ForCausalLM then has no lm_head of its own);
    # the V width is the model class's own (minicpm3_v_head_dim)
    _M(
        "minicpm3",
        derived_fields=(("v_head_dim", minicpm3_v_head_dim),),
        weight_defaults=(("tie_word_embeddings", True),),
    ),
    _M("olmo2", qk_norm=True),
    # Phi-3-small (remote-code Phi3SmallConfig: intermediate_size is ff_intermediate_size, tie_word_embeddings the
    # PretrainedConfig default True); sglang/srt/models/phi3_small.py: two LayerNorms with bias per layer and a final
    # one, query_key_value and dense with bias, the gegelu MLP's up_proj (2 I) and down_proj with bias, lm_head tied
    # unless tie_word_embeddings is false
    _M(
        "phi3small",
        weight_defaults=(("tie_word_embeddings", True),),
        config_aliases=(("intermediate_size", "ff_intermediate_size"),),
        norms_per_layer=4,
        layernorm_bias=True,
        qkv_bias=True,
        mlp_bias=True,
    ),
    _M("qwen2", qkv_bias=True, o_proj_bias=False),
    _M("qwen2_moe", qkv_bias=True, o_proj_bias=False),
    _M("qwen3", qk_norm=True),
    # SGLang 0.5.9 registers the Qwen3.5 and Kimi-K2.5 config classes (transformers 4.57.1 has none)
    _M("qwen3_5", linear_attention=_GDN, qk_norm=True, first_release="0.5.9"),
    _M("qwen3_5_moe", linear_attention=_GDN, qk_norm=True, first_release="0.5.9"),
    _M("qwen3_5_moe_text", linear_attention=_GDN, qk_norm=True),
    _M("qwen3_5_text", linear_attention=_GDN, qk_norm=True),
    _M("qwen3_moe", qk_norm=True),
    # SGLang 0.5.2 registers its Qwen3NextConfig (transformers 4.55.2, 0.5.1's pin, has none)
    _M("qwen3_next", linear_attention=_GDN, attn_output_gate=True, qk_norm=True, first_release="0.5.2"),
    _M("qwen2_5_vl", vision_gated_mlp=True),
    # transformers 4.57.0 (SGLang 0.5.3's pin) has the Qwen3-VL config classes; 4.56.1 (0.5.2's) does not
    _M("qwen3_vl", qk_norm=True, large_hopper_vl_overrides=True, first_release="0.5.3"),
    _M("qwen3_vl_moe", qk_norm=True, large_hopper_vl_overrides=True, first_release="0.5.3"),
)

#: SGLang 0.5.7's ``utils.common.is_fa3_default_architecture``: the MHA models that default to fa3 on Hopper (from 0.5.8
#: every MHA model does)
FA3_DEFAULT_ARCHITECTURES_0_5_7: frozenset[str] = frozenset({
    "Llama4ForConditionalGeneration", "LlamaForCausalLM", "Olmo2ForCausalLM", "Gemma2ForCausalLM",
    "Gemma3ForConditionalGeneration", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
    "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration", "Glm4MoeForCausalLM",
    "Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration", "Step3VLForConditionalGeneration",
})  # fmt: skip
#: the ones 0.5.7 added to that list (0.5.6's has no Qwen3-VL and no dense GLM-4V)
FA3_DEFAULT_ADDED_0_5_7: frozenset[str] = frozenset({
    "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration", "Glm4vForConditionalGeneration",
})  # fmt: skip
#: SGLang 0.5.7's ``server_args.auto_choose_speculative_params``: the models taking the narrow EAGLE auto parameters
#: (3, 1, 4), every other the wide (5, 4, 8); from 0.5.8 the narrow ones are the default
NARROW_SPECULATIVE_ARCHITECTURES_0_5_7: frozenset[str] = frozenset({
    "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM", "GptOssForCausalLM",
    "Glm4MoeForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM", "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration", "MiMoV2FlashForCausalLM",
})  # fmt: skip
#: the ones 0.5.7 added to that list (0.5.6's holds DeepSeek-V2 / V3 / V3.2, GPT-OSS and Bailing only)
NARROW_SPECULATIVE_ADDED_0_5_7: frozenset[str] = frozenset({
    "Glm4MoeForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "MiMoV2FlashForCausalLM",
})  # fmt: skip

_BY_NAME: dict[str, Architecture] = {row.name: row for row in ARCHITECTURES}
_BY_MODEL_TYPE: dict[str, ModelType] = {row.name: row for row in MODEL_TYPES}
_PLAIN_MODEL_TYPE = ModelType("")


def is_served(name: str) -> bool:
    """True when ``name`` is an architecture SGLang 0.5.23 serves (natively or through its
    Transformers backend) that this table knows."""
    row = _BY_NAME.get(name)
    return row is not None and row.sglang_model not in (SGLangModel.RULE_ONLY, SGLangModel.TRANSFORMERS_INCOMPATIBLE)


def transformers_incompatible(name: str) -> bool:
    """True when SGLang has no class for ``name`` and refuses its transformers class
    (:attr:`SGLangModel.TRANSFORMERS_INCOMPATIBLE`)."""
    row = _BY_NAME.get(name)
    return row is not None and row.sglang_model is SGLangModel.TRANSFORMERS_INCOMPATIBLE


def holds_in(row: Architecture, fact: str, release: EngineRelease) -> bool:
    """``fact`` of ``row`` in ``release``: its ``releases`` span when it lists the fact, else the
    row's field (``False`` for ``piecewise_multimodal``)."""
    for name, first, last in row.releases:
        if name == fact:
            return release in span(first, last)
    return bool(getattr(row, fact, False))


@cache
def names_holding(fact: str, release: EngineRelease) -> frozenset[str]:
    """The architecture names whose row has ``fact`` in ``release`` (:func:`holds_in`)."""
    return names_where(lambda row: holds_in(row, fact, release))


#: where SGLang holds a row fact that changed between releases, where it is not an allow-list
_FACT_SOURCES = {
    "router_fp32": "the model class's router (sglang.srt.models.glm4_moe.Glm4MoeGate: float32 from 0.5.19)",
    "lm_head_fp32": "sglang.srt.models.qwen3_next.Qwen3NextForCausalLM.__init__ (lm_head.float() up to 0.5.5)",
    "sm100_moe_override": "the model's SM100 MoE-runner override (ServerArgs._handle_model_specific_adjustments; "
    "arg_groups.overrides from 0.5.15)",
    "sm100_moe_flag_only": "ServerArgs._handle_model_specific_adjustments (DeepseekV3ForCausalLM: the given "
    "--quantization only, up to 0.5.4)",
}
#: one release rule per row fact limited to some releases, so release listings name them
_ROW_RULES = tuple(
    ReleaseRule(f"{fact}:{row.name}", span(first, last), f"{row.name} has {fact}",
                _FACT_SOURCES.get(fact, "sglang.srt.configs.model_config / arg_groups.overrides allow-lists"),
                topic="models")
    for row in ARCHITECTURES
    for fact, first, last in row.releases
)  # fmt: skip


def row_for(name: str) -> Architecture | None:
    """The row of one architecture name, None when the table does not know it."""
    return _BY_NAME.get(name)


def rows_for(architectures: Iterable[str]) -> tuple[Architecture, ...]:
    """The known rows of a config's ``architectures`` list, in its order (unknown names skipped)."""
    return tuple(_BY_NAME[name] for name in architectures if name in _BY_NAME)


def first_row(architectures: Iterable[str]) -> Architecture | None:
    """The row of the first known entry of ``architectures`` (None when none is known)."""
    rows = rows_for(architectures)
    return rows[0] if rows else None


def any_row(architectures: Iterable[str], predicate: Callable[[Architecture], bool]) -> bool:
    """True when some known entry of ``architectures`` satisfies ``predicate``."""
    return any(predicate(row) for row in rows_for(architectures))


def names_where(predicate: Callable[[Architecture], bool]) -> frozenset[str]:
    """The architecture names whose row satisfies ``predicate``."""
    return frozenset(row.name for row in ARCHITECTURES if predicate(row))


def model_type_row(name: object) -> ModelType:
    """The row of an HF ``model_type``; a row of defaults when the table does not know it."""
    return _BY_MODEL_TYPE.get(str(name), _PLAIN_MODEL_TYPE) if name is not None else _PLAIN_MODEL_TYPE


def with_config_aliases(text: Mapping[str, Any]) -> Mapping[str, Any]:
    """``text`` with the fields its model type's config class fills from other config.json names
    (:attr:`ModelType.config_aliases`, e.g. ChatGLM's ``num_layers``) set where absent, then the fields
    it computes from others (:attr:`ModelType.derived_fields`, e.g. Nemotron-H's layer count from
    ``layers_block_type``) set wherever their rule gives a value; ``text`` itself when none applies."""
    row = model_type_row(text.get("model_type"))
    aliases = row.config_aliases
    found = {field: text[name] for field, name in aliases if text.get(field) is None and text.get(name) is not None}
    merged = {**text, **found} if found else text
    derived = {field: value for field, rule in row.derived_fields if (value := rule(merged)) is not None}
    return {**merged, **derived} if derived else merged


def with_nested_defaults(root: Mapping[str, Any], nested: Mapping[str, Any]) -> Mapping[str, Any]:
    """``root``'s nested ``text_config`` as the wrapper's config class builds it: the config-class defaults
    of the nested model type (:attr:`ModelType.nested_defaults` of ``root``'s model type) for the fields it
    omits; ``nested`` itself when none applies."""
    by_type = dict(model_type_row(root.get("model_type")).nested_defaults)
    defaults = by_type.get(str(nested.get("model_type")), ())
    missing = {field: value for field, value in defaults if nested.get(field) is None}
    return {**nested, **missing} if missing else nested


def require_loadable(model_type: str, release: EngineRelease) -> None:
    """Refuse a config that ``release`` cannot load (``ModelConfig`` -> transformers ``AutoConfig``)."""
    first = model_type_row(model_type).first_release
    if first is None or parse_release(first) <= release:
        return
    raise UnsupportedConfigurationError(
        f"{release.label} cannot load a config.json of model_type {model_type!r}: neither its transformers "
        f"{SGLANG_TRANSFORMERS.at(release)} nor SGLang's own config registry knows it "
        f"(sglang.srt.configs.model_config.ModelConfig -> AutoConfig); SGLang loads it from {first} on "
        f"(--sglang-version {first})"
    )


#: a config whose class leaves ``head_dim`` None gets ``v_head_dim = head_dim`` once head_dim is derived; before,
#: ``v_head_dim`` stays None and sizing fails (``head_dim + v_head_dim``)
#: the MHA cell prices ``head_dim + v_head_dim`` (``v_head_dim`` defaulting to ``head_dim``); before, ``2 x head_dim``,
#: so a config whose ``v_head_dim`` stays None is sized
CELL_READS_V_HEAD_DIM = ReleaseRule(
    "cell-reads-v-head-dim",
    span("0.5.7"),
    "the MHA cell prices head_dim + v_head_dim (before: 2 x head_dim; v_head_dim is not read, so a config whose "
    "v_head_dim stays None is sized)",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin.get_cell_size_per_token "
    "(0.5.6: ModelRunner.profile_max_num_token)",
    topic="models",
)
V_HEAD_DIM_AFTER_HEAD_DIM = ReleaseRule(
    "v-head-dim-after-head-dim",
    span("0.5.14"),
    "a config without head_dim whose transformers class defaults it to None (Mixtral) is sized "
    "(before: v_head_dim stays None and SGLang raises TypeError)",
    "sglang.srt.configs.model_config.ModelConfig._derive_model_shapes; "
    "model_executor.pool_configurator.DefaultPoolConfigurator._compute_cell_size",
    topic="models",
)


def require_head_dim(config: Mapping[str, Any], release: EngineRelease) -> None:
    """Refuse a config that ``release`` cannot size because its ``v_head_dim`` stays None
    (:data:`V_HEAD_DIM_AFTER_HEAD_DIM`; 0.5.6 does not read it: :data:`CELL_READS_V_HEAD_DIM`)."""
    nested = config.get("text_config")
    text: Mapping[str, Any] = nested if isinstance(nested, Mapping) else config
    if V_HEAD_DIM_AFTER_HEAD_DIM.holds(release) or text.get("head_dim") is not None:
        return
    if not CELL_READS_V_HEAD_DIM.holds(release):  # 0.5.6 prices 2 x head_dim and never reads v_head_dim
        return
    model_type = text.get("model_type", config.get("model_type"))
    row = model_type_row(model_type)
    transformers4 = SGLANG_TRANSFORMERS.at(release).startswith("4.")
    if not (row.head_dim_none_default or (row.head_dim_none_transformers4 and transformers4)):
        return
    raise UnsupportedConfigurationError(
        f"{release.label} cannot size a {model_type!r} config.json without head_dim: its transformers "
        f"{SGLANG_TRANSFORMERS.at(release)} leaves head_dim None, so ModelConfig._derive_model_shapes sets "
        "v_head_dim None and DefaultPoolConfigurator._compute_cell_size raises TypeError "
        f"(sglang.srt.configs.model_config); SGLang sizes it from {V_HEAD_DIM_AFTER_HEAD_DIM.span.describe()}: "
        "add head_dim (hidden_size // num_attention_heads) to the config or pick a later --sglang-version"
    )


def known_model_types() -> frozenset[str]:
    return frozenset(_BY_MODEL_TYPE)


def served_listing() -> list[dict[str, str | bool]]:
    """One entry per served architecture, sorted by name (``kvstrategies architectures``)."""
    return [
        {"name": row.name, "family": row.family, "sglang_model": row.sglang_model.value, "draft": row.is_draft}
        for row in sorted(ARCHITECTURES, key=lambda r: r.name)
        if is_served(row.name)
    ]


__all__ = [
    "ARCHITECTURES",
    "MODEL_TYPES",
    "Architecture",
    "Attention",
    "Gemma4KVHeads",
    "HybridSWAGate",
    "LaunchBackendCheck",
    "LaunchBackendRule",
    "LinearAttention",
    "ModelType",
    "SWALayerSplit",
    "SWAMemoryOff",
    "SWAWindow",
    "SGLangModel",
    "any_row",
    "first_row",
    "FA3_DEFAULT_ADDED_0_5_7",
    "FA3_DEFAULT_ARCHITECTURES_0_5_7",
    "NARROW_SPECULATIVE_ADDED_0_5_7",
    "NARROW_SPECULATIVE_ARCHITECTURES_0_5_7",
    "holds_in",
    "is_served",
    "known_model_types",
    "model_type_row",
    "names_holding",
    "names_where",
    "row_for",
    "rows_for",
    "served_listing",
]


# ---- vLLM's model code, where the vLLM strategies read it -----------------------------------------


@dataclass(frozen=True)
class VLLMModelRule:
    """Where vLLM 0.33.0's model code (``vllm/model_executor/models``) decides a KV cache fact itself.

    ``sliding_layers``: ``"even"`` (Gemma-2: even layers slide) or ``"not_every_sixth"`` (Gemma-3:
    ``(i + 1) % 6 != 0``); ``kv_in_model_dtype``: attention built without the cache config, so the KV
    keeps the model dtype (Falcon's rotary attention); ``ssm_dtype``: the model's config hook for the
    Mamba SSM state (``"float32"``: NemotronH's default, ``"config"``: Qwen3.5's ``mamba_ssm_dtype``);
    ``mm_prefix``: multimodal prefix attention, which only Triton attention accepts (Gemma-3);
    ``unregistered``: transformers 5.20 (vLLM's pin) registers no config class for it;
    ``transformers_4_refuses``: transformers 4 registers no config class for it and vLLM's own registry lists none
    either, so a release pinning transformers 4 refuses the config (``vllm/transformers_utils/config.py get_config``;
    the rule ``vllm-transformers-4-configs``: vLLM 0.18.1);
    ``vllm_registry_from``: the first vLLM release whose own ``_CONFIG_REGISTRY`` reads the config (Kimi-K2 as
    ``DeepseekV3Config`` from 0.18.1); a release before it pinning transformers 4 refuses the config as for
    ``transformers_4_refuses`` (``vllm/transformers_utils/config.py _CONFIG_REGISTRY``; vLLM 0.17.1);
    ``cache_config_from``: the first vLLM release whose model code hands its attention the cache
    config; before it the KV keeps the model dtype whatever ``--kv-cache-dtype`` says (MiMo-V2:
    ``vllm/model_executor/models/mimo_v2.py MiMoV2DecoderLayer.__init__`` from 0.32.0);
    ``bf16_cache_is_auto``: ``--kv-cache-dtype bfloat16`` becomes ``auto`` (DeepSeek-V3.2:
    ``vllm/model_executor/models/config.py DeepseekV32ForCausalLM.verify_and_update_config``);
    ``fp8_cache_is_ds_mla``: there, in the releases of the rule ``vllm-dsa-fp8-ds-mla-cache`` (0.17.1), any fp8
    cache becomes ``fp8_ds_mla`` (FlashMLA's sparse layout, 656 bytes a token);
    ``sm100_fp8_cache_from``: from this vLLM release ``auto`` becomes ``fp8_e4m3`` on SM 10.x (GLM-5:
    ``GlmMoeDsaForCausalLM.verify_and_update_config``); ``diffkv_backend``: the model's attention asks
    for a DIFFKV backend when V is narrower than K (MiMo-V2: ``mimo_v2.py MiMoV2Attention.__init__``);
    ``mtp_draft``: ``--speculative-config`` method ``mtp`` builds the model's MTP layers as ``n_predict``
    layers of its full-attention kind (``vllm/config/speculative.py SpeculativeConfig.hf_config_override``:
    DeepSeekMTPModel, Glm4MoeMTPModel, Qwen3NextMTP, Qwen3_5MTP), or of its sliding-window kind
    (``"sliding"``: MiMoV2MTPModel, ``vllm/model_executor/models/mimo_v2_mtp.py``), which the vLLM strategies
    model; ``mtp_draft_from``: the first vLLM release that maps the model type to its MTP draft (before it,
    ``SpeculativeConfig`` raises "Unsupported speculative method: 'mtp'"); ``own_sliding_kv_heads``: the model
    class builds its sliding-window layers with KV heads of their own (``mimo_v2.py MiMoV2DecoderLayer.__init__``:
    ``swa_num_key_value_heads``; ``gemma4.py``: the sliding layers' ``num_key_value_heads`` beside the global
    ones); any other model's sliding layers take its KV heads, whatever ``swa_num_key_value_heads`` says (SGLang
    reads it for every model); ``config_state_without_lookahead``: before the rule
    ``vllm-hybrid-config-state-lookahead`` (0.32.0) the model class's config-level Mamba state leaves out the
    speculative lookahead (``falcon_h1.py FalconH1ForCausalLM.get_mamba_state_shape_from_config``: no ``num_spec``),
    so the hybrid block and the state padding are sized without it.
    """

    sliding_layers: str | None = None
    kv_in_model_dtype: bool = False
    cache_config_from: str | None = None
    bf16_cache_is_auto: bool = False
    fp8_cache_is_ds_mla: bool = False
    sm100_fp8_cache_from: str | None = None
    diffkv_backend: bool = False
    ssm_dtype: str | None = None
    mm_prefix: bool = False
    unregistered: bool = False
    transformers_4_refuses: bool = False
    vllm_registry_from: str | None = None
    mtp_draft: bool | str = False
    mtp_draft_from: str | None = None
    own_sliding_kv_heads: bool = False
    config_state_without_lookahead: bool = False
    #: the first vLLM release whose model class builds the model; before it vLLM fails while building it with
    #: ``vllm_build_error`` (Kimi-Linear in 0.12.0: its MLA layers' ``MLAModules`` take an ``indexer_rotary_emb``
    #: its model code does not pass)
    vllm_builds_from: str | None = None
    vllm_build_error: str | None = None


_GEMMA3_VLLM = VLLMModelRule(sliding_layers="not_every_sixth", mm_prefix=True)
_QWEN35_VLLM = VLLMModelRule(ssm_dtype="config", mtp_draft=True)
#: vLLM's own config registry reads qwen3_5 / qwen3_5_moe from 0.17.1 (``Qwen3_5Config``, ``Qwen3_5MoeConfig``)
_QWEN35_VLLM_REGISTERED = VLLMModelRule(ssm_dtype="config", mtp_draft=True, vllm_registry_from="0.17.1")
VLLM_MODEL_RULES: dict[str, VLLMModelRule] = {
    "gemma2": VLLMModelRule(sliding_layers="even"),
    "gemma3": _GEMMA3_VLLM,
    "gemma3_text": _GEMMA3_VLLM,
    "falcon": VLLMModelRule(kv_in_model_dtype=True),
    "mimo_v2_flash": VLLMModelRule(cache_config_from="0.32.0", diffkv_backend=True, mtp_draft="sliding",
                                   mtp_draft_from="0.21.0", transformers_4_refuses=True, own_sliding_kv_heads=True),
    "deepseek_v3": VLLMModelRule(mtp_draft=True),
    "kimi_k2": VLLMModelRule(vllm_registry_from="0.18.1"),
    # vLLM 0.11.0 lists no kimi_linear config (vllm/transformers_utils/config.py _CONFIG_REGISTRY) nor model class
    "kimi_linear": VLLMModelRule(vllm_registry_from="0.12.0", vllm_builds_from="0.13.0",
                                 vllm_build_error="TypeError: MLAModules.__init__() missing 1 required positional "
                                 "argument: 'indexer_rotary_emb'"),
    "deepseek_v32": VLLMModelRule(bf16_cache_is_auto=True, fp8_cache_is_ds_mla=True, mtp_draft=True),
    "glm4_moe": VLLMModelRule(mtp_draft=True),
    "glm_moe_dsa": VLLMModelRule(sm100_fp8_cache_from="0.32.0", mtp_draft=True, transformers_4_refuses=True),
    "qwen3_next": VLLMModelRule(mtp_draft=True),
    "falcon_h1": VLLMModelRule(config_state_without_lookahead=True),
    "nemotron_h": VLLMModelRule(ssm_dtype="float32", transformers_4_refuses=True),
    "qwen3_5": _QWEN35_VLLM_REGISTERED,
    "qwen3_5_text": _QWEN35_VLLM,
    "qwen3_5_moe": _QWEN35_VLLM_REGISTERED,
    "qwen3_5_moe_text": _QWEN35_VLLM,
    "muse_glimmer": VLLMModelRule(unregistered=True, transformers_4_refuses=True),
    "minimax_m3": VLLMModelRule(unregistered=True, transformers_4_refuses=True),
    "minimax_m2": VLLMModelRule(transformers_4_refuses=True),
    "deepseek_v4": VLLMModelRule(transformers_4_refuses=True, mtp_draft=True),
    "gemma4": VLLMModelRule(transformers_4_refuses=True, own_sliding_kv_heads=True),
    "gemma4_text": VLLMModelRule(own_sliding_kv_heads=True),
}


#: the architectures vLLM runs on Model Runner V2 even when MoE (0.24.0: the only ones), per release up to 0.28.0
#: (``vllm/config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES``); from 0.29.0 V2 runs every model
VLLM_V2_RUNNER_ARCHITECTURES: ByRelease[tuple[str, ...]] = ByRelease(
    "vllm-v2-runner-architectures",
    (
        ("0.11.0", ()),  # Model Runner V2 only with VLLM_USE_V2_MODEL_RUNNER=1 (vllm/envs.py)
        ("0.22.1", ("Qwen3ForCausalLM",)),
        ("0.23.0", ("LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM")),
        ("0.24.0", ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "LlamaForCausalLM", "MistralForCausalLM",
                    "Qwen2MoeForCausalLM", "Qwen3ForCausalLM")),
        ("0.25.1", ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "Qwen2MoeForCausalLM")),
        ("0.26.0", ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "InklingForCausalLM",
                    "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM", "Qwen2MoeForCausalLM")),
        ("0.27.1", ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "InklingForCausalLM",
                    "InklingForConditionalGeneration", "KimiK3ForConditionalGeneration", "LongcatFlashNgramForCausalLM",
                    "Qwen2MoeForCausalLM")),
        ("0.28.0", ("DeepseekV2ForCausalLM", "DeepseekV4ForCausalLM", "GraniteMoeForCausalLM", "InklingForCausalLM",
                    "InklingForConditionalGeneration", "KimiK3ForConditionalGeneration", "LongcatFlashNgramForCausalLM",
                    "Qwen2MoeForCausalLM")),
    ),
    "the architectures Model Runner V2 runs by default although MoE (0.24.0: the only ones it runs)",
    "vllm/config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES",
    topic="launch",
    engine=VLLM,
)  # fmt: skip


#: the model types vLLM's ``SpeculativeConfig`` lets an EAGLE3 or DFlash draft run beside
#: (``aux_hidden_states_supported``, 0.20.2 to 0.21.0: ``vllm-aux-hidden-states-model-types``; later releases ask the
#: model class, ``SupportsEagle3``), by the release that set the list
VLLM_AUX_HIDDEN_STATES_MODEL_TYPES: dict[str, tuple[str, ...]] = {
    "0.20.2": ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl", "hunyuan_v1_dense", "afmoe", "nemotron_h",
               "deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25", "minimax_m2", "gemma4"),
    "0.21.0": ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl", "hunyuan_v1_dense", "afmoe", "nemotron_h",
               "deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25", "minimax_m2", "gemma4", "laguna"),
}

#: the model types whose own MLA module records no ``max_tp_shards`` in vLLM 0.31.0
#: (``vllm/models/kimi_k3/nvidia/mla.py``), so a latent EAGLE head's layers, which record 1, form a bucket of their
#: own (``vllm-latent-head-own-bucket``)
VLLM_MLA_WITHOUT_TP_SHARDS = frozenset({"kimi_linear"})


def vllm_model_rule(model_type: str) -> VLLMModelRule:
    """vLLM's rule for ``model_type`` (no rule: the defaults)."""
    return VLLM_MODEL_RULES.get(model_type, VLLMModelRule())
