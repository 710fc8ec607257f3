"""Fields a published config.json leaves to its config class or to SGLang's model class, read as SGLang reads
them (``ModelType.config_aliases``, ``derived_fields``, ``nested_defaults``, ``weight_defaults``): each rule by
hand, on the shipped public file that needed it (SGLang 0.5.23 served all of them while the planner refused them;
each checked live with ``kvstrategies verify --against sglang``: cell size, pool sizes and buffers match)."""

from __future__ import annotations

from typing import Any

from kvstrategies.checkpoints import shipped_checkpoints
from kvstrategies.models import parse_hf_config
from kvstrategies.models.architectures import (
    LLAMA_CONFIG_DEFAULTS,
    minicpm3_v_head_dim,
    nemotron_h_num_layers,
    nemotron_h_pattern,
    with_config_aliases,
    with_nested_defaults,
)
from kvstrategies.models.hf import text_config
from kvstrategies.planner.hf_quant import modelopt_method, with_hf_quant_config
from kvstrategies.planner.weight_quant import quant_bytes
from kvstrategies.planner.weights import estimate_weights
from kvstrategies.sglang.launch.defaults.facts import model_facts_from_hf_config


def _shipped(hf_id: str) -> dict[str, Any]:
    return shipped_checkpoints()[hf_id].config()


def test_exaone_reads_num_layers_as_num_hidden_layers() -> None:
    """SGLang's own ExaoneConfig (sglang/srt/configs/exaone.py): ``attribute_map = {"num_hidden_layers":
    "num_layers"}``; EXAONE-3.5-7.8B-Instruct's config.json says ``num_layers: 32`` only. KV cell at TP 1:
    32 layers x 8 KV heads x 128 x (K + V) x 2 B = 131,072 B per token.

    Weights (sglang/srt/models/exaone.py, ``ExaoneForCausalLM``, lm_head untied as the file says): per layer
    q 4,096 x 4,096, k/v 2 x 4,096 x 8 x 128, o 4,096 x 4,096, the gated MLP 3 x 4,096 x 14,336 and two RMSNorms:
    218,112,000; 32 layers = 6,979,584,000 (the model card's 6.98B without embeddings) + embedding and lm_head
    2 x 102,400 x 4,096 + the final norm 4,096 = 7,818,448,896."""
    cfg = _shipped("LGAI-EXAONE/EXAONE-3.5-7.8B-Instruct")
    assert "num_hidden_layers" not in cfg and cfg["num_layers"] == 32
    assert with_config_aliases(cfg)["num_hidden_layers"] == 32
    geometry = parse_hf_config(cfg)
    assert (geometry.num_hidden_layers, geometry.total_num_kv_heads, geometry.head_dim) == (32, 8, 128)
    assert geometry.num_hidden_layers * geometry.total_num_kv_heads * geometry.head_dim * 2 * 2 == 131_072
    assert model_facts_from_hf_config(cfg).num_hidden_layers == 32
    layer = 2 * 4096 * 4096 + 2 * 4096 * 8 * 128 + 3 * 4096 * 14336 + 2 * 4096
    assert 32 * layer == 6_979_584_000
    assert estimate_weights(cfg).main_params == 32 * layer + 2 * 102400 * 4096 + 4096 == 7_818_448_896
    # ExaoneConfig's own default ties the embeddings; a config.json that says nothing gets it
    untold = {k: v for k, v in cfg.items() if k != "tie_word_embeddings"}
    assert estimate_weights(untold).main_params == 7_818_448_896 - 102400 * 4096


def test_minicpm3_v_head_dim_is_the_model_class_width() -> None:
    """sglang/srt/models/minicpm3.py ``MiniCPM3DecoderLayer.__init__`` builds its MLA attention with
    ``v_head_dim=self.hidden_size // config.num_attention_heads`` (2,560 / 40 = 64); MiniCPM3-4B's config.json has
    no ``v_head_dim`` and the model reads none, so the rule wins over any. The KV cache does not need it (MLA:
    ModelConfig reads kv_lora_rank 256 + qk_rope_head_dim 32), the weight estimate does (kv_b_proj, o_proj).

    Per layer: q_a 2,560 x 768 + its norm 768, q_b 768 x 40 x (64 + 32), kv_a 2,560 x (256 + 32) + its norm 256,
    kv_b 256 x 40 x (64 + 64), o 40 x 64 x 2,560, the gated MLP 3 x 2,560 x 6,400 and two norms: 62,674,944;
    62 layers + one tied 73,448 x 2,560 table (PretrainedConfig's tie_word_embeddings True: the config names
    none, MiniCPM3ForCausalLM then uses embed_tokens as lm_head) + the final norm = 4,073,875,968."""
    cfg = _shipped("openbmb/MiniCPM3-4B")
    assert "v_head_dim" not in cfg and "tie_word_embeddings" not in cfg
    assert minicpm3_v_head_dim(cfg) == 64
    assert with_config_aliases(cfg)["v_head_dim"] == 64
    assert with_config_aliases({**cfg, "v_head_dim": 128})["v_head_dim"] == 64  # the model class's, not the file's
    assert minicpm3_v_head_dim({"hidden_size": 2560}) is None  # nothing to divide: no rule value
    geometry = parse_hf_config(cfg)
    assert geometry.mla is not None and (geometry.mla.kv_lora_rank, geometry.mla.qk_rope_head_dim) == (256, 32)
    layer = (2560 * 768 + 768 + 768 * 40 * 96 + 2560 * 288 + 256 + 256 * 40 * 128 + 40 * 64 * 2560
             + 3 * 2560 * 6400 + 2 * 2560)  # fmt: skip
    assert layer == 62_674_944
    assert estimate_weights(cfg).main_params == 62 * layer + 73448 * 2560 + 2560 == 4_073_875_968


def test_llava_text_config_gets_llama_config_defaults() -> None:
    """llava-1.5-7b-hf's text_config names only what differs from transformers' LlamaConfig (model_type, vocab
    32,064, max_position_embeddings 4,096, rms_norm_eps); LlavaConfig builds it with
    ``CONFIG_MAPPING["llama"](**text_config)`` (transformers/models/llava/configuration_llava.py), so SGLang's
    hf_text_config has LlamaConfig's 32 layers, 4,096 hidden, 32 heads (KV heads None -> the heads), 11,008
    intermediate. KV cell at TP 1: 32 x 32 x 128 x 2 x 2 B = 524,288 B per token (fp16 checkpoint).

    Weights (Llama-2-7B's stack): 32 x (4 x 4,096^2 + 3 x 4,096 x 11,008 + 2 x 4,096) + untied embedding and
    lm_head 2 x 32,064 x 4,096 + the final norm = 6,738,939,904 (the vision tower is counted apart)."""
    cfg = _shipped("llava-hf/llava-1.5-7b-hf")
    assert "num_hidden_layers" not in cfg["text_config"]
    text = text_config(cfg)
    assert (text["num_hidden_layers"], text["hidden_size"], text["num_attention_heads"]) == (32, 4096, 32)
    assert text["vocab_size"] == 32064 and text["max_position_embeddings"] == 4096  # the file's own win
    assert dict(LLAMA_CONFIG_DEFAULTS)["intermediate_size"] == 11008
    geometry = parse_hf_config(cfg)
    assert (geometry.num_hidden_layers, geometry.total_num_kv_heads, geometry.head_dim) == (32, 32, 128)
    assert geometry.context_len == 4096 and geometry.is_multimodal
    assert model_facts_from_hf_config(cfg).num_hidden_layers == 32
    layer = 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096
    assert estimate_weights(cfg).main_params == 32 * layer + 2 * 32064 * 4096 + 4096 == 6_738_939_904
    # only the wrapper that builds its text config so, only for the nested type it names
    assert with_nested_defaults({"model_type": "llava"}, {"model_type": "mistral"}) == {"model_type": "mistral"}
    assert with_nested_defaults({"model_type": "qwen2_vl"}, {"model_type": "llama"}) == {"model_type": "llama"}


def test_nemotron_h_layers_and_pattern_come_from_layers_block_type() -> None:
    """SGLang's own NemotronHConfig (sglang/srt/configs/nemotron_h.py): ``num_hidden_layers`` is the property
    ``len(layers_block_type)`` (the argument is deprecated and ignored) and ``hybrid_override_pattern`` the property
    ``_list_to_pattern(layers_block_type)``. Nemotron-3-Ultra's config.json has neither (108 blocks: 48 Mamba2,
    12 attention, 48 MoE); Nemotron-3.5-Lightning's has no pattern (52 blocks)."""
    ultra = _shipped("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16")
    assert "num_hidden_layers" not in ultra and "hybrid_override_pattern" not in ultra
    assert nemotron_h_num_layers(ultra) == 108
    pattern = nemotron_h_pattern(ultra)
    assert pattern is not None and (pattern.count("M"), pattern.count("*"), pattern.count("E")) == (48, 12, 48)
    geometry = parse_hf_config(ultra)
    assert geometry.num_hidden_layers == 108
    # 2 KV heads x 128 x (K + V) x 2 B over the 12 attention layers: 12,288 B per token at TP 1
    assert pattern.count("*") * geometry.total_num_kv_heads * geometry.head_dim * 2 * 2 == 12_288
    lightning = _shipped("nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4")
    assert "hybrid_override_pattern" not in lightning
    assert with_config_aliases(lightning)["hybrid_override_pattern"] == nemotron_h_pattern(lightning)
    assert len(with_config_aliases(lightning)["hybrid_override_pattern"]) == lightning["num_hidden_layers"] == 52
    # a config without the list keeps its own fields; an unknown block type gives no pattern (the parser refuses it)
    assert nemotron_h_num_layers({"model_type": "nemotron_h", "num_hidden_layers": 4}) is None
    assert nemotron_h_pattern({"layers_block_type": ["mamba", "conv"]}) is None


def test_nemotron_h_latent_moe_and_shared_expert_width() -> None:
    """sglang/srt/models/nemotron_h.py ``NemotronHMoE``: with ``moe_latent_size`` the routed experts are built with
    ``hidden_size=moe_latent_size`` between the replicated ``fc1_latent_proj`` (h -> latent) and ``fc2_latent_proj``
    (latent -> h); the shared experts are one ``NemotronHMLP`` of ``moe_shared_expert_intermediate_size x
    n_shared_experts``. Nemotron-3-Super-120B (hidden 4,096, latent 1,024, 512 experts of 2,688, shared 5,376): one
    MoE layer holds 512 x 2 x 1,024 x 2,688 + 2 x 4,096 x 1,024 + 2 x 4,096 x 5,376 + the router; the model
    120.67B parameters (its name's 120B; before: 457.68B, the experts priced at the hidden width)."""
    super_fp8 = _shipped("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    assert estimate_weights(super_fp8).main_params == 120_668_687_360
    ultra = estimate_weights(_shipped("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16"))
    assert 545e9 < ultra.main_params < 555e9  # 550B-A55B (before: 2,089.86B)
    without = {k: v for k, v in super_fp8.items() if k != "moe_latent_size"}
    latent_saving = 40 * (512 * 2 * (4096 - 1024) * 2688 - 2 * 4096 * 1024)  # 40 MoE layers
    assert estimate_weights(without).main_params - estimate_weights(super_fp8).main_params == latent_saving


def test_a_mixed_precision_hf_quant_config_is_priced() -> None:
    """A MIXED_PRECISION hf_quant_config.json with NVFP4 layers is SGLang's ``modelopt_mixed`` method
    (ModelConfig._parse_modelopt_quant_config); its per-module map prices the weights as for a config.json that
    says ``quant_method: modelopt`` (Nemotron-3.5-Lightning: W4A16_NVFP4 experts, FP8 Mamba projections; before:
    'unsupported quantization modelopt_mixed')."""
    layers = {"backbone.layers.1.mixer.experts.0.up_proj": {"quant_algo": "W4A16_NVFP4", "group_size": 16}}
    assert modelopt_method("MIXED_PRECISION", layers) == "modelopt_mixed"
    q = {"quant_method": "modelopt_mixed", "quant_algo": "MIXED_PRECISION", "quantized_layers": layers}
    assert quant_bytes(q).name == "modelopt mixed w4a16_nvfp4"


def test_nemotron_h_modules_in_sglang_names_for_the_modelopt_lists() -> None:
    """sglang/srt/models/nemotron_h.py: every decoder layer's one block is ``self.mixer`` (attention, Mamba2, the
    ungated ``NemotronHMLP`` with ``up_proj`` / ``down_proj``, the MoE), and
    ``NemotronHForCausalLM.hf_to_sglang_mapper`` maps ``backbone.`` to ``model.``, which
    ``ModelOptQuantConfig.apply_weight_name_mapper`` (and the mixed-precision config's ``quantized_layers``)
    applies before matching. Nemotron-3-Nano-30B-A3B-NVFP4 at TP 1: 21,191,474,560 B
    planned against the 21,191,537,616 B SGLang 0.5.23 builds (golden/sglang-0.5.23-weights; was 665 MB short: the
    exclusion list named no module the estimate had). Nemotron-3.5-Lightning's W4A16_NVFP4 experts and FP8 Mamba
    projections are then priced from its map: 17.58 GiB of weights at TP 1 (was 58.85 GiB: nothing matched, all
    16-bit)."""
    from kvstrategies.planner.weights import _hf_weight_names, _layer_groups, _text

    nano = _shipped("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4")
    t = _text(nano)
    pattern = t["hybrid_override_pattern"]
    modules = {
        kind: {g.module for g in _layer_groups(t, pattern.index(code), mixer, ffn) if g.module}
        for kind, code, mixer, ffn in (("attention", "*", "attention", "none"), ("mamba", "M", "mamba2", "none"),
                                       ("moe", "E", "none", "moe"))
    }  # fmt: skip
    assert modules["attention"] == {"mixer.qkv_proj", "mixer.o_proj"}
    assert modules["mamba"] == {"mixer.in_proj", "mixer.out_proj"}
    assert {"mixer.experts", "mixer.gate", "mixer.shared_experts.up_proj", "mixer.shared_experts.down_proj"} <= (
        modules["moe"]
    )
    q = {"quant_algo": "NVFP4", "exclude_modules": ["backbone.layers.0.mixer*", "lm_head"],
         "quantized_layers": {"backbone.layers.1.mixer.experts.0.up_proj": {"quant_algo": "NVFP4"}}}  # fmt: skip
    mapped = _hf_weight_names(t, q)
    assert mapped["exclude_modules"] == ["model.layers.0.mixer*", "lm_head"]
    assert list(mapped["quantized_layers"]) == ["model.layers.1.mixer.experts.0.up_proj"]
    assert _hf_weight_names(_text(_shipped("Qwen/Qwen3-32B-FP8")), q) == q  # no mapper: the lists as written
    ckpt = shipped_checkpoints()["nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"]
    lightning, _ = with_hf_quant_config(ckpt.config(), ckpt.folder)  # MIXED_PRECISION, as SGLang reads it
    assert 17 * 2**30 < estimate_weights(lightning).weight_bytes_per_rank(1) < 18 * 2**30
