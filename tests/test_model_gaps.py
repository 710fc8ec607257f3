"""Model-table facts the catalog cannot reach, pinned by hand (found by ``tools/mutation_check.py``)."""

from __future__ import annotations

import pytest

from kvstrategies.models.architectures import ARCHITECTURES
from kvstrategies.models.parsers.hybrid_swa import _mla_scale_dims

#: SGLang's ModelConfig sets ``head_dim = 256`` for these MLA architectures (the dummy head dim its
#: MXFP8 scale term reads; sglang.srt.configs.model_config.ModelConfig._derive_model_shapes)
HEAD_DIM_256 = [
    "DeepseekV2ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV3ForCausalLMNextN",
    "DeepseekVL2ForCausalLM", "DotsVLMForCausalLM", "Eagle3DeepseekV2ForCausalLM", "Glm4MoeLiteForCausalLM",
    "Glm4MoeLiteForCausalLMNextN", "GlmMoeDsaForCausalLM", "KimiK25ForConditionalGeneration",
    "KimiVLForConditionalGeneration", "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN",
    "MistralLarge3ForCausalLM", "MistralLarge3ForCausalLMEagle", "PixtralForConditionalGeneration",
]  # fmt: skip


def test_the_256_list_is_sglang_s() -> None:
    assert sorted(row.name for row in ARCHITECTURES if row.mla_forced_head_dim == 256) == sorted(HEAD_DIM_256)


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


# ---- validation bounds: the smallest accepted value parses, the next one down is refused ------------


def _llama(**text: object) -> dict[str, object]:
    from kvstrategies.presets import load_preset_config

    return {**load_preset_config("llama-3.1-8b"), **text}


@pytest.mark.parametrize(
    ("fields", "read"),
    [
        ({"head_dim": 1}, lambda g: g.head_dim),
        ({"num_attention_heads": 1, "num_key_value_heads": 1, "hidden_size": 1}, lambda g: g.head_dim),
    ],
)
def test_a_head_dim_of_one_is_accepted(fields: dict[str, object], read: object) -> None:
    from kvstrategies.models.parse import parse_hf_config

    assert read(parse_hf_config(_llama(**fields))) == 1  # type: ignore[operator]


@pytest.mark.parametrize("field", ["swa_head_dim", "swa_v_head_dim"])
def test_swa_head_dims_of_one_are_accepted_and_zero_refused(field: str) -> None:
    from kvstrategies.errors import KVCacheConfigError
    from kvstrategies.models.parse import parse_hf_config

    assert getattr(parse_hf_config(_llama(**{field: 1})), field) == 1
    with pytest.raises(KVCacheConfigError, match=field):
        parse_hf_config(_llama(**{field: 0}))


def test_layer_lists_hold_up_to_max_layers_plus_16_entries() -> None:
    """``int_list`` / ``str_list`` refuse a list longer than MAX_LAYERS + 16 (10,016) entries."""
    from kvstrategies.errors import KVCacheConfigError
    from kvstrategies.models.hf import int_list, str_list
    from kvstrategies.validate import MAX_LAYERS

    assert int_list({"ids": [0] * (MAX_LAYERS + 16)}, "ids") == (0,) * (MAX_LAYERS + 16)
    assert str_list({"types": ["a"] * (MAX_LAYERS + 16)}, "types") == ("a",) * (MAX_LAYERS + 16)
    for reader, value in ((int_list, 0), (str_list, "a")):
        with pytest.raises(KVCacheConfigError, match="entries"):
            reader({"k": [value] * (MAX_LAYERS + 17)}, "k")  # type: ignore[operator]


def test_mla_dims_absent_from_the_config_are_zero() -> None:
    """An MLA config without qk_nope_head_dim / v_head_dim reads them as 0; the raw head dim of a
    config without hidden_size is 0 too (the MXFP8 MLA scale falls back to it)."""
    from kvstrategies.models.parse import _mla_dims

    dims = _mla_dims(("DeepseekV3ForCausalLM",), {"kv_lora_rank": 512, "qk_rope_head_dim": 64})
    assert (dims.qk_nope_head_dim, dims.v_head_dim) == (0, 0)
    assert _mla_scale_dims(("KimiLinearForCausalLM",), {}) == (72, 0, 0, 0)


def test_gemma4_sliding_window_pattern_marks_every_pth_layer_full() -> None:
    """Without layer_types, layer ``i`` is full when ``(i + 1) % pattern == 0`` and the last is always
    full (transformers' Gemma4TextConfig, as SGLang loads it): 14 layers, pattern 6 -> layers 5, 11 and 13."""
    from kvstrategies.models.parsers.hybrid_swa import _gemma4_layer_types

    types = _gemma4_layer_types({"sliding_window_pattern": 6}, 14)
    assert [i for i, t in enumerate(types) if t == "full_attention"] == [5, 11, 13]


def _parsed(preset: str, drop: tuple[str, ...] = (), **fields: object) -> object:
    from kvstrategies.models.parse import parse_hf_config
    from kvstrategies.presets import load_preset_config

    config = {k: v for k, v in load_preset_config(preset).items() if k not in drop}
    return parse_hf_config({**config, **fields})


def test_jamba_mamba_expand_defaults_to_2() -> None:
    """Jamba without ``mamba_expand``: transformers' JambaConfig default 2, so the mixer's inner
    size is 2 x 4,096 = 8,192 (sglang.srt.models.jamba reads config.mamba_expand)."""
    geometry = _parsed("jamba-v0.1", drop=("mamba_expand",))
    assert geometry.mamba.mixer.intermediate_size == 8192  # type: ignore[attr-defined]


def test_mamba_state_size_and_dsv4_v_head_dim_of_one_are_accepted() -> None:
    geometry = _parsed("nemotron-h-8b", ssm_state_size=1)
    assert geometry.mamba.mixer.state_size == 1  # type: ignore[attr-defined]
    assert _parsed("deepseek-v4-flash", v_head_dim=1).dsv4.v_head_dim == 1  # type: ignore[attr-defined]


def test_a_dsv4_compress_ratio_above_128_is_refused_by_the_range_check() -> None:
    """Ratios are range-checked (at most 128) before the known-ratio check names SGLang's set."""
    from kvstrategies.errors import KVCacheConfigError
    from kvstrategies.models.dsv4 import DSV4Geometry

    with pytest.raises(KVCacheConfigError, match=r"compress_ratios\[0\]"):
        DSV4Geometry(compress_ratios=(129,), window_size=128, qk_nope_head_dim=448, qk_rope_head_dim=64,
                     index_head_dim=128)  # fmt: skip


#: architectures whose draft SGLang renames to a one-layer MTP head (``num_nextn_predict_layers`` -> 1,
#: sglang.srt.configs.model_config.ModelConfig._config_draft_model)
ONE_LAYER_DRAFTS = [
    "HYV4ForCausalLM", "MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM", "NemotronHForCausalLM", "Qwen3MoeForCausalLM",
    "Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
    "Qwen3_5MoeForConditionalGeneration", "Step3p5ForCausalLM", "Step3p7ForConditionalGeneration",
]  # fmt: skip


def test_one_layer_draft_architectures() -> None:
    rows = {row.name: row.draft_num_layers for row in ARCHITECTURES if row.draft_num_layers is not None}
    assert rows == dict.fromkeys(ONE_LAYER_DRAFTS, 1)


def test_gemma3_text_launch_context_defaults_to_131072() -> None:
    """A gemma3_text config without max_position_embeddings: Gemma3TextConfig's 131,072 tokens."""
    from kvstrategies.planner.launch_defaults.facts import model_facts_from_hf_config

    facts = model_facts_from_hf_config({"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"]})
    assert facts.context_length == 131072


def test_an_unknown_architecture_splits_its_layers_one_for_one() -> None:
    """Only LongCat counts two pipeline layers per decoder layer; an architecture the table does not
    know counts one (num_pp_layers = num_hidden_layers)."""
    geometry = _parsed("llama-3.1-8b", architectures=["SomeUnknownForCausalLM"])
    assert (geometry.num_pp_layers, geometry.num_hidden_layers) == (32, 32)  # type: ignore[attr-defined]


def test_full_attention_interval_1_parses_and_leaves_no_linear_layer() -> None:
    """Interval 1 is a valid interval (every layer full attention), so the refusal is the missing
    linear-attention layer, not the interval's range."""
    from kvstrategies.errors import KVCacheConfigError

    with pytest.raises(KVCacheConfigError, match="no Mamba / linear-attention layer"):
        _parsed("qwen3-next-80b-a3b", full_attention_interval=1)


def test_gemma3n_counts_four_norms_per_layer() -> None:
    """Gemma-3n decoder layers hold input, post-attention, pre- and post-feedforward norms
    (sglang.srt.models.gemma3n_causal.Gemma3nDecoderLayer): 4 x hidden."""
    from kvstrategies.planner.weights import _layer_norms

    assert _layer_norms({"model_type": "gemma3n"}, 2048) == 4 * 2048
    assert _layer_norms({"model_type": "gemma3n_text"}, 2048) == 4 * 2048


def test_dsa_skip_offset_rule() -> None:
    """With ``index_skip_topk_offset`` o and frequency f, layer l keeps its own index keys when
    ``max(l - o + 1, 0) % f == 0`` (dsa_layer_skips_topk): o 2, f 4 keeps layers 0, 1, 5 and 9."""
    from kvstrategies.models.geometry import DSAGeometry

    dsa = DSAGeometry(index_head_dim=128, index_topk=2048, index_topk_freq=4, index_skip_topk_offset=2)
    assert [layer for layer in range(10) if not dsa.skips_topk(layer)] == [0, 1, 5, 9]


def test_more_validation_bounds_at_their_minimum() -> None:
    """A context of 1 token, one KV head in a DBRX attn_config, an index skip offset of 1 and an
    architectures list of 64 names all parse; 65 names are refused."""
    from kvstrategies.errors import KVCacheConfigError
    from kvstrategies.models.hf import architectures
    from kvstrategies.models.parse import derive_context_len, total_num_kv_heads

    assert derive_context_len({"max_position_embeddings": 1}) == 1
    assert total_num_kv_heads({"model_type": "dbrx", "attn_config": {"kv_n_heads": 1}}, 48) == 1
    assert _parsed("deepseek-v3.2", index_skip_topk_offset=1).dsa.index_skip_topk_offset == 1  # type: ignore[attr-defined]
    assert len(architectures({"architectures": ["A"] * 64})) == 64
    with pytest.raises(KVCacheConfigError, match="architectures"):
        architectures({"architectures": ["A"] * 65})


def test_hybrid_linear_parsers_defaults_and_layer_ids() -> None:
    """Qwen3-Next full attention every 4th layer, ``(i + 1) % 4 == 0``: 3, 7, ..., 47 (12 layers;
    sglang.srt.configs.qwen3_next.Qwen3NextConfig.full_attention_layer_ids). Nemotron-H without
    n_groups takes 8 (NemotronHConfig); Falcon-H1 without mamba_d_conv a conv kernel of 4."""
    assert _parsed("qwen3-next-80b-a3b").mamba.full_attention_layer_ids == tuple(range(3, 48, 4))  # type: ignore[attr-defined]
    nemotron = _parsed("nemotron-h-8b", drop=("n_groups", "mamba_n_groups"))
    assert nemotron.mamba.mixer.n_groups == 8  # type: ignore[attr-defined]
    assert _parsed("falcon-h1-7b", drop=("mamba_d_conv",)).mamba.mixer.conv_kernel == 4  # type: ignore[attr-defined]


def test_draft_layer_count_comes_from_the_first_architecture_only() -> None:
    """SGLang renames the draft by ``architectures[0]``: a Qwen3-MoE name second changes nothing."""
    assert _parsed("llama-3.1-8b", architectures=["LlamaForCausalLM", "Qwen3MoeForCausalLM"]).draft_num_layers is None  # type: ignore[attr-defined]


def test_minimax_sparse_index_dim_of_one_is_accepted() -> None:
    import copy
    import json
    from pathlib import Path

    from kvstrategies.models.parse import parse_hf_config

    case = Path(__file__).parents[1] / "cases" / "minimax-m3-sparse-synthetic-tp4-bf16-p64.json"
    config = copy.deepcopy(json.loads(case.read_text(encoding="utf-8"))["hf_config"])
    stack = [config]
    while stack:
        node = stack.pop()
        if "sparse_index_dim" in node:
            node["sparse_index_dim"] = 1
        stack += [v for v in node.values() if isinstance(v, dict)]
    assert parse_hf_config(config).minimax_sparse.sparse_index_dim == 1  # type: ignore[union-attr]


def test_gdn_value_heads_and_dsa_frequency_at_their_minimum() -> None:
    """One GDN value head parses (inner 1 x 128); a DSA config without index_topk_freq indexes every
    layer (frequency 1), and an explicit frequency of 1 is accepted."""
    mixer = _parsed("qwen3-next-80b-a3b", linear_num_value_heads=1).mamba.mixer  # type: ignore[attr-defined]
    assert (mixer.num_heads, mixer.intermediate_size) == (1, 128)
    assert _parsed("deepseek-v3.2", drop=("index_topk_freq",)).dsa.index_topk_freq == 1  # type: ignore[attr-defined]
    assert _parsed("deepseek-v3.2", index_topk_freq=1).dsa.index_topk_freq == 1  # type: ignore[attr-defined]


def test_longcat_cli_factor_default_and_minimum() -> None:
    """LongCat's indexer reads ``cli_factor``: absent -> 1, 1 accepted, 2 kept (DSA layers share keys
    in pairs); a DeepSeek-V3.2 architecture ignores the field."""

    def factor(**fields: object) -> int:
        return _parsed("deepseek-v3.2", architectures=["LongcatFlashForCausalLM"], **fields).dsa.cli_factor  # type: ignore[attr-defined]

    assert (factor(), factor(cli_factor=1), factor(cli_factor=2)) == (1, 1, 2)
    assert _parsed("deepseek-v3.2", cli_factor=2).dsa.cli_factor == 1  # type: ignore[attr-defined]
