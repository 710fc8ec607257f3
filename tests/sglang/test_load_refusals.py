"""What SGLang refuses while it builds and loads the weights, and expert parallelism.

Every expectation is computed by hand from the config and the SGLang 0.5.23 check named in the
test's docstring.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvstrategies.errors import UnsupportedConfigurationError
from kvstrategies.planner import DeploymentRequest, plan_deployment
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.planner.moe_layout import moe_layout, override_quantization
from kvstrategies.presets import load_preset_config
from kvstrategies.sglang.load_refusals import block_fp8, request_layout
from tests.helpers import block_fp8_llama, planner_request

BLOCK_FP8 = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}
QWEN3_235B_FP8 = {**load_preset_config("qwen3-235b-a22b"), "quantization_config": BLOCK_FP8}


def plan(config: dict[str, Any] | None = None, preset: str | None = None, **kw: Any) -> Any:
    source: dict[str, Any] = {"preset": preset} if preset else {"hf_config": config}
    gpu = lookup_gpu(kw.pop("gpu", "H200"))
    return plan_deployment(DeploymentRequest("m", source, gpu=gpu, **kw), suggest=False)


def test_minimax_m25_fp8_experts_at_tp8_are_refused_naming_the_fp8_moe_check() -> None:
    """MiniMax-M2.5: 256 experts of intermediate 1536 in 128 x 128 FP8 blocks. At TP 8 a rank holds
    1536 / 8 = 192 columns; 192 % 128 = 64 != 0, so ``Fp8MoEMethod.create_fp8_moe_weight_``
    (sglang/srt/layers/quantization/fp8.py) raises. EP 2 (768/... ) keeps moe_tp = 4: 1536 / 4 = 384
    = 3 blocks; EP 4: 768; EP 8: 1536 -- all whole blocks, so the message offers them."""
    with pytest.raises(UnsupportedConfigurationError) as err:
        plan(preset="minimax-m2.5", tp_size=8)
    text = str(err.value)
    assert "1536 / 8 = 192 columns" in text and "192 % 128 = 64" in text
    assert "Fp8MoEMethod.create_fp8_moe_weight_" in text and "intermediate_size_per_partition % block_n" in text
    assert "--ep-size 8 (32 whole experts per rank, 1536 columns each)" in text
    assert "--ep-size 2 (128 whole experts per rank, 384 columns each)" in text
    assert "aiter" in text


@pytest.mark.parametrize("release", ["0.5.15", "0.5.19", "0.5.23"])
def test_a_weight_load_refusal_names_the_release_planned_for(release: str) -> None:
    """The block-FP8 expert check (192 % 128 != 0 at TP 8) is in fp8.py of every supported release;
    the message names the release the user plans for (``--sglang-version``), not the newest."""
    with pytest.raises(UnsupportedConfigurationError, match=rf"SGLang {release} refuses it at weight load"):
        plan(preset="minimax-m2.5", tp_size=8, release=release)


def test_minimax_m25_with_expert_parallelism_is_planned() -> None:
    """--ep-size 8 at TP 8: moe_tp = 1, each rank holds 256 / 8 = 32 whole experts."""
    planned = plan(preset="minimax-m2.5", tp_size=8, ep_size=8)
    layout = request_layout(planned.request, planned.request.hf_config())
    assert layout is not None and (layout.moe_tp, layout.local_experts, layout.columns) == (1, 32, 1536)
    assert planned.sizes.max_total_num_tokens > 0


def test_qwen3_235b_fp8_at_tp8_is_refused_and_tp4_is_not() -> None:
    """Qwen3-235B-A22B-FP8: moe_intermediate_size 1536, 128 experts. TP 8: 192 columns (refused); TP 4:
    384 = 3 blocks (planned)."""
    with pytest.raises(UnsupportedConfigurationError, match="1536 / 8 = 192 columns"):
        plan(QWEN3_235B_FP8, tp_size=8)
    assert plan(QWEN3_235B_FP8, tp_size=4).sizes.max_total_num_tokens > 0


def test_b200_trtllm_runner_pads_then_the_post_load_check_refuses() -> None:
    """On SM100 SGLang picks flashinfer_trtllm for Qwen3-MoE fp8 (model_overrides/qwen3_moe.py), whose
    FusedMoE.__init__ rounds 192 up to 256 columns, so the weights are created; then
    check_quantized_moe_compatibility (moe_ep_setup.py) tests moe_intermediate_size // moe_tp = 192
    against block_n 128 after loading and raises."""
    with pytest.raises(UnsupportedConfigurationError) as err:
        plan(QWEN3_235B_FP8, tp_size=8, gpu="B200")
    assert "check_quantized_moe_compatibility" in str(err.value)
    layout = request_layout(
        DeploymentRequest("q", {"hf_config": QWEN3_235B_FP8}, tp_size=8, gpu=lookup_gpu("B200")), QWEN3_235B_FP8
    )
    assert layout is not None and layout.runner == "flashinfer_trtllm"
    assert layout.stored_columns(fp8_experts=True, nvfp4_experts=False) == 256


def test_rocm_aiter_pads_instead_of_refusing() -> None:
    """``Fp8MoEMethod.create_fp8_moe_weight_`` skips the block test when aiter's padding (128) equals
    the 128 x 128 blocks (get_moe_padding_size), and ``get_moe_weight_sizes`` pads 192 to 256 columns;
    with SGLANG_USE_AITER=0 the check applies again."""
    planned = plan(QWEN3_235B_FP8, tp_size=8, gpu="MI300X")
    layout = request_layout(planned.request, QWEN3_235B_FP8)
    assert layout is not None and layout.aiter and layout.stored_columns(fp8_experts=True, nvfp4_experts=False) == 256
    with pytest.raises(UnsupportedConfigurationError, match="192 columns"):
        plan(QWEN3_235B_FP8, tp_size=8, gpu="MI300X", rocm_aiter=False)


def test_expert_parallel_checks() -> None:
    """``derive_parallel_widths``: moe_tp = tp // ep, so EP must divide TP; FusedMoE.__init__ asserts
    num_experts % ep == 0 and intermediate % moe_tp == 0 (fused_moe_triton/layer.py)."""
    with pytest.raises(UnsupportedConfigurationError, match="--ep-size 3 does not divide --tp 8"):
        plan(preset="qwen3-30b-a3b", tp_size=8, ep_size=3, gpu="H100")
    mixtral = load_preset_config("mixtral-8x7b")  # 8 experts
    with pytest.raises(UnsupportedConfigurationError, match="8 routed experts do not divide over 16"):
        plan(mixtral, tp_size=16, ep_size=16, gpu="H100")
    odd = {**load_preset_config("qwen3-30b-a3b"), "moe_intermediate_size": 772}  # 772 % 8 = 4
    with pytest.raises(UnsupportedConfigurationError, match="intermediate size 772 does not divide over the expert-TP"):
        plan(odd, tp_size=8, gpu="H100")


def test_a2a_backends_span_ep_over_tp() -> None:
    """``overrides._a2a_ep_size``: deepep (and the other all-to-all backends) set ep_size = tp_size."""
    req = DeploymentRequest(
        "q", {"hf_config": QWEN3_235B_FP8}, tp_size=8, gpu=lookup_gpu("H200"),
        launch_extras={"moe_a2a_backend": "deepep"},
    )  # fmt: skip
    layout = request_layout(req, QWEN3_235B_FP8)
    assert layout is not None and layout.ep == 8 and layout.columns == 1536


def test_block_fp8_linear_shapes() -> None:
    """``Fp8LinearMethod.validate_block_quant_shapes`` (fp8.py): every output partition of a merged or
    TP-split linear must be whole ``block_n`` blocks. A 32-head, 8-KV-head model with head_dim 64 at TP 8
    splits qkv_proj into [32 / 8 x 64, 8 / 8 x 64, 64] = [256, 64, 64]: 64 % 128 != 0 -> refused.
    At TP 4: [512, 128, 128], gate_up [8192 / 4] x 2 = [2048, 2048], down input 2048, o_proj input
    2048 / 4 = 512 -> all whole blocks, planned."""
    small = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
        "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256, "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16", "quantization_config": BLOCK_FP8,
    }  # fmt: skip
    assert plan(small, tp_size=4, gpu="H100").sizes.max_total_num_tokens > 0
    with pytest.raises(UnsupportedConfigurationError) as err:
        plan(small, tp_size=8, gpu="H100")
    text = str(err.value)
    assert "model.layers.0.self_attn.qkv_proj" in text and "output partition 64" in text
    assert "Fp8LinearMethod.validate_block_quant_shapes" in text
    # compressed-tensors' validate_fp8_block_shape (fp8_utils.py) checks the same TP split
    ct = {**small, "quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g": {
        "targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "block",
                                           "block_structure": [128, 128]}}}}}  # fmt: skip
    with pytest.raises(UnsupportedConfigurationError, match="fp8_utils.py, validate_fp8_block_shape"):
        plan(ct, tp_size=8, gpu="H100")


def test_block_fp8_reading() -> None:
    assert block_fp8(QWEN3_235B_FP8, None) is not None
    assert block_fp8(QWEN3_235B_FP8, "nvfp4") is None  # another --quantization replaces the scheme
    ct = {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {
        "num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}}}}}  # fmt: skip
    found = block_fp8(ct, None)
    assert found is not None and found.loader == "compressed-tensors"


def test_mxfp4_on_mi300x_is_refused() -> None:
    """``Mxfp4Config.from_config`` (mxfp4.py) raises on ROCm before gfx950."""
    with pytest.raises(UnsupportedConfigurationError, match="Mxfp4Config.from_config"):
        plan(preset="gpt-oss-120b", gpu="MI300X")
    assert plan(preset="gpt-oss-120b", gpu="MI355X").sizes.max_total_num_tokens > 0


def test_a_request_longer_than_the_context_cannot_be_served() -> None:
    """``TokenizerManager._validate_one_request`` rejects input >= context_len and input +
    max_new_tokens > context_len: a 200,000-token request on Llama-3.1-8B's 131,072 tokens is refused,
    one of exactly the context is served."""
    planned = plan(preset="llama-3.1-8b", gpu="H100", request_lengths=(200_000, 131_072))
    too_long, whole = planned.fit.lengths
    assert not too_long.served and too_long.requests == 0
    assert "cannot be served" in too_long.limited_by and "_validate_one_request" in too_long.limited_by
    assert whole.served and whole.requests >= 1


MODELOPT_FP8 = {"quant_method": "modelopt", "quant_algo": "FP8"}


@pytest.mark.parametrize(
    ("preset", "qcfg", "flag", "gpu", "runner"),
    [
        # overrides._deepseek_moe_quant_resolution: fp8 / None / modelopt_* flags -> flashinfer_trtllm on SM100
        ("deepseek-v3", None, None, "B200", "flashinfer_trtllm"),
        ("deepseek-v3", None, None, "H200", "auto"),  # not SM100
        # config.json's raw quant_method "modelopt" is in none of the lists: the auto runner ...
        ("deepseek-v3", MODELOPT_FP8, None, "B200", "auto"),
        # ... unless --quantization names the ModelOpt scheme
        ("deepseek-v3", MODELOPT_FP8, "modelopt_fp8", "B200", "flashinfer_trtllm"),
        # model_overrides/qwen3_moe.py: fp8, modelopt_fp4, modelopt_mixed or None
        ("qwen3-30b-a3b", None, None, "GB300", "flashinfer_trtllm"),
        ("qwen3-30b-a3b", None, "awq", "B200", "auto"),
        # model_overrides/glm4_moe.py: modelopt_fp4 or None only (an fp8 checkpoint keeps auto)
        ("glm-4.5", None, None, "B200", "flashinfer_trtllm"),
        ("glm-4.5", {"quant_method": "fp8", "weight_block_size": [128, 128]}, None, "B200", "auto"),
        ("mixtral-8x7b", None, None, "B200", "auto"),  # no SM100 override for Mixtral
    ],
)
def test_sm100_moe_runner_choice(
    preset: str, qcfg: dict[str, object] | None, flag: str | None, gpu: str, runner: str
) -> None:
    config = load_preset_config(preset)
    config = {k: v for k, v in config.items() if k != "quantization_config"}
    if qcfg is not None:
        config["quantization_config"] = qcfg
    assert override_quantization(config, flag) == (flag or (qcfg or {}).get("quant_method") or "none")
    layout = moe_layout(config, tp=8, ep=1, gpu=lookup_gpu(gpu), quantization=override_quantization(config, flag))
    assert layout is not None and layout.runner == runner


def test_an_explicit_runner_or_an_a2a_backend_wins() -> None:
    config = load_preset_config("deepseek-v3")
    b200 = lookup_gpu("B200")
    given = moe_layout(config, tp=8, ep=1, gpu=b200, quantization="fp8", runner="triton")
    a2a = moe_layout(config, tp=8, ep=1, gpu=b200, quantization="fp8", a2a="deepep")
    assert given is not None and given.runner == "triton"
    assert a2a is not None and a2a.runner == "auto" and a2a.ep == 8


def test_nvfp4_row_parallel_inputs_must_be_multiples_of_16() -> None:
    """``ModelOptFp4LinearMethod.create_weights`` (modelopt_quant.py) raises 'in features size is not
    multiple of 16' for a rank's input width. down_proj is row-parallel: its input per rank is
    intermediate / tp = 12320 / 8 = 1540 (1540 % 16 = 4) or 12320 / 4 = 3080 (% 16 = 8), refused;
    12320 / 2 = 6160 = 16 x 385 loads."""
    nvfp4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}
    config = {**load_preset_config("qwen3-8b"), "intermediate_size": 12320, "quantization_config": nvfp4}
    for tp, width in ((8, 1540), (4, 3080)):
        with pytest.raises(UnsupportedConfigurationError, match=f"input width {width} is not a multiple of 16"):
            plan(config, tp_size=tp, gpu="B200")
    assert plan(config, tp_size=2, gpu="B200").sizes.max_total_num_tokens > 0


# ---- block-FP8 linears and expert parallelism at their edges, by hand --------------------------------------


def test_the_block_fp8_refusal_names_the_query_partition_first() -> None:
    """``Fp8LinearMethod.validate_block_quant_shapes`` (sglang/srt/layers/quantization/fp8.py) walks the
    output partitions in order and raises on the first that is not whole ``block_n`` blocks. 24 heads
    and 8 KV heads of dim 64 at TP 8 split qkv_proj into [24 / 8 x 64, 8 / 8 x 64, 64] = [192, 64, 64]:
    the query's 192 % 128 = 64 is named first."""
    with pytest.raises(UnsupportedConfigurationError, match=r"qkv_proj .* its output partition 192 is not"):
        plan_deployment(planner_request(block_fp8_llama(24, 8, BLOCK_FP8), tp_size=8), suggest=False)


# --- expert parallelism refusals ------------------------------------------------------------------


def test_an_ep_size_that_does_not_divide_tp_lists_every_divisor() -> None:
    """``derive_parallel_widths`` (sglang/srt/runtime_context.py) sets moe_tp_size = tp_size // ep_size,
    so the EP size must divide TP: --ep-size 3 at --tp 8 is refused offering 1, 2, 4, 8."""
    with pytest.raises(UnsupportedConfigurationError, match="Use an --ep-size that divides 8: 1, 2, 4, 8$"):
        plan_deployment(DeploymentRequest("q", {"preset": "qwen3-30b-a3b"}, tp_size=8, ep_size=3,
                                          gpu=lookup_gpu("H100")), suggest=False)  # fmt: skip


def test_experts_that_do_not_divide_over_ep_offer_the_sizes_that_do() -> None:
    """``FusedMoE.__init__`` (sglang/srt/layers/moe/fused_moe_triton/layer.py) needs num_experts % ep_size
    == 0: 60 routed experts over EP 8 are refused; of the divisors of --tp 8 (1, 2, 4, 8) those that
    divide 60 are 1, 2 and 4."""
    from kvstrategies.presets import load_preset_config

    config = {**load_preset_config("qwen3-30b-a3b"), "num_experts": 60}
    with pytest.raises(UnsupportedConfigurationError, match=r"num_experts % ep_size\)\. Use --ep-size 1 or 2 or 4$"):
        plan_deployment(planner_request(config, tp_size=8, ep_size=8), suggest=False)


def test_shared_experts_default_to_one() -> None:
    """``DeepseekV2MoE.__init__`` (sglang/srt/models/deepseek_v2.py) sizes the shared experts'
    MLP ``moe_intermediate_size x n_shared_experts``; a config without ``n_shared_experts`` is one
    shared expert: 2048 wide, not 4096."""
    from kvstrategies.sglang.load_refusals import _mlp_width

    module = "model.layers.1.mlp.shared_experts.gate_up_proj"
    assert _mlp_width({"moe_intermediate_size": 2048}, module) == 2048
    assert _mlp_width({"moe_intermediate_size": 2048, "n_shared_experts": 2}, module) == 4096


def test_block_fp8_whole_blocks_are_planned() -> None:
    """``Fp8LinearMethod.validate_block_quant_shapes`` (fp8.py) passes when every partition is whole
    ``block_n`` blocks: 128 heads and 128 KV heads of dim 64 at TP 1 merge qkv_proj as
    [128 x 64] x 3 = [8192, 8192, 8192], gate_up as [16384, 16384]: planned."""
    config = block_fp8_llama(128, 128, BLOCK_FP8, hidden=8192, inter=16384)
    assert plan_deployment(planner_request(config), suggest=False).sizes.max_total_num_tokens > 0
