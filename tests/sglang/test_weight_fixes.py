"""The planner fixes the weight recordings showed (golden/sglang-0.5.23-weights/), each computed by
hand from the config and the SGLang 0.5.23 function named in the test's docstring."""

from __future__ import annotations

from typing import Any

import pytest

from kvstrategies.errors import UnsupportedConfigurationError
from kvstrategies.planner import DeploymentRequest, plan_deployment
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.planner.known_models import shipped_model
from kvstrategies.planner.model_reading import ModelReading
from kvstrategies.planner.weights import estimate_weights
from kvstrategies.presets import load_preset_config
from kvstrategies.sglang.launch_refusals import check_architecture, registry_serves
from kvstrategies.sglang.load_refusals import check_weight_load, request_layout, skipped_block_checks
from kvstrategies.sglang.resident import resident_extras
from kvstrategies.sglang.tables.served import SERVED_ARCHITECTURES
from kvstrategies.sglang.weight_catalog import ROOT

GIB = 2**30


def _req(source: dict[str, Any], gpu: str, tp: int, **kw: Any) -> DeploymentRequest:
    return DeploymentRequest("m", source, tp_size=tp, gpu=lookup_gpu(gpu), **kw)


# --- MiMo-V2-Flash: qkv_proj is built without the block-shape check -------------------------


@pytest.mark.parametrize("tp", [4, 8])
def test_mimo_v2_flash_block_fp8_qkv_loads_at_tp_4_and_8(tp: int) -> None:
    """MiMo-V2-Flash's full-attention layers have 64 q heads of 192 and 4 KV heads: at TP 8 the
    q partition is 64 / 8 x 192 = 1536 and each KV partition 192, not a multiple of block_n 128.
    SGLang builds that QKVParallelLinear with ``skip_block_quant_check=True``
    (``sglang/srt/models/mimo_v2.py``, ``MiMoV2Attention.__init__``), so
    ``Fp8LinearMethod.validate_block_quant_shapes`` never runs for it and the model loads."""
    config = load_preset_config("mimo-v2-flash")
    assert 192 % 128 == 64 and skipped_block_checks(config) == {"qkv_proj"}
    req = _req({"preset": "mimo-v2-flash"}, "H200", tp)
    check_weight_load(req, ModelReading(config))  # no refusal


def test_mimo_v2_flash_router_is_float32() -> None:
    """MiMo-V2's ``MoEGate`` (``sglang/srt/models/mimo_v2.py``) builds its weight in the config's
    ``moe_router_dtype``, float32 when absent: 256 experts x 4096 x 4 B in each of the 47 MoE
    layers = 197,132,288 B on every rank (the recording's ``mlp.gate.weight``)."""
    estimate = estimate_weights(load_preset_config("mimo-v2-flash"))
    routers = [
        (layer, pos) for layer in range(estimate.num_layers)
        for pos, g in enumerate(estimate.groups_of(layer)) if g.name == "router"
    ]  # fmt: skip
    assert len(routers) == 47
    assert sum(estimate.groups_of(layer)[pos].count * estimate.price(layer, pos) for layer, pos in routers) == (
        256 * 4096 * 4 * 47
    )


def test_the_block_check_still_refuses_the_layers_no_model_exempts() -> None:
    """Qwen3-235B-A22B-FP8 at TP 8: its experts' 1536 / 8 = 192 columns are still refused
    (``Fp8MoEMethod.create_fp8_moe_weight_``), as SGLang 0.5.23 refuses them (the recording's
    ``ValueError: The output_size of gate's and up's weight = 192 is not divisible by weight
    quantization block_n = 128``)."""
    model = shipped_model("Qwen/Qwen3-235B-A22B-FP8")
    assert model is not None
    with pytest.raises(UnsupportedConfigurationError, match=r"1536 / 8 = 192 columns"):
        check_weight_load(_req({"hf_config": model.config}, "H200", 8), ModelReading(model.config))


# --- served architectures: SGLang's registry, not a guess -----------------------------------


def test_qwen3_vl_is_served_from_the_registry_table() -> None:
    """``sglang/srt/models/qwen3_vl.py`` has ``EntryClass = Qwen3VLForConditionalGeneration``, so
    SGLang's ``ModelRegistry`` resolves it natively; the generated table says so and the planner
    admits the config."""
    assert "Qwen3VLForConditionalGeneration" in SERVED_ARCHITECTURES["0.5.23"]
    assert registry_serves("Qwen3VLForConditionalGeneration")
    config = {"architectures": ["Qwen3VLForConditionalGeneration"]}
    assert check_architecture(config, None) == (config, None)


def test_an_architecture_outside_the_registry_is_still_refused() -> None:
    assert not registry_serves("NoSuchModelForCausalLM")
    with pytest.raises(UnsupportedConfigurationError, match="does not serve"):
        check_architecture({"architectures": ["NoSuchModelForCausalLM"]}, None)


def test_qwen3_vl_8b_plans_at_tp1() -> None:
    folder = ROOT / "cases" / "weights" / "configs" / "Qwen--Qwen3-VL-8B-Instruct"
    from kvstrategies.planner.model_lookup import resolve_for_planning

    source = resolve_for_planning(str(folder))
    plan = plan_deployment(_req(source.request_source(), "H100", 1), suggest=False)
    recorded = 17_535_427_040  # golden/sglang-0.5.23-weights/qwen3-vl-8b-h100-tp1.json, weights of rank 0
    assert plan.budget.weight_bytes is not None
    assert abs(plan.budget.weight_bytes / recorded - 1) < 0.01  # the budget's figure adds the RoPE cache
    assert plan.sizes.max_total_num_tokens > 0


def test_qwen3_vl_tower_counts_its_deepstack_mergers_and_position_table() -> None:
    """Qwen3-VL-8B's tower (``sglang/srt/models/qwen3_vl.py``, ``Qwen3VLMoeVisionModel``): 27
    blocks of h = 1152 (q/k/v/o 4 h^2, MLP 2 h x 4304), the patch embedding 3 x 2 x 16 x 16 x h,
    the merger ((4 h)^2 + 4 h x 4096) once plus once per deepstack layer (3: ``deepstack_merger_list``)
    and the position table 2304 x h."""
    from kvstrategies.core.jsonio import read_json_object
    from kvstrategies.planner.weights import vision_tower_params

    config = read_json_object(ROOT / "cases/weights/configs/Qwen--Qwen3-VL-8B-Instruct/config.json", "config")
    h = 1152
    blocks = 27 * (4 * h * h + 2 * h * 4304)
    merger = (4 * h) ** 2 + 4 * h * 4096
    assert vision_tower_params(config) == blocks + 3 * 2 * 16 * 16 * h + 4 * merger + 2304 * h


def test_qwen2_5_vl_tower_blocks_have_a_gated_mlp() -> None:
    """``Qwen2_5_VLMLP`` (``sglang/srt/models/qwen2_5_vl.py``) holds ``gate_up_proj`` and
    ``down_proj``: 3 x 1280 x 3420 per block, 32 blocks; patch 3 x 2 x 14 x 14 x 1280; one merger
    (5120^2 + 5120 x 3584); no position table."""
    from kvstrategies.core.jsonio import read_json_object
    from kvstrategies.planner.weights import vision_tower_params

    config = read_json_object(ROOT / "cases/weights/configs/Qwen--Qwen2.5-VL-7B-Instruct/config.json", "config")
    h = 1280
    expected = 32 * (4 * h * h + 3 * h * 3420) + 3 * 2 * 14 * 14 * h + (4 * h) ** 2 + 4 * h * 3584
    assert vision_tower_params(config) == expected


# --- NVFP4 MoE on Hopper: the swizzled copy of the expert scales ----------------------------


def test_nvfp4_moe_on_hopper_keeps_a_swizzled_copy_of_the_expert_scales() -> None:
    """Qwen3-235B-A22B-NVFP4 at TP 2 on H100 (MoE runner auto): 128 experts, hidden 4096,
    ``moe_intermediate_size`` 1536 -> 768 columns per rank, 94 MoE layers.
    ``ModelOptNvFp4FusedMoEMethod.create_weights`` keeps ``w13_blockscale_swizzled`` =
    ``swizzle_blockscale(w13_weight_scale)``: rows 2 x 768 = 1536 (rounded up to 128: 1536),
    scale columns 4096 / 16 = 256 (rounded up to 4: 256) -> 393,216 fp8 bytes per expert; and
    ``w2_blockscale_swizzled``: rows 4096, columns 768 / 16 = 48 -> 196,608 bytes. Per layer
    128 x 589,824 = 75,497,472 B; over 94 layers 7,096,762,368 B."""
    model = shipped_model("nvidia/Qwen3-235B-A22B-NVFP4")
    assert model is not None
    config = model.config
    req = _req({"hf_config": config}, "H100", 2)
    estimate = estimate_weights(config)
    extras = {e.name: e.nbytes for e in resident_extras(req, config, estimate, request_layout(req, config))}
    assert extras["NVFP4 swizzled expert scales"] == 128 * (1536 * 256 + 4096 * 48) * 94 == 7_096_762_368


def test_nvfp4_moe_under_the_trtllm_runner_shares_the_scales() -> None:
    """On B200 SGLang resolves the FlashInfer TRT-LLM MoE runner for this checkpoint, and
    ``create_weights`` sets ``w13_blockscale_swizzled = None`` (aliased after loading): no copy."""
    model = shipped_model("nvidia/Qwen3-235B-A22B-NVFP4")
    assert model is not None
    req = _req({"hf_config": model.config}, "B200", 2)
    extras = resident_extras(req, model.config, estimate_weights(model.config), request_layout(req, model.config))
    assert "NVFP4 swizzled expert scales" not in {e.name for e in extras}


def test_minimax_m2_nvfp4_on_sm100_takes_the_routed_trtllm_runner_and_shares_the_scales() -> None:
    """``arg_groups/model_overrides/minimax_m2.py``: on SM100, with the runner auto and
    ModelConfig's resolved quantization ``modelopt_fp4`` (a ModelOpt NVFP4 export's "modelopt"),
    SGLang sets ``--moe-runner-backend flashinfer_trtllm_routed``; ``ModelOptNvFp4FusedMoEMethod``
    then aliases the expert scales (no swizzled copy). On H100 the runner stays auto and the copy
    is kept: 256 experts x (r128(2 x 768) x r4(3072 / 16) + r128(3072) x r4(768 / 16)) =
    256 x (1536 x 192 + 3072 x 48) = 113,246,208 B per layer, 62 layers."""
    model = shipped_model("nvidia/MiniMax-M2.5-NVFP4")
    assert model is not None
    config = model.config
    b200 = _req({"hf_config": config}, "B200", 2)
    assert request_layout(b200, config).runner == "flashinfer_trtllm_routed"  # type: ignore[union-attr]
    assert not resident_extras(b200, config, estimate_weights(config), request_layout(b200, config))
    h100 = _req({"hf_config": config}, "H100", 2)
    layout = request_layout(h100, config)
    extras = {e.name: e.nbytes for e in resident_extras(h100, config, estimate_weights(config), layout)}
    assert extras["NVFP4 swizzled expert scales"] == 256 * (1536 * 192 + 3072 * 48) * 62


# --- Gemma-3: a plain nn.Embedding ----------------------------------------------------------


def test_gemma3_embedding_is_the_whole_vocabulary_on_every_rank() -> None:
    """``Gemma3TextScaledWordEmbedding`` (``sglang/srt/models/gemma3_causal.py``) is a plain
    ``nn.Embedding``: at TP 4 each rank holds all 262,208 x 5,376 bf16 values = 2,819,260,416 B
    (the recording's ``embedding`` group), and the tied lm_head adds nothing."""
    estimate = estimate_weights(load_preset_config("gemma-3-27b"))
    (embedding,) = estimate.embedding
    assert embedding.per_rank(4) * 2 == 262208 * 5376 * 2 == 2_819_260_416


# --- Nemotron-H: relu2 experts are ungated --------------------------------------------------


def test_nemotron_h_experts_hold_up_and_down_only() -> None:
    """Nemotron-3-Nano's experts use relu2: ``NemotronHMoE`` builds its FusedMoE with
    ``is_gated=False`` (``sglang/srt/models/nemotron_h.py``), so an expert holds up (h x I) and
    down (I x h): 2 x 2688 x 1856 values, 128 experts per MoE layer."""
    model = shipped_model("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    assert model is not None
    estimate = estimate_weights(model.config)
    experts = [g for layer in range(estimate.num_layers) for g in estimate.groups_of(layer) if g.name == "experts"]
    assert experts and {g.count for g in experts} == {128 * 2 * 2688 * 1856}


# --- Llama: the lm_head on every pipeline stage ---------------------------------------------


def test_llama_builds_its_lm_head_on_every_pipeline_stage() -> None:
    """``LlamaForCausalLM.__init__`` (``sglang/srt/models/llama.py``) builds an untied
    ``ParallelLMHead`` whatever the stage: stage 0 of Llama-3.1-70B at TP 4 x PP 2 holds the
    embedding, 40 layers and the lm_head (128,256 x 8,192 / 4 x 2 B = 525,336,576 B each).
    Stage 0 and the last stage then differ only by the embedding against the final norm."""
    estimate = estimate_weights(load_preset_config("llama-3.1-70b"))
    first, last = estimate.stage_bytes(4, 2, 0), estimate.stage_bytes(4, 2, 1)
    vocab_share = 128256 * 8192 // 4 * 2
    assert vocab_share == 525_336_576
    assert first - last == vocab_share - 8192 * 2
    assert first == 18_164_744_192  # golden/sglang-0.5.23-weights/llama-3.1-70b-h100-tp4-pp2.json, stage 0
    assert first > GIB
