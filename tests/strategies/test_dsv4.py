"""DeepSeek-V4 compressed attention: hand-computed examples D1-D4 (ratio and cap mode, each without and with MTP),
DeepSeekV4TokenToKVPool, the catalog cases.

Every expected number is a literal computed by hand from DSV4PoolConfigurator / DeepSeekV4TokenToKVPool (the
examples use the first 43 entries of the real V4-Flash ``compress_ratios``: 2 x 0, 21 x 4,
20 x 128; ``C = 65,536``; page 256; 60 GiB).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvstrategies import plan, select_configurator
from kvstrategies.api import build
from kvstrategies.case import load_case
from kvstrategies.core.dtypes import DType
from kvstrategies.errors import (
    InsufficientMemoryError,
    KVCacheConfigError,
    SWAPoolTooSmallError,
    UnsupportedConfigurationError,
)
from kvstrategies.models import AttentionArch, parse_hf_config
from kvstrategies.pools.dsv4 import KVPageLayout, compress_state_rows, dsv4_layout
from kvstrategies.presets import load_preset_config
from kvstrategies.strategies.dsv4 import DSV4PoolConfigurator, DSV4StateReservationError
from kvstrategies.strategies.resolve import finalize

from ..helpers import GIB, case_settings

FLASH, PRO = "deepseek-v4-flash", "deepseek-v4-pro"
BUDGET = 64_424_509_440  # 60 GiB
EXAMPLE: dict[str, Any] = {"page_size": 256, "context_length": 65_536}
CAP: dict[str, Any] = {"max_running_requests": 64, "chunked_prefill_size": 8192}
MTP: dict[str, Any] = {
    "speculative_algorithm": "EAGLE",
    "speculative_num_draft_tokens": 4,
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
}
CASES = sorted((Path(__file__).parents[2] / "cases").glob("dsv4-*.json"))


def dsv4(preset: str | dict[str, Any] = FLASH, **fields: Any) -> DSV4PoolConfigurator:
    cfg = select_configurator(case_settings(preset, **{**EXAMPLE, **fields}))
    assert isinstance(cfg, DSV4PoolConfigurator)
    return cfg


# ---- geometry ------------------------------------------------------------------------------


def test_flash_geometry_from_the_real_config() -> None:
    geometry = parse_hf_config(load_preset_config(FLASH))
    assert geometry.attention_arch is AttentionArch.MHA and geometry.mla is None
    assert geometry.num_hidden_layers == geometry.num_pp_layers == 43
    v4 = geometry.dsv4
    assert v4 is not None
    assert len(v4.compress_ratios) == 44 and v4.compress_ratios[43] == 0  # the MTP layer's entry
    target = v4.compress_ratios[:43]
    assert (target.count(0), target.count(4), target.count(128)) == (2, 21, 20)
    assert target == (0, 0) + (4, 128) * 20 + (4,)
    assert (v4.window_size, v4.qk_nope_head_dim, v4.qk_rope_head_dim, v4.head_dim) == (128, 448, 64, 512)
    assert (v4.index_head_dim, v4.kv_lora_rank, v4.v_head_dim) == (128, 512, 512)
    assert v4.kv_source_layer_ids is None
    assert geometry.family == "dsv4"


def test_pro_geometry_from_the_real_config() -> None:
    geometry = parse_hf_config(load_preset_config(PRO))
    v4 = geometry.dsv4
    assert v4 is not None and geometry.num_pp_layers == 61 and len(v4.compress_ratios) == 62
    target = v4.compress_ratios[:61]
    assert (target.count(0), target.count(4), target.count(128)) == (0, 30, 31)


def test_selection_dsv4_first_unless_hybrid_swa_memory_disabled() -> None:
    assert type(select_configurator(case_settings(FLASH, page_size=256))) is DSV4PoolConfigurator
    off = select_configurator(case_settings(FLASH, page_size=256, disable_hybrid_swa_memory=True))
    assert not isinstance(off, DSV4PoolConfigurator)  # falls through to the Default family


def test_bad_compress_ratio_is_rejected() -> None:
    config = dict(load_preset_config(FLASH))
    config["compress_ratios"] = [0, 8] + [4] * 42
    with pytest.raises(KVCacheConfigError, match="unsupported ratio"):
        parse_hf_config(config)


# ---- constants of the DeepSeek-V4 examples ----------------------------------------------------------------------


def test_per_token_constants() -> None:
    cfg = dsv4()
    assert (cfg.kv_bytes, cfg.indexer_bytes_per_token) == (584, 132)
    assert (cfg.paged(0), cfg.paged(4), cfg.paged(128)) == (585.0, 585.0, 864.0)
    assert cfg.compressed_bytes_per_full_token(4) == 179.25
    assert cfg.compressed_bytes_per_full_token(128) == 6.75
    assert cfg.bytes_per_swa_token == 31_875.0  # 585 * 43 + 8/256 * 10,240 * 21
    assert (cfg.n(4), cfg.n(128), cfg.ring_sizes) == (21, 20, {4: 8, 128: 128})


# ---- D1-D4: ratio mode, cap mode, ratio mode with MTP, cap mode with MTP ------------------------


def test_d1_ratio_mode() -> None:
    cfg = dsv4()
    assert not cfg.cap_mode and cfg.swa_ratio == 0.1
    assert cfg.cell_size_bytes == 7_086.75
    assert cfg.estimated_requests(BUDGET) == 4_096  # int(9,090,839 / 65,536 * 512) = 71,022 -> 4,096
    assert cfg.c128_state_fixed_bytes(4_096) == 42_981_130_240  # 524,672 rows * 1,024 * 4 * 20
    sizes = cfg.calculate_pool_sizes(BUDGET, 256)
    assert sizes.max_total_num_tokens == sizes.full_max_total_num_tokens == 3_025_664
    assert sizes.swa_max_total_num_tokens == 302_336
    assert (sizes.c4_max_total_num_tokens, sizes.c128_max_total_num_tokens) == (756_416, 23_638)
    assert (sizes.c4_state_pool_size, sizes.c128_state_pool_size) == (9_448, 0)
    assert (sizes.c4_state_dtype, sizes.c128_state_dtype) == ("float32", "float32")
    final = finalize(cfg, sizes)
    assert final.max_running_requests == 4_096
    assert final.c128_state_pool_size == 524_416  # 4,097 * 128


def test_d2_cap_mode() -> None:
    cfg = dsv4(**CAP)
    assert cfg.cap_mode and cfg.swa_prefix_tails == 256
    assert cfg.swa_cap_tokens == 164_096  # ceil_align(65,792 + 256 * 384, 256)
    assert cfg.cell_size_bytes == 3_899.25
    assert cfg.c128_state_fixed_bytes(64) == 702_545_920  # 8,576 rows
    assert cfg.fixed_bytes(64) == 5_933_105_920.0
    sizes = cfg.calculate_pool_sizes(BUDGET, 256)
    assert sizes.max_total_num_tokens == 15_000_576
    assert sizes.swa_max_total_num_tokens == 164_096
    assert (sizes.c4_max_total_num_tokens, sizes.c128_max_total_num_tokens) == (3_750_144, 117_192)
    assert sizes.c4_state_pool_size == 5_128  # 641 * 8
    final = finalize(cfg, sizes)
    assert (final.max_running_requests, final.c128_state_pool_size) == (64, 8_320)


def test_d3_ratio_mode_with_mtp_names_the_real_cause() -> None:
    cfg = dsv4(**MTP)
    assert cfg.ring_sizes == {4: 16, 128: 256}
    assert cfg.bytes_per_swa_token == 39_492.558139534885  # 38,595 * (44 / 43)
    assert cfg.cell_size_bytes == 7_939.186046511628
    assert cfg.c128_state_fixed_bytes(4_096) == 85_951_774_720  # 1,049,216 rows: above 60 GiB
    with pytest.raises(DSV4StateReservationError) as info:
        cfg.calculate_pool_sizes(BUDGET, 256)
    assert isinstance(info.value, SWAPoolTooSmallError) and isinstance(info.value, KVCacheConfigError)
    message = str(info.value)
    assert "ratio-128 compression state" in message and "4096" in message
    assert "--max-running-requests" in message and "1049216 rows" in message


def test_d4_cap_mode_with_mtp_and_its_draft_worker() -> None:
    cfg = dsv4(**MTP, **CAP)
    assert cfg.swa_cap_tokens == 172_800  # cap 74,496 + headroom 98,304
    assert cfg.bytes_per_swa_token == 39_492.558139534885
    assert cfg.cell_size_bytes == 3_989.93023255814
    assert cfg.c128_state_fixed_bytes(64) == 1_394_606_080  # 17,024 rows
    assert cfg.fixed_bytes(64) == 8_218_920_126.511628
    sizes = finalize(cfg, cfg.calculate_pool_sizes(BUDGET, 256))
    assert sizes.max_total_num_tokens == 14_086_656
    assert sizes.swa_max_total_num_tokens == 172_800
    assert (sizes.c4_max_total_num_tokens, sizes.c128_max_total_num_tokens) == (3_521_664, 110_052)
    assert (sizes.c4_state_pool_size, sizes.c128_state_pool_size) == (10_800, 16_640)
    draft_ctx = case_settings(FLASH, **EXAMPLE, **MTP, **CAP, is_draft_worker=True)
    draft = plan(draft_ctx, BUDGET).sizes
    assert (draft.max_total_num_tokens, draft.swa_max_total_num_tokens) == (14_086_656, 172_800)
    assert (draft.c4_max_total_num_tokens, draft.c128_max_total_num_tokens) == (0, 0)
    assert (draft.c4_state_pool_size, draft.c128_state_pool_size) == (0, 0)
    assert draft.c4_state_dtype == "float32"
    draft_cfg = select_configurator(draft_ctx)
    assert draft_cfg.calculate_pool_sizes(BUDGET, 256).c4_max_total_num_tokens == 0
    names = [b.name for b in draft_cfg.token_to_kv_layout(draft.replace(max_running_requests=64)).buffers]
    assert names == ["swa.kv_buffer[0]"]  # one MTP layer, SWA only


# ---- other sizing paths and errors ----------------------------------------------------------


def test_from_max_tokens_keeps_the_cap_mode_swa() -> None:
    cap = dsv4(**CAP).calculate_pool_sizes_from_max_tokens(4_000, 256)
    # _compute_dsv4_sizes keeps the cap-mode SWA size: neither re-aligned nor limited by the full tokens
    assert (cap.max_total_num_tokens, cap.swa_max_total_num_tokens) == (3_840, 164_096)
    ratio = dsv4(swa_full_tokens_ratio=0.5).calculate_pool_sizes_from_max_tokens(4_096, 256)
    assert (ratio.swa_max_total_num_tokens, ratio.c4_state_pool_size) == (2_048, 64)
    with pytest.raises(SWAPoolTooSmallError, match="cannot hold even one request"):
        dsv4().calculate_pool_sizes_from_max_tokens(4_096, 256)  # align(409, 256) = 256 <= 128 + 256


def test_budget_errors() -> None:
    with pytest.raises(InsufficientMemoryError, match="SWA pool cap"):
        dsv4(**CAP).calculate_pool_sizes(5 * GIB, 256)  # 5.93 GB of fixed bytes
    with pytest.raises(SWAPoolTooSmallError) as info:
        dsv4().calculate_pool_sizes(2**20, 256)  # too small even without the c128 state
    assert not isinstance(info.value, DSV4StateReservationError)


def test_explicit_ratio_keeps_ratio_mode_with_max_running_requests() -> None:
    cfg = dsv4(PRO, swa_full_tokens_ratio=0.5, max_running_requests=32, chunked_prefill_size=8192)
    assert not cfg.cap_mode and cfg.estimated_requests(24 * GIB) == 32
    # Pro: bpst 585 * 61 + 8/256 * 10,240 * 30 = 45,285; comp 179.25 * 30 + 6.75 * 31 = 5,586.75
    assert cfg.cell_size_bytes == 0.5 * 45_285.0 + 5_586.75


def test_bf16_state_dtype_halves_state_bytes() -> None:
    cfg = dsv4(env={"SGLANG_DSV4_COMPRESS_STATE_DTYPE": "bf16"})
    assert cfg.bytes_per_swa_token == 28_515.0  # 585 * 43 + 8/256 * 5,120 * 21
    assert cfg.cell_size_bytes == 6_750.75
    assert cfg.c128_state_fixed_bytes(64) == 8_576 * 1_024 * 2 * 20
    sizes = cfg.calculate_pool_sizes(BUDGET, 256)
    assert (sizes.c4_state_dtype, sizes.c128_state_dtype) == ("bfloat16", "bfloat16")
    states = [b for b in cfg.token_to_kv_layout(finalize(cfg, sizes)).buffers if "state" in b.name]
    assert states and {b.dtype for b in states} == {DType.BFLOAT16}


def test_npu_sizes_without_page_padding() -> None:
    cfg = dsv4(page_size=128, device="npu")
    assert (cfg.paged(0), cfg.paged(128)) == (584.0, 584.0)
    assert cfg.bytes_per_swa_token == 38_552.0  # 584 * 43 + 8/128 * 10,240 * 21
    assert cfg.cell_size_bytes == 7_705.450000000001
    with pytest.raises(KVCacheConfigError, match="multiple of 128"):
        _ = dsv4(page_size=192, device="npu").cell_size_bytes


@pytest.mark.parametrize("page", [1, 64, 192])
def test_page_size_must_be_a_multiple_of_128(page: int) -> None:
    with pytest.raises(KVCacheConfigError, match="multiple of 128"):
        _ = dsv4(page_size=page).cell_size_bytes
    with pytest.raises(KVCacheConfigError, match="multiple of 128"):
        dsv4().calculate_pool_sizes(BUDGET, page)


@pytest.mark.parametrize("page", [128, 512])
def test_cuda_sizes_other_128_multiples_but_builds_only_page_256(page: int) -> None:
    # SGLang's configurator asserts P % 128 == 0; its CUDA pool asserts P == 256 (_build_dsv4_kv_pool).
    cfg = dsv4(page_size=page)
    sizes = cfg.calculate_pool_sizes(BUDGET, page)
    assert sizes.max_total_num_tokens % page == 0
    with pytest.raises(KVCacheConfigError, match="needs page_size 256"):
        cfg.token_to_kv_layout(sizes.replace(max_running_requests=8))


def test_unsupported_and_invalid_settings() -> None:
    v41 = dict(load_preset_config(FLASH))
    v41["compress_ratios"] = [0, 2] + [4, 128] * 20 + [1, 0]
    v41["kv_source_layer_ids"] = [1]
    with pytest.raises(UnsupportedConfigurationError, match="kv_source_layer_ids"):
        _ = dsv4(v41).cell_size_bytes
    del v41["kv_source_layer_ids"]
    assert dsv4(v41).n(4) == 20  # ratio-1/2 layers own nothing without kv sources (SWA only)
    with pytest.raises(UnsupportedConfigurationError, match="DSpark"):
        _ = dsv4(speculative_algorithm="DSPARK", speculative_num_draft_tokens=4).cell_size_bytes
    with pytest.raises(UnsupportedConfigurationError, match="V4.1"):
        _ = dsv4(env={"SGLANG_DSV4_KV_LAYOUT": "v41"}).cell_size_bytes
    with pytest.raises(UnsupportedConfigurationError, match="V4.1"):
        _ = dsv4(env={"SGLANG_DSV4_KV_LAYOUT": "auto"}, platform={"is_sm100": True}).cell_size_bytes
    assert dsv4(env={"SGLANG_DSV4_KV_LAYOUT": "auto"}).cell_size_bytes == 7_086.75  # V4 off SM100
    with pytest.raises(KVCacheConfigError, match="fp8_e4m3"):
        _ = dsv4(dsv4_attn_backend="trtllm", kv_cache_dtype="bf16").cell_size_bytes
    with pytest.raises(KVCacheConfigError, match="speculative_num_draft_tokens"):
        _ = dsv4(speculative_algorithm="EAGLE").cell_size_bytes
    with pytest.raises(KVCacheConfigError, match="keeps resident"):
        _ = dsv4(speculative_algorithm="EAGLE", speculative_num_draft_tokens=11).cell_size_bytes
    assert dsv4(speculative_algorithm="EAGLE", speculative_num_draft_tokens=10).ring_sizes == {4: 16, 128: 256}
    with pytest.raises(UnsupportedConfigurationError, match="dcp_size"):
        dsv4(**MTP, **CAP, tp_size=2, dcp_size=2, is_draft_worker=True).calculate_pool_sizes(BUDGET, 256)


def test_invalid_state_dtype() -> None:
    import dataclasses

    ctx = case_settings(FLASH, page_size=256)
    ctx = dataclasses.replace(ctx, knobs=dataclasses.replace(ctx.knobs, dsv4_compress_state_dtype=DType.FLOAT16))
    with pytest.raises(KVCacheConfigError, match="bfloat16"):
        _ = DSV4PoolConfigurator(ctx).cell_size_bytes


def test_trtllm_uniform_fp8_pool() -> None:
    cfg = dsv4(dsv4_attn_backend="trtllm", kv_cache_dtype="fp8_e4m3", swa_full_tokens_ratio=0.5)
    assert cfg.kv_bytes == 512 and cfg.paged(128) == 512.0
    layout = cfg.token_to_kv_layout(finalize(cfg, cfg.calculate_pool_sizes_from_max_tokens(4_096, 256)))
    swa = layout.buffers[0]
    assert (swa.name, swa.shape, swa.dtype) == ("swa.kv_buffer[0]", (9, 256 * 512), DType.FLOAT8_E4M3FN)


# ---- layouts --------------------------------------------------------------------------------


def test_layouts_13_4b_illustration() -> None:
    ratios = (0, 0) + (4, 128) * 20 + (4,)
    layout = dsv4_layout(
        swa_size=16_384,
        c4_size=16_384,
        c128_size=512,
        c4_state_pool_size=512,
        c128_state_pool_size=2_176,
        num_req_slots=17,
        page_size=256,
        stage_start=0,
        stage_ratios=ratios,
        ring_sizes=(8, 128),
        qk_nope_head_dim=448,
        qk_rope_head_dim=64,
        indexer_head_dim=128,
        indexer_bytes_per_token=132,
        c4_state_dtype=DType.FLOAT32,
        c128_state_dtype=DType.FLOAT32,
    )
    groups: dict[tuple[str, tuple[int, ...], DType], int] = {}
    for buf in layout.buffers:
        kind = buf.name.split("[")[0] + buf.name.split("]")[1]
        groups[(kind, buf.shape, buf.dtype)] = groups.get((kind, buf.shape, buf.dtype), 0) + 1
    assert groups == {
        ("swa.kv_buffer", (65, 149_760), DType.UINT8): 43,
        ("c4.kv_buffer", (260, 37_440), DType.UINT8): 21,
        ("c128.kv_buffer", (384, 1_728), DType.UINT8): 20,
        ("c4_indexer.index_k_with_scale_buffer", (260, 8_448), DType.UINT8): 21,
        ("state.kv_score", (524, 2_048), DType.FLOAT32): 21,
        ("state.kv_score", (2_432, 1_024), DType.FLOAT32): 20,
        ("indexer_state.kv_score", (524, 512), DType.FLOAT32): 21,
    }
    names = {b.name for b in layout.buffers}
    assert "state[2].kv_score" in names and "state[3].kv_score" in names and "state[0].kv_score" not in names
    assert "indexer_state[42].kv_score" in names and "indexer_state[41].kv_score" not in names
    assert KVPageLayout.V4.page_bytes(256) == 149_760 and KVPageLayout.V4.page_bytes(2) == 1_728


def test_d2_what_if_layout() -> None:
    cfg = dsv4(**CAP)
    sizes = cfg.finalize_with_max_running_requests(
        cfg.calculate_pool_sizes_from_max_tokens(4_096, 256).replace(max_running_requests=8)
    )
    shapes = {b.name: b.shape for b in cfg.token_to_kv_layout(sizes).buffers}
    assert shapes["swa.kv_buffer[42]"] == (642, 149_760)  # (164,096 + 256) / 256
    assert shapes["c4.kv_buffer[20]"] == (20, 37_440)  # ceil((1,024 + 256) / 64)
    assert shapes["c128.kv_buffer[19]"] == (144, 1_728)  # (32 + 256) / 2
    assert shapes["c4_indexer.index_k_with_scale_buffer[0]"] == (20, 8_448)  # c4_logical 32 * 32
    assert shapes["state[2].kv_score"] == (5_140, 2_048)  # ceil_align(5,128 + 8 + 1, 4)
    assert shapes["indexer_state[2].kv_score"] == (5_140, 512)
    assert shapes["state[3].kv_score"] == (1_408, 1_024)  # ceil_align(9 * 128 + 129, 128)
    # the SWA allocator's full -> SWA mapping, registered on the pool: full tokens + page + 1
    assert shapes["full_to_swa_index_mapping"] == (sizes.max_total_num_tokens + 256 + 1,)
    # full = 4,096 tokens (c4 logical 1,024 = 4,096 / 4): 4,096 + 256 + 1 = 4,353 int64 entries
    assert sizes.full_max_total_num_tokens == 4_096
    assert shapes["full_to_swa_index_mapping"] == (4_353,)
    assert len(shapes) == 43 + 21 + 20 + 21 + 21 + 20 + 21 + 1


# ---- the catalog ------------------------------------------------------------------------------


def test_catalog_has_the_dsv4_cases() -> None:
    assert len(CASES) >= 12


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case_builds_on_meta_with_planned_bytes(path: Path) -> None:
    case = load_case(path)
    planned = plan(
        case.settings,
        case.available_bytes,
        max_tokens=case.max_tokens,
        pool_max_tokens=case.pool_max_tokens,
        pool_max_running_requests=case.pool_max_running_requests,
    )
    assert isinstance(planned.configurator, DSV4PoolConfigurator)
    pools = build(planned, "meta")
    assert pools.allocated_bytes == planned.planned_bytes
    assert pools.token_to_kv_pool.allocated_bytes == planned.layout.token_to_kv.planned_bytes


# ---- physical pages before and from SGLang 0.5.21, by hand -------------------------------------------------


def test_dsv4_physical_pages_before_and_from_0_5_21() -> None:
    """A paged DeepSeek-V4 buffer's rows (sglang.srt.mem_cache.deepseek_v4_memory_pool): up to 0.5.20
    ``DeepSeekV4SingleKVPool.__init__`` takes ``(size + p + 1) // p``; from 0.5.21
    ``_num_dsv4_physical_kv_pages`` takes ``ceil((size + P) / p)``, P the model-wide page."""
    from kvstrategies.pools.dsv4 import physical_pages

    assert physical_pages(1023, 256, 64, at_global_page=False) == (1023 + 64 + 1) // 64 == 17
    assert physical_pages(1022, 256, 64, at_global_page=False) == (1022 + 64 + 1) // 64 == 16
    assert physical_pages(1023, 256, 64, at_global_page=True) == -(-(1023 + 256) // 64) == 20
    assert physical_pages(1024, 256, 64, at_global_page=True) == (1024 + 256) // 64 == 20


# ---- DeepSeek-V4 by hand: the page format, cap and ratio modes, fixed bytes, state rows, the SWA floor -----


# ---- DeepSeek-V4 (DSV4PoolConfigurator.__init__) --------------------------------------------------------------


def test_v4_page_format_is_584_bytes_per_token() -> None:
    # DSV4PoolConfigurator.__init__: nope + 2 * rope + 8 = 448 (fp8) + 128 (bf16 rope) + 8 (scales) = 584
    assert KVPageLayout.V4.bytes_per_token == 584
    assert KVPageLayout.UNIFORM_FP8.bytes_per_token == 512  # trtllm: hd = 512 fp8 bytes


@pytest.mark.parametrize("low_ratio", [1, 2])
def test_v41_ratio_1_or_2_layers_with_kv_sources_are_rejected(low_ratio: int) -> None:
    """Ratios 1 and 2 each own their kv-source layers (DSV4PoolConfigurator.__init__): either alone needs the V4.1
    pools."""
    config = dict(load_preset_config("deepseek-v4-flash"))
    config["compress_ratios"] = [0, low_ratio] + [4, 128] * 20 + [0, 0]
    config["kv_source_layer_ids"] = [1]
    cfg = select_configurator(case_settings(config, page_size=256, context_length=65_536))
    assert isinstance(cfg, DSV4PoolConfigurator)
    with pytest.raises(UnsupportedConfigurationError, match=rf"compress ratio\(s\) \[{low_ratio}\]"):
        _ = cfg.owners


def test_c128_only_stage_ring_serves_130_drafts() -> None:
    """DSV4PoolConfigurator.__init__: the 256-ring of ratio 128 (window 128) keeps 256 - 128 + 2 = 130 drafts
    resident."""
    config = dict(load_preset_config("deepseek-v4-flash"))
    config["compress_ratios"] = [0, 0] + [128] * 41 + [0]  # no ratio-4 owner: only the c128 ring binds

    def configurator(drafts: int) -> DSV4PoolConfigurator:
        ctx = case_settings(config, page_size=256, context_length=65_536, speculative_algorithm="EAGLE",
                            speculative_num_draft_tokens=drafts, speculative_num_steps=3, speculative_eagle_topk=1)
        cfg = select_configurator(ctx)
        assert isinstance(cfg, DSV4PoolConfigurator)
        return cfg

    assert configurator(130).ring_sizes == {128: 256}
    with pytest.raises(KVCacheConfigError, match=r"c128 compression-state ring \(ring 256\) keeps resident \(130"):
        _ = configurator(131).ring_sizes


# ---- DeepSeek-V4 cap mode and fixed bytes (compute_swa_request_cap, DSV4PoolConfigurator._resolve_swa_cap_tokens,
# DSV4PoolConfigurator._fixed_swa_bytes)


def test_dsv4_cap_under_attention_dp_divides_the_requests_once() -> None:
    # DSV4PoolConfigurator._resolve_swa_cap_tokens: mrr_w = 128 // 2 = 64; compute_swa_request_cap reads the
    # global 128 and divides by dp itself: 768 * 64 + 2 * 8192 + 256 = 65,792; + 4 * 64 * (128 + 256) -> 164,096
    # (as test_d2_cap_mode)
    cfg = dsv4(tp_size=2, attn_dp_size=2, max_running_requests=128, chunked_prefill_size=8192)
    assert (cfg.requests_per_worker, cfg.swa_prefix_tails) == (64, 256)
    assert cfg.swa_cap_tokens == 164_096


def test_dsv4_cap_with_fewer_requests_than_dp_workers() -> None:
    # mrr_w = max(1, 1 // 2) = 1; n = max(1, 1 // 2) = 1: 768 + 2 * 8192 + 256 = 17,408;
    # + 4 * 1 * 384 = 18,944 (a page multiple: 74 * 256)
    cfg = dsv4(tp_size=2, attn_dp_size=2, max_running_requests=1, chunked_prefill_size=8192)
    assert (cfg.requests_per_worker, cfg.swa_prefix_tails) == (1, 4)
    assert cfg.swa_cap_tokens == 18_944


def test_dsv4_cap_without_radix_cache_keeps_no_prefix_tails() -> None:
    # _resolve_swa_cap_tokens: prefix_tails 0 with the radix cache disabled: ceil_align(65,792, 256) = 65,792
    cfg = dsv4(max_running_requests=64, chunked_prefill_size=8192, disable_radix_cache=True)
    assert (cfg.swa_prefix_tails, cfg.swa_cap_tokens) == (0, 65_792)


@pytest.mark.parametrize(("chunk", "cap"), [(0, None), (1, 147_968)])
def test_dsv4_cap_mode_needs_a_positive_chunk(chunk: int, cap: int | None) -> None:
    # chunk <= 0 outside the decode role -> ratio mode; chunk 1: 768 * 64 + 2 * 1 + 256 = 49,410,
    # + 256 * 384 = 147,714 -> ceil_align 256 = 147,968
    assert dsv4(max_running_requests=64, chunked_prefill_size=chunk).swa_cap_tokens == cap


def test_dsv4_estimated_requests_is_at_most_half_the_full_tokens() -> None:
    # DSV4PoolConfigurator._fixed_swa_bytes: F = int(14,173,500 / 7,086.75) = 2,000;
    # clamp(int(2,000 / 65,536 * 512) = 15) = 2,048; m = min(2,048, 2,000 // 2) = 1,000
    cfg = dsv4()
    assert cfg.bytes_per_full_token == 7_086.75
    assert cfg.estimated_requests(14_173_500) == 1_000


def test_dsv4_decode_role_slots_count_the_preallocated_requests() -> None:
    # _fixed_swa_bytes: slots = 64 + 4 + 1 = 69; rows = ceil_div(69 * 128 + 129, 128) * 128 = 9,088;
    # bytes = 9,088 * (2 * 512) * 4 * 20 ratio-128 layers
    cfg = dsv4(disaggregation_mode="decode", disaggregation_decode_extra_slots=4)
    assert cfg.request_slots(64) == 69
    assert cfg.c128_state_fixed_bytes(64) == 744_488_960


@pytest.mark.parametrize(("ratios", "fixed"), [([4] * 41, 0), ([4] * 40 + [128], 35_127_296)])
def test_dsv4_c128_state_bytes_per_owned_layer(ratios: list[int], fixed: int) -> None:
    # _fixed_swa_bytes: 0 without ratio-128 owners; one owner: 8,576 rows (as test_d2_cap_mode) * 1,024 * 4 B
    config = dict(load_preset_config("deepseek-v4-flash"))
    config["compress_ratios"] = [0, 0] + ratios + [0]
    assert dsv4(config).c128_state_fixed_bytes(64) == fixed


def test_dsv4_ratio_mode_has_no_fixed_swa_bytes() -> None:
    # _fixed_swa_bytes: swa_cap_tokens * bpst only in cap mode; ratio mode (no max_running_requests) adds 0
    cfg = dsv4()
    assert (cfg.swa_cap_tokens, cfg.swa_fixed_bytes) == (None, 0)


def test_dsv4_full_tokens_floor_to_the_page_one_token_below_a_boundary() -> None:
    # _get_bytes_per_full_token / _compute_dsv4_sizes with no ratio-128 owner (fixed 0 in ratio mode), ratio 0.5 given:
    # bpst = 585 * 43 + 8 / 256 * (4 * 512 * 4 + 4 * 128 * 4) * 41 = 38,275; comp(4) = 585 / 4 + 132 / 4
    # = 179.25; bpft = 0.5 * 38,275 + 179.25 * 41 = 26,486.75; int(54,218,378 / 26,486.75) = 2,047
    # -> full 1,792 (not 2,048); swa = align(896, 256) = 768; c4 = 448; c128 = 14; c4_state = 3 * 8
    config = dict(load_preset_config("deepseek-v4-flash"))
    config["compress_ratios"] = [0, 0] + [4] * 41 + [0]
    cfg = dsv4(config, swa_full_tokens_ratio=0.5)
    assert (cfg.bytes_per_swa_token, cfg.bytes_per_full_token) == (38_275.0, 26_486.75)
    sizes = cfg.calculate_pool_sizes(54_218_378, 256)
    assert (sizes.max_total_num_tokens, sizes.swa_max_total_num_tokens) == (1_792, 768)
    assert (sizes.c4_max_total_num_tokens, sizes.c128_max_total_num_tokens, sizes.c4_state_pool_size) == (448, 14, 24)
    assert sizes.c128_state_pool_size == 0  # until finalize_with_max_running_requests


def test_dsv4_user_cap_floors_full_and_swa_to_the_page() -> None:
    # _compute_dsv4_sizes on M = 2,303: full = align(2,303, 256) = 2,048; swa = align(int(2,048 * 767/2,048) = 767, 256)
    # = 512 (767/2,048 = 0.37451171875 is exact in binary); c4 = 512, c128 = 16, c4_state = 2 * 8
    sizes = dsv4(swa_full_tokens_ratio=0.37451171875).calculate_pool_sizes_from_max_tokens(2_303, 256)
    assert (sizes.max_total_num_tokens, sizes.swa_max_total_num_tokens) == (2_048, 512)
    assert (sizes.c4_max_total_num_tokens, sizes.c128_max_total_num_tokens, sizes.c4_state_pool_size) == (512, 16, 16)


def test_dsv4_swa_pool_equal_to_window_plus_page_is_too_small() -> None:
    # validate_swa_pool_size raises when W + P >= swa: NPU page 128, ratio 0.5: M = 512 -> swa 256 = 128 + 128
    cfg = dsv4(page_size=128, device="npu", swa_full_tokens_ratio=0.5)
    with pytest.raises(SWAPoolTooSmallError, match=r"SWA pool \(256 tokens\)"):
        cfg.calculate_pool_sizes_from_max_tokens(512, 128)
    sizes = cfg.calculate_pool_sizes_from_max_tokens(768, 128)  # swa 384 > 256 passes
    assert (sizes.max_total_num_tokens, sizes.swa_max_total_num_tokens, sizes.c4_state_pool_size) == (768, 384, 24)


def test_dsv4_c4_only_stage_has_no_c128_state_after_finalize() -> None:
    # finalize_with_max_running_requests: c128_state_pool_size = slots * ring.get(128, 0) = 0 without ratio-128 owners
    config = dict(load_preset_config("deepseek-v4-flash"))
    config["compress_ratios"] = [0, 0] + [4] * 41 + [0]
    cfg = dsv4(config, swa_full_tokens_ratio=0.5)
    sizes = cfg.calculate_pool_sizes(54_218_378, 256)
    assert sizes.c128_state_pool_size == 0  # 0 until finalize_with_max_running_requests
    assert cfg.finalize_with_max_running_requests(sizes.replace(max_running_requests=64)).c128_state_pool_size == 0


# NPU, page 128 (floor W + P = 256), ratio 0.5 given: paged(r) = kv_bytes = 584 unpadded;
# bpst = 584 * 43 + 8 / 128 * 10,240 * 21 = 38,552; bpft = 0.5 * 38,552 + (146 + 33) * 21 + 584 / 128 * 20
# = 23,126.25; no max_running_requests: m = 4,096 for 40 GiB, fixed = 4,099 * 128 rows * 4,096 B * 20
NPU_V4: dict[str, Any] = {"page_size": 128, "device": "npu", "swa_full_tokens_ratio": 0.5}


def test_dsv4_state_reservation_explains_a_swa_pool_exactly_at_the_floor() -> None:
    cfg = dsv4(**NPU_V4)
    assert (cfg.bytes_per_full_token, cfg.c128_state_fixed_bytes(4_096)) == (23_126.25, 42_981_130_240)
    # 12,000,000 B left: full = align(518, 128) = 512, swa = align(256, 128) = 256 = W + P (missed);
    # without the state swa would be huge: the c128 reservation is named as the cause
    with pytest.raises(DSV4StateReservationError, match="leaves the SWA pool 256 tokens"):
        cfg.calculate_pool_sizes(42_981_130_240 + 12_000_000, 128)


def test_dsv4_floor_error_stays_plain_when_the_stateless_pool_misses_it_too() -> None:
    # 17,740,000 B: m = min(2,048, 767 // 2) = 383, fixed (4.05 GB) > budget -> full 0, swa 0;
    # without the state: align(int(17,740,000 / 23,126.25) = 767, 128) = 640 -> swa 256 = W + P: still missed
    with pytest.raises(SWAPoolTooSmallError, match=r"SWA pool \(0 tokens\)") as info:
        dsv4(**NPU_V4).calculate_pool_sizes(17_740_000, 128)
    assert not isinstance(info.value, DSV4StateReservationError)


@pytest.mark.parametrize(("size", "ring", "ratio", "rows"), [(3, 8, 4, 12), (2, 8, 4, 12), (0, 128, 128, 256)])
def test_compress_state_rows_round_up_size_ring_and_sink(size: int, ring: int, ratio: int, rows: int) -> None:
    # DeepSeekV4TokenToKVPool: ceil_align(size + ring + 1, ratio): 12 -> 12, 11 -> 12, 129 -> 256
    assert compress_state_rows(size, ring, ratio) == rows


# ratio 767/1024 = 0.7490234375 (exact): bpft = 0.7490234375 * 38,552 + 3,850.25 = 32,726.6015625 on the NPU;
# 512 full tokens give int(383.5) = 383 -> swa align(383, 128) = 256 = W + P, one token short of 384
NPU_V4_767: dict[str, Any] = {**NPU_V4, "swa_full_tokens_ratio": 767 / 1024}


def test_dsv4_state_reservation_explained_one_token_below_the_next_swa_page() -> None:
    # 17,017,768 B after the 4,096-request state: int(17,017,768 / 32,726.6015625) = 519 -> full 512 -> swa 256
    cfg = dsv4(**NPU_V4_767)
    assert cfg.bytes_per_full_token == 32_726.6015625
    with pytest.raises(DSV4StateReservationError, match="leaves the SWA pool 256 tokens"):
        cfg.calculate_pool_sizes(42_981_130_240 + 17_017_768, 128)


def test_dsv4_plain_floor_error_when_the_stateless_swa_is_one_token_short() -> None:
    # 17,017,768 B alone: state > budget -> full 0; without the state align(519, 128) = 512 full tokens
    # -> swa 256 = W + P, still at the floor: SGLang's own error stands
    with pytest.raises(SWAPoolTooSmallError) as info:
        dsv4(**NPU_V4_767).calculate_pool_sizes(17_017_768, 128)
    assert not isinstance(info.value, DSV4StateReservationError)


def test_dsv4_stage_without_ratio_4_owners_has_no_c4_state() -> None:
    # _compute_dsv4_sizes: c4_state = swa // P * ring.get(4, 0) = 0; M = 2,048 at ratio 0.5 -> swa 1,024, c128 16
    config = dict(load_preset_config("deepseek-v4-flash"))
    config["compress_ratios"] = [0, 0] + [128] * 41 + [0]
    sizes = dsv4(config, swa_full_tokens_ratio=0.5).calculate_pool_sizes_from_max_tokens(2_048, 256)
    assert (sizes.swa_max_total_num_tokens, sizes.c128_max_total_num_tokens, sizes.c4_state_pool_size) == (1_024, 16, 0)


def test_dsv4_swa_only_stage_in_ratio_mode_with_a_tiny_ratio_still_plans() -> None:
    # every layer ratio 0, ratio 2**-15: bpft = 585 * 43 / 32,768 = 0.7676... B > 0, so sizing proceeds:
    # full = align(int(2**30 / bpft), 256); swa = align(int(full * 2**-15), 256)
    config = dict(load_preset_config("deepseek-v4-flash"))
    config["compress_ratios"] = [0] * 44
    cfg = dsv4(config, swa_full_tokens_ratio=2**-15)
    assert cfg.bytes_per_full_token == 25_155 / 32_768
    sizes = cfg.calculate_pool_sizes(2**30, 256)
    assert sizes.max_total_num_tokens == 1_398_702_848  # int(1,398,702,925.4) page-floored
    assert sizes.swa_max_total_num_tokens == 42_496  # int(42,685.02) page-floored


def test_dsv4_cap_mode_stage_without_compressed_layers_is_rejected() -> None:
    # cap mode prices a full token at 0 * bpst + no comp(r) terms = 0 B (SGLang divides by it): rejected
    config = dict(load_preset_config("deepseek-v4-flash"))
    config["compress_ratios"] = [0] * 44
    cfg = dsv4(config, max_running_requests=64, chunked_prefill_size=8192)
    assert cfg.cap_mode and cfg.bytes_per_full_token == 0
    with pytest.raises(UnsupportedConfigurationError, match="swa_full_tokens_ratio"):
        cfg.calculate_pool_sizes(40 * GIB, 256)
