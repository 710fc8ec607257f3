"""Request math (kvstrategies/strategies/request_math.py): the allocation sizing, decode slots and request caps of
sglang.srt.mem_cache.allocation_sizing, sglang.srt.utils.common and pool_configurator.compute_swa_request_cap,
every expected number worked out by hand."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kvstrategies.context import SpecAlgorithm, SpeculativeConfig
from kvstrategies.strategies.request_math import (
    alloc_len_per_decode,
    decode_extra_slots,
    estimated_max_running_requests,
    req_to_token_extra_context_len,
    spec_v1_alloc,
    swa_request_cap,
    swa_tokens_per_request,
)

from ..helpers import case_settings

LLAMA = "llama-3.1-8b"  # 32 layers, 8 KV heads of 128, context 131,072


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
