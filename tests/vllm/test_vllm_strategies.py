"""The vLLM strategies' rules, each against a hand-computed expectation from vLLM 0.33.0's own source.

Sources: ``vllm/v1/kv_cache_interface.py`` (spec page bytes and per-request blocks),
``vllm/v1/core/kv_cache_planning.py`` (grouping, null block, num_blocks),
``vllm/v1/core/kv_cache_utils.py get_kv_cache_capacity``, ``vllm/platforms/interface.py
_align_hybrid_block_size``, ``vllm/distributed/utils.py get_pp_indices``,
``vllm/engine/arg_utils.py EngineArgs.get_batch_defaults``.
"""

from __future__ import annotations

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.context import KVCacheSettings
from kvstrategies.core.dtypes import DType
from kvstrategies.core.releases import NEWEST_VLLM, VLLM, parse_release
from kvstrategies.errors import InsufficientMemoryError, UnsupportedConfigurationError
from kvstrategies.planner.gpus import GPUS
from kvstrategies.presets import load_preset_config
from kvstrategies.strategies.registry import select_configurator_class
from kvstrategies.vllm.strategies.devices import DEVICES, VLLMDevice, vllm_device
from kvstrategies.vllm.strategies.engine_args import vllm_deployment
from kvstrategies.vllm.strategies.grouping import KVCacheGroup, kv_cache_groups, padding_layers
from kvstrategies.vllm.strategies.launch import batch_defaults
from kvstrategies.vllm.strategies.layers import pp_indices
from kvstrategies.vllm.strategies.sizing import check_enough_memory
from kvstrategies.vllm.strategies.specs import CacheLimits, FullAttentionSpec, MambaSpec, SlidingWindowSpec

GIB = 2**30


def _vllm(preset: str, **fields: object) -> object:
    # the hand-computed numbers here are vLLM 0.33.0's (16-token default block; 0.34.0: tests/vllm/test_vllm_golden.py)
    case = parse_case({"preset": preset, "engine": "vllm", "vllm_version": "0.33.0", "available_bytes": 40 * GIB,
                       **fields})  # fmt: skip
    return plan(case.settings, case.available_bytes)


def test_the_engine_axis_names_vllm() -> None:
    assert parse_release("0.34.0", VLLM) == NEWEST_VLLM
    assert NEWEST_VLLM.label == "vLLM 0.34.0"
    assert parse_release("0.33.0", VLLM) < NEWEST_VLLM


def test_full_attention_page_and_blocks() -> None:
    # Llama-3.1-8B TP1 bf16, block 16: page = 16 x 8 heads x (128 + 128) x 2 B = 65,536
    spec = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, head_size_v=128, dtype=DType.BFLOAT16)
    assert spec.page_size_bytes == 65_536
    assert spec.blocks_per_request(CacheLimits(8192, 16384)) == 512  # cdiv(8192, 16)


def test_sliding_window_holds_window_plus_in_flight_plus_one() -> None:
    # gpt-oss: W 128, in flight 2 x 8192: cdiv(min(127 + 16384, 8192), 16) + 1 = 513
    spec = SlidingWindowSpec(block_size=16, num_kv_heads=8, head_size=64, head_size_v=64, dtype=DType.BFLOAT16,
                             sliding_window=128)
    assert spec.blocks_per_request(CacheLimits(8192, 16384)) == 513
    # at 131,072 tokens the window saves: cdiv(127 + 16384, 16) + 1 = 1,032 + 1
    assert spec.blocks_per_request(CacheLimits(131072, 16384)) == 1033


def test_mamba_align_mode_holds_three_pages() -> None:
    spec = MambaSpec(block_size=320, shapes=((3, 2048), (8, 128, 128)), dtypes=(DType.BFLOAT16, DType.BFLOAT16),
                     page_size_padded=327_680, num_prefill_checkpoint_blocks=1)
    assert spec.state_bytes == 3 * 2048 * 2 + 8 * 128 * 128 * 2 == 274_432
    assert spec.blocks_per_request(CacheLimits(8192, 16384, "align")) == 3  # 2 + 0 speculative + 1 checkpoint
    assert spec.blocks_per_request(CacheLimits(8192, 16384, "none")) == 1


def test_grouping_pads_the_short_groups() -> None:
    # Gemma-3-27B: 52 sliding + 10 full layers -> group size 10 -> 6 SWA groups 9,9,9,9,8,8 + 1 full of 10
    full = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, head_size_v=128, dtype=DType.BFLOAT16)
    swa = SlidingWindowSpec(block_size=16, num_kv_heads=8, head_size=128, head_size_v=128, dtype=DType.BFLOAT16,
                            sliding_window=1024)
    specs = {i: (full if (i + 1) % 6 == 0 else swa) for i in range(62)}
    groups = kv_cache_groups(specs, disable_hybrid=False)
    assert [len(g.layers) for g in groups] == [9, 9, 9, 9, 8, 8, 10]
    assert padding_layers(groups) == 8  # vLLM: "Add 8 padding layers"


def test_pp_split_gives_the_remainder_to_the_stages_before_the_last() -> None:
    assert pp_indices(61, 0, 2) == (0, 31) and pp_indices(61, 1, 2) == (31, 61)
    assert [pp_indices(10, r, 4) for r in range(4)] == [(0, 2), (2, 5), (5, 8), (8, 10)]


def test_batch_defaults_by_gpu_memory() -> None:
    assert batch_defaults(vllm_device("H200")) == (8192, 1024)
    assert batch_defaults(vllm_device("B200")) == (16384, 1024)  # >= 160 GiB
    assert batch_defaults(vllm_device("A100-80GB")) == (2048, 256)  # the A100 exception


def test_vllm_devices_are_the_planners_cuda_gpus() -> None:
    """The core's device facts are exactly the CUDA rows of ``kvstrategies gpus`` (no drift)."""
    cuda = {(g.name, g.compute_capability, g.capacity_mib) for g in GPUS if g.is_cuda}
    assert {(d.name, d.capability, d.memory_mib) for d in DEVICES} == cuda


def test_uniform_plan_llama_8b() -> None:
    planned = _vllm("llama-3.1-8b", context_length=8192)
    # 40 GiB / (32 layers x 65,536 B) = 20,480 blocks; 20,480 / 512 = 40x; 40 x 8192 tokens
    assert planned.vllm.num_gpu_blocks == 20_480
    assert planned.vllm.capacity.max_concurrency == 40.0
    assert planned.sizes.max_total_num_tokens == 327_680


def test_hybrid_swa_plan_gpt_oss() -> None:
    planned = _vllm("gpt-oss-120b", context_length=8192)
    # a block holds 18 layers x 32,768 B = 589,824 B: 40 GiB // that = 72,817; 72,817 / (513 + 512)
    assert planned.vllm.num_gpu_blocks == 72_817
    assert planned.vllm.capacity.tokens == int(72_817 / 1025 * 8192) == 581_967


def test_mamba_block_alignment_qwen3_next() -> None:
    planned = _vllm("qwen3-next-80b-a3b", tp_size=4, context_length=8192)
    # attention 1 KV head x 512 x 2 B = 1,024 B a token; state 274,432 B; kernel lcm(16, 64) = 64:
    # 64 x cdiv(274,432, 64 x 1,024) = 320 tokens
    assert planned.vllm.block_size == 320


def test_null_block_refusal_names_the_longest_length() -> None:
    with pytest.raises(InsufficientMemoryError, match="estimated maximum model length is"):
        _vllm("llama-3.1-8b", available_bytes=GIB)  # 131,072 tokens need 16 GiB


def test_vllm_refuses_heads_that_do_not_split() -> None:
    with pytest.raises(UnsupportedConfigurationError, match=r"attention heads \(28\) must be divisible by .*\(8\)"):
        _vllm("qwen2.5-7b", tp_size=8)


def test_sglang_strategies_never_answer_a_vllm_context() -> None:
    case = parse_case({"preset": "llama-3.1-8b", "engine": "vllm", "available_bytes": 40 * GIB})
    assert select_configurator_class(case.settings).engine == VLLM
    sglang = parse_case({"preset": "llama-3.1-8b", "available_bytes": 40 * GIB})
    assert select_configurator_class(sglang.settings).engine == "sglang"


def test_the_vllm_strategies_are_strategies_of_their_own() -> None:
    from kvstrategies.strategies import PoolConfigurator, Strategy, select_configurator, select_pool_configurator

    case = parse_case({"preset": "llama-3.1-8b", "engine": "vllm", "available_bytes": 40 * GIB, "context_length": 8192})
    strategy = select_configurator(case.settings)
    assert isinstance(strategy, Strategy) and not isinstance(strategy, PoolConfigurator)
    with pytest.raises(UnsupportedConfigurationError, match="not through SGLang's pool configurator steps"):
        select_pool_configurator(case.settings)
    planned = plan(case.settings, case.available_bytes)
    assert planned.vllm is not None
    # the cell is the plan's: a block is 32 layers x 65,536 B (16 tokens x 8 heads x 128 x K, V x 2 B); / 16 tokens
    assert planned.cell_size_bytes == planned.vllm.cell_size_bytes == 2_097_152 / 16 == 131_072.0
    assert planned.configurator.engine_class_name() == "VLLMAttentionStrategy"


def test_sglang_only_deployments_are_refused_for_vllm() -> None:
    with pytest.raises(UnsupportedConfigurationError, match="max_tokens"):
        _vllm("llama-3.1-8b", max_tokens=1000)


# ---- the strategies' edges, by hand: block sizes, batch tiers, the enough-memory refusal, Mamba pages ------


MIB = 2**20


def _ctx(**fields: object) -> KVCacheSettings:
    return parse_case({"preset": "llama-3.1-8b", "engine": "vllm", "available_bytes": 40 * GIB, **fields}).settings


@pytest.mark.parametrize(("page", "block"), [(1, None), (2, 2), (64, 64)])
def test_a_page_above_one_token_is_vllms_block_size(page: int, block: int | None) -> None:
    # SGLang's page 1 is its default: vLLM keeps its backend's block size (--block-size unset); any other page
    # becomes --block-size
    assert vllm_deployment(_ctx(page_size=page), 10 * GIB).block_size == block


def test_chunked_prefill_of_one_token_is_vllms_batch_budget() -> None:
    # --max-num-batched-tokens 1 is a valid (tiny) budget; 0 and -1 are SGLang's "no chunking": vLLM's
    # --no-enable-chunked-prefill with its own batch count (tests/vllm/test_vllm_chunked_prefill_off.py)
    assert vllm_deployment(_ctx(chunked_prefill_size=1), 10 * GIB).max_num_batched_tokens == 1
    for chunk in (0, -1):
        off = vllm_deployment(_ctx(chunked_prefill_size=chunk), 10 * GIB)
        assert off.enable_chunked_prefill is False and off.max_num_batched_tokens is None


def test_gb10_stays_on_the_small_batch_tier() -> None:
    # vllm/engine/arg_utils.py EngineArgs.get_batch_defaults: GB10 (DGX Spark, capability 12.1) has >= 70 GiB
    # but keeps 2048 / 256; a 12.0 part of the same size (RTX PRO 6000, 95.6 GiB) gets 8192 / 1024
    assert batch_defaults(VLLMDevice("GB10", (12, 1), 122_570)) == (2048, 256)
    assert batch_defaults(vllm_device("RTX-PRO-6000")) == (8192, 1024)
    # the tiers start at exactly 70 GiB (71,680 MiB) and 160 GiB (163,840 MiB): device_memory >= n * GiB_bytes
    assert batch_defaults(VLLMDevice("X", (9, 0), 71_680)) == (8192, 1024)
    assert batch_defaults(VLLMDevice("X", (9, 0), 71_679)) == (2048, 256)
    assert batch_defaults(VLLMDevice("X", (9, 0), 163_840)) == (16384, 1024)
    assert batch_defaults(VLLMDevice("X", (9, 0), 163_839)) == (8192, 1024)


def _llama_group() -> tuple[KVCacheGroup, ...]:
    # 32 layers x page (16 tokens x 8 heads x 256 x 2 B = 64 KiB) = 2 MiB a block
    spec = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, head_size_v=128, dtype=DType.BFLOAT16)
    return (KVCacheGroup(tuple(range(32)), spec),)


def test_enough_memory_refusal_names_gib_and_the_length_that_fits() -> None:
    # vllm/v1/core/kv_cache_planning.py _check_enough_kv_cache_memory: 4096 tokens need 256 blocks = 0.5 GiB;
    # budget 2 MiB + 256 MiB leaves 0.25 GiB after the null block: 128 blocks = 2048 tokens fit
    with pytest.raises(InsufficientMemoryError) as info:
        check_enough_memory(_llama_group(), 2 * MIB + 256 * MIB, CacheLimits(4096, 8192), "0.33.0")
    assert str(info.value).startswith(
        "vLLM 0.33.0 refuses: To serve at least one request with the model's max seq len (4096), (0.5 GiB KV cache "
        "is needed, which is larger than the available KV cache memory (0.25 GiB). Based on the available memory, "
        "the estimated maximum model length is 2048. Try increasing `gpu_memory_utilization`"
    )


def test_enough_memory_refusal_without_a_length_when_no_block_fits() -> None:
    # 1 MiB after the null block holds no 2 MiB block: the estimate is 0 and vLLM prints no estimate sentence
    with pytest.raises(InsufficientMemoryError) as info:
        check_enough_memory(_llama_group(), 2 * MIB + MIB, CacheLimits(4096, 8192), "0.33.0")
    assert "(0.0 GiB). Try increasing `gpu_memory_utilization`" in str(info.value)
    assert "estimated maximum model length" not in str(info.value)


def test_enough_memory_refusal_names_a_length_of_one_token() -> None:
    # block 1: 32 layers x (1 x 8 x 256 x 2 B) = 128 KiB a block; 128 KiB after the null block fits 1 token,
    # still > 0, so vLLM names it
    spec = FullAttentionSpec(block_size=1, num_kv_heads=8, head_size=128, head_size_v=128, dtype=DType.BFLOAT16)
    with pytest.raises(InsufficientMemoryError, match=r"\(0\.0 GiB\)\. Based on the available memory, the estimated "
                       r"maximum model length is 1\. Try"):
        check_enough_memory((KVCacheGroup(tuple(range(32)), spec),), 256 * 1024, CacheLimits(4096, 8192), "0.33.0")


def test_mamba_pages_per_request_by_cache_mode() -> None:
    # vllm/v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes: align 2 + speculative + checkpoint
    # pages, else 1 + speculative; state 4 x 8 x 2 B + 2 x 16 x 4 B = 192 B a page
    base = MambaSpec(block_size=16, shapes=((4, 8), (2, 16)), dtypes=(DType.BFLOAT16, DType.FLOAT32))
    align, none = CacheLimits(4096, 8192, "align"), CacheLimits(4096, 8192, "none")
    assert base.state_bytes == 192
    assert base.max_memory_usage_bytes(align) == 192 * 2  # no speculative, no checkpoint block by default
    spec = MambaSpec(block_size=16, shapes=((4, 8), (2, 16)), dtypes=(DType.BFLOAT16, DType.FLOAT32),
                     num_speculative_blocks=3, num_prefill_checkpoint_blocks=1)  # fmt: skip
    assert spec.max_memory_usage_bytes(align) == 192 * (2 + 3 + 1)
    assert spec.max_memory_usage_bytes(none) == 192 * (1 + 3)


def test_a_smaller_page_grows_its_block_to_the_largest_page() -> None:
    # vllm/v1/core/kv_cache_planning.py unify_kv_cache_spec_page_size: 8 heads at block 16 = 16 x 8 x 256 x 2 B
    # = 65,536 B; 4 heads = 32,768 B, ratio 65,536 // 32,768 = 2: its block becomes 16 x 2 = 32 tokens
    # (a full layer beside a sliding one: specs of two types, so not one uniform-type group)
    eight = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, head_size_v=128, dtype=DType.BFLOAT16)
    four = SlidingWindowSpec(block_size=16, num_kv_heads=4, head_size=128, head_size_v=128, dtype=DType.BFLOAT16,
                             sliding_window=128)  # fmt: skip
    groups = kv_cache_groups({0: eight, 1: four}, disable_hybrid=False)
    assert {g.layers: g.spec.block_size for g in groups} == {(0,): 16, (1,): 32}
    assert {g.spec.page_size_bytes for g in groups} == {65_536}


def test_llama4_chunked_local_attention_holds_one_chunk_plus_in_flight() -> None:
    """Llama-4-Scout TP 4 bf16 at 128K (vLLM 0.33.0): 2 KV heads x (128 + 128) x 2 B x 16 tokens = 16,384 B a page;
    36 chunked + 12 NoPE full layers -> 4 groups of 12, 12 x 16,384 = 196,608 B a block, 40 GiB // that =
    218,453 blocks. A chunked group holds cdiv(min(8,192 + 2 x 8,192 in flight, 131,072), 16) = 1,536 blocks
    (ChunkedLocalAttentionSpec.max_admission_blocks_per_request), the full one 8,192: 12,800 a request,
    218,453 / 12,800 = 17.07x, int(17.0666 x 131,072) = 2,236,958 tokens (the recording says the same)."""
    planned = _vllm("llama-4-scout", tp_size=4, context_length=131072).vllm
    assert planned.num_gpu_blocks == 40 * GIB // (12 * 16_384) == 218_453
    limits = CacheLimits(131072, 16384, "none")
    assert [g.spec.blocks_per_request(limits) for g in planned.groups] == [1536, 1536, 1536, 8192]
    assert planned.capacity.tokens == int(218_453 / 12_800 * 131072) == 2_236_958
    assert type(planned.groups[0].spec).__name__ == "ChunkedLocalAttentionSpec"
    assert planned.groups[0].spec.document()["attention_chunk_size"] == 8192


def test_llama4_without_the_hybrid_manager_promotes_chunked_layers_to_full() -> None:
    planned = _vllm("llama-4-scout", tp_size=4, context_length=131072, disable_hybrid_swa_memory=True).vllm
    (group,) = planned.groups
    # _promote_local_kv_cache_specs: one FullAttentionSpec group; FullAttentionSpec.merge keeps the chunk size
    assert type(group.spec).__name__ == "FullAttentionSpec" and group.spec.document()["attention_chunk_size"] == 8192
    assert planned.num_gpu_blocks == 40 * GIB // (48 * 16_384) == 54_613


# --- different K / V head sizes and heads per layer type (MiMo-V2-Flash, Gemma-4) -----------------


def test_mimo_v2_layer_types_keep_their_own_heads_and_share_one_page() -> None:
    """MiMo-V2-Flash TP 4 bf16, --block-size 64, 8K context (vllm/model_executor/models/mimo_v2.py: full layers
    4 KV heads, sliding ones 8, K 192 / V 128). Full: 64 x 1 x (192 + 128) x 2 B = 40,960 B a page; sliding:
    64 x 2 x 320 x 2 B = 81,920 B, so the full block grows to 128 tokens (unify_kv_cache_spec_page_size).
    9 full + 39 sliding layers: groups of 9 -> 1 + cdiv(39, 9) = 6 groups sharing 9 tensors (one layer of each
    group per tensor, a block id belongs to one group), so a block is 9 x 81,920 B = 737,280 B and 40 GiB // that
    = 58,254 blocks."""
    planned = _vllm("mimo-v2-flash", tp_size=4, page_size=64, context_length=8192).vllm
    assert planned.backends == ("FLASH_ATTN_DIFFKV",)  # MiMoV2Attention.__init__: v_head_dim != head_dim
    full, *sliding = planned.groups
    assert (full.spec.block_size, full.spec.num_kv_heads, full.spec.page_size_bytes) == (128, 1, 81_920)
    assert {(g.spec.block_size, g.spec.num_kv_heads, g.spec.page_size_bytes) for g in sliding} == {(64, 2, 81_920)}
    assert [len(g.layers) for g in planned.groups] == [9, 8, 8, 8, 8, 7]
    assert planned.bytes_per_block == 9 * 81_920 == 737_280
    assert planned.num_gpu_blocks == 40 * GIB // 737_280 == 58_254


@pytest.mark.parametrize(("release", "page"), [("0.31.0", 81_920), ("0.33.0", 40_960)])
def test_mimo_v2_fp8_cache_by_release(release: str, page: int) -> None:
    """vLLM 0.31.0 builds MiMo-V2's attention without the cache config (MiMoV2DecoderLayer.__init__), so an fp8
    request still stores bf16 (81,920 B pages as above); 0.32.0 on store one byte: half."""
    case = parse_case({"preset": "mimo-v2-flash", "engine": "vllm", "vllm_version": release, "tp_size": 4,
                       "page_size": 64, "context_length": 8192, "kv_cache_dtype": "fp8_e4m3",
                       "available_bytes": 40 * GIB})  # fmt: skip
    planned = plan(case.settings, case.available_bytes).vllm
    assert {g.spec.page_size_bytes for g in planned.groups} == {page}


def test_mimo_v2_fp8_cache_is_refused_by_vllm_0_34() -> None:
    case = parse_case({"preset": "mimo-v2-flash", "engine": "vllm", "vllm_version": "0.34.0", "tp_size": 4,
                       "page_size": 64, "kv_cache_dtype": "fp8_e4m3", "available_bytes": 40 * GIB})  # fmt: skip
    with pytest.raises(UnsupportedConfigurationError, match="Unsupported FP8 Diff-KV configuration.*"
                       "FlashAttentionDiffKVImpl"):  # fmt: skip
        plan(case.settings, case.available_bytes)


def test_mimo_v2_off_hopper_is_refused() -> None:
    with pytest.raises(UnsupportedConfigurationError, match="TRITON_ATTN_DIFFKV.*Hopper"):
        _vllm("mimo-v2-flash", tp_size=4, page_size=64, gpu="B200")


def test_mimo_v2_without_the_hybrid_manager_is_one_uniform_type_group() -> None:
    """--disable-hybrid-kv-cache-manager: the sliding layers become full attention but keep their 2 KV heads
    (TP 4), so every spec is a FullAttentionSpec of block 64 with one of two pages: UniformTypeKVCacheSpecs.
    from_specs puts all 48 layers in one group, a block holding 9 x 40,960 + 39 x 81,920 = 3,563,520 B."""
    planned = _vllm("mimo-v2-flash", tp_size=4, page_size=64, disable_hybrid_swa_memory=True).vllm
    (group,) = planned.groups
    assert type(group.spec).__name__ == "UniformTypeKVCacheSpecs" and len(group.layers) == 48
    assert planned.bytes_per_block == 9 * 40_960 + 39 * 81_920 == 3_563_520
    full, sliding = planned.tensors  # one section per spec, the full layers' first (layer 0)
    assert (len(full.layers), len(sliding.layers)) == (9, 39) and sliding.offset == 9 * full.layer_stride


# --- Falcon-H1's parallel hybrid and Kimi-Linear's KDA with MLA -------------------------------------


def test_falcon_h1_numbers_each_layers_mamba_mixer_after_the_attention_layers() -> None:
    """Falcon-H1-7B TP 1 bf16 at 256K (falcon_h1.py FalconH1ParallelHybrid.__init__: the Mamba mixer of layer i is
    layer num_hidden_layers + i). Attention 2 KV heads x (128 + 128) x 2 B = 1,024 B a token; a Mamba2 state
    3 x 3,584 x 2 + 24 x 128 x 256 x 2 = 1,594,368 B, so the block is 16 x cdiv(1,594,368, 16 x 1,024) = 1,568
    tokens (_align_hybrid_block_size) and a page 1,605,632 B. 44 attention + 44 Mamba layers: 2 groups of 44,
    a block 44 x 1,605,632 B, 40 GiB // that = 607 blocks."""
    planned = _vllm("falcon-h1-7b").vllm
    attention, mamba = planned.groups
    assert attention.layers == tuple(range(44)) and mamba.layers == tuple(range(44, 88))
    assert planned.block_size == 1_568 and attention.spec.page_size_bytes == mamba.spec.page_size_bytes == 1_605_632
    assert planned.backends == ("FLASH_ATTN", "MAMBA2_ATTN")
    assert planned.num_gpu_blocks == 40 * GIB // (44 * 1_605_632) == 607


def test_kimi_linear_kda_state_beside_mla_aligns_the_block_to_128() -> None:
    """Kimi-Linear-48B-A3B TP 1 bf16 at 1M: a KDA state is one conv of 3 x (3 x 32 x 128) bf16 and a float32
    32 x 128 x 128 recurrent state (mamba_utils.py kda_state_shape / kda_state_dtype): 73,728 + 2,097,152 =
    2,170,880 B. MLA pages 576 x 2 = 1,152 B a token, and a Mamba hybrid with MLA keeps its block a multiple of
    128: 128 x cdiv(2,170,880, 128 x 1,152) = 1,920 tokens, 2,211,840 B a page. KDA layers take no prefill
    checkpoints (2 pages a request in align mode). 20 KDA + 7 MLA layers: groups of 7 -> 3 + 1, 40 GiB //
    (7 x 2,211,840 B) = 2,774 blocks."""
    planned = _vllm("kimi-linear-48b-a3b").vllm
    assert planned.block_size == 1_920
    assert {g.spec.page_size_bytes for g in planned.groups} == {2_211_840}
    assert [len(g.layers) for g in planned.groups] == [7, 7, 6, 7]
    kda = planned.groups[0].spec
    assert isinstance(kda, MambaSpec) and kda.num_prefill_checkpoint_blocks == 0
    assert kda.dtypes == (DType.BFLOAT16, DType.FLOAT32) and kda.shapes == ((3, 12_288), (32, 128, 128))
    assert planned.backends == ("GDN_ATTN", "FLASH_ATTN_MLA")
    assert planned.num_gpu_blocks == 40 * GIB // (7 * 2_211_840) == 2_774


# --- DeepSeek sparse attention: the latent and the indexer's keys in one uniform-type group ---------


def test_dsa_layers_hold_latent_and_indexer_pages_in_one_group() -> None:
    """DeepSeek-V3.2 TP 8 fp8_e4m3, block 64, H200 (vLLM 0.33.0): a latent page 64 x 576 x 1 B = 36,864 B, an
    indexer page 64 x (128 + 128 // 128 x 4) = 8,448 B (deepseek_v2.py DeepseekV32IndexerCache, Indexer), both on
    every one of the 61 layers: one UniformTypeKVCacheSpecs group, 61 x 45,312 = 2,764,032 B a block, 40 GiB //
    that = 15,538 blocks; at 163,840 tokens a request holds 2,560 blocks."""
    planned = _vllm("deepseek-v3.2", tp_size=8, page_size=64, kv_cache_dtype="fp8_e4m3").vllm
    (group,) = planned.groups
    assert type(group.spec).__name__ == "UniformTypeKVCacheSpecs" and group.layers[:4] == (0, 0, 1, 1)
    assert group.spec.page_size_bytes == 61 * (36_864 + 8_448) == 2_764_032
    assert planned.num_gpu_blocks == 40 * GIB // 2_764_032 == 15_538
    assert planned.capacity.blocks_per_request == 163_840 // 64 == 2_560
    assert planned.backends == ("DEEPSEEK_V32_INDEXER", "FLASHINFER_MLA_SPARSE_SM90")
    # one buffer in two sections: every layer's indexer pages, then every layer's latent pages
    indexer, latent = planned.tensors
    assert (indexer.offset, latent.offset) == (0, 61 * 15_538 * 8_448)
    assert indexer.size == latent.size == 15_538 * 2_764_032


def test_dsa_bf16_runs_on_flash_attn_mla_sparse_as_auto() -> None:
    """DeepseekV32ForCausalLM.verify_and_update_config reads bfloat16 as auto; FLASH_ATTN_MLA_SPARSE takes it
    (a 16-bit latent: 64 x 576 x 2 B = 73,728 B a page)."""
    planned = _vllm("deepseek-v3.2", tp_size=8, page_size=64, kv_cache_dtype="bf16").vllm
    assert planned.launch.kv_cache_dtype == "auto"
    assert planned.backends == ("DEEPSEEK_V32_INDEXER", "FLASH_ATTN_MLA_SPARSE")
    assert planned.groups[0].spec.page_size_bytes == 61 * (73_728 + 8_448)


def test_dsa_layers_that_reuse_the_top_k_hold_no_indexer_pages() -> None:
    """A GLM-style index_topk_freq 4: layers 0, 1, 5, 9, ..., 57 keep their own top-k (16 layers; the rule of
    deepseek_v2.py DeepseekV2DecoderLayer: max(i - 2 + 1, 0) % 4), so a block is 61 x 36,864 + 16 x 8,448 B."""
    config = load_preset_config("deepseek-v3.2") | {"index_topk_freq": 4}
    case = parse_case({"hf_config": config, "engine": "vllm", "vllm_version": "0.33.0", "tp_size": 8,
                       "page_size": 64, "kv_cache_dtype": "fp8_e4m3", "available_bytes": 40 * GIB})  # fmt: skip
    planned = plan(case.settings, case.available_bytes).vllm
    assert planned.bytes_per_block == 61 * 36_864 + 16 * 8_448 == 2_383_872
    assert len(planned.tensors) == 3  # the 16 indexer layers' two sections, then the 45 others' latents


def test_dsa_choices_left_unmodelled_are_refused_with_the_fix() -> None:
    with pytest.raises(UnsupportedConfigurationError, match="SM 10.x"):  # a 16-bit cache on B200: FA4 or FlashMLA
        _vllm("deepseek-v3.2", tp_size=8, page_size=64, kv_cache_dtype="bf16", gpu="B200")
    with pytest.raises(UnsupportedConfigurationError, match="--block-size 64"):
        _vllm("deepseek-v3.2", tp_size=8, kv_cache_dtype="fp8_e4m3", gpu="B200")  # 32-token blocks vs the indexer


def test_vllm_fp8_alias_on_a_dsa_model_is_refused_naming_fp8_ds_mla(capsys: pytest.CaptureFixture[str]) -> None:
    from kvstrategies.cli.app import main

    assert main(["plan", "deepseek-v3.2", "--engine", "vllm", "--gpu", "H200", "--tp", "8", "--kv-cache-dtype",
                 "fp8"]) == 2  # fmt: skip
    assert "fp8_ds_mla" in capsys.readouterr().err


def test_glm5_on_blackwell_takes_an_fp8_cache_for_auto() -> None:
    """GlmMoeDsaForCausalLM.verify_and_update_config (vLLM 0.32.0 on): auto -> fp8_e4m3 on SM 10.x."""
    planned = _vllm("glm-5", tp_size=8, page_size=64, gpu="B200").vllm
    assert planned.launch.kv_cache_dtype == "fp8_e4m3"
    assert planned.backends == ("DEEPSEEK_V32_INDEXER", "FLASHINFER_MLA_SPARSE")


def test_an_nvfp4_cache_packs_k_and_v_in_their_own_head_slots() -> None:
    """Llama-3.1-8B nvfp4 on H200 (vLLM 0.33.0, FLASHINFER): each of the 8 KV heads keeps a K and a V slot of
    128 / 2 packed fp4 bytes + 128 / 16 fp8 scales = 72 B (torch_utils.py nvfp4_kv_cache_full_dim,
    FlashInferBackend.customize_spec), so a 16-token page is 16 x 16 x 72 = 18,432 B and a block of 32 layers
    589,824 B: 40 GiB // that = 72,817 blocks."""
    planned = _vllm("llama-3.1-8b", kv_cache_dtype="nvfp4", context_length=8192).vllm
    (group,) = planned.groups
    assert group.spec.page_size_bytes == 16 * 16 * 72 == 18_432
    assert group.spec.document()["kv_quant_mode"] == "NVFP4" and planned.backends == ("FLASHINFER",)
    assert planned.num_gpu_blocks == 40 * GIB // (32 * 18_432) == 72_817


def test_falcon_h1_pipeline_stage_holds_both_specs_of_its_layers() -> None:
    """PP 2 (vllm/distributed/utils.py get_pp_indices): stage 1 holds decoder layers [22, 44), so their
    attention (22-43) and their Mamba mixers, numbered 44 + i (66-87)."""
    planned = _vllm("falcon-h1-7b", pp_size=2, pp_rank=1).vllm
    attention, mamba = planned.stage_groups
    assert attention.layers == tuple(range(22, 44)) and mamba.layers == tuple(range(66, 88))


def test_a_state_that_fills_whole_kernel_blocks_needs_no_padding() -> None:
    """A Qwen3-Next-shaped GDN hybrid whose state is an exact number of kernel blocks (synthetic: conv kernel 3,
    1 KV head x 128): a state is 2 x (2 x 16 x 128 + 32 x 128) x 2 B conv + 32 x 128 x 128 x 2 B = 1,081,344 B,
    an attention token 1 x (128 + 128) x 2 = 512 B, so _align_hybrid_block_size takes
    64 x cdiv(1,081,344, 64 x 512) = 64 x 33 = 2,112 tokens exactly, and the state page equals the
    attention page (no padding)."""
    config = load_preset_config("qwen3-next-80b-a3b") | {"linear_conv_kernel_dim": 3, "num_key_value_heads": 1,
                                                         "head_dim": 128}  # fmt: skip
    case = parse_case({"hf_config": config, "engine": "vllm", "vllm_version": "0.33.0", "context_length": 8192,
                       "available_bytes": 40 * GIB})  # fmt: skip
    planned = plan(case.settings, case.available_bytes).vllm
    assert planned.block_size == 64 * 33 == 2_112
    state = next(g.spec for g in planned.groups if isinstance(g.spec, MambaSpec))
    assert state.state_bytes == 1_081_344 == 2_112 * 512 and state.page_size_padded is None


@pytest.mark.parametrize("kv", ["nvfp4", "fp8_e5m2"])
def test_mimo_v2_cache_dtypes_flash_attention_does_not_take_are_refused(kv: str) -> None:
    """FLASH_ATTN_DIFFKV inherits FlashAttentionBackend.supported_kv_cache_dtypes: auto, float16, bfloat16, fp8,
    fp8_e4m3 (vLLM 0.33.0 flash_attn.py); an nvfp4 or fp8_e5m2 cache is refused with them named."""
    with pytest.raises(UnsupportedConfigurationError, match="supported_kv_cache_dtypes"):
        _vllm("mimo-v2-flash", tp_size=4, page_size=64, kv_cache_dtype=kv)


def test_sliding_layers_take_their_own_kv_heads_only_where_the_model_class_reads_them() -> None:
    # swa_num_key_value_heads 4 on GPT-OSS (which SGLang reads for any model): vLLM's gpt_oss.py builds every
    # attention layer with num_key_value_heads 8, so a sliding page at --block-size 64 is 64 x 8 x 64 x 2 x 2 =
    # 131,072 B; MiMo-V2-Flash's class reads its swa_num_key_value_heads (8 beside 4 full-attention heads)
    config = {**load_preset_config("gpt-oss-120b"), "swa_num_key_value_heads": 4}
    case = parse_case({"hf_config": config, "engine": "vllm", "available_bytes": 40 * 2**30, "page_size": 64})
    planned = plan(case.settings, case.available_bytes).vllm
    sliding = {spec for _, spec in planned.layer_specs if isinstance(spec, SlidingWindowSpec)}
    assert {(s.num_kv_heads, s.page_size_bytes) for s in sliding} == {(8, 131_072)}
    mimo = _vllm("mimo-v2-flash", tp_size=4, page_size=64).vllm
    heads = {type(spec).__name__: spec.num_kv_heads for _, spec in mimo.layer_specs}
    assert (heads["SlidingWindowSpec"], heads["FullAttentionSpec"]) == (2, 1)
