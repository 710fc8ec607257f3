"""vLLM 0.18.1 to 0.31.0: each release rule that sets them apart, against a hand-computed expectation.

Sources (each release's own code): ``vllm/model_executor/layers/attention/attention.py
Attention.get_kv_cache_spec`` (0.29.0: ``_largest_kernel_block_within`` with no padded page),
``vllm/v1/core/kv_cache_utils.py`` (0.28.0: ``get_kv_cache_config_from_groups``, the memory check in
``get_kv_cache_configs``, ``_promote_local_kv_cache_specs``), ``vllm/v1/engine/core.py
EngineCore._initialize_kv_caches`` (the engine's block size), ``vllm/config/vllm.py
VllmConfig.use_v2_model_runner`` / ``max_concurrent_batches``, ``vllm/model_executor/layers/quantization/fp8.py
Fp8MoEMethod.create_weights`` (0.28.0), ``fused_moe/oracle/fp8.py refine_fp8_moe_block_shape`` (0.29.0),
``vllm/model_executor/models/deepseek_v2.py DeepseekV2MLAAttention.__init__`` (0.23.0: an indexer in every layer),
``vllm/v1/kv_cache_interface.py KVCacheTensor`` (0.23.0: no offset), ``vllm/v1/core/kv_cache_utils.py
_max_memory_usage_bytes_from_groups`` (0.18.1: the first group's blocks) and ``vllm/transformers_utils/config.py
get_config`` (0.18.1: transformers 4's config classes and vLLM's ``_CONFIG_REGISTRY``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.core.dtypes import DType
from kvstrategies.core.releases import VLLM, parse_release
from kvstrategies.errors import InsufficientMemoryError, UnsupportedConfigurationError
from kvstrategies.models.parse import parse_hf_config
from kvstrategies.presets import load_preset_config
from kvstrategies.vllm.planner.deployment import resolved_launch
from kvstrategies.vllm.planner.load_refusals import load_refusal
from kvstrategies.vllm.planner.request import VLLMPlanRequest
from kvstrategies.vllm.strategies.engine_args import vllm_deployment
from kvstrategies.vllm.strategies.launch import resolve_model_launch, uses_model_runner_v2
from kvstrategies.vllm.strategies.layers import mamba_state
from kvstrategies.vllm.strategies.sizing import KVCacheTensor, SharedKVCacheTensor, shared_tensors
from kvstrategies.vllm.strategies.specs import CacheLimits

GIB = 2**30


def _vllm(preset: str, release: str, **fields: object) -> object:
    case = parse_case({"preset": preset, "engine": "vllm", "vllm_version": release, "available_bytes": 40 * GIB,
                       **fields})  # fmt: skip
    return plan(case.settings, case.available_bytes)


def test_sliding_window_layers_take_the_smallest_kernel_block_up_to_0_29() -> None:
    # Mistral-7B: every layer slides (W 4,096), FLASH_ATTN takes MultipleOf(16) -> 16 whatever --block-size 64.
    # page = 16 x 8 heads x (128 + 128) x 2 B = 65,536; a block of 32 layers 2,097,152 B; 40 GiB / that = 20,480
    old = _vllm("mistral-7b", "0.29.0", page_size=64)
    assert old.vllm.block_size == 16
    assert old.vllm.num_gpu_blocks == 20_480
    # 0.30.0 keeps the primary block: 64 tokens, a block 4 x larger, 5,120 of them
    new = _vllm("mistral-7b", "0.30.0", page_size=64)
    assert new.vllm.block_size == 64
    assert new.vllm.num_gpu_blocks == 5_120


def test_a_16_token_sliding_page_is_scaled_to_the_full_layers_page() -> None:
    # gpt-oss-120b in 0.29.0: sliding layers 16 x 8 x (64 + 64) x 2 = 32,768 B, full layers 64 tokens 131,072 B;
    # unify_kv_cache_spec_page_size scales the sliding block by 131,072 / 32,768 = 4 to 64: both groups 64 tokens
    planned = _vllm("gpt-oss-120b", "0.29.0", page_size=64, context_length=8192)
    specs = dict((layers[0], spec) for layers, spec in planned.vllm.layer_specs)
    assert specs[0].block_size == 16 and specs[1].block_size == 64  # layer 0 slides, layer 1 is full
    assert {g.spec.block_size for g in planned.vllm.groups} == {64}
    assert planned.vllm.block_size == 64  # the smallest group block (EngineCore._initialize_kv_caches)


def test_promoted_sliding_layers_take_the_full_layers_block() -> None:
    # hybrid manager off, 0.29.0: the 16-token sliding specs become full attention on the full layers' 64-token
    # block (_promote_local_kv_cache_specs), so all 36 layers are one group of 64 x 8 x 128 x 2 = 131,072 B pages
    planned = _vllm("gpt-oss-120b", "0.29.0", page_size=64, context_length=8192, disable_hybrid_swa_memory=True)
    assert len(planned.vllm.groups) == 1
    group = planned.vllm.groups[0]
    assert len(group.layers) == 36 and group.spec.block_size == 64 and group.spec.page_size_bytes == 131_072


def test_0_28_shares_one_tensor_per_layer_position() -> None:
    # gpt-oss-20b (24 layers: 12 sliding, 12 full, two groups of 12) at 8,192 tokens: a block of the widest
    # group is 12 x 131,072 B; 40 GiB // 1,572,864 = 27,306 blocks; 12 tensors of 27,306 x 131,072 B, tensor i
    # shared by the i-th layer of each group (sliding layer 2i, full layer 2i + 1)
    planned = _vllm("gpt-oss-20b", "0.28.0", page_size=64, context_length=8192)
    assert planned.vllm.num_gpu_blocks == 27_306
    tensors = planned.vllm.tensors
    assert all(isinstance(t, SharedKVCacheTensor) for t in tensors)
    assert [t.shared_by for t in tensors] == [(2 * i, 2 * i + 1) for i in range(12)]
    assert {t.size for t in tensors} == {27_306 * 131_072}
    # vLLM 0.28.0's KVCacheTensor(size, shared_by, offset=0, block_stride=0), as the bridge records it
    assert tensors[0].document() == {"size": 27_306 * 131_072, "shared_by": [0, 1], "offset": 0, "block_stride": 0}
    assert planned.vllm.kv_cache_layout is None  # 0.28.0 resolves no KV cache layout
    # 0.29.0: one allocation per group at a layer stride of num_blocks pages
    later = _vllm("gpt-oss-20b", "0.29.0", page_size=64, context_length=8192)
    assert all(isinstance(t, KVCacheTensor) for t in later.vllm.tensors)
    assert later.vllm.num_gpu_blocks == 27_306 and later.vllm.kv_cache_layout == "LBNHC"


def test_0_28_checks_the_whole_budget_without_the_null_block() -> None:
    # Llama-3.1-70B TP 1 at 131,072 tokens: 80 layers x 8 x 256 x 2 B = 327,680 B a token, 40 GiB exactly.
    # 0.28.0 asks 40 GiB <= 40 GiB and plans 1 request; 0.29.0 first holds back a block (16 tokens)
    planned = _vllm("llama-3.1-70b", "0.28.0")
    assert planned.vllm.capacity.max_concurrency == 1.0
    with pytest.raises(InsufficientMemoryError, match="estimated maximum model length is 131056") as refused:
        _vllm("llama-3.1-70b", "0.29.0")
    # the refusal names the release's module: _check_enough_kv_cache_memory moved to kv_cache_planning.py in 0.33.0
    assert "vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory" in str(refused.value)
    with pytest.raises(InsufficientMemoryError, match="vllm/v1/core/kv_cache_planning.py _check_enough_kv_cache"):
        _vllm("llama-3.1-70b", "0.33.0")


@pytest.mark.parametrize(("preset", "pp", "batches"), [
    ("llama-3.1-70b", 2, 3),  # dense: Model Runner V2 in 0.28.0, pp + 1 with async scheduling
    ("gpt-oss-120b", 2, 2),  # MoE, not listed: the V1 runner, pp
    ("deepseek-v2-lite", 1, 2),  # listed (DeepseekV2ForCausalLM): V2, pp + 1
    ("gpt-oss-120b", 1, 2),  # V1 at PP 1 still overlaps two batches
])  # fmt: skip
def test_0_28_runs_model_runner_v2_only_for_listed_or_dense_models(preset: str, pp: int, batches: int) -> None:
    planned = _vllm(preset, "0.28.0", pp_size=pp, context_length=8192)
    assert planned.vllm.launch.max_concurrent_batches == batches
    assert _vllm(preset, "0.29.0", pp_size=pp, context_length=8192).vllm.launch.max_concurrent_batches == pp + 1


def test_the_planner_resolves_the_release_s_model_runner() -> None:
    # plan MODEL --engine vllm: gpt-oss-120b (MoE) at PP 2 runs V1 in 0.28.0 (2 batches of 8,192 in flight),
    # V2 in 0.29.0 (3)
    config = load_preset_config("gpt-oss-120b")
    fields = {"model": "gpt-oss-120b", "source": {"preset": "gpt-oss-120b"}, "config": config, "gpu": "H100-80GB",
              "pipeline_parallel_size": 2}  # fmt: skip
    old = resolved_launch(VLLMPlanRequest(**fields, release=parse_release("0.28.0", VLLM)))  # type: ignore[arg-type]
    new = resolved_launch(VLLMPlanRequest(**fields, release=parse_release("0.29.0", VLLM)))  # type: ignore[arg-type]
    assert (old.max_concurrent_batches, old.max_in_flight_tokens) == (2, 16_384)
    assert (new.max_concurrent_batches, new.max_in_flight_tokens) == (3, 24_576)


def test_a_single_expert_is_moe() -> None:
    # vLLM's is_moe is get_num_experts() > 0: one routed expert already takes the V1 runner in 0.28.0
    config = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 1024,
              "num_attention_heads": 8, "num_key_value_heads": 8, "num_hidden_layers": 4, "intermediate_size": 4096,
              "num_local_experts": 1, "max_position_embeddings": 4096}  # fmt: skip
    geometry = parse_hf_config(config)
    assert geometry.num_experts == 1
    deployment = vllm_deployment(parse_case({"hf_config": config, "engine": "vllm", "vllm_version": "0.28.0",
                                             "available_bytes": GIB, "pp_size": 2}).settings, GIB)  # fmt: skip
    assert resolve_model_launch(deployment, geometry, "0.28.0").max_concurrent_batches == 2
    assert resolve_model_launch(deployment, geometry, "0.29.0").max_concurrent_batches == 3


def test_model_runner_v2_choice_by_release() -> None:
    moe = ("Qwen3MoeForCausalLM",)
    assert uses_model_runner_v2(moe, is_moe=True, is_hybrid=False, version="0.28.0") is False
    assert uses_model_runner_v2(moe, is_moe=True, is_hybrid=False, version="0.29.0") is True
    assert uses_model_runner_v2(("Qwen2MoeForCausalLM",), is_moe=True, is_hybrid=False, version="0.28.0") is True
    assert uses_model_runner_v2(("NemotronHForCausalLM",), is_moe=False, is_hybrid=True, version="0.28.0") is False
    assert uses_model_runner_v2(("LlamaForCausalLM",), is_moe=False, is_hybrid=False, version="0.28.0") is True
    # DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES grew: Kimi-K3 from 0.27.1, DeepSeek-V4 from 0.28.0
    k3 = ("KimiK3ForConditionalGeneration",)
    assert [uses_model_runner_v2(k3, is_moe=True, is_hybrid=False, version=v) for v in ("0.26.0", "0.27.1")] == [
        False, True]
    v4 = ("DeepseekV4ForCausalLM",)
    assert [uses_model_runner_v2(v4, is_moe=True, is_hybrid=False, version=v) for v in ("0.27.1", "0.28.0")] == [
        False, True]


def _fp8_moe(intermediate: int, hidden: int) -> dict[str, object]:
    return {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": hidden,
            "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
            "moe_intermediate_size": intermediate, "num_hidden_layers": 48,
            "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}  # fmt: skip


def test_fp8_experts_split_into_partial_blocks_load_from_0_29_only() -> None:
    # Qwen3-30B-A3B-FP8 at TP 8: 768 / 8 = 96 per rank, not a multiple of 128; 0.29.0 refines to
    # gcd(128, 128, 96, 2048) = 32 and loads, 0.28.0 refuses with Fp8MoEMethod.create_weights' words
    config = _fp8_moe(768, 2048)
    assert load_refusal(config, 8, version="0.29.0") is None
    refusal = load_refusal(config, 8, version="0.28.0")
    assert refusal is not None
    assert refusal[1] == "The output_size of gate's and up's weight = 96 is not divisible by weight quantization " \
                         "block_n = 128."
    assert "Fp8MoEMethod.create_weights" in refusal[0]


def test_experts_without_moe_intermediate_size_use_intermediate_size() -> None:
    # MiniMax-M2.5: experts of intermediate_size 1,536; TP 16 leaves 96 a rank (refused by 0.28.0), TP 32 leaves 48:
    # gcd(128, 128, 48, 3,072) = 16 < 32, refused by every release
    config = dict(load_preset_config("minimax-m2.5"))
    assert "moe_intermediate_size" not in config
    assert load_refusal(config, 16, version="0.29.0") is None
    assert load_refusal(config, 16, version="0.28.0") is not None
    refusal = load_refusal(config, 32, version="0.34.0")
    assert refusal is not None and "= 48 is not divisible" in refusal[1]


def test_0_28_mamba_specs_carry_no_checkpoint_block_count() -> None:
    old = _vllm("nemotron-h-8b", "0.28.0", context_length=8192)
    new = _vllm("nemotron-h-8b", "0.29.0", context_length=8192)
    state = [s for _, s in old.vllm.layer_specs if type(s).__name__ == "MambaSpec"][0]
    assert "num_prefill_checkpoint_blocks" not in state.document()
    later = [s for _, s in new.vllm.layer_specs if type(s).__name__ == "MambaSpec"][0]
    assert later.document()["num_prefill_checkpoint_blocks"] == 0


def test_an_attention_free_stage_has_no_shared_tensors() -> None:
    # get_kv_cache_config_from_groups with no groups: kv_cache_tensors=[]
    assert shared_tensors((), 10) == ()


def test_0_27_b200_takes_the_70_gib_batch_tier() -> None:
    # EngineArgs.get_batch_defaults: the >= 160 GiB tier (16384 tokens) arrives in 0.28.0; 0.27.1's B200 is >= 70 GiB
    old = _vllm("llama-3.1-8b", "0.27.1", gpu="B200", context_length=8192).vllm.launch
    new = _vllm("llama-3.1-8b", "0.28.0", gpu="B200", context_length=8192).vllm.launch
    assert (old.max_num_batched_tokens, old.max_num_seqs) == (8192, 1024)
    assert (new.max_num_batched_tokens, new.max_num_seqs) == (16384, 1024)


def test_0_27_hybrids_take_no_prefix_caching_by_default() -> None:
    # default_prefix_caching = supported and not is_hybrid (0.27.1): Nemotron-H runs mamba_cache_mode "none",
    # a state a request (no checkpoint blocks); 0.28.0 turns prefix caching on ("align": 2 state pages a request)
    old = _vllm("nemotron-h-8b", "0.27.1", context_length=8192).vllm
    new = _vllm("nemotron-h-8b", "0.28.0", context_length=8192).vllm
    assert (old.launch.enable_prefix_caching, old.launch.mamba_cache_mode) == (False, "none")
    assert (new.launch.enable_prefix_caching, new.launch.mamba_cache_mode) == (True, "align")


def test_the_engine_block_is_the_smallest_group_block_mamba_groups_included() -> None:
    # Nemotron-H-56B TP 4 fp8 at 8,192 tokens in 0.27.1 (no prefix caching): the attention block aligns to
    # 8,256 tokens, the Mamba groups' block is max_model_len 8,192, and the engine takes min = 8,192
    planned = _vllm("nemotron-h-56b", "0.27.1", tp_size=4, kv_cache_dtype="fp8_e4m3", page_size=64,
                    context_length=8192).vllm  # fmt: skip
    blocks = {type(g.spec).__name__: g.spec.block_size for g in planned.groups}
    assert blocks == {"MambaSpec": 8192, "FullAttentionSpec": 8256}
    assert planned.block_size == 8192


def test_0_27_mla_specs_record_the_latent_as_head_size_v() -> None:
    # DeepSeek-V3 fp8 at TP 8: the latent row 512 + 64 = 576 bytes a token either way; 0.27.1 records
    # head_size_v 576 (AttentionSpec's default), 0.28.0 0 (MLAAttentionSpec)
    old = _vllm("deepseek-v3", "0.27.1", tp_size=8, kv_cache_dtype="fp8_e4m3", page_size=64).vllm
    new = _vllm("deepseek-v3", "0.28.0", tp_size=8, kv_cache_dtype="fp8_e4m3", page_size=64).vllm
    old_spec, new_spec = old.layer_specs[0][1], new.layer_specs[0][1]
    assert (old_spec.head_size_v, new_spec.head_size_v) == (576, 0)
    assert old_spec.page_size_bytes == new_spec.page_size_bytes == 64 * 576
    assert old.num_gpu_blocks == new.num_gpu_blocks


def test_0_27_chunked_local_specs_record_no_head_size_v() -> None:
    old = _vllm("llama-4-scout", "0.27.1", tp_size=4, context_length=8192).vllm
    new = _vllm("llama-4-scout", "0.28.0", tp_size=4, context_length=8192).vllm
    chunked = [s for _, s in old.layer_specs if type(s).__name__ == "ChunkedLocalAttentionSpec"][0]
    assert "head_size_v" not in chunked.document()
    later = [s for _, s in new.layer_specs if type(s).__name__ == "ChunkedLocalAttentionSpec"][0]
    assert later.document()["head_size_v"] == 128
    assert chunked.page_size_bytes == later.page_size_bytes  # 16 x 2 heads x (128 + 128) x 2 B


def test_0_26_aligns_an_mla_hybrid_to_its_kernel_block_only() -> None:
    # Kimi-Linear TP 1 bf16: a latent row of (512 + 64) x 2 = 1,152 B a token. 0.26.0 aligns the block to the
    # 32-token kernel block: 1,888 tokens, a 2,174,976 B page; from 0.27.1 to a multiple of 128: 1,920, 2,211,840 B
    old = _vllm("kimi-linear-48b-a3b", "0.26.0").vllm
    new = _vllm("kimi-linear-48b-a3b", "0.27.1").vllm
    assert (old.block_size, old.block_size % 32, old.block_size % 128) == (1888, 0, 96)
    assert {s.page_size_bytes for _, s in old.layer_specs} == {1888 * 1152}
    assert (new.block_size, {s.page_size_bytes for _, s in new.layer_specs}) == (1920, {1920 * 1152})


def test_0_26_refuses_promoted_layers_of_different_blocks() -> None:
    # hybrid manager off, 0.26.0: gpt-oss's sliding layers keep their 16-token block when promoted, next to the
    # full layers' 64, and unify_hybrid_kv_cache_specs refuses; 0.27.1 promotes them to 64 and plans
    with pytest.raises(UnsupportedConfigurationError, match="failed to convert the KV cache specs to one unified"):
        _vllm("gpt-oss-120b", "0.26.0", page_size=64, context_length=8192, disable_hybrid_swa_memory=True)
    assert len(_vllm("gpt-oss-120b", "0.27.1", page_size=64, context_length=8192,
                     disable_hybrid_swa_memory=True).vllm.groups) == 1  # fmt: skip


def test_0_25_sliding_windows_hold_one_batch_in_flight() -> None:
    # gpt-oss-120b, W 128, 64-token blocks, 8,192 batched tokens, 2 batches in flight from 0.26.0:
    # 0.25.1: cdiv(127 + 8,192, 64) + 1 = 131 blocks a request; 0.26.0: cdiv(127 + 16,384, 64) + 1 = 259.
    # 40 GiB // (18 x 131,072 B) = 18,204 blocks; tokens = int(18,204 / (131 + 2,048) x 131,072)
    old = _vllm("gpt-oss-120b", "0.25.1", page_size=64).vllm
    new = _vllm("gpt-oss-120b", "0.26.0", page_size=64).vllm
    assert old.capacity.blocks_per_request == 131 + 2048 and new.capacity.blocks_per_request == 259 + 2048
    assert old.num_gpu_blocks == new.num_gpu_blocks == 18_204
    assert old.capacity.tokens == int(18_204 / 2179 * 131_072) == 1_095_013
    assert new.capacity.tokens == 1_034_258
    assert old.launch.settings_document()["max_in_flight_tokens"] is None  # 0.25.1's VllmConfig has no such bound
    assert new.launch.settings_document()["max_in_flight_tokens"] == 16_384


def test_0_25_mla_specs_record_no_quant_mode_and_triton_mla_takes_fp8_on_ampere() -> None:
    old = _vllm("deepseek-v3", "0.25.1", tp_size=8, kv_cache_dtype="fp8_e4m3", page_size=64).vllm
    new = _vllm("deepseek-v3", "0.26.0", tp_size=8, kv_cache_dtype="fp8_e4m3", page_size=64).vllm
    assert "kv_quant_mode" not in old.layer_specs[0][1].document()
    assert new.layer_specs[0][1].document()["kv_quant_mode"] == "FP8_PER_TENSOR"
    # TritonMLAImpl.__init__ refuses an fp8 cache below SM 8.9 from 0.26.0 only
    assert _vllm("deepseek-v2-lite", "0.25.1", kv_cache_dtype="fp8_e4m3", gpu="A100-80GB").vllm.num_gpu_blocks > 0
    with pytest.raises(UnsupportedConfigurationError, match="requires SM89"):
        _vllm("deepseek-v2-lite", "0.26.0", kv_cache_dtype="fp8_e4m3", gpu="A100-80GB")


def test_a_model_of_sliding_layers_only_plans_without_the_hybrid_manager() -> None:
    # Mistral-7B: every layer slides, so the specs are uniform and unify_hybrid_kv_cache_specs leaves them as
    # they are (no promotion, no refusal), in 0.26.0 as in 0.34.0: one sliding-window group
    for release in ("0.26.0", "0.34.0"):
        planned = _vllm("mistral-7b", release, page_size=16, disable_hybrid_swa_memory=True).vllm
        assert [type(g.spec).__name__ for g in planned.groups] == ["SlidingWindowSpec"]


def test_0_24_runs_model_runner_v2_for_its_listed_architectures_only() -> None:
    # 0.24.0's _is_default_v2_model_runner_model: a listed architecture (Llama, Mistral, Qwen3, ...) only, so
    # Gemma-3 (dense, not listed) runs V1 at PP 2: 2 batches; from 0.25.1 every dense model runs V2: 3
    old = _vllm("gemma-3-27b", "0.24.0", tp_size=2, pp_size=2, context_length=8192).vllm.launch
    new = _vllm("gemma-3-27b", "0.25.1", tp_size=2, pp_size=2, context_length=8192).vllm.launch
    assert (old.model_runner_v2, old.max_concurrent_batches) == (False, 2)
    assert (new.model_runner_v2, new.max_concurrent_batches) == (True, 3)
    llama = _vllm("llama-3.1-70b", "0.24.0", tp_size=4, pp_size=2, context_length=8192).vllm.launch
    assert llama.max_concurrent_batches == 3  # LlamaForCausalLM is listed


def test_0_24_gemma3_asks_for_no_multimodal_prefix_and_sliding_layers_keep_the_primary_block() -> None:
    # Gemma-3-27B (multimodal config) on H200: 0.24.0's model asks the selector for no mm prefix, so FLASH_ATTN
    # leads; 0.25.1's asks for it, and only TRITON_ATTN / FLEX_ATTENTION take it
    assert _vllm("gemma-3-27b", "0.24.0").vllm.backends == ("FLASH_ATTN",)
    assert _vllm("gemma-3-27b", "0.25.1").vllm.backends == ("TRITON_ATTN",)
    # Mistral-7B --block-size 64: 0.24.0's sliding layers keep the 64-token block (5,120 blocks on 40 GiB),
    # 0.25.1's take the kernel's 16 (20,480)
    assert _vllm("mistral-7b", "0.24.0", page_size=64).vllm.num_gpu_blocks == 5_120
    assert _vllm("mistral-7b", "0.25.1", page_size=64).vllm.num_gpu_blocks == 20_480


def _llama_case(release: str, **config: object) -> object:
    case = parse_case({"hf_config": load_preset_config("llama-3.1-70b") | config, "engine": "vllm",
                       "vllm_version": release, "tp_size": 4, "pp_size": 2, "context_length": 8192,
                       "available_bytes": 40 * GIB})  # fmt: skip
    return plan(case.settings, case.available_bytes).vllm.launch


def test_0_23_runs_model_runner_v2_for_unquantized_dense_listed_models_only() -> None:
    # 0.23.0's _is_default_v2_model_runner_model: a listed architecture (Llama, Mistral, Qwen3) that is neither MoE
    # nor quantized; 0.24.0 takes any listed one, DeepSeek-V2 (MoE) included
    llama = ("LlamaForCausalLM",)
    assert uses_model_runner_v2(llama, is_moe=False, is_hybrid=False, version="0.23.0") is True
    assert uses_model_runner_v2(llama, is_moe=False, is_hybrid=False, version="0.23.0", is_quantized=True) is False
    assert uses_model_runner_v2(llama, is_moe=False, is_hybrid=False, version="0.24.0", is_quantized=True) is True
    deepseek = ("DeepseekV2ForCausalLM",)
    assert [uses_model_runner_v2(deepseek, is_moe=True, is_hybrid=False, version=v) for v in ("0.23.0", "0.24.0")] == [
        False, True]  # fmt: skip
    # at PP 2 with async scheduling: V2 overlaps pp + 1 = 3 batches, V1 pp = 2 (a quantization_config: quantized)
    assert _llama_case("0.23.0").max_concurrent_batches == 3
    assert _llama_case("0.23.0", quantization_config={"quant_method": "fp8"}).max_concurrent_batches == 2
    assert _llama_case("0.24.0", quantization_config={"quant_method": "fp8"}).max_concurrent_batches == 3


def _freq4_dsa(release: str) -> Any:
    """DeepSeek-V3.2 with ``index_topk_freq`` 4, a bf16 cache, TP 8, 64-token blocks, 40 GiB on H200."""
    config = load_preset_config("deepseek-v3.2") | {"index_topk_freq": 4}
    case = parse_case({"hf_config": config, "engine": "vllm", "vllm_version": release, "tp_size": 8,
                       "page_size": 64, "kv_cache_dtype": "bf16", "available_bytes": 40 * GIB})  # fmt: skip
    return plan(case.settings, case.available_bytes).vllm


def test_0_23_holds_indexer_keys_in_every_sparse_attention_layer() -> None:
    # DeepSeek-V3.2 with index_topk_freq 4, bf16 cache, TP 8, H200: a latent page 64 x 576 x 2 B = 73,728 B, an
    # indexer page 64 x (128 + 4) = 8,448 B. 0.24.0 builds an indexer only where a layer keeps its own top-k
    # (16 of 61 layers): 61 x 73,728 + 16 x 8,448 = 4,632,576 B a block; 0.23.0 in all 61: 61 x 82,176 = 5,012,736
    blocks = {}
    for release in ("0.23.0", "0.24.0"):
        planned = _freq4_dsa(release)
        assert planned.backends == ("DEEPSEEK_V32_INDEXER", "FLASHMLA_SPARSE")  # Hopper's one sparse backend then
        blocks[release] = planned.bytes_per_block
    assert blocks == {"0.23.0": 61 * (73_728 + 8_448), "0.24.0": 61 * 73_728 + 16 * 8_448}
    assert blocks["0.23.0"] == 5_012_736 and blocks["0.24.0"] == 4_632_576


@pytest.mark.parametrize(("release", "backend"), [
    ("0.23.0", None),  # Hopper's sparse tail: FLASHMLA_SPARSE alone, which takes fp8_ds_mla, not fp8_e4m3
    ("0.29.0", None),  # FLASH_ATTN_MLA_SPARSE (0.25.1 on) takes 16-bit caches only
    ("0.30.0", "FLASHINFER_MLA_SPARSE_SM90"),  # the first Hopper backend that takes fp8_e4m3
])  # fmt: skip
def test_an_fp8_e4m3_sparse_cache_on_hopper_needs_flashinfer_sm90(release: str, backend: str | None) -> None:
    if backend is None:  # get_attn_backend_cls finds no valid backend
        with pytest.raises(UnsupportedConfigurationError, match="No valid attention backend found"):
            _vllm("deepseek-v3.2", release, tp_size=8, page_size=64, kv_cache_dtype="fp8_e4m3")
        return
    planned = _vllm("deepseek-v3.2", release, tp_size=8, page_size=64, kv_cache_dtype="fp8_e4m3").vllm
    assert planned.backends == ("DEEPSEEK_V32_INDEXER", backend)


def test_a_16_bit_sparse_cache_on_hopper_takes_flash_attn_mla_sparse_from_0_25() -> None:
    # DeepSeek-V3.2 bf16 (read as auto), TP 8, H200: 0.24.0 has FLASHMLA_SPARSE alone, 0.25.1 puts
    # FLASH_ATTN_MLA_SPARSE first; the 16-bit latent page is 64 x 576 x 2 = 73,728 B on both
    for release, backend in (("0.24.0", "FLASHMLA_SPARSE"), ("0.25.1", "FLASH_ATTN_MLA_SPARSE")):
        planned = _vllm("deepseek-v3.2", release, tp_size=8, page_size=64, kv_cache_dtype="bf16").vllm
        assert planned.backends == ("DEEPSEEK_V32_INDEXER", backend)
        assert planned.bytes_per_block == 61 * (73_728 + 8_448)


def test_0_23_tensors_record_no_offset_or_block_stride() -> None:
    # 0.23.0's KVCacheTensor holds a size and shared_by only; 0.24.0 to 0.28.0 add offset 0 and block_stride 0
    old = _vllm("llama-3.1-8b", "0.23.0", context_length=8192).vllm.tensors[0]
    new = _vllm("llama-3.1-8b", "0.24.0", context_length=8192).vllm.tensors[0]
    assert old.document() == {"size": old.size, "shared_by": [0]}
    assert new.document() == {"size": new.size, "shared_by": [0], "offset": 0, "block_stride": 0}
    assert old.size == new.size


def test_a_deepseek_v3_config_without_an_expert_count_takes_the_config_class_default() -> None:
    # vLLM reads deepseek_v3 / deepseek_v32 configs with transformers' DeepseekV3Config: n_routed_experts 256
    base = load_preset_config("deepseek-v3.2")
    bare = {k: v for k, v in base.items() if k != "n_routed_experts"}
    assert parse_hf_config(bare).num_experts == 256
    assert parse_hf_config(bare | {"n_routed_experts": 8}).num_experts == 8
    llama = load_preset_config("llama-3.1-8b")
    assert parse_hf_config(llama).num_experts == 0


def test_0_29_packs_one_latent_section_then_the_indexer_s() -> None:
    # DeepSeek-V3.2 index_topk_freq 4, bf16, TP 8 (61 layers; 16 keep their own top-k, layer 0 first, which
    # registers its indexer before its latent): 0.29.0 cuts the packed buffer by spec in order of first appearance,
    # every indexer (16 x N x 8,448 B) then every latent (61 x N x 73,728 B); from 0.30.0 a leader's latent is a
    # spec of its own, so the sections follow the buckets (3 here)
    tensors = {}
    for release in ("0.29.0", "0.30.0"):
        planned = _freq4_dsa(release)
        tensors[release] = (planned.num_gpu_blocks, planned.tensors)
    blocks, (indexer, latent) = tensors["0.29.0"]
    assert blocks == 40 * GIB // (61 * 73_728 + 16 * 8_448)
    assert (len(indexer.layers), indexer.layer_stride, indexer.offset) == (16, blocks * 8_448, 0)
    assert (len(latent.layers), latent.layer_stride, latent.offset) == (61, blocks * 73_728, 16 * blocks * 8_448)
    assert len(tensors["0.30.0"][1]) == 3


def test_0_31_rounds_a_flat_sparse_block_up_to_a_latent_row() -> None:
    # DeepSeek-V3.2 fp8_e4m3, TP 8, B200, block 64 (FLASHINFER_MLA_SPARSE reads the cache as flat rows): a block
    # is 61 x (36,864 + 8,448) = 2,764,032 B; 0.31.0 aligns it to the 576-byte latent row: 4,799 x 576 =
    # 2,764,224 B, so 40 GiB holds 15,537 blocks (15,538 in 0.30.0 and 0.32.0)
    blocks = {r: _vllm("deepseek-v3.2", r, tp_size=8, page_size=64, kv_cache_dtype="fp8_e4m3", gpu="B200").vllm
              for r in ("0.30.0", "0.31.0", "0.32.0")}  # fmt: skip
    assert blocks["0.31.0"].bytes_per_block == 4_799 * 576 == 2_764_224
    assert blocks["0.31.0"].num_gpu_blocks == 40 * GIB // 2_764_224 == 15_537
    assert [blocks[r].num_gpu_blocks for r in ("0.30.0", "0.32.0")] == [40 * GIB // 2_764_032] * 2 == [15_538] * 2
    assert blocks["0.31.0"].tensors[0].size == 15_537 * 2_764_224


def test_0_22_overlaps_the_executor_s_batches_whatever_the_runner() -> None:
    # Qwen3-8B (Qwen3ForCausalLM, the one architecture 0.22.1 runs on Model Runner V2) at PP 2 with async
    # scheduling: 0.22.1's MultiprocExecutor.max_concurrent_batches is pp = 2; 0.23.0's VllmConfig gives V2
    # pp + 1 = 3. At PP 1 both overlap 2
    def batches(release: str, pp: int) -> int:
        launch = _vllm("qwen3-8b", release, pp_size=pp, context_length=8192).vllm.launch
        assert launch.model_runner_v2 is True
        return launch.max_concurrent_batches

    assert [batches("0.22.1", 2), batches("0.23.0", 2)] == [2, 3]
    assert [batches("0.22.1", 1), batches("0.23.0", 1)] == [2, 2]
    assert uses_model_runner_v2(("LlamaForCausalLM",), is_moe=False, is_hybrid=False, version="0.22.1") is False


def test_0_22_keeps_three_kda_conv_states() -> None:
    # Kimi-Linear TP 1: KDA's q, k and v convs over 32 heads x 128 = 4,096 channels each, a 3-token window:
    # 0.22.1 keeps three (3, 4,096) bf16 states, 0.23.0 one (3, 12,288); both 3 x 12,288 x 2 = 73,728 B beside
    # the (32, 128, 128) float32 recurrent state
    old = mamba_state(parse_hf_config(load_preset_config("kimi-linear-48b-a3b")), 1, parse_release("0.22.1", VLLM))
    new = mamba_state(parse_hf_config(load_preset_config("kimi-linear-48b-a3b")), 1, parse_release("0.23.0", VLLM))
    assert old.shapes == ((3, 4_096), (3, 4_096), (3, 4_096), (32, 128, 128))
    assert new.shapes == ((3, 12_288), (32, 128, 128))
    assert old.dtypes == (DType.BFLOAT16,) * 3 + (DType.FLOAT32,) and new.dtypes == (DType.BFLOAT16, DType.FLOAT32)
    assert 3 * 3 * 4_096 * 2 == 3 * 12_288 * 2 == 73_728


def test_0_21_runs_no_model_on_model_runner_v2_by_default() -> None:
    # 0.21.0 takes Model Runner V2 only with VLLM_USE_V2_MODEL_RUNNER=1 (vllm/envs.py, default 0); 0.22.1 runs it
    # for Qwen3ForCausalLM by default
    qwen3 = ("Qwen3ForCausalLM",)
    assert uses_model_runner_v2(qwen3, is_moe=False, is_hybrid=False, version="0.21.0") is False
    assert uses_model_runner_v2(qwen3, is_moe=False, is_hybrid=False, version="0.22.1") is True


def test_0_21_names_the_model_models_s_in_its_memory_refusal() -> None:
    # Llama-3.1-8B bf16 at 131,072 tokens: 32 layers x 8 heads x 256 x 2 B x 131,072 = 16 GiB for one request;
    # 0.21.0's _check_enough_kv_cache_memory writes "the models's max seq len", 0.22.1 "the model's"
    for release, word in (("0.21.0", "models's"), ("0.22.1", "model's")):
        with pytest.raises(InsufficientMemoryError, match=f"with the {word} max seq len \\(131072\\), \\(16.0 GiB"):
            _vllm("llama-3.1-8b", release, available_bytes=8 * GIB)


def test_0_20_records_the_mamba_layer_type_not_its_backend_class() -> None:
    # MambaSpec.mamba_type: 0.20.2 the layer's own name (MambaMixer2.mamba_type: "mamba2"), 0.21.0 the backend's
    # class path; the pages are the same
    old = _vllm("nemotron-h-8b", "0.20.2", context_length=8192).vllm
    new = _vllm("nemotron-h-8b", "0.21.0", context_length=8192).vllm
    old_mamba = next(g.spec for g in old.groups if type(g.spec).__name__ == "MambaSpec")
    new_mamba = next(g.spec for g in new.groups if type(g.spec).__name__ == "MambaSpec")
    assert old_mamba.mamba_type == "mamba2"
    assert new_mamba.mamba_type == "vllm.v1.attention.backends.mamba2_attn.Mamba2AttentionBackend"
    assert old_mamba.page_size_bytes == new_mamba.page_size_bytes and old.num_gpu_blocks == new.num_gpu_blocks


def test_0_20_promotes_a_sliding_layer_with_v_as_wide_as_k() -> None:
    # MiMo-V2-Flash TP 4 without the hybrid manager, block 64: its sliding layers (8 KV heads, 2 per rank; K 192,
    # V 128) become full attention; 0.20.2's unify_hybrid_kv_cache_specs drops head_size_v, so V takes K's 192:
    # a page of 64 x 2 x (192 + 192) x 2 = 98,304 B instead of 64 x 2 x (192 + 128) x 2 = 81,920 B
    fields = {"tp_size": 4, "page_size": 64, "disable_hybrid_swa_memory": True, "context_length": 8192}
    pages = {}
    for release in ("0.20.2", "0.21.0"):
        (group,) = _vllm("mimo-v2-flash", release, **fields).vllm.groups
        pages[release] = sorted({spec.page_size_bytes for _, spec in group.spec.entries})
    assert pages["0.20.2"][-1] == 64 * 2 * (192 + 192) * 2 == 98_304
    assert 64 * 2 * (192 + 128) * 2 == 81_920 in pages["0.21.0"]


def test_0_20_leaves_an_nvfp4_mla_cache_to_the_selector() -> None:
    # DeepSeek-V2-Lite nvfp4 on B200: 0.21.0's VllmConfig refuses nvfp4 with MLA; 0.20.2 has no such check and its
    # selector finds no MLA backend that takes nvfp4
    with pytest.raises(UnsupportedConfigurationError, match="nvfp4 KV cache is not supported with MLA"):
        _vllm("deepseek-v2-lite", "0.21.0", kv_cache_dtype="nvfp4", gpu="B200")
    with pytest.raises(UnsupportedConfigurationError, match="No valid attention backend found"):
        _vllm("deepseek-v2-lite", "0.20.2", kv_cache_dtype="nvfp4", gpu="B200")


def test_a_flat_sparse_latent_aligns_a_block_to_its_row() -> None:
    # MLAAttentionSpec.state_content_size_bytes: (head_size + head_size_v) x es; a 64-token block of an fp8 latent
    # (36,864 B) and an indexer (8,448 B) is 45,312 B, which a 576-byte row alignment rounds up to 79 x 576 = 45,504
    from kvstrategies.vllm.strategies.specs import MLAAttentionSpec, UniformTypeKVCacheSpecs

    latent = MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=576, dtype=DType.UINT8)
    indexer = MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=132, dtype=DType.UINT8)
    assert latent.state_content_size_bytes == 576
    assert MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=576, head_size_v=576,
                            dtype=DType.BFLOAT16).state_content_size_bytes == 2_304  # fmt: skip
    plain = UniformTypeKVCacheSpecs(block_size=64, entries=((0, indexer), (0, latent)))
    aligned_latent = replace(latent, block_stride_alignment=576)
    aligned = UniformTypeKVCacheSpecs(block_size=64, entries=((0, indexer), (0, aligned_latent)))
    assert plain.block_bytes == plain.page_size_bytes == 8_448 + 36_864 == 45_312
    assert aligned.block_bytes == 79 * 576 == 45_504
    # a block already a multiple of the alignment keeps its bytes: 45,312 = 708 x 64
    exact_latent = replace(latent, block_stride_alignment=64)
    exact = UniformTypeKVCacheSpecs(block_size=64, entries=((0, indexer), (0, exact_latent)))
    assert exact.block_bytes == 708 * 64 == 45_312


@pytest.mark.parametrize(("tp", "row"), [(8, "|sh"), (4, "|s")])
def test_the_sparse_backend_row_counts_the_heads_a_rank_holds(tp: int, row: str) -> None:
    # DeepSeek-V3.2's 128 query heads: 16 a rank at TP 8 (row flag h: at most 16, which orders SM 10.x's 16-bit
    # backends), 32 at TP 4; a cache dtype the tables do not record names the row it looked for
    with pytest.raises(UnsupportedConfigurationError, match=f"576\\|fp8_e5m2\\{row} \\("):
        _vllm("deepseek-v3.2", "0.33.0", tp_size=tp, page_size=64, kv_cache_dtype="fp8_e5m2")


def test_0_19_sizes_a_hybrid_block_in_16_token_steps() -> None:
    # Qwen3-Next-80B TP 4 --block-size 64: a GDN state of (3, 2,048) bf16 conv = 12,288 B plus (8, 128, 128) bf16
    # = 262,144 B, 274,432 B; an attention token 1 KV head x (256 + 256) x 2 B = 1,024 B. 0.19.1's
    # HybridAttentionMambaModelConfig: 16 x cdiv(274,432, 16 x 1,024) = 16 x 17 = 272 tokens (larger than 64);
    # 0.20.2's _align_hybrid_block_size steps by the 64-token block: 64 x cdiv(274,432, 65,536) = 320
    old = _vllm("qwen3-next-80b-a3b", "0.19.1", tp_size=4, page_size=64, context_length=8192).vllm
    new = _vllm("qwen3-next-80b-a3b", "0.20.2", tp_size=4, page_size=64, context_length=8192).vllm
    assert (old.block_size, new.block_size) == (272, 320)
    assert {g.spec.page_size_bytes for g in old.groups} == {272 * 1_024}
    assert {g.spec.page_size_bytes for g in new.groups} == {320 * 1_024}


def test_0_19_keeps_a_hybrid_s_attention_layers_at_the_default_block() -> None:
    # Nemotron-H-8B TP 1, no --block-size: a Mamba2 state of (3, 10,240) bf16 + (128, 64, 128) float32 =
    # 61,440 + 4,194,304 = 4,255,744 B; an attention token 8 heads x 256 x 2 B = 4,096 B: 16 x cdiv(4,255,744,
    # 65,536) = 1,040 tokens, the state page padded to 1,040 x 4,096 = 4,259,840 B. 0.19.1's executor then sets the
    # attention layers back to 16 tokens (update_block_size_for_backend, a hybrid), and unify scales the group to
    # 1,040; 0.20.2's layers are built at 1,040
    old = _vllm("nemotron-h-8b", "0.19.1", context_length=8192).vllm
    new = _vllm("nemotron-h-8b", "0.20.2", context_length=8192).vllm
    attention = [s for _, s in old.layer_specs if type(s).__name__ == "FullAttentionSpec"]
    assert [(s.block_size, s.page_size_bytes) for s in attention] == [(16, 65_536)]
    later = [s for _, s in new.layer_specs if type(s).__name__ == "FullAttentionSpec"]
    assert [(s.block_size, s.page_size_bytes) for s in later] == [(1_040, 4_259_840)]
    assert old.block_size == new.block_size == 1_040 and old.num_gpu_blocks == new.num_gpu_blocks
    assert {g.spec.page_size_bytes for g in old.groups} == {4_259_840}


def test_0_19_pads_mimo_v2_s_values_to_the_key_width() -> None:
    # MiMo-V2-Flash TP 8 --block-size 128 on H200 (1 KV head a rank, K 192, V 128): 0.19.1 pads V to 192 and runs
    # FLASH_ATTN, a page of 128 x 1 x (192 + 192) x 2 = 98,304 B; 0.20.2's FLASH_ATTN_DIFFKV keeps V at 128:
    # 128 x (192 + 128) x 2 = 81,920 B
    old = _vllm("mimo-v2-flash", "0.19.1", tp_size=8, page_size=128, context_length=8192).vllm
    new = _vllm("mimo-v2-flash", "0.20.2", tp_size=8, page_size=128, context_length=8192).vllm
    assert (old.backends, new.backends) == (("FLASH_ATTN",), ("FLASH_ATTN_DIFFKV",))
    assert {g.spec.page_size_bytes for g in old.groups} == {98_304}
    assert {g.spec.page_size_bytes for g in new.groups} == {81_920}


def test_0_19_sliding_and_fp8_specs_record_fewer_fields() -> None:
    # gpt-oss-20b fp8 on H200: 0.19.1's SlidingWindowSpec has no head_size_v and no attention spec a
    # kv_quant_mode; 0.20.2 records both. The pages are the same: 16 x 8 x (64 + 64) x 1 B = 16,384
    old = _vllm("gpt-oss-20b", "0.19.1", kv_cache_dtype="fp8_e4m3", context_length=8192).vllm
    new = _vllm("gpt-oss-20b", "0.20.2", kv_cache_dtype="fp8_e4m3", context_length=8192).vllm
    kinds = {type(s).__name__: s.document() for _, s in old.layer_specs}
    assert "head_size_v" not in kinds["SlidingWindowSpec"] and kinds["FullAttentionSpec"]["head_size_v"] == 64
    assert not any("kv_quant_mode" in d for d in kinds.values())
    later = {type(s).__name__: s.document() for _, s in new.layer_specs}
    assert later["SlidingWindowSpec"]["head_size_v"] == 64
    assert {d["kv_quant_mode"] for d in later.values()} == {"FP8_PER_TENSOR"}
    assert {s.page_size_bytes for _, s in old.layer_specs} == {s.page_size_bytes for _, s in new.layer_specs}


def test_0_19_gemma3_asks_for_multimodal_prefix_by_model_type_and_takes_no_nvfp4() -> None:
    # ModelConfig.is_mm_prefix_lm lists gemma3 in 0.19.1: TRITON_ATTN on H200; 0.20.2 asks for no mm prefix
    assert _vllm("gemma-3-27b", "0.19.1").vllm.backends == ("TRITON_ATTN",)
    assert _vllm("gemma-3-27b", "0.20.2").vllm.backends == ("FLASH_ATTN",)
    # 0.19.1's CacheDType Literal ends at fp8_ds_mla
    with pytest.raises(UnsupportedConfigurationError, match="'fp8_inc' or 'fp8_ds_mla'"):
        _vllm("llama-3.1-8b", "0.19.1", kv_cache_dtype="nvfp4", gpu="B200")


def test_0_18_checks_one_request_against_the_first_group_only() -> None:
    # gpt-oss-20b TP 1 --block-size 16 with 1 GiB + 1 B at 131,072 tokens: two groups of 12 layers, pages of
    # 16 x 8 x (64 + 64) x 2 = 32,768 B, a block 12 x 32,768 = 393,216 B. The first group slides (window 128):
    # cdiv(127 + 8,192, 16) + 1 = 521 blocks a request; the full group 131,072 / 16 = 8,192. 0.18.1's
    # _max_memory_usage_bytes_from_groups counts the first group's only: 393,216 x 521 = 0.19 GiB fits, and the budget
    # holds 1,073,741,825 // 393,216 = 2,730 blocks; 0.19.1 sums both, 393,216 x 8,713 = 3.19 GiB, and refuses
    old = _vllm("gpt-oss-20b", "0.18.1", page_size=16, available_bytes=GIB + 1).vllm
    limits = CacheLimits(131_072, 8_192)
    assert [g.spec.blocks_per_request(limits) for g in old.groups] == [521, 8_192]
    assert old.num_gpu_blocks == 2_730
    with pytest.raises(InsufficientMemoryError, match=r"\(3\.19 GiB KV cache is needed"):
        _vllm("gpt-oss-20b", "0.19.1", page_size=16, available_bytes=GIB + 1)


def test_0_18_refuses_a_config_transformers_4_cannot_read() -> None:
    # 0.18.1 pins transformers < 5 (4.57.6): no config class for nemotron_h, and vLLM 0.18.1's _CONFIG_REGISTRY lists
    # none either, so ModelConfig refuses before any other check (GLM-5 fp8_e4m3 on H200 would otherwise find no
    # sparse backend); 0.19.1 reads both configs
    for preset, model_type, fields in (("nemotron-h-8b", "nemotron_h", {}),
                                       ("glm-5", "glm_moe_dsa", {"tp_size": 8, "kv_cache_dtype": "fp8_e4m3"})):
        with pytest.raises(UnsupportedConfigurationError,
                           match=f"has model type `{model_type}` but Transformers does not recognize"):
            _vllm(preset, "0.18.1", **fields)
    assert _vllm("nemotron-h-8b", "0.19.1", context_length=8192).vllm.num_gpu_blocks > 0
