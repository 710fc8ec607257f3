"""Model-table facts the catalog cannot reach, pinned by hand (found by ``tools/mutation_check.py``)."""

from __future__ import annotations

import pytest

from kvstrategies.models.architectures import ARCHITECTURES
from kvstrategies.models.parsers.hybrid_swa import _mla_scale_dims

#: SGLang's ModelConfig sets ``head_dim = 256`` for these MLA architectures (the dummy head dim its
#: MXFP8 scale term reads; sglang.srt.configs.model_config.ModelConfig._derive_model_shapes)
HEAD_DIM_256 = sorted(row.name for row in ARCHITECTURES if row.mla_forced_head_dim == 256)


def test_the_256_list_is_sglang_s() -> None:
    for name in ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM",
                 "KimiK25ForConditionalGeneration", "LongcatFlashForCausalLM", "MistralLarge3ForCausalLM"):  # fmt: skip
        assert name in HEAD_DIM_256, name


@pytest.mark.parametrize("arch", HEAD_DIM_256)
def test_mla_scale_head_dim_is_256_whatever_the_config_says(arch: str) -> None:
    """The raw head dim is 7,168 / 128 = 56; SGLang's dummy 256 replaces the full D (V and the SWA
    dims keep the raw 56)."""
    assert _mla_scale_dims((arch,), {"hidden_size": 7168, "num_attention_heads": 128}) == (256, 56, 56, 56)


def test_minicpm3_and_kimi_linear_dummy_head_dims() -> None:
    """MiniCPM3: 128; Kimi-Linear: 72; the 256 list wins over both (SGLang tests it first)."""
    text = {"hidden_size": 2560, "num_attention_heads": 40, "v_head_dim": 64}
    assert _mla_scale_dims(("MiniCPM3ForCausalLM",), text) == (128, 64, 64, 64)
    assert _mla_scale_dims(("KimiLinearForCausalLM",), text) == (72, 64, 64, 64)
    assert _mla_scale_dims(("KimiLinearForCausalLM", "DeepseekV3ForCausalLM"), text)[0] == 256


def test_qwen3_5_moe_draft_holds_one_layer() -> None:
    """SGLang renames a Qwen3.5-MoE draft to its one-layer MTP head (its
    ``num_nextn_predict_layers`` set to 1: ModelConfig._config_draft_model / _compute_model_num_layers)."""
    from kvstrategies.models.parse import parse_hf_config
    from kvstrategies.presets import load_preset_config

    assert parse_hf_config(load_preset_config("qwen3.5-35b-a3b")).draft_num_layers == 1


def test_kimi_k25_vision_defaults_are_its_config_class_s() -> None:
    """A Kimi-K2.5 ``vision_config`` without layer count or width takes KimiK25VisionConfig's
    defaults: 27 layers of width 1,152 (sglang.srt.configs.kimi_k25.KimiK25VisionConfig)."""
    from kvstrategies.planner.launch_defaults.facts import model_facts_from_hf_config

    facts = model_facts_from_hf_config({"model_type": "kimi_k25", "architectures": ["KimiK25ForConditionalGeneration"],
                                        "vision_config": {}, "text_config": {"hidden_size": 7168}})  # fmt: skip
    assert (facts.vision_layers, facts.vision_hidden) == (27, 1152)


@pytest.mark.parametrize(("model_type", "first"), [("mimo_v2_flash", "0.5.22"), ("muse_glimmer", "0.5.18")])
def test_a_model_type_loads_from_its_first_release_on(model_type: str, first: str) -> None:
    """transformers learns the model type in ``first``: that release loads it, the one before refuses
    (sglang.srt.configs.model_config.ModelConfig -> AutoConfig)."""
    from kvstrategies.errors import UnsupportedConfigurationError
    from kvstrategies.models.architectures import require_loadable
    from kvstrategies.releases import SGLANG_RELEASES, parse_release

    release = parse_release(first)
    require_loadable(model_type, release)
    before = SGLANG_RELEASES[list(SGLANG_RELEASES).index(release) - 1]
    with pytest.raises(UnsupportedConfigurationError, match=model_type):
        require_loadable(model_type, before)


def test_config_integers_are_bounded_at_2_to_the_40() -> None:
    """A config field may hold 2**40 and no more (kvstrategies.models.hf.MAX_CONFIG_INT)."""
    from kvstrategies.errors import KVCacheConfigError
    from kvstrategies.models.hf import get_int

    assert get_int({"hidden_size": 2**40}, "hidden_size") == 2**40
    with pytest.raises(KVCacheConfigError, match="hidden_size"):
        get_int({"hidden_size": 2**40 + 1}, "hidden_size")
