"""Weight bytes under each quantization_config scheme, unquantized modules and refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvstrategies.errors import KVCacheConfigError, UnsupportedConfigurationError
from kvstrategies.planner import DeploymentRequest, plan_deployment
from kvstrategies.planner.config_fields import validate_config_fields
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.planner.weight_quant import NVFP4, quant_bytes
from kvstrategies.planner.weights import ParamKind, estimate_weights
from kvstrategies.presets import load_preset_config, preset_names
from tests.helpers import SMALL_LLAMA, block_fp8_llama, planner_request

LLAMA = load_preset_config("llama-3.1-8b")
EMBED_HEAD = 2 * 128256 * 4096
NORMS = 2 * 4096 * 32 + 4096
LINEAR = 8_030_261_248 - EMBED_HEAD - NORMS  # q/k/v/o and MLP parameters of Llama-3.1-8B
ATTN = 32 * 4096 * (4096 + 2 * 1024 + 4096)


def with_quant(qcfg: dict[str, Any]) -> dict[str, Any]:
    return {**LLAMA, "quantization_config": qcfg}


def test_awq_counts_values_scales_and_zeros() -> None:
    est = estimate_weights(with_quant({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}))
    per = 0.5 + (2 + 0.5) / 128  # int4 values + fp16 scale + int4 zero per 128
    assert est.fmt.bytes_per_param(ParamKind.DENSE) == per
    assert est.weight_bytes() == pytest.approx(2 * (EMBED_HEAD + NORMS) + LINEAR * per, abs=1)


def test_gptq_per_channel_and_8_bit() -> None:
    assert quant_bytes({"quant_method": "gptq", "bits": 4, "group_size": -1}).dense == 0.5
    assert quant_bytes({"quant_method": "gptq", "bits": 8, "group_size": 64}).dense == 1 + 3 / 64


def test_compressed_tensors_int4_fp8_nvfp4() -> None:
    w4a16 = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True},
            }
        },
        "ignore": ["lm_head"],
    }
    q = quant_bytes(w4a16)
    assert (q.attention, q.dense, q.expert) == (0.5 + 2 / 128,) * 3  # symmetric: no zero point
    fp8 = {
        **w4a16,
        "config_groups": {
            "g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}
        },
    }
    assert quant_bytes(fp8).dense == 1.0
    nvfp4 = {
        **w4a16,
        "config_groups": {
            "g": {
                "targets": ["Linear"],
                "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16},
            }
        },
    }
    assert quant_bytes(nvfp4).expert == NVFP4


def test_compressed_tensors_groups_by_target() -> None:
    qcfg = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "experts": {
                "targets": ["re:.*mlp.experts.*"],
                "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32},
            },
            "rest": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}},
        },
    }
    q = quant_bytes(qcfg)
    assert q.expert == 0.5 + 2 / 32 and q.attention == 1.0 and q.dense == 1.0


def group_bytes(est: Any, name: str, layer: int = 0) -> float:
    """Bytes per parameter the format gives group ``name`` of decoder layer ``layer``."""
    (group,) = [g for g in est.layers[layer] if g.name == name]
    return float(est.fmt.bytes_for(group))


def test_fp8_modules_to_not_convert_match_dotted_module_paths() -> None:
    """``Fp8Config.from_config`` keeps each entry with and without ``model.``; ``is_layer_skipped``
    matches it as a dotted path (``_module_path_match``) against SGLang's module names, the shards
    of a fused ``qkv_proj`` one by one (sglang/srt/layers/quantization/utils.py)."""
    est = estimate_weights(
        with_quant({"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["self_attn"]})
    )
    blocked = estimate_weights(with_quant({"quant_method": "fp8", "weight_block_size": [128, 128]}))
    assert group_bytes(est, "q_proj") == 2 and group_bytes(est, "mlp.gate_up_proj") == 1 + 4 / 16384
    assert est.weight_bytes() - blocked.weight_bytes() == pytest.approx(ATTN * (2 - 1 - 4 / 16384), abs=1)
    # no glob in this loader: a literal "*" names no module, so nothing moves
    starred = with_quant({"quant_method": "fp8", "weight_block_size": [128, 128],
                          "modules_to_not_convert": ["model.layers.*.self_attn"]})  # fmt: skip
    assert estimate_weights(starred).weight_bytes() == blocked.weight_bytes()


def test_compressed_tensors_ignore_regexes_match_module_names() -> None:
    """``re:`` entries are ``re.match`` over the module name (compressed_tensors/utils.py,
    ``check_equal_or_regex_match``); qkv_proj is ignored when q/k/v_proj are (``should_ignore_layer``)."""
    ct = estimate_weights(
        with_quant(
            {
                "quant_method": "compressed-tensors",
                "ignore": ["re:.*self_attn.*", "lm_head"],
                "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float"}}},
            }
        )
    )
    assert group_bytes(ct, "q_proj") == 2 and group_bytes(ct, "o_proj") == 2
    assert group_bytes(ct, "mlp.down_proj") == 1


def test_modelopt_exclusion_globs_match_whole_names_or_one_part() -> None:
    """``ModelOptQuantConfig.is_layer_excluded``: ``*`` is any text and the pattern must match the
    whole module name (or one dotted part), so ``model.layers.*.mlp`` leaves ``mlp.gate_up_proj``
    quantized while ``model.layers.*.mlp*`` does not (sglang/srt/layers/quantization/modelopt_quant.py)."""
    nvfp4 = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
    loose = estimate_weights(with_quant({**nvfp4, "exclude_modules": ["lm_head", "model.layers.*.mlp*"]}))
    assert group_bytes(loose, "mlp.gate_up_proj") == 2 and group_bytes(loose, "q_proj") == NVFP4
    exact = estimate_weights(with_quant({**nvfp4, "exclude_modules": ["lm_head", "model.layers.*.mlp"]}))
    assert group_bytes(exact, "mlp.gate_up_proj") == NVFP4


def test_single_layer_exclusions_are_priced_per_layer() -> None:
    """A list naming one layer's module leaves only that module in 16 bits (no safe-side bound)."""
    est = estimate_weights(
        with_quant(
            {
                "quant_method": "fp8",
                "weight_block_size": [128, 128],
                "modules_to_not_convert": ["model.layers.0.mlp.down_proj"],
            }
        )
    )
    blocked = estimate_weights(with_quant({"quant_method": "fp8", "weight_block_size": [128, 128]}))
    assert group_bytes(est, "mlp.down_proj", 0) == 2 and group_bytes(est, "mlp.down_proj", 1) == 1 + 4 / 16384
    assert est.weight_bytes() - blocked.weight_bytes() == pytest.approx(4096 * 14336 * (1 - 4 / 16384), abs=1)
    assert not est.fmt.notes


def test_routers_heads_and_embeddings_in_lists_change_nothing() -> None:
    names = ["gate", "e_score_correction_bias", "lm_head", "model.embed_tokens"]
    listed = {"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": names}
    blocked = estimate_weights(with_quant({"quant_method": "fp8", "weight_block_size": [128, 128]}))
    assert estimate_weights(with_quant(listed)).weight_bytes() == blocked.weight_bytes()


@pytest.mark.parametrize("method", ["bitsandbytes", "gguf", "quark"])
def test_unpriceable_schemes_are_refused(method: str) -> None:
    with pytest.raises(KVCacheConfigError, match=f"unsupported quantization '{method}'.*checkpoint folder"):
        estimate_weights(with_quant({"quant_method": method}))


def test_modelopt_unknown_algo_is_refused() -> None:
    with pytest.raises(KVCacheConfigError, match="quant_algo 'W4A8_AWQ'"):
        estimate_weights(with_quant({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}))


@pytest.mark.parametrize("preset", preset_names())
def test_every_preset_is_priced(preset: str) -> None:
    """Every shipped architecture gets a weight figure in a format the module can name."""
    est = estimate_weights(load_preset_config(preset))
    assert est.main_params > 1e9 and est.weight_bytes() > est.main_params * 0.5
    assert not est.fmt.notes  # nothing in a shipped config needs a safe-side bound


def test_vision_towers_are_counted_with_a_note() -> None:
    from kvstrategies.planner import plan_deployment
    from kvstrategies.planner.weights import vision_tower_params

    gemma = load_preset_config("gemma-3-27b")
    assert 0.40e9 < vision_tower_params(gemma) < 0.43e9  # SigLIP-So400m (~400M) + the 1152x5376 projector
    assert vision_tower_params(LLAMA) == 0
    budget = plan_deployment(
        DeploymentRequest("g", {"preset": "gemma-3-27b"}, gpu=lookup_gpu("H100")), suggest=False
    ).budget
    assert (
        budget.weight_source is not None
        and "vision tower" in budget.weight_source
        and "approximate" in budget.weight_source
    )


def test_per_channel_gptq_is_priced_not_refused() -> None:
    """``group_size: -1`` is per-output-channel quantization, which SGLang serves
    (sglang.srt.layers.quantization.gptq.gptq.GPTQMarlinConfig.__init__): 4 bits = 0.5 B per
    parameter plus one fp16 scale per row (negligible). Refused before (issue: a common format)."""
    from kvstrategies.planner import plan_deployment
    from kvstrategies.presets import load_preset_config

    # every field GPTQMarlinConfig.is_gptq_marlin_compatible reads (from SGLang 0.5.20 a GPTQ checkpoint loads only
    # as gptq_marlin: one without ``sym`` is refused, tests/sglang/test_weight_release_rules.py)
    qcfg = {"quant_method": "gptq", "bits": 4, "group_size": -1, "desc_act": False, "sym": True}
    config = {**load_preset_config("qwen3-8b"), "quantization_config": qcfg}
    per_channel = plan_deployment(DeploymentRequest("q", {"hf_config": config}, gpu=lookup_gpu("H100")), suggest=False)
    config["quantization_config"]["group_size"] = 128
    grouped = plan_deployment(DeploymentRequest("q", {"hf_config": config}, gpu=lookup_gpu("H100")), suggest=False)
    assert per_channel.budget.weight_bytes is not None and grouped.budget.weight_bytes is not None
    # 128-groups add (2 + 0.5) / 128 B per quantized parameter: per-channel is smaller, never zero
    assert 0 < per_channel.budget.weight_bytes < grouped.budget.weight_bytes


def test_compressed_tensors_zero_bits_is_refused_naming_the_field() -> None:

    qcfg = {"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["Linear"], "weights": {
        "num_bits": 0, "type": "int", "strategy": "channel"}}}}  # fmt: skip
    with pytest.raises(KVCacheConfigError, match=r"quantization_config\.config_groups\.g\.weights\.num_bits"):
        validate_config_fields({"hidden_size": 8, "quantization_config": qcfg})


# ---- weight formats, module matches, block scales and compressed-tensors lists, by hand --------------------


CT_BLOCK_FP8 = {"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["Linear"], "weights": {
    "num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}}}}  # fmt: skip


def test_integer_weight_formats_take_1_to_64_bits() -> None:
    """``_int_group`` prices ``bits / 8`` B per value plus a 2-byte scale and a packed zero per group:
    1 bit in groups of 128 is 1/8 + (2 + 1/8) / 128 B; 64 bits 8 + (2 + 8) / 128 B; 0 and 65 bits
    are no format (0 would price every linear at 0 B) and are refused naming config.json."""
    from kvstrategies.planner.weight_quant import _int_group

    assert _int_group(1, 128) == 1 / 8 + (2 + 1 / 8) / 128
    assert _int_group(64, 128) == 8 + (2 + 8) / 128
    for bits in (0, 65):
        with pytest.raises(KVCacheConfigError, match=f"{bits} bits per weight is not a format; fix config.json"):
            _int_group(bits, 128)


def test_an_int_override_without_a_quantization_config_uses_groups_of_128() -> None:
    """The weight estimate's own default (planner/weight_quant.py, ``_scheme``): ``--weight-quantization
    gptq`` on a config that carries no ``quantization_config`` is priced as 4 bits in groups of 128
    (the common GPTQ export), 4 / 8 + (2 + 4 / 8) / 128 B per value, and named so."""
    from kvstrategies.planner.weights import estimate_weights

    fmt = estimate_weights(SMALL_LLAMA, quantization="gptq").fmt
    assert fmt.name == "int4-g128"
    # a quantization_config without a group size (or with none) gets the same 128
    for qcfg in ({"quant_method": "gptq", "bits": 4}, {"quant_method": "gptq", "bits": 4, "group_size": None}):
        assert estimate_weights({**SMALL_LLAMA, "quantization_config": qcfg}).fmt.name == "int4-g128"


def test_a_module_path_match_needs_a_dotted_boundary() -> None:
    """``_module_path_match`` (sglang/srt/layers/quantization/utils.py): equal paths, ``ignored + "."``
    as a prefix, or ``"." + ignored + "."`` inside ``"." + prefix + "."``; ``mlp.gate`` does not match
    ``mlp.gate_up_proj``, and a path that merely starts with a dot matches nothing unrelated."""
    from kvstrategies.planner.weight_quant import module_path_match

    cases = {
        ("model.layers.0", "model.layers.0.mlp"): True,  # a dotted prefix
        ("mlp.gate", "model.layers.0.mlp.gate"): True,  # a dotted part run
        ("mlp.gate", "model.layers.0.mlp.gate_up_proj"): False,
        ("mlp.gate", "model.layers.0.shared_mlp.gate"): False,  # "mlp" is not the part "shared_mlp"
        ("lm_head", "lm_head."): True,  # trailing dots are stripped
        ("lm_head", ".visual.proj"): False,
    }
    assert {case: module_path_match(*case) for case in cases} == cases


def test_block_fp8_costs_a_4_byte_scale_per_block() -> None:
    """Block FP8 (``Fp8LinearMethod.create_weights``, fp8.py): 1 B per value plus one float32 scale per
    ``[block_n, block_k]`` block, 1 + 4 / (128 x 128) B; a block that is not two positive sizes is
    per-channel FP8, 1 B."""
    from kvstrategies.planner.weight_quant import _fp8

    assert _fp8([128, 128]) == 1 + 4 / (128 * 128)
    assert _fp8([1, 1]) == 1 + 4 / 1
    assert _fp8([0, 128]) == _fp8([128, 128, 128]) == _fp8(None) == 1.0


def test_the_hf_quant_config_note_names_the_kv_cache_algorithm(tmp_path: Path) -> None:
    """``with_hf_quant_config``: a ModelOpt ``hf_quant_config.json`` (read by SGLang's
    ``ModelConfig._parse_modelopt_quant_config``) is noted with its algorithm and method and, when it
    quantizes the KV cache too, that algorithm."""
    from kvstrategies.planner.hf_quant import with_hf_quant_config

    llama = {"architectures": ["LlamaForCausalLM"]}
    for section, tail in (({"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}, ", KV cache FP8"),
                          ({"quant_algo": "FP8"}, "")):  # fmt: skip
        (tmp_path / "hf_quant_config.json").write_text(json.dumps({"quantization": section}))
        _, note = with_hf_quant_config(llama, tmp_path)
        assert note == "quantization from hf_quant_config.json: ModelOpt FP8 (modelopt_fp8)" + tail


def test_a_compressed_tensors_ignore_list_must_cover_all_or_none_of_an_experts_projections() -> None:
    """``CompressedTensorsConfig.get_moe_scheme`` (compressed_tensors.py) needs one scheme for all MoE
    projections: ignoring the experts' down_proj but not gate/up (``re:.*down_proj``) is refused when
    the weights are priced; ignoring only ``lm_head`` prices them."""
    from kvstrategies.planner.weights import estimate_weights
    from kvstrategies.presets import load_preset_config

    config = load_preset_config("qwen3-30b-a3b")
    qcfg = {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"g": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}}}}
    assert estimate_weights({**config, "quantization_config": {**qcfg, "ignore": ["lm_head"]}}).weight_bytes() > 0
    partial = estimate_weights({**config, "quantization_config": {**qcfg, "ignore": ["lm_head", "re:.*down_proj"]}})
    with pytest.raises(UnsupportedConfigurationError, match="covers some but not all projections of model.layers.0"):
        partial.weight_bytes()


def test_compressed_tensors_exempts_only_the_last_merged_output() -> None:
    """``validate_fp8_block_shape`` (sglang/srt/layers/quantization/fp8_utils.py): without a TP split
    a merged linear's partitions but the last must be whole ``block_n`` blocks. A 32-head model with one
    KV head of dim 64 at TP 1 merges qkv_proj as [32 x 64, 64, 64] = [2048, 64, 64]: V (last) is
    exempt, K's 64 % 128 != 0 is refused."""
    with pytest.raises(UnsupportedConfigurationError, match=r"qkv_proj .* its output partition 64 is not a multiple"):
        plan_deployment(planner_request(block_fp8_llama(32, 1, CT_BLOCK_FP8)), suggest=False)


def test_any_path_match_equals_module_path_match_over_every_ignored_name() -> None:
    """The set lookup answers exactly what the three tests of ``_module_path_match`` answer."""
    import itertools

    from kvstrategies.planner.weight_quant import any_path_match, module_path_match

    parts = ["model", "layers", "0", "mlp", "gate_proj", "layers.0", "", "mlp."]
    names = {".".join(p) for n in (1, 2, 3) for p in itertools.product(parts, repeat=n)}
    prefixes = ["model.layers.0.mlp.gate_proj", "model.layers.0.mlp.", "lm_head", "model..layers"]
    for prefix in prefixes:
        for ignored in names:
            assert any_path_match((ignored,), prefix) == module_path_match(ignored, prefix), (ignored, prefix)


# --- ModelOpt MIXED_PRECISION ------------------------------------------------------------------

_MIXED = {
    "quant_method": "modelopt",
    "quant_algo": "MIXED_PRECISION",
    "ignore": ["mtp*"],
    "quantized_layers": {
        "model.language_model.layers.0.self_attn.q_proj": {"quant_algo": "FP8"},
        "model.language_model.layers.0.self_attn.k_proj": {"quant_algo": "FP8"},
        "model.language_model.layers.0.self_attn.v_proj": {"quant_algo": "FP8"},
        "model.language_model.layers.0.mlp.gate_proj": {"quant_algo": "W4A16_NVFP4", "group_size": 16},
        "model.language_model.layers.0.mlp.up_proj": {"quant_algo": "W4A16_NVFP4", "group_size": 16},
        "model.language_model.layers.0.mlp.down_proj": {"quant_algo": "FP8_PB_WO", "group_size": 128},
        "model.language_model.layers.1.mlp.experts.0.gate_proj": {"quant_algo": "NVFP4", "group_size": 32},
        "model.language_model.layers.1.linear_attn.in_proj_qkv": {"quant_algo": "MXFP8"},
        "model.language_model.layers.1.linear_attn.in_proj_z": {"quant_algo": "MXFP8"},
        "lm_head": {"quant_algo": "W4A16_NVFP4", "group_size": 16},
    },
}


def test_modelopt_mixed_precision_prices_each_module_by_its_own_algorithm() -> None:
    """``ModelOptMixedPrecisionConfig`` (``modelopt_quant.py``): ``_resolve_quant_algo`` finds a module under
    its other spellings (``model.`` -> ``model.language_model.``), a fused layer through its shards (q/k/v ->
    qkv_proj), a routed-expert layer through the first entry under it; ``get_quant_method`` leaves unnamed
    modules 16-bit and the ``ignore`` list's unquantized. Bytes a parameter: FP8 1; W4A16 NVFP4 at group 16
    0.5 + 1/16; block FP8 at 128 1 + 4 / 128^2; NVFP4 at group 32 0.5 + 1/32; MXFP8 1 + 1/32."""
    from kvstrategies.planner.weight_quant import UNQUANTIZED, quant_bytes

    rules = quant_bytes(_MIXED).modules
    assert rules is not None and quant_bytes(_MIXED).name == "modelopt mixed fp8+fp8_pb_wo+mxfp8+nvfp4+w4a16_nvfp4"
    assert rules.bytes_for("model.layers.0.self_attn.qkv_proj", "attention") == 1.0
    assert rules.bytes_for("model.layers.0.self_attn.o_proj", "attention") == UNQUANTIZED
    assert rules.bytes_for("model.layers.0.mlp.gate_up_proj", "dense") == 0.5 + 1 / 16
    assert rules.bytes_for("model.layers.0.mlp.down_proj", "dense") == 1 + 4 / 128**2
    assert rules.bytes_for("model.layers.1.mlp.experts", "expert") == 0.5 + 1 / 32
    assert rules.bytes_for("model.layers.1.linear_attn.in_proj", "attention") == 1 + 1 / 32
    assert rules.bytes_for("lm_head", "lm_head") == 0.5 + 1 / 16
    assert rules.bytes_for("mtp.layers.0.mlp.gate_up_proj", "dense") == UNQUANTIZED


def test_modelopt_mixed_precision_refuses_what_sglang_refuses() -> None:
    """Shards of one fused layer with different algorithms ('Mixed quant_algo within fused layer'), an
    algorithm the config class does not take, and an empty map (``from_config``)."""
    from kvstrategies.errors import KVCacheConfigError, UnsupportedConfigurationError
    from kvstrategies.planner.weight_quant import quant_bytes

    layers = dict(_MIXED["quantized_layers"])  # type: ignore[call-overload]
    split = {**_MIXED, "quantized_layers": {**layers, "model.language_model.layers.0.self_attn.k_proj": {
        "quant_algo": "NVFP4"}}}  # fmt: skip
    rules = quant_bytes(split).modules
    assert rules is not None
    with pytest.raises(UnsupportedConfigurationError, match="Mixed quant_algo within fused layer"):
        rules.bytes_for("model.layers.0.self_attn.qkv_proj", "attention")
    with pytest.raises(KVCacheConfigError, match="unsupported MIXED_PRECISION quant_algo 'INT4_AWQ'"):
        quant_bytes({**_MIXED, "quantized_layers": {"lm_head": {"quant_algo": "INT4_AWQ"}}})
    with pytest.raises(KVCacheConfigError, match="non-empty quantized_layers"):
        quant_bytes({**_MIXED, "quantized_layers": {}})


def test_modelopt_mixed_needs_nvfp4s_capability() -> None:
    """``ModelOptMixedPrecisionConfig.get_min_capability`` is ``ModelOptFp4Config``'s: the mixed checkpoint
    resolves to ``modelopt_mixed`` (``ModelConfig._parse_modelopt_quant_config``)."""
    from kvstrategies.planner.moe_layout import quantization_method

    assert quantization_method({"quantization_config": _MIXED}, None) == "modelopt_mixed"


def test_modelopt_mixed_candidates_are_sglangs_spellings() -> None:
    """``ModelOptMixedPrecisionConfig._quantized_layer_prefix_candidates``: a head also as ``lm_head``; the
    text stack as ``model.language_model.`` / ``language_model.model.`` / ``model.``."""
    from kvstrategies.planner.weight_quant import mixed_candidates

    assert mixed_candidates("language_model.model.layers.0.mlp") == (
        "language_model.model.layers.0.mlp", "model.language_model.layers.0.mlp")
    assert mixed_candidates("model.language_model.layers.0.mlp") == (
        "model.language_model.layers.0.mlp", "language_model.model.layers.0.mlp", "model.layers.0.mlp")
    assert mixed_candidates("model.layers.0.mlp") == ("model.layers.0.mlp", "model.language_model.layers.0.mlp")
    assert mixed_candidates("language_model.lm_head") == ("language_model.lm_head", "lm_head")
    assert mixed_candidates("vision.blocks.0") == ("vision.blocks.0",)


def test_modelopt_mixed_defaults_and_prefix_rule() -> None:
    """Without ``group_size``: NVFP4 groups of 16, block FP8 blocks of 128 (``from_config``); a negative size is
    refused, a size of 1 taken; the fallback looks under the name *and a dot* (``key.startswith(prefix + '.')``),
    so ``experts_shared`` does not price ``experts``."""
    from kvstrategies.planner.weight_quant import UNQUANTIZED, quant_bytes

    mixed = {**_MIXED, "quantized_layers": {
        "model.layers.0.mlp.gate_up_proj": {"quant_algo": "W4A16_NVFP4"},
        "model.layers.0.mlp.down_proj": {"quant_algo": "FP8_BLOCK_SCALES"},
        "model.layers.1.mlp.experts_shared.gate_proj": {"quant_algo": "FP8"},
        "model.layers.2.mlp.down_proj": {"quant_algo": "NVFP4", "group_size": 1},
    }}  # fmt: skip
    rules = quant_bytes(mixed).modules
    assert rules is not None
    assert rules.bytes_for("model.layers.0.mlp.gate_up_proj", "dense") == 0.5 + 1 / 16
    assert rules.bytes_for("model.layers.0.mlp.down_proj", "dense") == 1 + 4 / 128**2
    assert rules.bytes_for("model.layers.1.mlp.experts", "expert") == UNQUANTIZED
    assert rules.bytes_for("model.layers.2.mlp.down_proj", "dense") == 0.5 + 1
    with pytest.raises(KVCacheConfigError, match="group_size -16 is not a size"):
        quant_bytes({**_MIXED, "quantized_layers": {"lm_head": {"quant_algo": "NVFP4", "group_size": -16}}})
    for bad in ("x", 1e400, [16], True):  # named as the map's field, not as whatever was read last
        with pytest.raises(KVCacheConfigError, match=r"quantized_layers\['lm_head'\]: group_size .* is not a size"):
            quant_bytes({**_MIXED, "quantized_layers": {"lm_head": {"quant_algo": "NVFP4", "group_size": bad}}})
