"""Hybrid sliding-window strategies: hand-computed examples (GPT-OSS-120B SWA, all-SWA, GPT-OSS-120B request cap,
EAGLE/MTP drafts) of ModelConfig._derive_model_shapes, MemoryPoolConfigurator.validate_swa_pool_size,
HybridSWAPoolConfigurator, SWARequestCapPoolConfigurator and the SWAKVPool.

Every expected number is written as computed by hand from SGLang's formulas, not read back from the
library.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from kvstrategies import plan, select_configurator
from kvstrategies.api import build
from kvstrategies.case import load_case
from kvstrategies.context import SchedulingConfig
from kvstrategies.core.sizing import PoolSizes, validate_swa_pool_size
from kvstrategies.errors import (
    InsufficientMemoryError,
    KVCacheConfigError,
    SWAPoolTooSmallError,
    UnsupportedConfigurationError,
)
from kvstrategies.models import parse_hf_config
from kvstrategies.presets import load_preset_config
from kvstrategies.strategies.default import DefaultPoolConfigurator
from kvstrategies.strategies.dsv4 import DSV4PoolConfigurator
from kvstrategies.strategies.hybrid_swa import DraftLayers, HybridSWAPoolConfigurator, SWAChunkCapPoolConfigurator
from kvstrategies.strategies.registry import registered
from kvstrategies.strategies.resolve import finalize, resolve

from ..helpers import GIB, case_settings

GPT_OSS = "gpt-oss-120b"
BUDGET_50G = 53_687_091_200
CAP = {"max_running_requests": 64, "disable_radix_cache": True, "chunked_prefill_size": 8192}
CASES = sorted((Path(__file__).parents[2] / "cases").glob("swa-*.json"))


def hybrid(preset_or_config: str | dict[str, Any], **fields: Any) -> HybridSWAPoolConfigurator:
    cfg = select_configurator(case_settings(preset_or_config, **fields))
    assert isinstance(cfg, HybridSWAPoolConfigurator)
    return cfg


def gemma4_config(**text_overrides: Any) -> dict[str, Any]:
    """A Gemma-4-26B-A4B-shaped config: 30 layers, every 6th full (ModelConfig._derive_model_shapes example)."""
    text = {
        "model_type": "gemma4_text",
        "num_hidden_layers": 30,
        "hidden_size": 2816,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 256,
        "global_head_dim": 512,
        "num_global_key_value_heads": 2,
        "attention_k_eq_v": True,
        "sliding_window": 1024,
        "max_position_embeddings": 262144,
        "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5,
    }
    text.update(text_overrides)
    return {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "text_config": text}


ALL_SWA_CONFIG = {
    "architectures": ["UnlimitedOCRForCausalLM"],
    "model_type": "unlimited-ocr",
    "num_hidden_layers": 24,
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "sliding_window": 1024,
    "max_position_embeddings": 32768,
}


# ---- selection (create_memory_pool_configurator) and detection (ModelConfig._derive_model_shapes) -----------------


def test_registered_in_sizing_9_order_after_dsv4() -> None:
    order = list(registered())
    assert order.index(DSV4PoolConfigurator) < order.index(SWAChunkCapPoolConfigurator)
    assert order.index(SWAChunkCapPoolConfigurator) + 1 == order.index(HybridSWAPoolConfigurator)
    assert order.index(HybridSWAPoolConfigurator) < order.index(DefaultPoolConfigurator)


@pytest.mark.parametrize("preset", ["gemma-2-9b", "gemma-3-27b"])
def test_gemma_2_and_3_are_not_hybrid_swa_in_0_5_23(preset: str) -> None:
    ctx = case_settings(preset)
    assert ctx.geometry.hybrid_swa is None
    assert type(select_configurator(ctx)) is DefaultPoolConfigurator


def test_disable_hybrid_swa_memory_falls_back_to_default_over_all_layers() -> None:
    cfg = select_configurator(case_settings(GPT_OSS, page_size=64, disable_hybrid_swa_memory=True))
    assert type(cfg) is DefaultPoolConfigurator
    assert cfg.cell_size_bytes == 73_728  # 8 heads * (64 + 64) * 36 layers * 2 B


def test_deepseek_v4_is_hybrid_swa_but_never_picked_by_hybrid_swa_strategies() -> None:
    ctx = case_settings("deepseek-v4-flash", page_size=256)
    assert ctx.geometry.hybrid_swa is not None and ctx.geometry.hybrid_swa.is_deepseek_v4
    assert ctx.geometry.hybrid_swa.full_attention_layer_ids == ()
    assert ctx.geometry.hybrid_swa.sliding_window_size == 128  # the config value, no "- 1"
    assert not HybridSWAPoolConfigurator.is_applicable(ctx)
    assert not SWAChunkCapPoolConfigurator.is_applicable(case_settings("deepseek-v4-flash", page_size=256, **CAP))
    assert type(select_configurator(ctx)) is DSV4PoolConfigurator


def test_engine_windows_and_layer_ids() -> None:
    gpt = parse_hf_config(load_preset_config(GPT_OSS)).hybrid_swa
    assert gpt is not None and gpt.sliding_window_size == 127  # HF 128 inclusive -> 127
    assert gpt.full_attention_layer_ids[:3] == (1, 3, 5) and gpt.swa_attention_layer_ids[:3] == (0, 2, 4)
    llama = parse_hf_config(load_preset_config("llama-4-scout")).hybrid_swa
    assert llama is not None and llama.sliding_window_size == 8192  # attention_chunk_size
    assert llama.full_attention_layer_ids == (3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47)
    assert len(llama.swa_attention_layer_ids) == 36
    mimo = parse_hf_config(load_preset_config("mimo-v2-flash")).hybrid_swa
    assert mimo is not None and mimo.sliding_window_size == 128 and mimo.is_compress_model
    assert mimo.full_attention_layer_ids == (0, 5, 11, 17, 23, 29, 35, 41, 47)
    assert not gpt.is_compress_model and not llama.is_compress_model


def test_other_family_rules() -> None:
    mellum = {
        "architectures": ["MellumForCausalLM"],
        "num_hidden_layers": 4,
        "hidden_size": 256,
        "num_attention_heads": 4,
        "sliding_window": 1024,
        "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
    }
    geometry = parse_hf_config(mellum).hybrid_swa
    assert geometry is not None and geometry.sliding_window_size == 1023
    assert (geometry.full_attention_layer_ids, geometry.swa_attention_layer_ids) == ((3,), (0, 1, 2))
    assert parse_hf_config({**mellum, "architectures": ["LagunaForCausalLM"], "sliding_window": 0}).hybrid_swa is None
    beam = {**mellum, "architectures": ["BeamForCausalLM"], "layer_types": ["full_attention"] * 4}
    assert parse_hf_config(beam).hybrid_swa is None
    generic = {**mellum, "architectures": ["MyForCausalLM"], "is_hybrid_swa": True}
    generic["hybrid_layer_pattern"] = [1, 0, 1, 0]
    generic.pop("layer_types")
    geometry = parse_hf_config(generic).hybrid_swa
    assert geometry is not None and geometry.swa_attention_layer_ids == (0, 2) and geometry.sliding_window_size == 1024
    generic.pop("hybrid_layer_pattern")
    with pytest.raises(KVCacheConfigError, match="hybrid_layer_pattern"):
        parse_hf_config(generic)


def test_inkling_default_ratio_is_0_1() -> None:
    inkling = {
        "architectures": ["InklingForConditionalGeneration"],
        "num_hidden_layers": 4,
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "swa_num_key_value_heads": 4,
        "head_dim": 128,
        "sliding_window": 512,
        "local_layer_ids": [0, 1, 2],
    }
    cfg = hybrid(inkling, page_size=16)
    assert cfg.ratio == 0.1 and cfg.hybrid.is_compress_model
    assert cfg.full_layer_ids == (3,) and cfg.swa_layer_ids == (0, 1, 2)
    # full 2 * 256 * 2 = 1,024; SWA 4 * 256 * 2 = 2,048; 1,024 + 0.1 * 6,144
    assert cfg.cell_size_bytes == 1_024 + 0.1 * 6_144
    assert hybrid(inkling, page_size=16, swa_full_tokens_ratio=0.5).ratio == 0.5


# ---- worked example: GPT-OSS-120B SWA, ratio 0.8 ---------------------------------------------------------------------


def test_example_9_gpt_oss_120b_ratio_0_8() -> None:
    cfg = hybrid(GPT_OSS, kv_cache_dtype="bf16", page_size=64)
    assert (cfg.full_layers, cfg.swa_layers, cfg.sliding_window_size, cfg.ratio) == (18, 18, 127, 0.8)
    assert cfg.full_bytes_per_layer == cfg.swa_bytes_per_layer == 2_048  # 8 * (64 + 64) * 2
    assert cfg.cell_size_bytes == 66_355.2  # 36,864 + 0.8 * 36,864
    sizes = cfg.calculate_pool_sizes(BUDGET_50G, 64)  # M = int(50 GiB // 66,355.2) = 809,086
    assert sizes.max_total_num_tokens == sizes.full_max_total_num_tokens == 809_024
    assert sizes.swa_max_total_num_tokens == 647_168  # align(int(647,219.2), 64)
    assert finalize(cfg, sizes).max_running_requests == 3_160  # int(809,024 / 131,072 * 512)
    assert hybrid(GPT_OSS, tp_size=2, page_size=64).cell_size_bytes == 33_177.6


def test_example_9_user_cap_re_derives_both_pools() -> None:
    cfg = hybrid(GPT_OSS, page_size=64)
    capped = cfg.calculate_pool_sizes_from_max_tokens(100_000, 64)
    assert (capped.full_max_total_num_tokens, capped.swa_max_total_num_tokens) == (99_968, 79_936)
    resolved = resolve(case_settings(GPT_OSS, page_size=64, max_tokens=100_000), BUDGET_50G).sizes
    assert (resolved.max_total_num_tokens, resolved.swa_max_total_num_tokens) == (99_968, 79_936)


def test_example_9_window_floor_200_cells_fails_300_cells_passes() -> None:
    cfg = hybrid(GPT_OSS, page_size=64)
    # 200 * 66,355.2 = 13,271,040 B: M = 200, full = 192, swa = align(153, 64) = 128 <= 127 + 64
    with pytest.raises(SWAPoolTooSmallError, match=r"SWA pool \(128 tokens\).*127.*64") as info:
        cfg.calculate_pool_sizes(13_271_040, 64)
    assert "swa_full_tokens_ratio" in str(info.value)  # the message says how to fix it
    assert isinstance(info.value, KVCacheConfigError)
    sizes = cfg.calculate_pool_sizes(19_906_560, 64)  # 300 cells: full 256, swa 192 > 191
    assert (sizes.full_max_total_num_tokens, sizes.swa_max_total_num_tokens) == (256, 192)


def test_example_9_user_cap_of_200_tokens_fails_the_floor_again() -> None:
    cfg = hybrid(GPT_OSS, page_size=64)
    with pytest.raises(SWAPoolTooSmallError, match=r"\(128 tokens\)"):
        cfg.calculate_pool_sizes_from_max_tokens(200, 64)
    with pytest.raises(SWAPoolTooSmallError):
        resolve(case_settings(GPT_OSS, page_size=64, max_tokens=200), BUDGET_50G)


def test_window_floor_boundary_is_exactly_w_plus_p() -> None:
    with pytest.raises(SWAPoolTooSmallError):
        validate_swa_pool_size(191, 127, 64)  # 127 + 64 >= 191
    validate_swa_pool_size(192, 127, 64)
    validate_swa_pool_size(0, None, 64)  # no window: skipped
    cfg = hybrid(GPT_OSS, page_size=64)
    assert cfg.calculate_pool_sizes_from_max_tokens(256, 64).swa_max_total_num_tokens == 192
    with pytest.raises(SWAPoolTooSmallError):
        cfg.calculate_pool_sizes_from_max_tokens(255, 64)  # full 192, swa align(153, 64) = 128
    page1 = hybrid(GPT_OSS, page_size=1)
    assert page1.calculate_pool_sizes_from_max_tokens(162, 1).swa_max_total_num_tokens == 129  # > 128
    with pytest.raises(SWAPoolTooSmallError):
        page1.calculate_pool_sizes_from_max_tokens(161, 1)  # int(128.8) = 128 = 127 + 1


def test_window_floor_fires_before_the_generic_error() -> None:
    with pytest.raises(SWAPoolTooSmallError, match=r"\(0 tokens\)"):
        hybrid(GPT_OSS, page_size=64).calculate_pool_sizes(1_000, 64)


# ---- worked example: all-SWA -----------------------------------------------------------------------------------


def test_example_10_all_swa_int_cell_no_ratio_no_floor() -> None:
    cfg = hybrid(ALL_SWA_CONFIG, kv_cache_dtype="bf16", page_size=16)
    assert cfg.is_all_swa and cfg.swa_layers == 24
    assert cfg.swa_bytes_per_layer == 4_096  # 8 * (128 + 128) * 2
    assert cfg.cell_size_bytes == 98_304 and isinstance(cfg.cell_size_bytes, int)
    sizes = finalize(cfg, cfg.calculate_pool_sizes(10_737_418_240, 16))  # 109,226 -> page 16
    assert sizes.max_total_num_tokens == sizes.swa_max_total_num_tokens == 109_216
    assert sizes.full_max_total_num_tokens == 0
    assert sizes.max_running_requests == 2_048
    tiny = cfg.calculate_pool_sizes(98_304 * 100, 16)  # 96 SWA tokens < W + P: no floor check
    assert tiny.swa_max_total_num_tokens == 96
    with pytest.raises(InsufficientMemoryError) as info:
        cfg.calculate_pool_sizes(1_000, 16)
    assert not isinstance(info.value, SWAPoolTooSmallError)


def test_all_swa_layout_uses_the_pure_swa_mapping() -> None:
    cfg = hybrid(ALL_SWA_CONFIG, page_size=1)
    layout = cfg.token_to_kv_layout(cfg.calculate_pool_sizes_from_max_tokens(1024, 1))
    attributes = dict(layout.attributes)
    assert attributes["allocator_class"] == "PureSWATokenToKVPoolAllocator"
    assert attributes["full.layer_num"] == 0 and attributes["swa.layer_num"] == 24
    mapping = {b.name: b for b in layout.buffers}["full_to_swa_index_mapping"]
    assert mapping.shape == (1024 + 1 + 1,) and str(mapping.dtype) == "torch.int64"


def test_all_swa_sizes_at_any_page_but_the_pool_needs_page_1() -> None:
    # SGLang sizes the all-SWA pool at page 16 (the all-SWA example) but its PureSWA allocator asserts page 1.
    cfg = hybrid(ALL_SWA_CONFIG, page_size=16)
    sizes = cfg.calculate_pool_sizes_from_max_tokens(1024, 16)
    assert sizes.swa_max_total_num_tokens == 1024 and sizes.full_max_total_num_tokens == 0
    with pytest.raises(UnsupportedConfigurationError, match="page_size 1"):
        cfg.token_to_kv_layout(sizes.replace(max_running_requests=8))


# ---- worked example: GPT-OSS-120B request cap (SWARequestCapPoolConfigurator): the request / chunk cap ---------


def test_example_11_chunk_cap() -> None:
    cfg = select_configurator(case_settings(GPT_OSS, page_size=64, **CAP))
    assert isinstance(cfg, SWAChunkCapPoolConfigurator)
    assert cfg.swa_cap_tokens == 40_960  # 383 * 64 + 2 * 8,192 + 64
    # reported: the inherited hybrid value (HybridSWAPoolConfigurator._recompute_cell_size)
    assert cfg.cell_size_bytes == 66_355.2
    assert cfg.full_token_cell == 36_864
    assert 40_960 * cfg.swa_cell == 1_509_949_440
    sizes = finalize(cfg, cfg.calculate_pool_sizes(BUDGET_50G, 64))
    assert sizes.max_total_num_tokens == sizes.full_max_total_num_tokens == 1_415_360
    assert sizes.swa_max_total_num_tokens == 40_960
    assert sizes.max_running_requests == 64
    capped = cfg.calculate_pool_sizes_from_max_tokens(100_000, 64)
    assert (capped.full_max_total_num_tokens, capped.swa_max_total_num_tokens) == (99_968, 40_960)
    quirk = cfg.calculate_pool_sizes_from_max_tokens(30_000, 64)  # SGLang's min(cap, un-aligned M)
    assert (quirk.full_max_total_num_tokens, quirk.swa_max_total_num_tokens) == (29_952, 30_000)


def test_example_11_speculative_cap() -> None:
    ctx = case_settings(
        GPT_OSS,
        page_size=64,
        speculative_algorithm="EAGLE",
        eagle_draft_num_layers=1,
        speculative_num_steps=3,
        speculative_eagle_topk=1,
        speculative_num_draft_tokens=4,
        **CAP,
    )
    cfg = select_configurator(ctx)
    assert isinstance(cfg, SWAChunkCapPoolConfigurator)
    assert cfg.swa_cap_tokens == 61_952  # (127 + 128 * 4 + 64 + 2 * 4) * 64 + 16,384 + 64


def test_cap_without_the_overlap_scheduler_uses_spec_v1_alloc_and_one_chunk() -> None:
    ctx = case_settings(
        GPT_OSS,
        page_size=64,
        speculative_algorithm="EAGLE",
        eagle_draft_num_layers=1,
        speculative_num_steps=3,
        speculative_eagle_topk=1,
        speculative_num_draft_tokens=4,
        disable_overlap_schedule=True,
        **CAP,
    )
    cfg = select_configurator(ctx)
    assert isinstance(cfg, SWAChunkCapPoolConfigurator)
    # spec_v1_alloc: max(ceil_align(3, 64) * 1, ceil_align(4, 64)) = 64; trailing 127 + 512 + 64
    assert cfg.swa_cap_tokens == 57_344  # (703 + 64) * 64 + 1 * 8,192 + 64


def test_chunk_cap_needs_all_five_conditions() -> None:
    assert SWAChunkCapPoolConfigurator.is_applicable(case_settings(GPT_OSS, page_size=64, **CAP))
    for missing in (
        {"max_running_requests": None},
        {"disable_radix_cache": False},
        {"chunked_prefill_size": None},
        {"chunked_prefill_size": 0},
    ):
        ctx = case_settings(GPT_OSS, page_size=64, **{**CAP, **missing})
        assert type(select_configurator(ctx)) is HybridSWAPoolConfigurator, missing
    decode = case_settings(GPT_OSS, page_size=16, **{**CAP, "chunked_prefill_size": None}, disaggregation_mode="decode")
    assert type(select_configurator(decode)) is SWAChunkCapPoolConfigurator
    all_swa = case_settings(ALL_SWA_CONFIG, page_size=16, **CAP)  # no local full layer
    assert type(select_configurator(all_swa)) is HybridSWAPoolConfigurator


def test_sizing_7_2_pd_decode_cap() -> None:
    decode = {"page_size": 16, "disaggregation_mode": "decode", "disable_radix_cache": True}
    ctx = case_settings(GPT_OSS, max_running_requests=16, **decode)
    cfg = select_configurator(ctx)
    assert isinstance(cfg, SWAChunkCapPoolConfigurator)
    # w = 16 <= 32 -> 32 extra slots; per request 127 + 128 + 16 + 16 = 287
    assert cfg.swa_cap_tokens == 9_168  # 287 * 16 + (127 + 16) * 32 = 4,592 + 4,576
    ctx64 = case_settings(GPT_OSS, max_running_requests=64, **decode)
    cap64 = select_configurator(ctx64)
    assert isinstance(cap64, SWAChunkCapPoolConfigurator)
    assert cap64.swa_cap_tokens == 18_368  # 64 > 32 -> no extra slots: 287 * 64


def test_sizing_4_llama_4_scout_reported_cell_under_the_request_cap() -> None:
    cfg = select_configurator(case_settings("llama-4-scout", tp_size=4, page_size=64, **CAP))
    assert isinstance(cfg, SWAChunkCapPoolConfigurator)
    assert cfg.full_bytes_per_layer == cfg.swa_bytes_per_layer == 1_024  # 2 * 256 * 2
    assert (cfg.full_layers, cfg.swa_layers) == (12, 36)
    assert cfg.cell_size_bytes == 41_779.2  # 12,288 + 0.8 * 36,864
    assert cfg.full_token_cell == 12_288  # what the full pool is sized with
    assert cfg.swa_cap_tokens == 557_120  # (8,192 + 128 + 64 + 64) * 64 + 2 * 8,192 + 64
    sizes = cfg.calculate_pool_sizes(BUDGET_50G, 64)
    # (53,687,091,200 - 557,120 * 36,864) // 12,288 = 2,697,706 -> page 64
    assert (sizes.full_max_total_num_tokens, sizes.swa_max_total_num_tokens) == (2_697_664, 557_120)


def test_chunk_cap_that_eats_the_budget_says_what_to_reduce() -> None:
    cfg = select_configurator(case_settings(GPT_OSS, page_size=64, **CAP))
    with pytest.raises(InsufficientMemoryError, match=r"SWA pool cap \(40960 tokens.*max_running_requests"):
        cfg.calculate_pool_sizes(1_509_949_440, 64)


# ---- EAGLE/MTP drafts: draft layers (HybridSWAPoolConfigurator.__init__) ---------------------------------------------


def test_example_12_hybrid_swa_with_a_one_layer_eagle3_head() -> None:
    cfg = hybrid(GPT_OSS, page_size=64, speculative_algorithm="EAGLE3", eagle_draft_num_layers=1)
    assert (cfg.draft_layers.full, cfg.draft_layers.swa, cfg.draft_layers.swa_full) == (1, 0, 0)
    assert cfg.cell_size_bytes == 68_403.2  # 2,048 * 19 + 0.8 * 2,048 * 18
    sizes = cfg.calculate_pool_sizes(BUDGET_50G, 64)  # M = 784,862
    assert (sizes.full_max_total_num_tokens, sizes.swa_max_total_num_tokens) == (784_832, 627_840)


def test_draft_swa_layers_and_mtp_local_layers() -> None:
    swa_draft = hybrid(
        GPT_OSS, page_size=64, speculative_algorithm="EAGLE", eagle_draft_num_layers=1, eagle_draft_swa_num_layers=1
    )
    assert swa_draft.cell_size_bytes == 67_993.6  # 36,864 + 0.8 * 2,048 * 19
    config = {**load_preset_config(GPT_OSS), "mtp_local_layer_ids": [0]}
    mtp = hybrid(config, page_size=64, speculative_algorithm="EAGLE", eagle_draft_num_layers=2)
    assert (mtp.draft_layers.full, mtp.draft_layers.swa, mtp.draft_layers.swa_full) == (1, 0, 1)
    assert mtp.cell_size_bytes == 70_451.2  # 2,048 * 19 + 2,048 * 1 + 0.8 * 36,864


# ---- Gemma-4 rewrite (ModelConfig._derive_model_shapes, KVCacheConfigurator.__init__) --------------------------------


def test_gemma4_per_layer_bytes_after_the_rewrite() -> None:
    cfg = hybrid(gemma4_config(), tp_size=2, kv_cache_dtype="bf16", page_size=16)
    assert cfg.full_bytes_per_layer == 2_048  # max(1, 2 // 2) * (512 + 512) * 2
    assert cfg.swa_bytes_per_layer == 4_096  # max(1, 8 // 2) * (256 + 256) * 2
    assert (cfg.full_layers, cfg.swa_layers, cfg.sliding_window_size) == (5, 25, 1023)
    assert cfg.cell_size_bytes == 10_240 + 0.8 * 102_400
    layout = cfg.token_to_kv_layout(cfg.calculate_pool_sizes_from_max_tokens(2048, 16))
    shapes = {b.name: b.shape for b in layout.buffers}
    assert shapes["full.k_buffer[0]"] == (2048 + 16, 1, 512)  # H = 1, D = Dv = 512
    assert shapes["swa.k_buffer[0]"] == (1632 + 16, 4, 256)  # H_swa = 4, D = 256; swa = align(1638, 16)


def test_gemma4_global_kv_head_gates() -> None:
    no_k_eq_v = parse_hf_config(gemma4_config(attention_k_eq_v=False))
    assert (no_k_eq_v.total_num_kv_heads, no_k_eq_v.head_dim, no_k_eq_v.swa_head_dim) == (8, 512, 256)
    diffusion = parse_hf_config({**gemma4_config(attention_k_eq_v=False), "model_type": "diffusion_gemma"})
    assert diffusion.total_num_kv_heads == 2  # no attention_k_eq_v gate
    embedding = gemma4_config()
    embedding["text_config"].pop("num_global_key_value_heads")
    embedding["text_config"].pop("global_head_dim")
    parsed = parse_hf_config({**embedding, "model_type": "embedding_gemma2"})
    assert (parsed.total_num_kv_heads, parsed.head_dim, parsed.swa_total_num_kv_heads) == (1, 512, 8)
    assert parsed.context_len == 8192


def test_gemma4_last_layer_forced_full_and_bidirectional_window() -> None:
    config = gemma4_config(layer_types=["sliding_attention"] * 30, use_bidirectional_attention="all")
    geometry = parse_hf_config(config).hybrid_swa
    assert geometry is not None and geometry.full_attention_layer_ids == (29,)
    assert geometry.sliding_window_size == 512  # 1024 // 2 + 1 = 513, minus 1


# ---- per-layer bytes: MXFP8, MLA, DCP ----------------------------------------------------------------


def test_mxfp8_scales_are_floored_per_layer() -> None:
    cfg = hybrid(GPT_OSS, kv_cache_dtype="mxfp8", page_size=128)
    assert cfg.full_bytes_per_layer == cfg.swa_bytes_per_layer == 1_056  # 8 * 128 + (8 * 128) // 32
    assert cfg.cell_size_bytes == 34_214.4  # 19,008 + 0.8 * 19,008
    layout = cfg.token_to_kv_layout(cfg.calculate_pool_sizes_from_max_tokens(2048, 128))
    attributes = dict(layout.attributes)
    assert attributes["full.pool_class"] == attributes["swa.pool_class"] == "MHATokenToKVPoolMXFP8"


MLA_SWA_CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "is_hybrid_swa": True,
    "hybrid_layer_pattern": [0, 1, 1, 1],
    "num_hidden_layers": 4,
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "sliding_window": 128,
    "max_position_embeddings": 4096,
}


def test_mla_hybrid_swa_bytes_and_mxfp8_quirk() -> None:
    bf16 = hybrid(MLA_SWA_CONFIG, kv_cache_dtype="bf16", page_size=64)
    assert bf16.full_bytes_per_layer == bf16.swa_bytes_per_layer == 1_152  # 576 * 2
    # SGLang applies the MHA scale formula to an MLA model: its dummy head_dim 256 + v 128 (full),
    # raw head dim 2048 // 16 = 128 twice (SWA): 576 + 16 * 384 // 32 and 576 + 16 * 256 // 32
    mx = hybrid(MLA_SWA_CONFIG, kv_cache_dtype="mxfp8", page_size=64)
    assert (mx.full_bytes_per_layer, mx.swa_bytes_per_layer) == (768, 704)
    layout = bf16.token_to_kv_layout(bf16.calculate_pool_sizes_from_max_tokens(1024, 64))
    shapes = {b.name: b.shape for b in layout.buffers}
    assert shapes["full.kv_buffer[0]"] == (1024 + 64, 1, 576)
    assert shapes["swa.kv_buffer[2]"] == (768 + 64, 1, 576)


def test_dsa_hybrid_swa_adds_the_index_key_without_elision() -> None:
    config = {**MLA_SWA_CONFIG, "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64}
    cfg = hybrid(config, kv_cache_dtype="bf16", page_size=64)
    assert cfg.full_bytes_per_layer == 1_152 + 132 and cfg.swa_bytes_per_layer == 1_152
    layout = cfg.token_to_kv_layout(cfg.calculate_pool_sizes_from_max_tokens(1024, 64))
    shapes = {b.name: b.shape for b in layout.buffers}
    assert shapes["full.index_k_with_scale_buffer[0]"] == ((1024 + 64 + 1) // 64, 64 * 132)
    assert dict(layout.attributes)["full.pool_class"] == "DSATokenToKVPool"


def test_sizing_ignores_dcp_but_the_pools_use_it() -> None:
    cfg = hybrid(GPT_OSS, tp_size=8, dcp_size=2, page_size=64)
    assert cfg.full_bytes_per_layer == 256  # max(1, 8 // 8) * 128 * 2 (the sizing ignores DCP)
    layout = cfg.token_to_kv_layout(cfg.calculate_pool_sizes_from_max_tokens(2048, 64))
    assert {b.name: b.shape for b in layout.buffers}["full.k_buffer[0]"] == (2112, 2, 64)  # 8 // (8 // 2)


# ---- the SWAKVPool layout (SWAKVPool) -------------------------------------------------------------


def test_gpt_oss_swa_kv_pool_layout_and_bytes() -> None:
    planned = plan(case_settings(GPT_OSS, page_size=64), BUDGET_50G, pool_max_tokens=2048)
    layout = planned.layout.token_to_kv
    assert layout.pool_class == "SWAKVPool"
    shapes = {b.name: (b.shape, str(b.dtype)) for b in layout.buffers}
    assert shapes["full.kv_storage[0]"] == ((2, 2112, 8, 64), "torch.bfloat16")
    assert shapes["full.k_buffer[17]"] == ((2112, 8, 64), "torch.bfloat16")
    assert shapes["swa.v_buffer[17]"] == ((1664, 8, 64), "torch.bfloat16")  # swa = align(1638, 64) = 1600
    assert shapes["full_to_swa_index_mapping"] == ((2113,), "torch.int64")
    assert "full.k_buffer[18]" not in shapes
    attributes = dict(layout.attributes)
    assert (attributes["layers_mapping[0]"], attributes["layers_mapping[1]"]) == ("swa[0]", "full[0]")
    assert attributes["layers_mapping[35]"] == "full[17]"
    assert attributes["allocator_class"] == "SWATokenToKVPoolAllocator"
    # (2048 + 64) * 36,864 + (1600 + 64) * 36,864 + 2113 * 8
    assert layout.planned_bytes == 77_856_768 + 61_341_696 + 16_904


def test_fp8_pools_store_uint8() -> None:
    cfg = hybrid(GPT_OSS, kv_cache_dtype="fp8_e4m3", page_size=16)
    layout = cfg.token_to_kv_layout(cfg.calculate_pool_sizes_from_max_tokens(2048, 16))
    assert {str(b.dtype) for b in layout.buffers if b.name != "full_to_swa_index_mapping"} == {"torch.uint8"}


def test_mimo_compress_pools_have_their_own_swa_heads_and_split_kv() -> None:
    cfg = hybrid("mimo-v2-flash", tp_size=4, page_size=64)
    assert cfg.full_bytes_per_layer == 640  # 1 * (192 + 128) * 2
    assert cfg.swa_bytes_per_layer == 1_280  # 2 * (192 + 128) * 2
    assert cfg.cell_size_bytes == 45_696.0  # 640 * 9 + 0.8 * 1,280 * 39
    layout = cfg.token_to_kv_layout(cfg.calculate_pool_sizes_from_max_tokens(2048, 64))
    shapes = {b.name: b.shape for b in layout.buffers}
    assert shapes["full.k_buffer[0]"] == (2112, 1, 192) and shapes["full.v_buffer[0]"] == (2112, 1, 128)
    assert shapes["swa.k_buffer[38]"] == (1664, 2, 192) and shapes["swa.v_buffer[38]"] == (1664, 2, 128)
    assert not any(b.is_view for b in layout.buffers)  # D != Dv: separate allocations


def test_npu_builds_two_npu_mha_sub_pools() -> None:
    cfg = hybrid("gpt-oss-20b", device="npu", page_size=128)
    layout = cfg.token_to_kv_layout(cfg.calculate_pool_sizes_from_max_tokens(1024, 128))
    attributes = dict(layout.attributes)
    assert attributes["full.pool_class"] == attributes["swa.pool_class"] == "NPUMHATokenToKVPool"
    assert {b.name: b.shape for b in layout.buffers}["full.k_buffer"] == (12, 1024 // 128 + 1, 128, 8, 64)


# ---- pipeline parallelism ----------------------------------------------------------------------------


def test_pp_stage_ids_and_an_all_swa_stage_reports_swa_tokens() -> None:
    stage0 = hybrid("llama-4-scout", tp_size=8, pp_size=2, pp_rank=0, page_size=64)
    assert stage0.full_layer_ids == (3, 7, 11, 15, 19, 23) and len(stage0.swa_layer_ids) == 18
    env = {"SGLANG_PP_LAYER_PARTITION": "1,23"}
    only_swa = hybrid("gpt-oss-20b", pp_size=2, pp_rank=0, page_size=64, env=env)
    assert only_swa.is_all_swa and only_swa.cell_size_bytes == 2_048
    sizes = only_swa.calculate_pool_sizes(40 * GIB, 64)
    assert (sizes.max_total_num_tokens, sizes.full_max_total_num_tokens) == (20_971_520, 0)  # SWA tokens
    rest = hybrid("gpt-oss-20b", pp_size=2, pp_rank=1, page_size=64, env=env)
    assert (rest.full_layers, rest.swa_layers) == (12, 11)
    assert rest.cell_size_bytes == 24_576 + 0.8 * 22_528  # 42,598.4
    resolution = resolve(case_settings("gpt-oss-20b", pp_size=2, pp_rank=0, page_size=64, env=env), 40 * GIB)
    assert resolution.pp_min_tokens == 1_008_192  # stage 1: align(1,008,246, 64) < stage 0's SWA count


def test_stage_without_swa_layers_is_an_error() -> None:
    with pytest.raises(KVCacheConfigError, match="at least one SWA layer"):
        hybrid("gpt-oss-20b", pp_size=2, pp_rank=1, page_size=64, env={"SGLANG_PP_LAYER_PARTITION": "23,1"})


# ---- bad inputs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["nvfp4", "fp4_mx_block16"])
def test_fp4_with_hybrid_swa_is_rejected(dtype: str) -> None:
    with pytest.raises(UnsupportedConfigurationError, match="FP4.*hybrid sliding-window"):
        select_configurator(case_settings(GPT_OSS, kv_cache_dtype=dtype, page_size=64))


@pytest.mark.parametrize("ratio", [0.0, 1.5, -0.1])
def test_ratio_outside_0_1_is_rejected(ratio: float) -> None:
    ctx = case_settings(GPT_OSS, page_size=64)
    bad = dataclasses.replace(ctx, scheduling=SchedulingConfig(swa_full_tokens_ratio=ratio))
    with pytest.raises(KVCacheConfigError, match="swa_full_tokens_ratio"):
        select_configurator(bad)
    with pytest.raises(KVCacheConfigError, match="swa_full_tokens_ratio"):
        case_settings(GPT_OSS, swa_full_tokens_ratio=ratio)


def test_hybrid_swa_with_mamba_layers_is_rejected_not_mispriced() -> None:
    config = {**load_preset_config("qwen3-next-80b-a3b"), "is_hybrid_swa": True, "sliding_window": 128}
    config["hybrid_layer_pattern"] = [1, 0] * 24
    with pytest.raises(UnsupportedConfigurationError, match="Mamba"):
        select_configurator(case_settings(config, page_size=64))


def test_draft_worker_is_sized_as_its_own_model() -> None:
    """A draft worker prices only its own D layers (no draft scaling) and is planned
    (KVCacheConfigurator._resolve_memory_pool_config draft branch)."""
    cfg = hybrid(GPT_OSS, page_size=64, is_draft_worker=True, speculative_algorithm="EAGLE3",
                 eagle_draft_num_layers=2, tp_size=2)  # fmt: skip
    assert (cfg.full_layer_ids, cfg.swa_layer_ids) == ((1,), (0,))  # layer_types[0:2] = sliding, full
    assert cfg.draft_layers == DraftLayers()
    # full_pt = swa_pt = 4 heads (8 // TP2) * (64 + 64) * 2 B = 1024; cell = 1024 + 0.8 * 1024
    assert cfg.cell_size_bytes == 1024 + 0.8 * 1024


def test_sizes_without_sub_pools_cannot_be_laid_out() -> None:

    cfg = hybrid(GPT_OSS, page_size=64)
    with pytest.raises(KVCacheConfigError, match="swa_max_total_num_tokens"):
        cfg.token_to_kv_layout(PoolSizes(max_total_num_tokens=1024))


# ---- the catalog cases: planned == allocated on meta -------------------------------------------------


def test_catalog_has_the_hybrid_swa_cases() -> None:
    assert len(CASES) >= 20
    for path in CASES:
        assert json.loads(path.read_text())["name"] == path.stem


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case_builds_on_meta_exactly_as_planned(path: Path) -> None:
    case = load_case(path)
    planned = plan(
        case.settings,
        case.available_bytes,
        max_tokens=case.max_tokens,
        pool_max_tokens=case.pool_max_tokens,
        pool_max_running_requests=case.pool_max_running_requests,
    )
    built = build(planned, "meta")
    assert built.token_to_kv_pool.allocated_bytes == planned.layout.token_to_kv.planned_bytes
    assert built.allocated_bytes == planned.layout.planned_bytes
    for spec in planned.layout.token_to_kv.buffers:
        tensor = built.token_to_kv_pool[spec.name]
        assert (tuple(tensor.shape), str(tensor.dtype)) == (spec.shape, str(spec.dtype)), spec.name


def test_gemma3_context_ignores_the_linear_rope_factor() -> None:
    """transformers keeps Gemma-3's rope parameters per attention type, so SGLang's
    ``get_context_length`` sees no top-level factor: the context is max_position_embeddings."""
    from kvstrategies.models.parse import derive_context_len

    rope = {"factor": 8.0, "rope_type": "linear"}
    # gemma3_text: factor dropped -> 131072 x 1 = 131,072 (not 131072 x 8)
    assert derive_context_len({"model_type": "gemma3_text", "max_position_embeddings": 131072,
                               "rope_scaling": rope}) == 131_072  # fmt: skip
    # the same text under a model type without per-type rope keeps the factor: 131072 x 8 = 1,048,576
    assert derive_context_len({"model_type": "gemma2", "max_position_embeddings": 131072,
                               "rope_scaling": rope}) == 1_048_576  # fmt: skip
    # the published Gemma-3 27B config (text_config rope_scaling factor 8, no length key: the
    # gemma3_text default 131072 applies) -> 131,072
    assert parse_hf_config(load_preset_config("gemma-3-27b")).context_len == 131_072


# ---- all-SWA stages with drafts, SWA draft terms and the chunk-capped pool, by hand ------------------------


# ---- all-SWA stage with draft layers (HybridSWAPoolConfigurator.__init__ draft layers,
# HybridSWAPoolConfigurator._recompute_cell_size)


def _gemma4(**text_overrides: Any) -> dict[str, Any]:
    """Gemma-4-26B-A4B-shaped: 30 layers, every 6th full; full layers 2 KV heads of 512, SWA 8 of 256."""
    text: dict[str, Any] = {
        "model_type": "gemma4_text", "num_hidden_layers": 30, "hidden_size": 2816, "num_attention_heads": 16,
        "num_key_value_heads": 8, "head_dim": 256, "global_head_dim": 512, "num_global_key_value_heads": 2,
        "attention_k_eq_v": True, "sliding_window": 1024, "max_position_embeddings": 262144,
        "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5,
    }
    text.update(text_overrides)
    return {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "text_config": text}


# PP stage 0 of "5,25" holds layers 0-4: all sliding. TP2 bf16: full_pt = 1 * (512 + 512) * 2 = 2,048,
# swa_pt = 4 * (256 + 256) * 2 = 4,096; all-SWA cell = swa_pt * nS + full_pt * dF + swa_pt * dS
# + swa_pt * dSF + draft_cell with nS = 5
SWA_STAGE: dict[str, Any] = {"tp_size": 2, "kv_cache_dtype": "bf16", "page_size": 16, "pp_size": 2, "pp_rank": 0,
                             "env": {"SGLANG_PP_LAYER_PARTITION": "5,25"}}


@pytest.mark.parametrize(
    ("config", "spec", "cell"),
    [
        (_gemma4(), {}, 20_480),  # 4,096 * 5
        # D = 3 with 1 SWA draft layer: dF = 2, dS = 1 -> 20,480 + 2,048 * 2 + 4,096 * 1
        (_gemma4(), {"speculative_algorithm": "EAGLE", "eagle_draft_num_layers": 3, "eagle_draft_swa_num_layers": 1},
         28_672),
        # mtp_local_layer_ids [0], D = 2: dSF = 1, dF = 1 -> 20,480 + 2,048 + 4,096
        (_gemma4(mtp_local_layer_ids=[0]), {"speculative_algorithm": "EAGLE", "eagle_draft_num_layers": 2}, 26_624),
        # DFLASH: no draft layers, draft_cell = 1,000 * dcp 1
        (_gemma4(), {"speculative_algorithm": "DFLASH", "eagle_draft_num_layers": 2,
                     "dflash_draft_cell_size_per_token": 1_000}, 21_480),
    ],
)
def test_all_swa_stage_cell_with_draft_layers(config: dict[str, Any], spec: dict[str, Any], cell: int) -> None:
    cfg = select_configurator(case_settings(config, **SWA_STAGE, **spec))
    assert isinstance(cfg, HybridSWAPoolConfigurator) and cfg.is_all_swa and cfg.swa_layers == 5
    assert cfg.cell_size_bytes == cell


# GPT-OSS-120B page 64 (the worked example at the top of this file): full_pt = swa_pt = 8 * (64 + 64) * 2
# = 2,048; full_layers = swa_layers = 18; ratio 0.8: cell = 36,864 + 0.8 * 36,864 = 66,355.2
CHUNK_CAP: dict[str, Any] = {"max_running_requests": 64, "disable_radix_cache": True, "chunked_prefill_size": 8192}


def swa_cfg(config: str | dict[str, Any] = GPT_OSS, **fields: Any) -> HybridSWAPoolConfigurator:
    cfg = select_configurator(case_settings(config, page_size=64, **fields))
    assert isinstance(cfg, HybridSWAPoolConfigurator)
    return cfg


def test_zero_swa_draft_layers_leave_every_draft_layer_full() -> None:
    # HybridSWAPoolConfigurator.__init__ draft layers: dS = min(max(0, 0), 1) = 0, dF = 1: 2,048 * 19 + 0.8 * 2,048 * 18
    cfg = swa_cfg(speculative_algorithm="EAGLE", eagle_draft_num_layers=1, eagle_draft_swa_num_layers=0)
    assert (cfg.draft_layers.full, cfg.draft_layers.swa) == (1, 0)
    assert cfg.cell_size_bytes == 68_403.2


@pytest.mark.parametrize(
    ("fields", "cell"),
    [
        ({"dflash_draft_cell_size_per_token": 0}, 66_355.2),  # not positive: no draft cell
        ({"dflash_draft_cell_size_per_token": 1}, 66_356.2),
        ({"dflash_draft_cell_size_per_token": 1_000}, 67_355.2),
        # TP2 DCP2: the sizing counts heads without DCP -> 1,024 per layer: 18,432 + 14,745.6, + 1,000 * 2
        ({"dflash_draft_cell_size_per_token": 1_000, "tp_size": 2, "dcp_size": 2}, 35_177.6),
    ],
)
def test_hybrid_swa_dflash_draft_cell(fields: dict[str, Any], cell: float) -> None:
    cfg = swa_cfg(speculative_algorithm="DFLASH", eagle_draft_num_layers=2, **fields)
    assert cfg.cell_size_bytes == cell


@pytest.mark.parametrize(("chunk", "capped"), [(0, False), (1, True)])
def test_chunk_cap_needs_a_positive_prefill_chunk(chunk: int, capped: bool) -> None:
    cfg = swa_cfg(max_running_requests=64, disable_radix_cache=True, chunked_prefill_size=chunk)
    assert isinstance(cfg, SWAChunkCapPoolConfigurator) is capped


def test_chunk_cap_full_token_cell_counts_swa_full_drafts_and_the_draft_cell() -> None:
    # SWAChunkCapPoolConfigurator: full_cell = full_pt * (nF + dF) + swa_pt * dSF + draft_cell
    mtp_config = {**load_preset_config(GPT_OSS), "mtp_local_layer_ids": [0]}
    mtp = swa_cfg(mtp_config, speculative_algorithm="EAGLE", eagle_draft_num_layers=2, speculative_num_draft_tokens=4,
                  speculative_num_steps=3, speculative_eagle_topk=1, **CHUNK_CAP)
    assert isinstance(mtp, SWAChunkCapPoolConfigurator)
    assert mtp.full_token_cell == 2_048 * (18 + 1) + 2_048 * 1 == 40_960  # dF = 1, dSF = 1
    dflash = swa_cfg(speculative_algorithm="DFLASH", eagle_draft_num_layers=2, dflash_draft_cell_size_per_token=1_000,
                     **CHUNK_CAP)
    assert isinstance(dflash, SWAChunkCapPoolConfigurator)
    assert dflash.full_token_cell == 36_864 + 1_000


def test_chunk_cap_user_cap_floors_full_to_the_page() -> None:
    # calculate_pool_sizes_from_max_tokens: full = align(127, 64) = 64; swa = min(ceil_align(40,960, 64), 127) = 127
    sizes = swa_cfg(**CHUNK_CAP).calculate_pool_sizes_from_max_tokens(127, 64)
    assert (sizes.full_max_total_num_tokens, sizes.swa_max_total_num_tokens) == (64, 127)


def test_chunk_cap_error_reports_gib() -> None:
    # the error message: the cap's 40,960 tokens * 36,864 B = 1,509,949,440 B = 1.40625 GiB, of 1.40625 GiB available
    with pytest.raises(InsufficientMemoryError, match=r"\(40960 tokens, 1\.41 GiB\).*available 1\.41 GiB"):
        swa_cfg(**CHUNK_CAP).calculate_pool_sizes(1_509_949_440, 64)


@pytest.mark.parametrize(("extra", "full"), [(36_864, 1), (36_863, 0)])
def test_chunk_cap_at_page_1_leaves_exactly_one_full_token(extra: int, full: int) -> None:
    # compute_swa_request_cap at P = 1: per_request = 127 + 128 + 1 + 1 = 257; cap = 257 * 64 + 2 * 8,192 + 1 = 32,833;
    # fixed = 32,833 * 36,864; one more full cell (36,864 B) -> full = 1; a byte less -> 0 (error)
    cfg = select_configurator(case_settings(GPT_OSS, page_size=1, **CHUNK_CAP))
    assert isinstance(cfg, SWAChunkCapPoolConfigurator) and cfg.swa_cap_tokens == 32_833
    budget = 32_833 * 36_864 + extra
    if full:
        sizes = cfg.calculate_pool_sizes(budget, 1)
        assert (sizes.full_max_total_num_tokens, sizes.swa_max_total_num_tokens) == (1, 32_833)
    else:
        with pytest.raises(InsufficientMemoryError, match="leaves no room for the full KV pool"):
            cfg.calculate_pool_sizes(budget, 1)
