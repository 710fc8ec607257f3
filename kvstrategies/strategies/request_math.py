"""Per-request token arithmetic shared by sizing and the request table (compute_swa_request_cap,
KVCacheConfigurator.resolve_max_num_reqs, KVCacheConfigurator._build_req_to_token_pool)."""

from __future__ import annotations

from ..context import DisaggregationMode, KVCacheContext, SpecAlgorithm, context_len
from ..core.releases import ReleaseRule, span
from ..core.sizing import ceil_align
from ..errors import KVCacheConfigError

#: the allocator's page under DCP spans the DCP group: ``Pa = page * dcp`` (before: ``page``)
ALLOC_PAGE_SPANS_DCP = ReleaseRule(
    "alloc-page-spans-dcp",
    span("0.5.19"),
    "decode allocation and request-row headroom use page x attn_dcp (before: page)",
    "sglang.srt.mem_cache.allocation_sizing.get_alloc_page_size",
)
#: with speculative decoding and ``Pa > 1`` the request row keeps ``reserve + Pa - 1`` columns of
#: headroom (the page-aligned reserve can overshoot); before, ``reserve`` and only when top-k > 1
REQ_ROW_PAGE_HEADROOM = ReleaseRule(
    "req-row-page-headroom",
    span("0.5.16"),
    "request-row headroom max(4 + D, 2 * alloc + Pa - 1) with speculation and Pa > 1 (before: max(4 + D, "
    "2 * alloc) only with top-k > 1)",
    "sglang.srt.mem_cache.allocation_sizing.get_req_to_token_extra_context_len (before: mem_cache.common)",
)


#: a DFLASH draft's own cell (``dflash_draft_cell_size_per_token``) is added, times DCP; before, SGLang
#: ignored it (Default scaled the target cell by the draft's layers, hybrid SWA priced no draft)
DFLASH_DRAFT_CELL_ADDED = ReleaseRule(
    "dflash-draft-cell-added",
    span("0.5.18"),
    "DFLASH draft with a known draft cell: cell + draft_cell * dcp (before: the cell scaled by the draft layers)",
    "sglang.srt.model_executor.pool_configurator._dflash_draft_cell_size (0.5.17: DefaultPoolConfigurator.__init__ "
    "hands scale_kv_cell_size_per_token_for_dflash no draft_cell_size_per_token)",
)


def known_dflash_draft_cell(ctx: KVCacheContext) -> int:
    """``draft_cell * dcp`` B per token: a DFLASH-family target's known draft cell, replicated over the DCP
    group (``pool_configurator._dflash_draft_cell_size``); 0 for a draft worker, another algorithm, no
    positive cell, or a release before :data:`DFLASH_DRAFT_CELL_ADDED`."""
    spec = ctx.speculative
    cell = spec.dflash_draft_cell_size_per_token
    if ctx.is_draft_worker or not spec.algorithm.is_dflash_family or cell is None or cell <= 0:
        return 0
    return cell * ctx.parallel.dcp_size if DFLASH_DRAFT_CELL_ADDED.holds(ctx.release) else 0


def alloc_page_span(ctx: KVCacheContext) -> int:
    """``Pa``: the page the allocator hands out, ``page * dcp`` (:data:`ALLOC_PAGE_SPANS_DCP`)."""
    dcp = ctx.parallel.dcp_size if ALLOC_PAGE_SPANS_DCP.holds(ctx.release) else 1
    return ctx.page_size * dcp


def alloc_len_per_decode(ctx: KVCacheContext) -> int:
    """Tokens one decode step allocates per request (SGLang ``alloc_len_per_decode``).

    No speculation: 1. UNO: ``t + 1``. With ``Pa = page * dcp``, ``s`` steps, ``k`` top-k and
    ``t`` draft tokens: ``max(s * k, t)`` when ``Pa == 1`` or ``k == 1`` or NGRAM, else
    ``max(pages * Pa * k, t)`` with ``pages = ((Pa - 1) + s + Pa - 1) // Pa``.
    """
    spec = ctx.speculative
    if not spec.enabled:
        return 1
    draft_tokens = spec.max_num_draft_tokens
    if spec.algorithm is SpecAlgorithm.UNO:
        if draft_tokens is None:
            raise KVCacheConfigError("speculative_algorithm UNO needs speculative_num_draft_tokens")
        return draft_tokens + 1
    page_span = alloc_page_span(ctx)
    steps = spec.num_steps or 1
    topk = spec.eagle_topk or 1
    t = draft_tokens or 0
    if page_span == 1 or topk == 1 or spec.algorithm is SpecAlgorithm.NGRAM:
        return max(steps * topk, t)
    pages = ((page_span - 1) + steps + page_span - 1) // page_span
    return max(pages * page_span * topk, t)


def spec_v1_alloc(ctx: KVCacheContext) -> int:
    """Decode allocation without the overlap scheduler (SGLang ``spec_v1_alloc``, compute_swa_request_cap)."""
    spec = ctx.speculative
    page = ctx.page_size
    steps = spec.num_steps or 1
    topk = spec.eagle_topk or 1
    tokens = spec.num_draft_tokens or 1
    if page > 1 and topk > 1:
        steps = ceil_align(steps + page, page)
        tokens = ceil_align(tokens, page)
    elif page > 1:
        steps = ceil_align(steps, page)
        tokens = ceil_align(tokens, page)
    return max(steps * topk, tokens)


def decode_extra_slots(ctx: KVCacheContext) -> int:
    """``disaggregation_decode_extra_slots`` as the launch resolves it (compute_swa_request_cap).

    An explicit value is kept. Otherwise, in the decode role with ``--max-running-requests``:
    ``2 * w`` when ``w = max(1, mrr // attn_dp) <= 32``, else 0; 0 outside the decode role.
    """
    sched = ctx.scheduling
    if sched.disaggregation_decode_extra_slots is not None:
        return sched.disaggregation_decode_extra_slots
    if sched.disaggregation_mode is not DisaggregationMode.DECODE or sched.max_running_requests is None:
        return 0
    per_worker = max(1, sched.max_running_requests // ctx.parallel.attn_dp_size)
    return 2 * per_worker if per_worker <= 32 else 0


def swa_tokens_per_request(ctx: KVCacheContext, window: int) -> int:
    """SWA slots one running request holds at worst: ``W + ev * Dt + P + decode_alloc`` (compute_swa_request_cap).

    ``Dt`` draft tokens or 1, ``ev`` the eviction interval, ``decode_alloc`` = P without
    speculation, ``spec_v1_alloc`` without the overlap scheduler, else ``2 * alloc_len_per_decode``.
    E.g. W 128, P 256, no speculation: ``128 + 128 + 256 + 256 = 768``.
    """
    page = ctx.page_size
    draft_tokens = ctx.speculative.max_num_draft_tokens or 1
    trailing = window + max(1, ctx.knobs.swa_eviction_interval) * draft_tokens + page
    if not ctx.speculative.enabled:
        decode_alloc = page
    elif ctx.scheduling.disable_overlap_schedule:
        decode_alloc = spec_v1_alloc(ctx)
    else:
        decode_alloc = 2 * alloc_len_per_decode(ctx)
    return trailing + decode_alloc


def swa_request_cap(ctx: KVCacheContext, window: int, max_running_requests: int) -> int:
    """SWA tokens the worst case of ``max_running_requests`` needs (``compute_swa_request_cap``, 7.2).

    ``per_request = W + ev * Dt + P + decode_alloc`` (``Dt`` draft tokens or 1, ``ev`` the
    eviction interval, ``decode_alloc`` = P, ``spec_v1_alloc`` without the overlap scheduler,
    else ``2 * alloc_len_per_decode``); ``n = max(1, mrr // attn_dp)``. Decode role:
    ``per_request * n + (W + P) * extra_slots``; otherwise ``per_request * n + chunks *
    chunked_prefill_size + P`` with 2 chunks in flight (1 without the overlap scheduler).
    E.g. W 128, P 256, 64 requests, chunk 8192: ``768 * 64 + 2 * 8192 + 256 = 65,792``.
    """
    page = ctx.page_size
    sched = ctx.scheduling
    per_request = swa_tokens_per_request(ctx, window)
    requests = max(1, max_running_requests // ctx.parallel.attn_dp_size)
    if sched.disaggregation_mode is DisaggregationMode.DECODE:
        return per_request * requests + (window + page) * decode_extra_slots(ctx)
    chunks = 1 if sched.disable_overlap_schedule else 2
    return per_request * requests + chunks * (sched.chunked_prefill_size or 0) + page


#: the top-k > 1 paged headroom ``max(4 + D, 2 * alloc)`` exists
#: (``mem_cache.common.get_req_to_token_extra_context_len``); before, the request table always gets ``4 + D`` extra
#: columns
REQ_ROW_TREE_HEADROOM = ReleaseRule(
    "req-row-tree-headroom",
    span("0.5.13"),
    "request-row headroom max(4 + D, 2 * alloc) for EAGLE top-k > 1 at page > 1 (before: 4 + D always)",
    "sglang.srt.mem_cache.common.get_req_to_token_extra_context_len (before: ModelRunnerKVCacheMixin.init_memory_pool)",
)


def req_to_token_extra_context_len(ctx: KVCacheContext) -> int:
    """Columns beyond ``context_len`` in the request table (KVCacheConfigurator._build_req_to_token_pool).

    ``extra = 4 + Dmax`` (only that up to 0.5.12: :data:`REQ_ROW_TREE_HEADROOM`); with speculation and (``Pa > 1``
    or UNO):
    ``max(extra, 2 * alloc_len_per_decode + Pa - 1)``. E.g. EAGLE top-1, 3 steps, 4 drafts,
    P = 64: ``max(8, 2*4 + 63) = 71``.
    """
    spec = ctx.speculative
    extra = 4 + (spec.max_num_draft_tokens or 0)
    page_span = alloc_page_span(ctx)
    if not REQ_ROW_PAGE_HEADROOM.holds(ctx.release):
        tree = REQ_ROW_TREE_HEADROOM.holds(ctx.release)
        if tree and spec.enabled and page_span > 1 and (spec.eagle_topk or 1) > 1:
            extra = max(extra, 2 * alloc_len_per_decode(ctx))
        return extra
    if spec.enabled and (page_span > 1 or spec.algorithm is SpecAlgorithm.UNO):
        extra = max(extra, 2 * alloc_len_per_decode(ctx) + page_span - 1)
    return extra


def req_to_token_max_context_len(ctx: KVCacheContext) -> int:
    return context_len(ctx) + req_to_token_extra_context_len(ctx)


#: the decode role's extra request rows are ``--disaggregation-decode-extra-slots`` (defaulted by the launch); before,
#: ``2 R`` for a resolved ``R <= 32`` requests, else ``SGLANG_DISAGGREGATION_NUM_PRE_ALLOCATE_REQS`` (0)
DECODE_EXTRA_SLOTS_FLAG = ReleaseRule(
    "decode-extra-slots-flag",
    span("0.5.14"),
    "PD decode extra request rows from --disaggregation-decode-extra-slots (before: 2 x the resolved request count "
    "when it is at most 32, else 0)",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin.init_memory_pool (pre_alloc_size)",
)


def req_to_token_pre_alloc(ctx: KVCacheContext, requests: int) -> int:
    """Extra request rows of the decode-role table (``DecodeReqToTokenPool``) for ``requests`` resolved requests."""
    if ctx.scheduling.disaggregation_mode is not DisaggregationMode.DECODE:
        return 0
    if not DECODE_EXTRA_SLOTS_FLAG.holds(ctx.release):
        return 2 * requests if requests <= 32 else 0
    return decode_extra_slots(ctx)


#: an explicit ``--max-running-requests`` is capped at ``T // 2``; before, at the clamped estimate
USER_REQUESTS_CAPPED_AT_HALF_TOKENS = ReleaseRule(
    "user-requests-capped-at-half-tokens",
    span("0.5.14"),
    "an explicit --max-running-requests is capped at max_total_num_tokens // 2 (before: at the clamped estimate "
    "clamp(int(T / C * 512), 2048, 4096))",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin._resolve_max_num_reqs",
)


#: the request pool is sized from the resolved token count; before, ``init_memory_pool`` sized it from the profiled
#: count (before the user cap, the page alignment and the hybrid-SWA split), without the ``T // 2`` cap, and took an
#: explicit ``--max-running-requests`` as it is
REQUESTS_FROM_RESOLVED_TOKENS = ReleaseRule(
    "requests-from-resolved-tokens",
    span("0.5.10"),
    "the request pool is sized from the resolved tokens: min(clamp(int(T / C * 512), 2048, 4096), T // 2), an explicit "
    "count divided by attention DP (before: clamp(int(P / C * 512), 2048, 4096) of the profiled count P, an explicit "
    "count as given)",
    "sglang.srt.model_executor.model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin._resolve_max_num_reqs "
    "(before: init_memory_pool)",
)


def estimated_max_running_requests(total_tokens: int, ctx: KVCacheContext, profiled_tokens: int | None = None) -> int:
    """``resolve_max_num_reqs`` before any Mamba cap (KVCacheConfigurator.resolve_max_num_reqs).

    ``est = clamp(int(T / C * 512), 2048, 4096)`` (float, truncated); an explicit
    ``--max-running-requests`` bypasses the clamp and is divided by attention DP;
    either way at most ``T // 2`` (before :data:`USER_REQUESTS_CAPPED_AT_HALF_TOKENS`, an explicit count is capped at
    the estimate instead). Before :data:`REQUESTS_FROM_RESOLVED_TOKENS` (0.5.9): ``clamp(int(P / C * 512), 2048,
    4096)`` of the profiled count ``P`` (``profiled_tokens``; ``T`` when not given), an explicit count as it is.
    """
    if not REQUESTS_FROM_RESOLVED_TOKENS.holds(ctx.release):
        if ctx.scheduling.max_running_requests is not None:
            return ctx.scheduling.max_running_requests
        tokens = total_tokens if profiled_tokens is None else profiled_tokens
        return max(min(int(tokens / context_len(ctx) * 512), 4096), 2048)
    estimate = int(total_tokens / context_len(ctx) * 512)
    estimate = max(min(estimate, 4096), 2048)
    requested = ctx.scheduling.max_running_requests
    if requested is not None:
        per_worker = max(1, requested // ctx.parallel.attn_dp_size)
        if not USER_REQUESTS_CAPPED_AT_HALF_TOKENS.holds(ctx.release):
            return min(per_worker, estimate)
        return min(per_worker, total_tokens // 2)
    return min(estimate, total_tokens // 2)


#: the target's token pool holds the profiled count; before, EAGLE / EAGLE3 / STANDALONE targets add room for the
#: draft's allocations beside their own (they share the pool): ``R x steps x topk + R x draft tokens + 100``
SPEC_TARGET_POOL_HEADROOM = ReleaseRule(
    "spec-target-pool-headroom",
    span(last="0.5.6"),
    "an EAGLE / EAGLE3 / STANDALONE target's token pool is the profiled count plus R x steps x topk + R x draft "
    "tokens + 100 (the draft's share of the pool; from 0.5.7 the profiled count alone)",
    "sglang.srt.model_executor.model_runner.ModelRunner.init_memory_pool (draft_runner_cache_size)",
)


def has_speculative_headroom(ctx: KVCacheContext) -> bool:
    """Whether ``ctx``'s pool takes the draft's share (:data:`SPEC_TARGET_POOL_HEADROOM`): an EAGLE / EAGLE3 /
    STANDALONE target up to 0.5.6."""
    eagle = ctx.speculative.algorithm in (SpecAlgorithm.EAGLE, SpecAlgorithm.EAGLE3, SpecAlgorithm.STANDALONE)
    return eagle and not ctx.is_draft_worker and SPEC_TARGET_POOL_HEADROOM.holds(ctx.release)


def speculative_pool_headroom(ctx: KVCacheContext, requests: int) -> int:
    """Tokens an EAGLE-family target adds to its profiled count up to 0.5.6 (:data:`SPEC_TARGET_POOL_HEADROOM`):
    ``R x steps x topk + R x draft + 100`` for ``R`` requests (the request pool's size); 0 elsewhere."""
    spec = ctx.speculative
    if not has_speculative_headroom(ctx):
        return 0
    steps, topk, draft = spec.num_steps, spec.eagle_topk, spec.num_draft_tokens
    if steps is None or topk is None or draft is None:
        raise KVCacheConfigError(
            f"SGLang {ctx.release.text}'s {spec.algorithm.value} target sizes its pool with speculative_num_steps, "
            f"speculative_eagle_topk and speculative_num_draft_tokens (given {steps}, {topk}, {draft}); set all three"
        )
    return requests * steps * topk + requests * draft + 100
