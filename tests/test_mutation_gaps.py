"""Formulas and guards the family tests left unpinned, found by ``tools/mutation_check.py``.

Each test pins one of SGLang's rules that a surviving mutant showed no test was checking; every
expected number is a literal computed by hand from the SGLang function named in the test or its section.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kvstrategies import plan, select_configurator
from kvstrategies.dtypes import DType
from kvstrategies.errors import (
    InsufficientMemoryError,
    KVCacheConfigError,
    SWAPoolTooSmallError,
    UnsupportedConfigurationError,
)
from kvstrategies.models.minimax import MiniMaxLocalLayers
from kvstrategies.pools.ascend import NPUIndexer, npu_mla_layout
from kvstrategies.pools.basic import req_to_token_layout
from kvstrategies.pools.binding import AllocatorKind, AllocatorSpec, select_allocator_spec
from kvstrategies.pools.dsa import DSAIndexGeometry, validate_index_page_size
from kvstrategies.pools.dsv4 import KVPageLayout, compress_state_rows
from kvstrategies.pools.layout import BufferSpec, PoolLayout
from kvstrategies.pools.mamba import hybrid_req_to_token_layout, mamba_pool_layout
from kvstrategies.pools.minimax import minimax_sparse_cell_bytes
from kvstrategies.presets import load_preset_config
from kvstrategies.sizing import PoolSizes
from kvstrategies.strategies import DefaultPoolConfigurator
from kvstrategies.strategies.dsv4 import DSV4PoolConfigurator, DSV4StateReservationError
from kvstrategies.strategies.hybrid_linear import HybridLinearPoolConfigurator
from kvstrategies.strategies.hybrid_swa import HybridSWAPoolConfigurator, SWAChunkCapPoolConfigurator
from kvstrategies.strategies.registry import register, registered, unregister

from .helpers import GIB, case_settings

QWEN3_NEXT = "qwen3-next-80b-a3b"
# Qwen3-Next TP4 Mamba state per request (mamba_utils mamba_cache_per_req): conv (8192 / 4, 3) bf16 = 12,288 B and
# temporal (32 / 4, 128, 128) fp32 = 524,288 B per layer, times 36 linear-attention layers
QWEN3_NEXT_TP4_PER_REQ = 36 * (2048 * 3 * 2 + 8 * 128 * 128 * 4)  # 19,316,736
MTP: dict[str, Any] = {
    "speculative_algorithm": "EAGLE",
    "eagle_draft_num_layers": 1,
    "speculative_num_draft_tokens": 4,
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
}


def hybrid_linear(preset: str | dict[str, Any], **fields: Any) -> HybridLinearPoolConfigurator:
    cfg = select_configurator(case_settings(preset, **fields))
    assert isinstance(cfg, HybridLinearPoolConfigurator)
    return cfg


def default(preset: str, **fields: Any) -> DefaultPoolConfigurator:
    cfg = select_configurator(case_settings(preset, **fields))
    assert type(cfg) is DefaultPoolConfigurator
    return cfg


# ---- pools/layout.py -----------------------------------------------------------------------------


def test_duplicate_buffer_names_are_named_in_the_error() -> None:
    buffers = tuple(BufferSpec(name, (4, 8), DType.BFLOAT16) for name in ("k_buffer[0]", "v_buffer[0]", "k_buffer[0]"))
    with pytest.raises(KVCacheConfigError, match=r"names buffers twice: \['k_buffer\[0\]'\]"):
        PoolLayout("MHATokenToKVPool", buffers)


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


# ---- speculative draft scaling (DefaultPoolConfigurator.__init__ draft scaling) --------------------------------------


def test_dflash_with_zero_draft_layers_adds_no_draft_cell() -> None:
    # the DFLASH term needs Dd > 0; Llama-8B TP2 DCP2 base cell 8 * 256 * 32 * 2 = 131,072
    cfg = default("llama-3.1-8b", tp_size=2, dcp_size=2, speculative_algorithm="DFLASH", eagle_draft_num_layers=0,
                  dflash_draft_cell_size_per_token=20_480)
    assert cfg.cell_size_bytes == 131_072


# ---- Mamba budget with speculative state (KVCacheConfigurator._handle_max_mamba_cache) -------------------------------


def test_spec_scratch_for_a_single_request_branch_c() -> None:
    # C: capped = min(max(1, 1 // 1), K // 3) = 1; scratch = per * (1 + 1) * Dt = per * 2 * 4
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, page_size=64, max_running_requests=1, **MTP)
    budget = cfg.mamba_budget(46 * GIB)
    assert budget.stage_mamba_cache_per_req == QWEN3_NEXT_TP4_PER_REQ == 19_316_736
    assert budget.branch == "C"
    assert budget.spec_scratch_gib * GIB == 154_533_888.0


def test_spec_scratch_for_a_single_request_branch_a() -> None:
    # A: K = 600; capped = min(max(1, 1 // 1), 600 // 3) = 1; scratch = per * 2 * 4
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, page_size=64, max_running_requests=1, max_mamba_cache_size=600, **MTP)
    budget = cfg.mamba_budget(46 * GIB)
    assert (budget.branch, budget.max_mamba_cache_size) == ("A", 600)
    assert budget.spec_scratch_gib * GIB == 154_533_888.0


def test_eagle_scales_a_single_layer_stage() -> None:
    # the draft scaling needs num_layers > 0 (not > 1): Llama-8B cut to 1 layer, 8 * 256 * 1 * 2 = 4,096,
    # + int(4,096 * 1 / 1)
    config = dict(load_preset_config("llama-3.1-8b"))
    config["num_hidden_layers"] = 1
    cfg = select_configurator(case_settings(config, speculative_algorithm="EAGLE", eagle_draft_num_layers=1))
    assert cfg.cell_size_bytes == 8_192


def test_eagle_scales_by_every_draft_layer() -> None:
    # EAGLE3 head of 2 layers on Llama-8B: 131,072 + int(131,072 * 2 / 32) = 131,072 + 8,192
    assert default("llama-3.1-8b", speculative_algorithm="EAGLE3", eagle_draft_num_layers=2).cell_size_bytes == 139_264


def test_eagle_dsa_scaling_under_dcp_with_two_draft_layers() -> None:
    # DeepSeek-V3.2 fp8 TP2 DCP2 (as in tests/test_default_advanced.py: kv 656 * 61 = 40,016, indexer 132 * 61 =
    # 8,052): t_idx = 8,052 * 2; t_kv = 56,120 - 16,104 = 40,016; d_kv = int(40,016 * 2 / 61) = 1,312;
    # d_idx = 132 * 2 = 264; cell = 56,120 + 1,312 * 2 + 264 * 2
    cfg = default("deepseek-v3.2", kv_cache_dtype="fp8_e4m3", page_size=64, tp_size=2, dcp_size=2,
                  speculative_algorithm="EAGLE", eagle_draft_num_layers=2)
    assert cfg.cell_size_bytes == 59_272


@pytest.mark.parametrize(
    ("draft_layers", "draft_cell", "cell"),
    [
        (1, 20_480, 151_552),  # Dd = 1 > 0: 131,072 + 20,480
        (5, 0, 151_552),  # a draft cell of 0 is not positive: ceil_div(131,072 * (32 + 5), 32)
        (5, 1, 131_073),  # the smallest positive draft cell is added as given
    ],
)
def test_dflash_draft_cell_boundaries(draft_layers: int, draft_cell: int, cell: int) -> None:
    cfg = default("llama-3.1-8b", speculative_algorithm="DFLASH", eagle_draft_num_layers=draft_layers,
                  dflash_draft_cell_size_per_token=draft_cell)
    assert cfg.cell_size_bytes == cell


# ---- zero-KV stages (DefaultPoolConfigurator.calculate_pool_sizes) ---------------------------------------------------


@pytest.mark.parametrize(("page", "tokens"), [(1, 9_223_372_036_854_775_807), (64, 9_223_372_036_854_775_744)])
def test_zero_attention_stage_of_an_mtp_target_reports_int64_max(page: int, tokens: int) -> None:
    # Qwen3-Next PP16 rank 0 holds layers 0-2: all linear attention (the first full layer is 3);
    # the KV lives on other stages, so 2**63 - 1 tokens page-floored; 5.8 never scales 0 layers
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, pp_size=16, pp_rank=0, page_size=page, max_running_requests=64, **MTP)
    assert (cfg.num_layers, cfg.cell_size_bytes) == (0, 0)
    assert cfg.calculate_pool_sizes(40 * GIB, page).max_total_num_tokens == tokens


# ---- DSA kpool compress tails (DSATokenToKVPool, _build_dsa_kv_pool) ------------------------------------------


def _dsa_kpool(kpool: int) -> dict[str, Any]:
    config = copy.deepcopy(dict(load_preset_config("deepseek-v3.2")))
    config.update(index_kpool=kpool, index_kpool_compress=True, num_hidden_layers=2)
    return config


def _buffer_shapes(layout: PoolLayout) -> dict[str, tuple[int, ...]]:
    return {b.name: b.shape for b in layout.buffers}


def test_dsa_compress_tails_need_kpool_above_one() -> None:
    # index_kpool 1 with index_kpool_compress set: no tail buffers (only kv + index keys per layer)
    planned = plan(case_settings(_dsa_kpool(1), kv_cache_dtype="fp8_e4m3", page_size=64), 40 * GIB,
                   pool_max_tokens=1024, pool_max_running_requests=8)
    assert sorted(_buffer_shapes(planned.layout.token_to_kv)) == [
        "index_k_with_scale_buffer[0]", "index_k_with_scale_buffer[1]", "kv_buffer[0]", "kv_buffer[1]",
    ]


def test_dsa_compress_tails_in_the_decode_role_with_drafts() -> None:
    # rows: req_to_token rows R + pre_alloc + 1 = 8 + 4 + 1 = 13, passed as max_running_requests -> 14;
    # slots: index_kpool + max draft tokens = 2 + 3 = 5 (_build_dsa_kv_pool tail_extra_slots)
    ctx = case_settings(_dsa_kpool(2), kv_cache_dtype="fp8_e4m3", page_size=128, disaggregation_mode="decode",
                        disaggregation_decode_extra_slots=4, speculative_algorithm="EAGLE",
                        speculative_num_draft_tokens=3, speculative_num_steps=2, speculative_eagle_topk=1)
    planned = plan(ctx, 40 * GIB, pool_max_tokens=1024, pool_max_running_requests=8)
    found = _buffer_shapes(planned.layout.token_to_kv)
    assert found["_compress_tail_k[0]"] == found["_compress_tail_score[1]"] == (14, 5, 128)


# ---- DeepSeek-V4 cap mode and fixed bytes (compute_swa_request_cap, DSV4PoolConfigurator._resolve_swa_cap_tokens,
# DSV4PoolConfigurator._fixed_swa_bytes)

V4_EXAMPLE: dict[str, Any] = {"page_size": 256, "context_length": 65_536}


def dsv4(config: str | dict[str, Any] = "deepseek-v4-flash", **fields: Any) -> DSV4PoolConfigurator:
    cfg = select_configurator(case_settings(config, **{**V4_EXAMPLE, **fields}))
    assert isinstance(cfg, DSV4PoolConfigurator)
    return cfg


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


# ---- Mamba state (KVCacheConfigurator._handle_max_mamba_cache) -------------------------------------------------------


def test_mamba_state_pool_bytes_include_the_dummy_slot() -> None:
    # _handle_max_mamba_cache "rest -= (K + 1) * per": Qwen3-Next TP4, 46 GiB, no spec: K = int((bb - per) // per) with
    # bb = 46 * 0.9 / 1.9 GiB = 23,395,863,838.3 B -> K = 1,210 (as in tests/test_hybrid_linear.py); (1,210 + 1) *
    # per
    budget = hybrid_linear(QWEN3_NEXT, tp_size=4, page_size=64).mamba_budget(46 * GIB)
    assert budget.max_mamba_cache_size == 1_210
    assert budget.state_bytes == 1_211 * QWEN3_NEXT_TP4_PER_REQ == 23_392_567_296


def test_pp_scale_of_a_model_with_a_single_mamba_layer() -> None:
    # the PP scale of the Mamba state: scale = max_stage / max(len(mamba_layers), 1) = 1 / 1; Qwen3-Next cut to 2 layers
    # (interval 2: layer 0 linear, layer 1 full), PP2: stage 0 holds the only Mamba layer
    config = dict(load_preset_config(QWEN3_NEXT))
    config.update(num_hidden_layers=2, full_attention_interval=2)
    cfg = hybrid_linear(config, tp_size=4, pp_size=2, pp_rank=1)
    assert cfg.stage_mamba_cache_per_req == cfg.mamba_cache_per_req == 2_048 * 3 * 2 + 8 * 128 * 128 * 4


def test_spec_scratch_branch_a_under_attention_dp() -> None:
    # attn DP 2 at TP4: attention TP 2, per = 36 * ((8192 / 2) * 3 * 2 + 16 * 128 * 128 * 4) = 38,633,472;
    # A: K = 600 // 2 = 300; capped = min(max(1, 64 // 2), 300 // 3) = 32; scratch = per * 33 * 4
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, attn_dp_size=2, page_size=64, max_running_requests=64,
                        max_mamba_cache_size=600, **MTP)
    budget = cfg.mamba_budget(46 * GIB)
    assert (budget.stage_mamba_cache_per_req, budget.max_mamba_cache_size) == (38_633_472, 300)
    assert budget.spec_scratch_gib * GIB == 5_099_618_304.0


def test_spec_scratch_branch_a_capped_by_the_state_slots() -> None:
    # A: capped = min(max(1, 64), 60 // 3) = 20 slots get per-draft-token state: per * 21 * 4
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, page_size=64, max_running_requests=64, max_mamba_cache_size=60, **MTP)
    assert cfg.mamba_budget(46 * GIB).spec_scratch_gib * GIB == 21 * 4 * QWEN3_NEXT_TP4_PER_REQ == 1_622_605_824


def test_spec_branch_c_slot_count_at_44_gib() -> None:
    # C: bb = 44 * 0.9 / 1.9 * 2**30 = 22,379,040,121.26 B; K = int((bb - per * (1 + 4)) // (per * (1 + 4 / 3)))
    # = int(494.37) = 494 (one more per subtracted would give 493.9 -> 493)
    budget = hybrid_linear(QWEN3_NEXT, tp_size=4, page_size=64, max_running_requests=64, **MTP).mamba_budget(44 * GIB)
    assert (budget.branch, budget.max_mamba_cache_size) == ("C", 494)
    assert budget.spec_scratch_gib * GIB == 65 * 4 * QWEN3_NEXT_TP4_PER_REQ  # capped = min(64, 494 // 3)


def test_spec_branch_c_under_attention_dp() -> None:
    # per 38,633,472 (attention TP 2): K = int((bb - per * 5) // (per * 7 / 3)) = 246;
    # capped = min(max(1, 64 // 2), 246 // 3) = 32: scratch = per * 33 * 4
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, attn_dp_size=2, page_size=64, max_running_requests=64, **MTP)
    budget = cfg.mamba_budget(44 * GIB)
    assert budget.max_mamba_cache_size == 246
    assert budget.spec_scratch_gib * GIB == 5_099_618_304.0


@pytest.mark.parametrize(("requests", "dp", "slots"), [(1, 1, 1), (64, 2, 32)])
def test_branch_b_slots_are_the_requests_per_dp_worker(requests: int, dp: int, slots: int) -> None:
    # B (radix cache off, max_running_requests given): K = max(1, mrr // dp)
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, attn_dp_size=dp, page_size=64, max_running_requests=requests,
                        disable_radix_cache=True)
    budget = cfg.mamba_budget(44 * GIB)
    assert (budget.branch, budget.max_mamba_cache_size) == ("B", slots)


def test_spec_branch_c_capped_by_the_state_slots() -> None:
    # C at 44 GiB: K = 494 whatever mrr is; capped = min(max(1, 256), 494 // 3 = 164): scratch per * 165 * 4
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, page_size=64, max_running_requests=256, **MTP)
    budget = cfg.mamba_budget(44 * GIB)
    assert budget.max_mamba_cache_size == 494
    assert budget.spec_scratch_gib * GIB == 165 * 4 * QWEN3_NEXT_TP4_PER_REQ == 12_749_045_760


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


@pytest.mark.parametrize(("available", "slots"), [(61_169_664, 0), (101_949_440, 1)])
def test_auto_fit_needs_at_least_one_mamba_slot(available: int, slots: int) -> None:
    # C without spec: bb = available * 0.9 / 1.9 = 1.5 * per -> K = int((bb - per) // per) = 0 (error);
    # 2.5 * per -> K = 1, and rest - 2 * per > 0 leaves KV memory
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, page_size=64)
    if slots == 0:
        with pytest.raises(InsufficientMemoryError, match="max_mamba_cache_size=0"):
            cfg.mamba_budget(available)
    else:
        budget = cfg.mamba_budget(available)
        assert budget.max_mamba_cache_size == 1
        assert budget.kv_available_bytes == available - 2 * QWEN3_NEXT_TP4_PER_REQ == 63_315_968


# ---- hybrid SWA draft terms and the request-capped pool (HybridSWAPoolConfigurator.__init__ draft layers,
# HybridSWAPoolConfigurator._recompute_cell_size, SWARequestCapPoolConfigurator.is_applicable)

GPT_OSS = "gpt-oss-120b"
# GPT-OSS-120B page 64 (as in tests/test_hybrid_swa.py): full_pt = swa_pt = 8 * (64 + 64) * 2 = 2,048; nF = nS =
# 18; ratio 0.8: cell = 36,864 + 0.8 * 36,864 = 66,355.2
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


# ---- hybrid linear: request cap and the Mamba pool (KVCacheConfigurator._handle_max_mamba_cache,
# KVCacheConfigurator.resolve_max_num_reqs; MambaPool)


def test_mamba_slots_for_exactly_one_request() -> None:
    # KVCacheConfigurator.resolve_max_num_reqs: min(64, 3 // 3) = 1 request is served; 2 // 3 = 0 is an error
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4)
    assert cfg.mamba_ratio == 3
    assert cfg.cap_max_running_requests(64, PoolSizes(max_total_num_tokens=1024, max_mamba_cache_size=3)) == 1
    with pytest.raises(InsufficientMemoryError, match="max_running_requests=0"):
        cfg.cap_max_running_requests(64, PoolSizes(max_total_num_tokens=1024, max_mamba_cache_size=2))


def test_given_mamba_cache_that_takes_the_whole_budget_is_an_error() -> None:
    # A: K = 600 without spec; rest = 601 * per / 2**30 - 601 * per / 2**30 = 0.0 -> no KV memory left
    cfg = hybrid_linear(QWEN3_NEXT, tp_size=4, max_mamba_cache_size=600)
    with pytest.raises(InsufficientMemoryError, match="leaves no memory for the KV cache"):
        cfg.mamba_budget(601 * QWEN3_NEXT_TP4_PER_REQ)


def test_spec_state_without_a_topk_uses_the_dedup_conv_layout() -> None:
    # MambaPool: the dedup conv window needs eagle_topk <= 1; an unset topk counts as 1 (compute_swa_request_cap `k`)
    sizes = PoolSizes(max_total_num_tokens=1024, max_running_requests=8, max_mamba_cache_size=24)
    spec = {key: value for key, value in MTP.items() if key != "speculative_eagle_topk"}
    mamba = hybrid_linear(QWEN3_NEXT, tp_size=4, **spec).layout(sizes).extra[0]
    shapes = {b.name: b.shape for b in mamba.allocations}
    assert shapes["mamba._intermediate_conv_window_phys[0]"] == (36, 9, 2048, 6)  # Dd + K - 2 = 4 + 4 - 2


# ---- the registry (create_memory_pool_configurator) -------------------------------------------------------------


def test_register_puts_a_strategy_first_by_default() -> None:
    class Probe(DefaultPoolConfigurator):
        @classmethod
        def is_applicable(cls, ctx: Any) -> bool:
            return False

    register(Probe)
    try:
        assert registered()[0] is Probe
    finally:
        unregister(Probe)
    assert Probe not in registered()


# ---- NPU MLA pool (NPUMLATokenToKVPool) ---------------------------------------------------------------------


def _npu_mla(**fields: Any) -> PoolLayout:
    base: dict[str, Any] = {"size": 1024, "page_size": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                            "layer_num": 2, "dtype": DType.BFLOAT16}
    return npu_mla_layout(**{**base, **fields})


def test_npu_mla_indexer_defaults_to_stage_0_without_dcp() -> None:
    # start_layer 0, dcp 1: idx_pad 1 -> 1,024 // 128 + 1 = 9 pages; views labelled by pool-local layer
    layout = _npu_mla(indexer=NPUIndexer(index_head_dim=128, index_size=1024, index_page_size=128, layer_ids=(0, 1)))
    found = {b.name: b.shape for b in layout.buffers}
    assert found["index_k_buffer"] == (2, 9, 128, 1, 128)
    assert found["k_buffer"] == (2, 9, 128, 1, 512) and found["v_buffer"] == (2, 9, 128, 1, 64)
    assert "index_k_buffer[1]" in found


def test_npu_mla_indexer_of_a_later_stage_uses_pool_local_labels() -> None:
    # a PP stage holding global layers 30, 31 (start_layer 30): both inside [30, 32), views [0] and [1]
    indexer = NPUIndexer(index_head_dim=128, index_size=1024, index_page_size=128, layer_ids=(30, 31))
    layout = _npu_mla(start_layer=30, indexer=indexer)
    views = sorted(b.name for b in layout.buffers if b.name.startswith("index_k_buffer["))
    assert views == ["index_k_buffer[0]", "index_k_buffer[1]"]
    with pytest.raises(KVCacheConfigError, match=r"inside the stage range \[30, 32\)"):
        _npu_mla(start_layer=30, indexer=NPUIndexer(128, 1024, 128, (30, 32)))


# ---- allocator choice (KVCacheConfigurator._build_token_to_kv_pool_allocator) ----------------------------------------

T = 4096
HYBRID = PoolSizes(max_total_num_tokens=T, full_max_total_num_tokens=T, swa_max_total_num_tokens=2048)
PLAIN = PoolSizes(max_total_num_tokens=T)
ALL_SWA = PoolSizes(max_total_num_tokens=2048, full_max_total_num_tokens=0, swa_max_total_num_tokens=2048)


@pytest.mark.parametrize(
    ("preset", "fields", "sizes", "expected"),
    [
        # page 1, no DCP -> TokenToKVPoolAllocator(T)
        ("llama-3.1-8b", {}, PLAIN, (AllocatorKind.TOKEN, T, None, 1, False)),
        # paged, page P * dcp over T * dcp slots (page 1 with DCP is paged too)
        ("llama-3.1-8b", {"page_size": 64}, PLAIN, (AllocatorKind.PAGED, T, None, 64, False)),
        ("llama-3.1-8b", {"tp_size": 2, "dcp_size": 2, "page_size": 64}, PLAIN,
         (AllocatorKind.PAGED, 2 * T, None, 128, False)),
        ("llama-3.1-8b", {"tp_size": 2, "dcp_size": 2}, PLAIN, (AllocatorKind.PAGED, 2 * T, None, 2, False)),
        # NPU paged, T * dcp and P * dcp; PD roles sort their frees
        ("llama-3.1-8b", {"device": "npu", "tp_size": 2, "dcp_size": 2, "page_size": 128}, PLAIN,
         (AllocatorKind.PAGED, 2 * T, None, 256, False)),
        ("llama-3.1-8b", {"page_size": 64, "disaggregation_mode": "prefill"}, PLAIN,
         (AllocatorKind.PAGED, T, None, 64, True)),
        # rows 1, 4, 5: hybrid SWA (full, swa); all-SWA (full = 0) -> PureSWA(swa)
        ("gpt-oss-20b", {"device": "npu", "page_size": 128}, HYBRID, (AllocatorKind.SWA, T, 2048, 128, False)),
        ("gpt-oss-20b", {}, ALL_SWA, (AllocatorKind.PURE_SWA, 2048, 2048, 1, False)),
        ("gpt-oss-20b", {"page_size": 64}, HYBRID, (AllocatorKind.SWA, T, 2048, 64, False)),
    ],
)
def test_fresh_allocator_rows(preset: str, fields: dict[str, Any], sizes: PoolSizes, expected: tuple[Any, ...]) -> None:
    spec = select_allocator_spec(case_settings(preset, **fields), sizes)
    assert spec is not None
    assert (spec.kind, spec.size, spec.size_swa, spec.page_size, spec.need_sort) == expected


def test_a_draft_worker_reuses_the_target_allocator() -> None:
    ctx = case_settings("deepseek-v3", page_size=64, tp_size=8, speculative_algorithm="EAGLE", is_draft_worker=True)
    assert select_allocator_spec(ctx, PLAIN) is None
    assert AllocatorSpec(AllocatorKind.TOKEN, T).page_size == 1  # an unpaged allocator's page is one token


# ---- DSA index pages and tails, request table, DSV4 state rows (ReqToTokenPool, DSATokenToKVPool,
# DeepSeekV4TokenToKVPool)


@pytest.mark.parametrize(("size", "pages"), [(1_023, 17), (1_022, 16)])
def test_dsa_index_pages_add_one_not_page_minus_one(size: int, pages: int) -> None:
    # DSATokenToKVPool: num_index_pages = (index_buf_size + P + 1) // P: (1,023 + 65) // 64 = 17, (1,022 + 65) // 64 =
    # 16
    assert DSAIndexGeometry(size=size, page_size=64, index_head_dim=128).num_index_pages == pages


@pytest.mark.parametrize(("page", "ok"), [(1, True), (16, True), (32, True), (24, False), (17, False)])
def test_hip_dsa_index_page_is_one_or_a_multiple_of_16(page: int, ok: bool) -> None:
    if ok:
        validate_index_page_size(page, is_hip=True)
    else:
        with pytest.raises(KVCacheConfigError, match="multiple of 16"):
            validate_index_page_size(page, is_hip=True)


def test_dsa_layers_that_reuse_the_topk_get_zero_row_keys_and_tails() -> None:
    # _build_dsa_kv_pool, freq 2 without offset: layer l skips when max(l - 1, 0) % 2 != 0 -> only layer 2 of 4;
    # DSATokenToKVPool: its index keys and both tails have 0 rows; the others (1,024 + 128 + 1) // 128 = 9 pages
    # and R + 2 = 10 tail rows of index_kpool 2 slots
    config = _dsa_kpool(2)
    config.update(num_hidden_layers=4, index_topk_freq=2)
    planned = plan(case_settings(config, kv_cache_dtype="fp8_e4m3", page_size=128), 40 * GIB, pool_max_tokens=1024,
                   pool_max_running_requests=8)
    found = _buffer_shapes(planned.layout.token_to_kv)
    assert [found[f"index_k_with_scale_buffer[{i}]"][0] for i in range(4)] == [9, 9, 0, 9]
    assert [found[f"_compress_tail_k[{i}]"] for i in range(4)] == [(10, 2, 128)] * 2 + [(0, 2, 128), (10, 2, 128)]
    assert found["_compress_tail_score[2]"] == (0, 2, 128)


def test_request_table_has_one_padding_row_by_default() -> None:
    # KVCacheConfigurator._build_req_to_token_pool: R + 1 rows (no pre-allocation) of context_len + extra int32 columns
    layout = req_to_token_layout(max_running_requests=8, max_context_len=100)
    assert _buffer_shapes(layout)["req_to_token"] == (9, 100)


@pytest.mark.parametrize(("size", "ring", "ratio", "rows"), [(3, 8, 4, 12), (2, 8, 4, 12), (0, 128, 128, 256)])
def test_compress_state_rows_round_up_size_ring_and_sink(size: int, ring: int, ratio: int, rows: int) -> None:
    # DeepSeekV4TokenToKVPool: ceil_align(size + ring + 1, ratio): 12 -> 12, 11 -> 12, 129 -> 256
    assert compress_state_rows(size, ring, ratio) == rows


# ---- Mamba and MiniMax pool functions (MambaPool, HybridReqToTokenPool; DefaultPoolConfigurator._compute_cell_size) --


def test_npu_conv_state_puts_the_window_first_for_mamba2_shapes() -> None:
    # MambaPool (Ascend): Mamba2/GDN conv (channels 2048, window 3) -> (Lm, size + 1, 3 + 0, 2048) without spec
    layout = mamba_pool_layout(size=24, spec_state_size=8, conv_shapes=((2048, 3),), temporal_shape=(8, 128, 128),
                               mamba_layer_ids=(0, 1, 2), conv_dtype=DType.BFLOAT16, ssm_dtype=DType.FLOAT32,
                               npu_conv=True)
    assert _buffer_shapes(layout)["mamba.conv[0]"] == (3, 25, 3, 2048)
    assert dict(layout.attributes)["npu_conv"] == 1


def test_hybrid_request_table_maps_every_row_without_preallocation() -> None:
    # HybridReqToTokenPool: R + 1 rows in both the table and the row -> Mamba slot mapping
    layout = hybrid_req_to_token_layout(max_running_requests=8, max_context_len=100, mamba_size=24)
    found = _buffer_shapes(layout)
    assert (found["req_to_token"], found["req_index_to_mamba_index_mapping"]) == ((9, 100), (9,))


def test_minimax_hisparse_ratio_scales_dense_layers_and_the_index() -> None:
    # DefaultPoolConfigurator._compute_cell_size with r = 2: dense (0, 1), sparse (2, 3, 4) of which 4 keeps K only; H
    # 2, D 128, fp8 KV, bf16 index of 128: main (2 * 2 + 3) * 2 * 2 * 128 * 1 = 3,584; index ((2 * 2 + 1) * 128 * 2) * 2
    # = 2,560
    layers = MiniMaxLocalLayers(dense=(0, 1), sparse=(2, 3, 4), k_only=(4,))
    cell = minimax_sparse_cell_bytes(layers, head_num=2, head_dim=128, kv_itemsize=1, index_dim=128, index_itemsize=2,
                                     hisparse_ratio=2)
    assert cell == 6_144


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


def test_dsv4_cap_mode_stage_without_compressed_layers_is_rejected() -> None:
    # cap mode prices a full token at 0 * bpst + no comp(r) terms = 0 B (SGLang divides by it): rejected
    config = dict(load_preset_config("deepseek-v4-flash"))
    config["compress_ratios"] = [0] * 44
    cfg = dsv4(config, max_running_requests=64, chunked_prefill_size=8192)
    assert cfg.cap_mode and cfg.bytes_per_full_token == 0
    with pytest.raises(UnsupportedConfigurationError, match="swa_full_tokens_ratio"):
        cfg.calculate_pool_sizes(40 * GIB, 256)
