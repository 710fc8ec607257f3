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
from kvstrategies.dtypes import DType
from kvstrategies.errors import InsufficientMemoryError, UnsupportedConfigurationError
from kvstrategies.planner.gpus import GPUS
from kvstrategies.releases import NEWEST_VLLM, VLLM, parse_release
from kvstrategies.strategies.registry import select_configurator_class
from kvstrategies.strategies.vllm.devices import DEVICES, vllm_device
from kvstrategies.strategies.vllm.grouping import kv_cache_groups, padding_layers
from kvstrategies.strategies.vllm.launch import batch_defaults
from kvstrategies.strategies.vllm.layers import pp_indices
from kvstrategies.strategies.vllm.specs import CacheLimits, FullAttentionSpec, MambaSpec, SlidingWindowSpec

GIB = 2**30


def _vllm(preset: str, **fields: object) -> object:
    case = parse_case({"preset": preset, "engine": "vllm", "available_bytes": 40 * GIB, **fields})
    return plan(case.settings, case.available_bytes)


def test_the_engine_axis_names_vllm() -> None:
    assert parse_release("0.33.0", VLLM) == NEWEST_VLLM
    assert NEWEST_VLLM.label == "vLLM 0.33.0"


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
