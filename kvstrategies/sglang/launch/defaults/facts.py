"""The model facts the launch rules read, from a raw HF ``config.json`` (``text_config`` aware).

Mirrors what SGLang's launch hooks ask the model config: the architecture sets of the model
override hooks (``arg_groups.model_overrides``), the context length
(``hf_transformers_utils.get_context_length``) and the vision-config values of
``arg_groups.memory_hook.adjust_mem_fraction_for_vlm``. The name sets come from the
architecture table (:mod:`kvstrategies.models.architectures`); the steps that test a family
import them from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ....core.validate import TrackedConfig, reading_config
from ....errors import KVCacheConfigError
from ....models.architectures import (
    Attention,
    SWAMemoryOff,
    model_type_row,
    names_where,
    with_config_aliases,
    with_nested_defaults,
)
from ....planner.moe_layout import override_quantization, sm100_trtllm_quantization
from .core import LaunchModelFacts

# --- architecture sets (arg_groups.cuda_graph_hook, attention_hook.handle_attention_backend_compatibility,
# arg_groups.overrides; ModelConfig._derive_model_shapes, model_config.is_deepseek_dsa)

_MLA_ARCHS = names_where(lambda r: r.launch_mla)
# DeepSeek-V3-style architectures; with `index_topk` they are DSA (model_config.is_deepseek_dsa).
_DEEPSEEK_FAMILY = names_where(lambda r: r.launch_deepseek_family)
_DSV4_ARCHS = names_where(lambda r: r.launch_dsv4)
_HYBRID_SWA_ARCHS = names_where(lambda r: r.launch_hybrid_swa)
_MAMBA_RADIX_ARCHS = names_where(lambda r: r.mamba_radix)
# overrides._mamba_radix_cache_resolution: Mamba-radix architectures without extra-buffer support.
_NO_EXTRA_BUFFER_ARCHS = names_where(lambda r: r.mamba_radix and not r.mamba_extra_buffer)
# memory_hook.adjust_mem_fraction_for_vlm: multimodal part off unless --enable-multimodal.
_MULTIMODAL_OPT_IN = names_where(lambda r: r.multimodal_opt_in)
# arg_groups.cuda_graph_hook: multimodal models that keep the breakable prefill graph.
_BREAKABLE_MULTIMODAL = names_where(lambda r: r.breakable_multimodal)
# arg_groups.overrides: forced --disable-hybrid-swa-memory (Exaone-4 only with sliding_window_pattern).
_NO_HYBRID_SWA_MEMORY = names_where(lambda r: r.hybrid_swa_memory_off is SWAMemoryOff.ALWAYS)
_NO_HYBRID_SWA_MEMORY_WITH_PATTERN = names_where(
    lambda r: r.hybrid_swa_memory_off is SWAMemoryOff.WITH_SLIDING_WINDOW_PATTERN
)
_MLA_UNLESS_DISABLED = names_where(lambda r: r.attention is Attention.MLA_UNLESS_DISABLED)
_NOT_KDA = names_where(lambda r: not r.kda_from_linear_attn_config)
_ATTENTION_SINKS = names_where(lambda r: r.attention_sinks)
_AUDIO_ENCODER_DECODER = names_where(lambda r: r.audio_encoder_decoder)


def _text_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    merged = {k: v for k, v in cfg.items() if k not in ("text_config", "vision_config")}
    text = cfg.get("text_config") or {}
    merged.update(with_nested_defaults(cfg, text) if isinstance(text, Mapping) else text)
    return merged


def _context_length(t: Mapping[str, Any]) -> int:
    """hf_transformers.common.get_context_length: first length key, times the rope factor unless llama3/original-max."""
    rope = t.get("rope_scaling") or {}
    factor = float(rope.get("factor", 1)) if isinstance(rope, Mapping) else 1.0
    if (
        not isinstance(rope, Mapping)
        or "original_max_position_embeddings" in rope
        or (rope.get("rope_type") == "llama3")
        or model_type_row(t.get("model_type")).rope_per_layer_type  # as models.parse.derive_context_len
    ):
        factor = 1.0
    for key in ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                "max_position_embeddings"):  # fmt: skip
        if t.get(key):
            return int(factor * int(t[key]))
    return int(factor * (model_type_row(t.get("model_type")).launch_context_default or 2048))


def model_facts_from_hf_config(cfg: Mapping[str, Any]) -> LaunchModelFacts:
    """Read :class:`LaunchModelFacts` from a raw HF ``config.json`` dict (``text_config`` aware).

    A field the launch rules cannot read raises :class:`KVCacheConfigError` naming it.
    """
    if not isinstance(cfg, Mapping):
        raise KVCacheConfigError(f"a model config must be a JSON object, got {type(cfg).__name__}")
    t = TrackedConfig()
    with reading_config(t, "reading the launch facts", "pass the settings explicitly (--available-bytes)"):
        t.update(with_config_aliases(_text_config(cfg)))
        return _model_facts(cfg, t)


def _model_facts(cfg: Mapping[str, Any], t: Mapping[str, Any]) -> LaunchModelFacts:
    arch = tuple(str(a) for a in cfg.get("architectures") or t.get("architectures") or ())
    if not arch:
        raise KVCacheConfigError("config has no 'architectures'; SGLang selects rules by it")
    names = frozenset(arch)
    is_mla = bool(names & _MLA_ARCHS) and not (names & _MLA_UNLESS_DISABLED and t.get("use_mla") is False)
    vision = cfg.get("vision_config")
    opt_in = bool(names & _MULTIMODAL_OPT_IN)
    multimodal = (
        opt_in
        or isinstance(vision, Mapping)
        or any(a.endswith("ForConditionalGeneration") and a not in _AUDIO_ENCODER_DECODER for a in arch)
    )
    lac = t.get("linear_attn_config") or {}
    head_dim, v_head_dim = t.get("head_dim"), t.get("v_head_dim")
    return LaunchModelFacts(
        architectures=arch,
        model_type=str(cfg.get("model_type") or t.get("model_type") or ""),
        num_hidden_layers=int(t.get("num_hidden_layers") or 0),
        context_length=_context_length(t),
        num_kv_heads=int(t.get("num_key_value_heads") or t.get("num_attention_heads") or 0),
        is_mla=is_mla,
        is_dsa=bool(names & _DEEPSEEK_FAMILY) and t.get("index_topk") is not None,
        index_kpool=int(t.get("index_kpool") or 1),
        is_dsv4=bool(names & _DSV4_ARCHS),
        is_hybrid_swa=bool(names & _HYBRID_SWA_ARCHS) or bool(t.get("is_hybrid_swa")),
        is_mamba_radix=bool(names & _MAMBA_RADIX_ARCHS),
        mamba_extra_buffer=bool(names & _MAMBA_RADIX_ARCHS) and not names & _NO_EXTRA_BUFFER_ARCHS,
        is_kda=bool(lac.get("kda_layers")) and not names & _NOT_KDA,
        is_multimodal=multimodal,
        multimodal_opt_in=opt_in,
        breakable_multimodal=bool(names & _BREAKABLE_MULTIMODAL),
        has_vision_config=isinstance(vision, Mapping),
        vision_layers=_vision_value(cfg, vision, "num_hidden_layers"),
        vision_hidden=_vision_value(cfg, vision, "hidden_size"),
        has_attention_sinks=bool(names & _ATTENTION_SINKS)
        or bool(t.get("add_swa_attention_sink_bias") or t.get("add_full_attention_sink_bias")),
        kv_head_dims_differ=not is_mla and v_head_dim is not None and v_head_dim != head_dim,
        forces_disable_hybrid_swa_memory=bool(names & _NO_HYBRID_SWA_MEMORY)
        or (bool(names & _NO_HYBRID_SWA_MEMORY_WITH_PATTERN) and "sliding_window_pattern" in t),
        sm100_trtllm_moe_quantization=sm100_trtllm_quantization(cfg, override_quantization(cfg, None)),
    )


def _vision_value(cfg: Mapping[str, Any], vision: Any, key: str) -> int | None:
    """``vision_config[key]``, else the vision-config class default of the model type, else
    ``None`` (the VLM cut then uses 24 / 1024). SGLang: ``arg_groups.memory_hook.
    adjust_mem_fraction_for_vlm`` reads the attribute of the config *object*, which SGLang builds
    from the dict with the vision-config class defaults (the model type's table row)."""
    value = _opt_int(vision, key)
    if value is not None or not isinstance(vision, Mapping):
        return value
    return dict(model_type_row(str(cfg.get("model_type") or "")).vision_config_defaults).get(key)


def _opt_int(section: Any, key: str) -> int | None:
    if isinstance(section, Mapping) and section.get(key) is not None:
        return int(section[key])
    return None
