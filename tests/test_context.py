"""The deployment context (kvstrategies/context.py): the parallel layout (sglang.srt.runtime_context.
derive_attn_tp_size) and the scheduler and environment settings, each at its edge, by hand."""

from __future__ import annotations

import dataclasses

import pytest

from kvstrategies.context import (
    MAX_PARALLEL_SIZE,
    EngineKnobs,
    KVCacheSettings,
    ParallelLayout,
    SchedulingConfig,
    num_kv_heads_per_rank,
)
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.strategies.request_math import swa_tokens_per_request

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
