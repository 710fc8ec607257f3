"""Parse a HuggingFace ``config.json`` dict into a :class:`ModelGeometry`.

The base parser reads what every family shares (layers, KV heads, head dims, MLA dims, DSA
indexer, context length, dtype). Family modules refine the result through
:data:`FAMILY_PARSERS`: each is ``(root, text, geometry) -> geometry`` and returns the geometry
unchanged when the config is not of its family.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..core.dtypes import DType
from ..core.validate import MAX_LAYERS, check_sane_ints
from ..errors import KVCacheConfigError
from .architectures import Attention, any_row, model_type_row, rows_for, with_config_aliases
from .geometry import AttentionArch, DSAGeometry, MLADims, ModelGeometry
from .hf import (
    MAX_CONFIG_INT,
    ConfigDict,
    architectures,
    as_float,
    as_int,
    first_present,
    get_int,
    get_opt_int,
    str_list,
    text_config,
)

FamilyParser = Callable[[ConfigDict, ConfigDict, ModelGeometry], ModelGeometry]

_CONTEXT_KEYS = (
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
    "model_max_length",
    "max_position_embeddings",
)
_MULTIMODAL_KEYS = ("vision_config", "audio_config", "vision_tower", "mm_vision_tower")


def _with_defaults(cfg: ConfigDict) -> dict[str, Any]:
    """The config over its model type's transformers defaults (``ModelType.geometry_defaults``), with the
    fields its config class reads under other names (``ModelType.config_aliases``: ChatGLM's ``num_layers``)."""
    merged = dict(model_type_row(cfg.get("model_type", "")).geometry_defaults)
    merged.update({k: v for k, v in with_config_aliases(cfg).items() if v is not None})
    return merged


def derive_context_len(text: ConfigDict, *, transformers4: bool = False) -> int:
    """First context key, times the rope factor unless the scaling is llama3-style
    (hf_transformers.common.get_context_length); ``transformers4``: as transformers 4 reads the config (SGLang up
    to 0.5.9), which keeps a per-layer-type model's top-level rope factor."""
    factor: float = 1.0
    rope = text.get("rope_scaling")
    if model_type_row(text.get("model_type")).rope_per_layer_type and not transformers4:
        # transformers 5.19 keeps these rope parameters per attention type ({"sliding_attention":
        # ..., "full_attention": ...}): SGLang's get_context_length finds no top-level factor and
        # uses 1 (Gemma 3: 131072, not 8x; checked with the SGLang bridge)
        rope = None
    if isinstance(rope, Mapping) and rope:
        factor = as_float(rope.get("factor", 1) or 1, "rope_scaling.factor", maximum=1e6)
        rope_type = rope.get("rope_type", rope.get("type"))
        if "original_max_position_embeddings" in rope or rope_type == "llama3":
            factor = 1.0
    found = first_present(text, _CONTEXT_KEYS)
    if found is None:
        return 2048
    key, value = found
    context = int(factor * as_int(value, key, minimum=1))
    if not 1 <= context <= MAX_CONFIG_INT:
        raise KVCacheConfigError(
            f"context length {key} x rope_scaling.factor = {as_int(value, key)} x {factor} = {context} is outside "
            f"[1, {MAX_CONFIG_INT}]; fix {key} or rope_scaling.factor in config.json"
        )
    return context


def _context_len_transformers4(text: ConfigDict) -> int | None:
    """:attr:`ModelGeometry.context_len_transformers4`: set only where it differs."""
    if not model_type_row(text.get("model_type")).rope_per_layer_type:
        return None
    old = derive_context_len(text, transformers4=True)
    return old if old != derive_context_len(text) else None


def total_num_kv_heads(text: ConfigDict, num_attention_heads: int) -> int:
    """``get_total_num_kv_heads`` (ModelConfig.get_num_kv_heads), first match wins."""
    conventions = model_type_row(text.get("model_type", ""))
    new_decoder = bool(text.get("new_decoder_architecture", False))
    if text.get("multi_query") is True and not (conventions.multi_query_unless_new_decoder and new_decoder):
        return 1
    attn_config = text.get("attn_config")
    if conventions.kv_heads_in_attn_config and isinstance(attn_config, Mapping):
        kv = attn_config.get("kv_n_heads")
        return num_attention_heads if kv is None else as_int(kv, "attn_config.kv_n_heads", minimum=1)
    found = first_present(
        text, ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num", "num_attention_groups")
    )
    if found is not None:
        return as_int(found[1], found[0], minimum=1)
    return num_attention_heads


def model_dtype_of(root: ConfigDict, text: ConfigDict) -> DType:
    """The serving dtype SGLang picks for ``--dtype auto``: fp32 checkpoints serve in bf16."""
    raw = text.get("torch_dtype") or text.get("dtype") or root.get("torch_dtype") or root.get("dtype")
    if not isinstance(raw, str):
        return DType.BFLOAT16
    try:
        dtype = DType.from_name(raw)
    except KVCacheConfigError:
        return DType.BFLOAT16
    return DType.BFLOAT16 if dtype is DType.FLOAT32 else dtype


def checkpoint_kv_is_fp8(quant: Mapping[str, Any]) -> bool:
    """The checkpoint asks for an FP8 KV cache, so ``--kv-cache-dtype auto`` is FP8 (SGLang's
    ``configure_kv_cache_dtype`` reads the quant config's ``kv_cache_quant_algo``):

    * ``kv_cache_quant_algo: "FP8"``;
    * a ModelOpt flat config (``quant_algo`` set) whose ``kv_cache_scheme`` is an 8-bit float
      (``{"type": "float", "num_bits": 8}``, or the string ``FP8`` / ``FLOAT8``):
      ``sglang.srt.layers.quantization.modelopt_quant.ModelOptFp8Config.from_config`` /
      ``ModelOptFp4Config.from_config``;
    * compressed-tensors with a static, symmetric, per-tensor 8-bit float ``kv_cache_scheme``
      (``compressed_tensors.CompressedTensorsConfig.kv_cache_quant_algo`` via
      ``CompressedTensorsKVCacheMethod.is_supported_scheme``).
    """
    kv_algo = quant.get("kv_cache_quant_algo")
    if isinstance(kv_algo, str):
        return kv_algo.upper() == "FP8"
    scheme = quant.get("kv_cache_scheme")
    if quant.get("quant_algo") is not None and str(quant.get("quant_method", "modelopt")).startswith("modelopt"):
        if isinstance(scheme, str):
            return scheme.strip().upper() in ("FP8", "FLOAT8")
        return isinstance(scheme, Mapping) and scheme.get("type") == "float" and scheme.get("num_bits") == 8
    if quant.get("quant_method") == "compressed-tensors" and isinstance(scheme, Mapping):
        return (scheme.get("type") == "float" and scheme.get("num_bits") == 8 and scheme.get("strategy") == "tensor"
                and scheme.get("symmetric", True) is not False and not scheme.get("dynamic", False))  # fmt: skip
    return False


def _quantization(root: ConfigDict, text: ConfigDict) -> tuple[str | None, bool]:
    quant = text.get("quantization_config") or root.get("quantization_config")
    if not isinstance(quant, Mapping):
        return None, False
    method = quant.get("quant_method") or quant.get("quant_algo")
    return (str(method) if method is not None else None), checkpoint_kv_is_fp8(quant)


def _is_mla(archs: tuple[str, ...], text: ConfigDict) -> bool:
    """SGLang's ``attention_arch`` rule (ModelConfig._derive_model_shapes): any entry whose row's condition holds."""
    for row in rows_for(archs):
        if row.attention is Attention.MLA_UNLESS_DISABLED:
            if text.get("use_mla", True) is not False:
                return True
        elif row.attention is Attention.MLA or (
            row.attention is Attention.MLA_IF_LORA and text.get("kv_lora_rank") is not None
        ):
            return True
    return False


def _mla_dims(archs: tuple[str, ...], text: ConfigDict) -> MLADims:
    kv_lora_rank = get_int(text, "kv_lora_rank", minimum=1)
    rope = get_int(text, "qk_rope_head_dim")
    if any_row(archs, lambda r: r.mla_nope_flag) and text.get("use_mla_nope"):
        rope = 0
    nope = get_int(text, "qk_nope_head_dim", 0)
    v_head_dim = get_int(text, "v_head_dim", 0)
    swa_rank, swa_rope = kv_lora_rank, rope
    if any_row(archs, lambda r: r.mla_swa_dims):
        swa_rank = get_int(text, "swa_kv_lora_rank", kv_lora_rank, minimum=1)
        swa_rope = get_int(text, "swa_qk_rope_head_dim", rope)
    return MLADims(kv_lora_rank, rope, nope, v_head_dim, swa_rank, swa_rope)


def _dsa(archs: tuple[str, ...], text: ConfigDict) -> DSAGeometry | None:
    if text.get("index_topk") is None or not any_row(archs, lambda r: r.dsa_if_index_topk):
        return None
    pattern = text.get("index_topk_pattern")
    if pattern is not None and not isinstance(pattern, str):
        if not isinstance(pattern, (list, tuple)) or not all(isinstance(p, (str, int)) for p in pattern):
            raise KVCacheConfigError(
                f"config field 'index_topk_pattern' must be a string or a list of per-layer codes, got {pattern!r:.80}"
            )
        pattern = "".join(str(p) for p in pattern)
    return DSAGeometry(
        index_head_dim=get_int(text, "index_head_dim", minimum=1),
        index_topk=get_int(text, "index_topk", minimum=1),
        index_kpool=get_int(text, "index_kpool", 1, minimum=1),
        indexer_types=str_list(text, "indexer_types"),
        cli_factor=get_int(text, "cli_factor", 1, minimum=1) if any_row(archs, lambda r: r.dsa_cli_factor) else 1,
        index_topk_pattern=pattern,
        index_topk_freq=get_int(text, "index_topk_freq", 1, minimum=1),
        index_skip_topk_offset=get_opt_int(text, "index_skip_topk_offset", minimum=1),
        index_kpool_compress=bool(text.get("index_kpool_compress", False)),
    )


def _loop_num(text: ConfigDict, num_layers: int) -> int:
    """``loop_num`` (else ``num_loops``, else 1): how often the layer stack repeats; the product is capped."""
    loops = get_int(text, "loop_num", get_int(text, "num_loops", 1, minimum=1), minimum=1)
    if loops * num_layers > MAX_LAYERS:
        raise KVCacheConfigError(
            f"config gives {num_layers} layers x loop_num {loops} = {loops * num_layers} effective layers, more than "
            f"the {MAX_LAYERS} accepted; fix num_hidden_layers / loop_num in config.json"
        )
    return loops


def parse_base(root: ConfigDict) -> ModelGeometry:
    """Everything but the family refinements; see :func:`parse_hf_config`."""
    if not isinstance(root, Mapping):
        raise KVCacheConfigError(f"a model config must be a JSON object, got {type(root).__name__}")
    archs = architectures(root)
    text = _with_defaults(text_config(root))
    model_type = str(root.get("model_type") or text.get("model_type") or "")
    layers_field = "n_layer" if "n_layer" in text and "num_hidden_layers" not in text else "num_hidden_layers"
    num_layers = get_int(text, layers_field, minimum=1, maximum=MAX_LAYERS)
    heads_field = "n_head" if "n_head" in text and "num_attention_heads" not in text else "num_attention_heads"
    num_heads = get_int(text, heads_field, minimum=1)
    use_mla = _is_mla(archs, text)
    if use_mla:
        head_dim = 0  # MLA forces a dummy head_dim that sizing never reads
        v_head_dim = 0
    elif text.get("head_dim") is not None:
        head_dim = get_int(text, "head_dim", minimum=1)
        v_head_dim = get_int(text, "v_head_dim", 0) or head_dim
    else:
        hidden = get_int(text, "hidden_size" if "hidden_size" in text else "n_embd", minimum=1)
        if hidden % num_heads:
            raise KVCacheConfigError(
                f"hidden_size {hidden} is not divisible by {heads_field} {num_heads}; add an explicit "
                "'head_dim' to the config"
            )
        head_dim = hidden // num_heads
        v_head_dim = get_int(text, "v_head_dim", 0) or head_dim
    swa_head_dim = get_opt_int(text, "swa_head_dim", minimum=1)
    swa_v_head_dim = get_opt_int(text, "swa_v_head_dim", minimum=1)
    num_pp_layers = num_layers * max((r.pp_layers_per_layer for r in rows_for(archs)), default=1)
    quantization, kv_fp8 = _quantization(root, text)
    swa_kv_heads = get_opt_int(text, "swa_num_key_value_heads", minimum=1)
    other = text.get("attention_other_setting")
    if swa_kv_heads is None and isinstance(other, Mapping) and other.get("num_attention_groups") is not None:
        swa_kv_heads = as_int(other["num_attention_groups"], "attention_other_setting.num_attention_groups", minimum=1)
    return ModelGeometry(
        architectures=archs,
        model_type=model_type,
        num_hidden_layers=num_layers,
        num_pp_layers=num_pp_layers,
        total_num_kv_heads=total_num_kv_heads(text, num_heads),
        num_attention_heads=num_heads,
        head_dim=head_dim,
        v_head_dim=v_head_dim,
        swa_head_dim=swa_head_dim,
        swa_v_head_dim=swa_v_head_dim,
        swa_total_num_kv_heads=swa_kv_heads,
        context_len=derive_context_len(text),
        context_len_transformers4=_context_len_transformers4(text),
        model_dtype=model_dtype_of(root, text),
        attention_arch=AttentionArch.MLA if use_mla else AttentionArch.MHA,
        mla=_mla_dims(archs, text) if use_mla else None,
        loop_num=_loop_num(text, num_layers),
        num_nextn_predict_layers=get_opt_int(text, "num_nextn_predict_layers"),
        draft_num_layers=next((r.draft_num_layers for r in rows_for(archs[:1]) if r.draft_num_layers), None),
        checkpoint_kv_fp8=kv_fp8,
        quantization=quantization,
        is_multimodal=any(root.get(k) is not None for k in _MULTIMODAL_KEYS),
        dsa=_dsa(archs, text) if use_mla else None,
        config_sliding_window=_config_sliding_window(text),
        num_experts=_num_experts(text),
    )


#: the keys vLLM reads the expert count from, first present wins (``get_num_experts``)
_EXPERT_KEYS = ("num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts")


def _num_experts(text: ConfigDict) -> int:
    """vLLM's ``get_num_experts``: the first expert-count key present (a list: its first entry); with none,
    the config class's default (``ModelType.vllm_default_experts``: vLLM reads DeepSeek-V3 / V3.2 configs with
    transformers' ``DeepseekV3Config``, ``vllm/transformers_utils/config.py _CONFIG_REGISTRY``)."""
    for key in _EXPERT_KEYS:
        if key in text:
            value = text[key]
            if isinstance(value, list):
                value = value[0] if value else 0
            return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
    return model_type_row(text.get("model_type")).vllm_default_experts


def _config_sliding_window(text: ConfigDict) -> int | None:
    """The text config's own ``sliding_window`` (None when ``use_sliding_window`` is false): the window
    vLLM's attention layers are built with (``vllm/model_executor/models``)."""
    if text.get("use_sliding_window") is False:
        return None
    value = text.get("sliding_window")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


FAMILY_PARSERS: list[FamilyParser] = []


def parse_hf_config(config: ConfigDict) -> ModelGeometry:
    """The :class:`ModelGeometry` of a HF ``config.json`` dict (nested ``text_config`` allowed)."""
    check_sane_ints(config, "config")
    geometry = parse_base(config)
    text = _with_defaults(text_config(config))
    for refine in FAMILY_PARSERS:
        geometry = refine(config, text, geometry)
    return geometry
