"""Default strategy: hand-computed examples (Llama-3.1-8B TP1, Llama-3.1-8B fp8 TP2, Llama-3.1-70B, KV-head
replication, DeepSeek-V3 MLA, EAGLE/MTP drafts, end to end Llama-3.1-8B) and layouts (Llama-3.1-8B bf16 T=1000
P=16, DeepSeek-V3 MLA bf16 T=1024 P=64).

Every expected number is written here as computed by hand from SGLang's formulas, not read back.
"""

from __future__ import annotations

import pytest

from kvstrategies import plan, select_configurator
from kvstrategies.api import build
from kvstrategies.core.sizing import PoolSizes
from kvstrategies.strategies import DefaultPoolConfigurator
from kvstrategies.strategies.resolve import finalize, resolve

from ..helpers import GIB, case_settings

LLAMA_8B = "llama-3.1-8b"


def test_example_1_llama_8b_bf16_tp1() -> None:
    ctx = case_settings(LLAMA_8B, kv_cache_dtype="bf16")
    cfg = select_configurator(ctx)
    assert type(cfg) is DefaultPoolConfigurator
    assert cfg.cell_size_bytes == 131_072  # 8 heads * (128 + 128) * 32 layers * 2 B
    sizes = finalize(cfg, cfg.calculate_pool_sizes(40 * GIB, 1))
    assert sizes.max_total_num_tokens == 327_680
    assert sizes.max_running_requests == 2_048  # int(1280.0) clamped up to 2048
    layout = cfg.layout(sizes)
    assert layout.req_to_token.planned_bytes == 2_049 * 131_076 * 4 + 2_049 * 8
    assert layout.req_to_token.allocations[0].nbytes == 1_074_298_896


def test_example_2_llama_8b_fp8_tp2_page64() -> None:
    ctx = case_settings(LLAMA_8B, kv_cache_dtype="fp8_e4m3", tp_size=2, page_size=64)
    cfg = select_configurator(ctx)
    assert cfg.cell_size_bytes == 32_768
    sizes = finalize(cfg, cfg.calculate_pool_sizes(40 * GIB, 64))
    assert sizes.max_total_num_tokens == 1_310_720
    assert sizes.max_running_requests == 4_096  # int(5120) clamped down


def test_example_3_llama_70b_tp8_and_pp2() -> None:
    budget = 53_687_091_200
    tp8 = select_configurator(case_settings("llama-3.1-70b", tp_size=8, page_size=16))
    assert tp8.cell_size_bytes == 40_960
    assert tp8.calculate_pool_sizes(budget, 16).max_total_num_tokens == 1_310_720
    for rank, expected_range in ((0, (0, 40)), (1, (40, 80))):
        stage = select_configurator(case_settings("llama-3.1-70b", tp_size=4, pp_size=2, pp_rank=rank, page_size=16))
        assert isinstance(stage, DefaultPoolConfigurator)
        assert stage.layer_range == expected_range
        assert stage.cell_size_bytes == 40_960  # 2 heads * 256 * 40 layers * 2 B


def test_pp_split_gives_the_extra_layers_to_the_last_stages() -> None:
    from kvstrategies.context import ParallelLayout

    layout = ParallelLayout(pp_size=2)
    assert [layout.layer_range(81, r) for r in range(2)] == [(0, 40), (40, 81)]
    four = ParallelLayout(pp_size=4)
    assert [four.layer_range(61, r) for r in range(4)] == [(0, 15), (15, 30), (30, 45), (45, 61)]
    assert ParallelLayout(pp_size=2, pp_layer_partition=(3, 45)).layer_range(48, 1) == (3, 48)


def test_example_4_kv_head_replication() -> None:
    cfg = select_configurator(case_settings("qwen2.5-7b", tp_size=8, context_length=32768))
    assert cfg.cell_size_bytes == 14_336  # max(1, 4 // 8) = 1 head kept per rank
    sizes = finalize(cfg, cfg.calculate_pool_sizes(32_212_254_720, 1))
    assert sizes.max_total_num_tokens == 2_246_948
    assert sizes.max_running_requests == 4_096
    # MQA: falcon-7b multi_query -> 1 head at any TP
    falcon = select_configurator(case_settings("falcon-7b", tp_size=4))
    assert isinstance(falcon, DefaultPoolConfigurator)
    assert falcon.kv_heads == 1
    # 8 KV heads, TP8, DCP2 -> 8 // (8 // 2) = 2 heads
    dcp = select_configurator(case_settings(LLAMA_8B, tp_size=8, dcp_size=2))
    assert isinstance(dcp, DefaultPoolConfigurator)
    assert dcp.kv_heads == 2


@pytest.mark.parametrize(
    ("dtype", "cell", "tokens", "requests"),
    [("bf16", 70_272, 611_136, 2_048), ("fp8_e4m3", 35_136, 1_222_336, 3_819)],
)
def test_example_5_deepseek_v3_mla(dtype: str, cell: int, tokens: int, requests: int) -> None:
    cfg = select_configurator(case_settings("deepseek-v3", kv_cache_dtype=dtype, page_size=64, tp_size=8))
    assert cfg.cell_size_bytes == cell  # 576 * 61 * es; TP does not change the MLA cell
    sizes = finalize(cfg, cfg.calculate_pool_sizes(40 * GIB, 64))
    assert sizes.max_total_num_tokens == tokens
    assert sizes.max_running_requests == requests


def test_example_12_eagle_draft_scaling() -> None:
    eagle = select_configurator(
        case_settings(LLAMA_8B, speculative_algorithm="EAGLE3", eagle_draft_num_layers=1)
    )
    assert eagle.cell_size_bytes == 135_168  # 131,072 + int(131,072 * 1 / 32)
    assert eagle.calculate_pool_sizes(40 * GIB, 1).max_total_num_tokens == 317_750
    mtp = select_configurator(case_settings("deepseek-v3", speculative_algorithm="EAGLE", page_size=64))
    assert mtp.cell_size_bytes == 71_424  # draft layers from num_nextn_predict_layers = 1
    assert mtp.calculate_pool_sizes(40 * GIB, 64).max_total_num_tokens == 601_280
    frozen = select_configurator(
        case_settings(LLAMA_8B, speculative_algorithm="FROZEN_KV_MTP", eagle_draft_num_layers=1)
    )
    assert frozen.cell_size_bytes == 135_168  # FROZEN_KV_MTP counts as EAGLE in 0.5.23


def test_example_17_end_to_end_resolve() -> None:
    available = int((63.5 - 79.0 * (1 - 0.88)) * 2**30)
    assert available == 58_003_533_332
    ctx = case_settings(LLAMA_8B, page_size=64)
    result = resolve(ctx, available)
    assert result.profiled.max_total_num_tokens == 442_496
    assert result.sizes.max_running_requests == 2_048
    capped = resolve(case_settings(LLAMA_8B, page_size=64, max_tokens=150_000), available)
    assert capped.sizes.max_total_num_tokens == 149_952
    assert capped.sizes.max_running_requests == 2_048
    eight = resolve(case_settings(LLAMA_8B, page_size=64, max_tokens=150_000, max_running_requests=8), available)
    assert eight.sizes.max_running_requests == 8
    many = resolve(case_settings(LLAMA_8B, page_size=64, max_tokens=150_000, max_running_requests=10_000), available)
    assert many.sizes.max_running_requests == 10_000  # explicit value bypasses the clamp
    round_cap = resolve(case_settings(LLAMA_8B, page_size=64, max_tokens=200_000), available)
    assert round_cap.sizes.max_total_num_tokens == 200_000


def test_example_17_request_table_with_eagle() -> None:
    ctx = case_settings(
        LLAMA_8B,
        page_size=64,
        speculative_algorithm="EAGLE",
        eagle_draft_num_layers=1,
        speculative_num_steps=3,
        speculative_eagle_topk=1,
        speculative_num_draft_tokens=4,
    )
    cfg = select_configurator(ctx)
    table = cfg.req_to_token_layout(PoolSizes(max_total_num_tokens=149_952, max_running_requests=8))
    req = table.allocations[0]
    assert req.shape == (9, 131_143)  # extra = max(4 + 4, 2*4 + 63) = 71
    assert req.nbytes == 4_721_148


def test_pp_min_across_stages() -> None:
    # 81-layer model at PP2: stage 1 holds 41 layers and has the smaller capacity; both sync to it.
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": 81,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "hidden_size": 1024,
        "max_position_embeddings": 4096,
    }
    budget = 10 * GIB
    stage0 = resolve(case_settings(config, pp_size=2, pp_rank=0), budget)
    stage1 = resolve(case_settings(config, pp_size=2, pp_rank=1), budget)
    cell1 = 8 * 256 * 41 * 2
    assert stage1.profiled.max_total_num_tokens == budget // cell1
    assert stage0.sizes.max_total_num_tokens == stage1.sizes.max_total_num_tokens == budget // cell1


def test_layout_example_15a_llama_8b_t1000_p16() -> None:
    cfg = select_configurator(case_settings(LLAMA_8B, page_size=16))
    sizes = PoolSizes(max_total_num_tokens=1000, max_running_requests=500)
    layout = cfg.layout(sizes)
    kv = layout.token_to_kv
    storage = [b for b in kv.allocations]
    assert len(storage) == 32
    assert storage[0].shape == (2, 1024, 8, 128)
    assert storage[0].nbytes == 4_194_304
    k0 = next(b for b in kv.buffers if b.name == "k_buffer[0]")
    assert k0.shape == (1016, 8, 128) and k0.is_view
    assert kv.planned_bytes == 134_217_728  # allocated, > 133,169,152 reported, > T * cell
    assert layout.req_to_token.allocations[0].shape == (501, 131_076)
    assert layout.req_to_token.allocations[0].nbytes == 262_676_304


def test_layout_example_15b_deepseek_v3_t1024_p64() -> None:
    cfg = select_configurator(case_settings("deepseek-v3", page_size=64))
    layout = cfg.layout(PoolSizes(max_total_num_tokens=1024, max_running_requests=512))
    kv = layout.token_to_kv
    assert kv.pool_class == "MLATokenToKVPool"
    assert len(kv.allocations) == 61
    assert kv.allocations[0].shape == (1088, 1, 576)
    assert kv.allocations[0].nbytes == 1_253_376
    assert kv.planned_bytes == 76_455_936
    assert layout.req_to_token.allocations[0].nbytes == 336_207_888


def test_fp8_is_stored_as_uint8_and_cpu_fp8_keeps_fp8() -> None:
    gpu = select_configurator(case_settings(LLAMA_8B, kv_cache_dtype="fp8_e4m3"))
    sizes = PoolSizes(max_total_num_tokens=16, max_running_requests=2)
    assert {str(b.dtype) for b in gpu.token_to_kv_layout(sizes).buffers} == {"torch.uint8"}
    cpu = select_configurator(case_settings(LLAMA_8B, kv_cache_dtype="fp8_e4m3", device="cpu"))
    assert {str(b.dtype) for b in cpu.token_to_kv_layout(sizes).buffers} == {"torch.float8_e4m3fn"}


def test_auto_resolves_to_fp8_from_checkpoint_kv_quant() -> None:
    config = {
        "architectures": ["LlamaForCausalLM"],
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_size": 256,
        "quantization_config": {"quant_method": "modelopt", "kv_cache_quant_algo": "fp8"},
    }
    ctx = case_settings(config)
    assert ctx.kv_cache_dtype.name == "fp8_e4m3"
    assert select_configurator(ctx).cell_size_bytes == 2 * 128 * 2 * 1


def test_meta_build_matches_layout_bytes() -> None:
    planned = plan(case_settings(LLAMA_8B, page_size=16), 40 * GIB, pool_max_tokens=1000, pool_max_running_requests=4)
    pools = build(planned, "meta")
    assert pools.allocated_bytes == planned.layout.planned_bytes
    k0 = pools.token_to_kv_pool["k_buffer[0]"]
    assert tuple(k0.shape) == (1008, 8, 128)  # what-if cap 1000 aligns to 992 tokens, + 16 padding rows
    assert k0._base is pools.token_to_kv_pool["kv_storage[0]"]


def test_draft_worker_takes_the_target_sizes_widened_by_dcp() -> None:
    # DeepSeek-V3 MTP draft at TP8 DCP2: the target's cell 71,424 (example 12) sizes the tokens,
    # the draft pool spans the DCP-widened ids (x2) with page 64 * 2 and its single MTP layer.
    ctx = case_settings("deepseek-v3", page_size=64, tp_size=8, dcp_size=2, speculative_algorithm="EAGLE",
                        is_draft_worker=True)
    planned = plan(ctx, 40 * GIB)
    assert planned.adopted_sizes is not None and planned.adopted_sizes.max_total_num_tokens == 601_280 * 2
    # its own sizing (what a plan's sizes mean): one 576-wide MTP layer, 1,152 B a token, page 128
    assert planned.sizes.max_total_num_tokens == (40 * GIB // 1_152) // 128 * 128 == 37_282_688
    kv = planned.layout.token_to_kv
    assert [b.shape for b in kv.allocations] == [(601_280 * 2 + 128, 1, 576)]
