"""Sizing rules the other tests left unpinned, found by ``tools/mutation_check.py --groups sizing``.

Each test pins one rule a surviving mutant showed no test was checking; every expected number is
computed by hand (formula and numbers in the test) from the SGLang function the code reproduces.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import kvstrategies
from kvstrategies.api import MAX_WHAT_IF_REQUESTS
from kvstrategies.budget_check import kv_allowance
from kvstrategies.context import (
    MAX_PARALLEL_SIZE,
    EngineKnobs,
    KVCacheSettings,
    ParallelLayout,
    SchedulingConfig,
    SpecAlgorithm,
    SpeculativeConfig,
    num_kv_heads_per_rank,
    stage_layer_range,
)
from kvstrategies.errors import InsufficientMemoryError, KVCacheConfigError, UnsupportedConfigurationError
from kvstrategies.layer_setup import check_layer_setup
from kvstrategies.request_math import (
    alloc_len_per_decode,
    decode_extra_slots,
    estimated_max_running_requests,
    req_to_token_extra_context_len,
    spec_v1_alloc,
    swa_request_cap,
    swa_tokens_per_request,
)
from kvstrategies.sizing import require_positive_tokens

from .helpers import case_settings

LLAMA = "llama-3.1-8b"  # 32 layers, 8 KV heads of 128, context 131,072


# ---- context.py: the parallel layout (sglang.srt.runtime_context.derive_attn_tp_size) ----------------------


def test_attention_tp_divides_out_attention_cp() -> None:
    # derive_attn_tp_size: attn_tp = tp // attn_dp // attn_cp = 8 // 1 // 2 = 4; with attn DP 2 as well: 8 // 2 // 2 = 2
    assert ParallelLayout(tp_size=8, attn_cp_size=2).attn_tp_size == 4
    assert ParallelLayout(tp_size=8, attn_dp_size=2, attn_cp_size=2).attn_tp_size == 2


def test_tp_must_hold_attention_dp_times_cp() -> None:
    # parallel_hook.handle_context_parallelism: tp_size % (attn_dp_size * attn_cp_size) == 0; 2 % (2 * 2) = 2
    with pytest.raises(KVCacheConfigError, match=r"tp_size 2 is not divisible by attn_dp_size x attn_cp_size"):
        ParallelLayout(tp_size=2, attn_dp_size=2, attn_cp_size=2)
    assert ParallelLayout(tp_size=4, attn_dp_size=2, attn_cp_size=2).attn_tp_size == 1  # 4 // 2 // 2


def test_a_context_without_a_layout_is_one_gpu() -> None:
    # ServerArgs tp_size defaults to 1 (sglang.srt.arg_groups.fields.parallel): ModelConfig.get_num_kv_heads
    # keeps every KV head on the one rank, max(1, 8 // 1) = 8
    named = case_settings(LLAMA)
    bare = KVCacheSettings(geometry=named.geometry, kv_cache_dtype=named.kv_cache_dtype)
    assert bare.parallel.attn_tp_size == 1
    assert num_kv_heads_per_rank(bare) == 8


def test_the_largest_parallel_group_is_2_to_the_16() -> None:
    # the project's bound on a group size (context.MAX_PARALLEL_SIZE): 65,536 ranks accepted, 65,537 refused
    assert MAX_PARALLEL_SIZE == 65536
    assert ParallelLayout(pp_size=65536).pp_size == 65536
    with pytest.raises(KVCacheConfigError, match="pp_size"):
        ParallelLayout(pp_size=65537)


def test_a_pipeline_partition_may_leave_a_stage_empty() -> None:
    # get_pp_indices (sglang.srt.distributed.utils) checks only the count and the sum of SGLANG_PP_LAYER_PARTITION:
    # "0,32" gives stage 0 layers [0, 0) and stage 1 layers [0, 32)
    layout = ParallelLayout(pp_size=2, pp_layer_partition=(0, 32))
    assert layout.layer_range(32) == (0, 0)
    assert layout.layer_range(32, pp_rank=1) == (0, 32)
    with pytest.raises(KVCacheConfigError, match=r"pp_layer_partition\[0\]"):
        ParallelLayout(pp_size=2, pp_layer_partition=(-1, 33))


# ---- context.py: scheduler and environment settings ---------------------------------------------------------


def test_chunked_prefill_minus_one_is_off_and_below_is_refused() -> None:
    # sglang.srt.arg_groups.fields.schedule: "Setting this to -1 means disabling chunked prefill"
    assert SchedulingConfig(chunked_prefill_size=-1).chunked_prefill_size == -1
    with pytest.raises(KVCacheConfigError, match="chunked_prefill_size"):
        SchedulingConfig(chunked_prefill_size=-2)


def test_an_eviction_interval_of_one_counts_one_draft_round() -> None:
    # compute_swa_request_cap (sglang.srt.model_executor.pool_configurator): W + ev * Dt + P + P with
    # SGLANG_SWA_EVICTION_INTERVAL 1, no speculation (Dt 1), W 128, P 64: 128 + 1 * 1 + 64 + 64 = 257
    ctx = case_settings(LLAMA, page_size=64)
    one = dataclasses.replace(ctx, knobs=EngineKnobs(swa_eviction_interval=1))
    assert swa_tokens_per_request(one, 128) == 257
    with pytest.raises(KVCacheConfigError, match="swa_eviction_interval"):
        EngineKnobs(swa_eviction_interval=0)


# ---- request_math.py (sglang.srt.mem_cache.allocation_sizing, sglang.srt.utils.common) -----------------------


def test_uno_decode_allocation_keeps_the_clean_root() -> None:
    # allocation_sizing.get_alloc_len_per_decode: UNO allocates Q + 1 = 4 + 1 = 5 per decode step;
    # get_req_to_token_extra_context_len: max(4 + 4, 2 * 5 + Pa - 1) = max(8, 10 + 0) = 10 at page 1
    ctx = case_settings(LLAMA, speculative_algorithm="UNO", speculative_num_draft_tokens=4)
    assert alloc_len_per_decode(ctx) == 5
    assert req_to_token_extra_context_len(ctx) == 10


def test_spec_v1_alloc_aligns_a_page_multiple_of_steps_as_is() -> None:
    # utils.common.spec_decode_alloc_len_per_request, page 4 > 1 and top-k 1 (breadth-1 NGRAM: 12 draft tokens,
    # steps 12 // 1 = 12, speculative_hook._handle_ngram): max(ceil_align(12, 4) * 1, ceil_align(12, 4)) = 12
    ngram: dict[str, Any] = {"speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": 12,
                             "speculative_num_steps": 12, "speculative_eagle_topk": 1}  # fmt: skip
    assert spec_v1_alloc(case_settings(LLAMA, page_size=4, **ngram)) == 12
    # page 8: max(ceil_align(12, 8), ceil_align(12, 8)) = 16
    assert spec_v1_alloc(case_settings(LLAMA, page_size=8, **ngram)) == 16


@pytest.mark.parametrize(
    ("mrr", "attn_dp", "slots"),
    [
        (1, 1, 2),  # w = max(1, 1 // 1) = 1 <= 32: 2 * 1
        (1, 2, 2),  # w = max(1, 1 // 2) = max(1, 0) = 1: 2
        (64, 2, 64),  # w = 64 // 2 = 32 <= 32: 64
        (66, 2, 0),  # w = 33 > 32: none
    ],
)
def test_decode_extra_slots_per_attention_dp_worker(mrr: int, attn_dp: int, slots: int) -> None:
    # pd_disaggregation_hook.handle_pd_disaggregation: per_worker = max(1, mrr // dp), 2 * per_worker when <= 32
    ctx = case_settings(LLAMA, tp_size=attn_dp, attn_dp_size=attn_dp, disaggregation_mode="decode",
                        max_running_requests=mrr)  # fmt: skip
    assert decode_extra_slots(ctx) == slots


# ---- budget_check.py ----------------------------------------------------------------------------------------


def test_the_kv_allowance_pads_two_pages_of_every_dcp_rank() -> None:
    # budget_check module doc: available * dcp + ceil(2 * page * dcp * cell) = 1000 * 2 + ceil(2 * 64 * 2 * 100.5)
    # = 2000 + 25,728 = 27,728
    assert kv_allowance(1000, 64, 2, 100.5) == 27728
    assert kv_allowance(1000, 64, 1, 100.5) == 1000 + 12864  # 2 * 64 * 100.5


# ---- api.py -------------------------------------------------------------------------------------------------


def test_a_what_if_layout_holds_eight_requests_unless_told() -> None:
    # the case files' pool_max_running_requests default 8: ReqToTokenPool rows R + 1 = 9 of 131,072 + 4 columns
    # (KVCacheConfigurator._build_req_to_token_pool, extra 4 + 0 draft tokens)
    planned = kvstrategies.plan(case_settings(LLAMA), 2**30, pool_max_tokens=256)
    assert planned.pool_sizes.max_running_requests == 8
    assert planned.layout.req_to_token.buffers[0].shape == (9, 131076)
    one = kvstrategies.plan(case_settings(LLAMA), 2**30, pool_max_tokens=256, pool_max_running_requests=1)
    assert one.layout.req_to_token.buffers[0].shape == (2, 131076)  # 1 + 1 rows
    with pytest.raises(KVCacheConfigError, match="pool_max_running_requests"):
        kvstrategies.plan(case_settings(LLAMA), 2**30, pool_max_tokens=256, pool_max_running_requests=0)


def test_a_cpu_build_that_exactly_fits_the_host_goes_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvstrategies import host_memory
    from kvstrategies.pools.runtime import factory

    planned = kvstrategies.plan(case_settings(LLAMA), 2**30, pool_max_tokens=256)
    built = object()
    monkeypatch.setattr(factory, "build_typed_pools", lambda *args, **kwargs: built)
    monkeypatch.setattr(host_memory, "available_host_bytes", lambda: planned.planned_bytes)
    assert kvstrategies.build(planned, "cpu") is built  # room == planned: it fits
    monkeypatch.setattr(host_memory, "available_host_bytes", lambda: planned.planned_bytes - 1)
    with pytest.raises(InsufficientMemoryError, match="building on 'cpu'"):
        kvstrategies.build(planned, "cpu")


def test_a_one_token_cap_passes_the_argument_check_and_serves_no_request() -> None:
    # plan()'s token arguments need >= 1. A cap of 1 token then serves min(2048, 1 // 2) = 0 requests
    # (KVCacheConfigurator.resolve_max_num_reqs), refused as such; 2 tokens serve 1; a what-if of 1 token is laid out
    settings = case_settings(LLAMA)
    with pytest.raises(KVCacheConfigError, match="the plan serves 0 requests"):
        kvstrategies.plan(settings, 2**30, max_tokens=1)
    capped = kvstrategies.plan(settings, 2**30, max_tokens=2).sizes_from_max_tokens
    assert capped is not None and (capped.max_total_num_tokens, capped.max_running_requests) == (2, 1)
    assert kvstrategies.plan(settings, 2**30, pool_max_tokens=1).pool_sizes.max_total_num_tokens == 1
    for name in ("max_tokens", "pool_max_tokens"):
        with pytest.raises(KVCacheConfigError, match=name):
            kvstrategies.plan(settings, 2**30, **{name: 0})


def test_a_what_if_may_ask_for_up_to_2_to_the_20_requests() -> None:
    # api.MAX_WHAT_IF_REQUESTS = 2**20 = 1,048,576 rows of the request table (+ 1 padding row)
    assert MAX_WHAT_IF_REQUESTS == 1048576
    settings = case_settings(LLAMA)
    most = kvstrategies.plan(settings, 2**30, pool_max_tokens=256, pool_max_running_requests=1048576)
    assert most.layout.req_to_token.buffers[0].shape == (1048577, 131076)
    with pytest.raises(KVCacheConfigError, match="pool_max_running_requests"):
        kvstrategies.plan(settings, 2**30, pool_max_tokens=256, pool_max_running_requests=1048577)


# ---- request_math.py, more (allocation_sizing, pool_configurator.compute_swa_request_cap) ---------------------

EAGLE: dict[str, Any] = {"speculative_algorithm": "EAGLE", "eagle_draft_num_layers": 1,
                         "speculative_num_draft_tokens": 4, "speculative_num_steps": 3}  # fmt: skip


def test_spec_v1_alloc_without_page_alignment_at_page_one() -> None:
    # spec_decode_alloc_len_per_request at page 1 aligns nothing: top-k 2, 3 steps, 6 tokens: max(3 * 2, 6) = 6
    six = {**EAGLE, "speculative_eagle_topk": 2, "speculative_num_draft_tokens": 6}
    assert spec_v1_alloc(case_settings(LLAMA, **six)) == 6
    # no step count: len_per_topk = None or 1 = 1, tokens None or 1 = 1: max(1 * 2, 1) = 2
    bare = dataclasses.replace(case_settings(LLAMA), speculative=SpeculativeConfig(SpecAlgorithm.EAGLE, eagle_topk=2))
    assert spec_v1_alloc(bare) == 2


def test_a_tree_branch_reserves_its_partial_page_and_its_steps() -> None:
    # get_alloc_len_per_decode, page 16 > 1 and top-k 2 > 1: pages = ((16 - 1) + 2 + 16 - 1) // 16 = 32 // 16 = 2
    # per branch, max(2 * 16 * 2, 4) = 64; 3 steps: 33 // 16 = 2 as well; 1 step: 31 // 16 = 1, max(1 * 16 * 2, 4) = 32
    for steps, alloc in ((2, 64), (3, 64), (1, 32)):
        tree = {**EAGLE, "speculative_eagle_topk": 2, "speculative_num_steps": steps}
        ctx = case_settings(LLAMA, page_size=16, **tree)
        assert alloc_len_per_decode(ctx) == alloc


def test_the_overlap_decode_reserve_is_twice_the_step_allocation() -> None:
    # compute_swa_request_cap, spec v2: decode_alloc = 2 * get_alloc_len_per_decode; top-k 1 at page 64:
    # max(3 * 1, 4) = 4, so W + ev * Dt + P + 2 * 4 = 128 + 128 * 4 + 64 + 8 = 712
    ctx = case_settings(LLAMA, page_size=64, speculative_eagle_topk=1, **EAGLE)
    assert swa_tokens_per_request(ctx, 128) == 712


def test_page_one_eagle_keeps_the_plain_request_row_headroom() -> None:
    # get_req_to_token_extra_context_len: at page 1 (not UNO) extra stays 4 + 4 = 8 although 2 * max(3 * 2, 4) = 12
    ctx = case_settings(LLAMA, speculative_eagle_topk=2, **EAGLE)
    assert req_to_token_extra_context_len(ctx) == 8


def test_the_decode_role_swa_cap_counts_every_request_and_the_extra_slots() -> None:
    # compute_swa_request_cap, decode role: per_request * n + (W + P) * extra_slots with W 128, P 64, no
    # speculation: per_request = 128 + 128 + 64 + 64 = 384, n = 4, extra slots 2 * 4 = 8: 1,536 + 192 * 8 = 3,072
    ctx = case_settings(LLAMA, page_size=64, disaggregation_mode="decode", max_running_requests=4)
    assert swa_request_cap(ctx, 128, 4) == 3072


@pytest.mark.parametrize(
    ("tokens", "mrr", "attn_dp", "requests"),
    [
        (10_000_000, None, 1, 4096),  # int(1e7 / 131,072 * 512) = 39,062, clamped to 4,096
        (100_000, None, 1, 2048),  # int(390.6) = 390, raised to 2,048
        (3_000, None, 1, 1500),  # 2,048 but at most 3,000 // 2
        (100, 100, 1, 50),  # explicit 100, at most 100 // 2
        (1_000, 100, 2, 50),  # explicit 100 // 2 per worker
    ],
)
def test_estimated_max_running_requests(tokens: int, mrr: int | None, attn_dp: int, requests: int) -> None:
    # KVCacheConfigurator.resolve_max_num_reqs: clamp(int(T / C * 512), 2048, 4096), or max(1, mrr // dp); then
    # at most T // 2 (context C = 131,072)
    ctx = case_settings(LLAMA, tp_size=attn_dp, attn_dp_size=attn_dp, max_running_requests=mrr)
    assert estimated_max_running_requests(tokens, ctx) == requests


# ---- sizing.py, layer_setup.py ------------------------------------------------------------------------------


def test_one_token_is_a_positive_budget() -> None:
    # MemoryPoolConfig's check: tokens <= 0 means the budget is too small; 1 token is not refused
    require_positive_tokens(1)
    with pytest.raises(InsufficientMemoryError, match="gives 0 tokens"):
        require_positive_tokens(0)


def test_a_middle_pp_stage_of_an_mtp_model_is_refused_up_to_0_5_20() -> None:
    # layer_setup._assert_pp_mtp_compat (0.5.20): DeepSeek-V3, 61 layers, SGLANG_PP_LAYER_PARTITION 20,21,20: rank 1
    # holds [20, 41), 41 - 20 = 21 of 61 layers: "PP is not compatible with MTP models"
    ctx = case_settings("deepseek-v3", tp_size=8, pp_size=3, pp_rank=1, env={"SGLANG_PP_LAYER_PARTITION": "20,21,20"},
                        sglang_version="0.5.20", speculative_eagle_topk=1, **EAGLE)  # fmt: skip
    assert stage_layer_range(ctx) == (20, 41)
    with pytest.raises(UnsupportedConfigurationError, match="PP is not compatible with MTP models"):
        check_layer_setup(ctx)


# ---- host_memory.py -----------------------------------------------------------------------------------------


@pytest.fixture
def fake_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``/proc/meminfo`` and the cgroup folders moved under ``tmp_path`` (all absent until written)."""
    from kvstrategies import host_memory

    monkeypatch.setattr(host_memory, "_MEMINFO", tmp_path / "meminfo")
    monkeypatch.setattr(host_memory, "_CGROUP_V2", tmp_path / "v2")
    monkeypatch.setattr(host_memory, "_CGROUP_V1", tmp_path / "v1")
    for folder in ("v2", "v1"):
        (tmp_path / folder).mkdir()
    return tmp_path


@pytest.mark.parametrize("line", ["MemAvailable:    2048 kB", "MemAvailable: 2048"])
def test_memavailable_is_read_in_kib(fake_host: Path, line: str) -> None:
    from kvstrategies.host_memory import available_host_bytes

    (fake_host / "meminfo").write_text(f"MemTotal:  999999 kB\n{line}\n")
    assert available_host_bytes() == 2048 * 1024  # 2,097,152 B


def test_a_cgroup_limit_of_2_to_the_60_or_more_is_no_limit(fake_host: Path) -> None:
    from kvstrategies.host_memory import _cgroup_room

    (fake_host / "v2" / "memory.current").write_text("1000\n")
    (fake_host / "v2" / "memory.max").write_text(f"{2**60}\n")
    assert _cgroup_room() is None  # v1 absent too
    (fake_host / "v2" / "memory.max").write_text(f"{2**60 - 1}\n")
    assert _cgroup_room() == 2**60 - 1 - 1000
