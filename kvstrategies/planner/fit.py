"""How many requests of a given length fit, and the longest request that fits at all.

A request of ``L`` tokens draws from every token pool a plan has (:class:`TokenPool`): a
full-attention pool takes ``ceil_align(L, P)`` slots; a sliding-window pool at most
``ceil_align(min(L, span), P)`` with ``span = W + ev * Dt + P + decode_alloc`` (the worst-case
SWA residency of one request, compute_swa_request_cap). Pools come from the finished
:class:`~kvstrategies.core.sizing.PoolSizes` alone, whatever the strategy:

* ``swa_max_total_num_tokens`` set (hybrid SWA, DeepSeek-V4): the full pool (SGLang's token
  capacity, TpModelWorker max_req_len) plus the SWA pool; an all-SWA model has only the SWA pool.
* otherwise one pool of ``max_total_num_tokens * dcp`` logical tokens in pages of ``P * dcp``.

Concurrency at ``L`` = ``min(max_running_requests, min over pools of capacity // tokens(L))``
per attention-DP worker. The longest request that fits is found by a binary search over ``L``
on the same predicate (vLLM's ``_estimate_max_model_len`` does the same on memory); for hybrid
SWA the full pool bounds it. State pools (Mamba, DSV4 compression state) hold one slot per
request and are already folded into ``max_running_requests`` by the strategies.
SGLang itself admits at most ``max_req_len = min(context_len - 1, capacity - 1)`` tokens
(TpModelWorker max_req_len); a request of the model's whole context fits exactly when
``capacity >= context_len``, which is what :attr:`FitReport.context_fits` says. A request longer
than the context is not served at all (:func:`rejected_reason`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..context import KVCacheContext, context_len
from ..core.sizing import PoolSizes, ceil_align
from ..strategies.request_math import swa_tokens_per_request

STANDARD_LENGTHS = (2048, 8192, 32768, 131072)


@dataclass(frozen=True)
class TokenPool:
    """``capacity`` token slots in pages of ``page_size``; ``span`` caps what one request holds."""

    name: str
    capacity: int
    page_size: int
    span: int | None = None

    def tokens_for(self, length: int) -> int:
        """Slots one request of ``length`` tokens takes: ``ceil_align(min(L, span), P)``."""
        held = length if self.span is None else min(length, self.span)
        return ceil_align(held, self.page_size)

    def requests_at(self, length: int) -> int:
        """How many such requests the pool holds: ``capacity // tokens_for(L)``."""
        return self.capacity // self.tokens_for(length)


def largest_true(predicate: Callable[[int], bool], upper: int) -> int:
    """The largest ``L`` in ``[0, upper]`` with ``predicate(L)`` for a monotone predicate
    (true up to some length, false after); 0 when even ``L = 1`` fails."""
    if predicate(upper):
        return upper
    lo, hi = 0, upper  # predicate(lo) holds (0 trivially), predicate(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if predicate(mid):
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class FitModel:
    """The token pools and request cap of one planned rank (see the module doc)."""

    pools: tuple[TokenPool, ...]
    max_running_requests: int
    context_len: int

    @property
    def capacity(self) -> int:
        """The first pool's size: SGLang's token capacity (full pool for hybrid SWA)."""
        return self.pools[0].capacity

    def fits(self, length: int) -> bool:
        """One request of ``length`` tokens fits every pool."""
        return all(pool.tokens_for(length) <= pool.capacity for pool in self.pools)

    def concurrency(self, length: int) -> tuple[int, str]:
        """``(requests, what bounds them)`` for requests of ``length`` tokens, per DP worker."""
        best, bound = self.max_running_requests, "max_running_requests"
        for pool in self.pools:
            count = pool.requests_at(length)
            if count < best:
                best, bound = count, f"{pool.name} pool"
        return best, bound

    def max_fitting_length(self, upper: int) -> int:
        """Binary search: the longest request (<= ``upper``) that fits."""
        return largest_true(lambda length: length == 0 or self.fits(length), upper)


def fit_model(ctx: KVCacheContext, sizes: PoolSizes) -> FitModel:
    """The pools of finished ``sizes`` for ``ctx`` (module doc)."""
    page, dcp = ctx.page_size, ctx.parallel.dcp_size
    requests = sizes.max_running_requests or 0
    swa = sizes.swa_max_total_num_tokens
    if swa is None:
        pools: tuple[TokenPool, ...] = (TokenPool("token", sizes.max_total_num_tokens * dcp, page * dcp),)
        return FitModel(pools, requests, context_len(ctx))
    full = sizes.full_max_total_num_tokens or 0
    if full <= 0:
        return FitModel((TokenPool("swa", swa, page),), requests, context_len(ctx))
    hybrid = ctx.geometry.hybrid_swa
    window = None if hybrid is None else hybrid.sliding_window_size
    pools = (TokenPool("full", full, page),)
    if window is not None:
        pools += (TokenPool("swa", swa, page, swa_tokens_per_request(ctx, window)),)
    return FitModel(pools, requests, context_len(ctx))


@dataclass(frozen=True)
class LengthFit:
    """Concurrency for requests of ``request_length`` tokens (per attention-DP worker).

    ``served`` is False for a request longer than the model's context, which SGLang rejects
    (``requests`` is then 0 and ``limited_by`` says why).
    """

    request_length: int
    requests: int
    limited_by: str
    tokens_per_request: int
    served: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"request_length": self.request_length, "requests": self.requests,
                "limited_by": self.limited_by, "tokens_per_request": self.tokens_per_request,
                "served": self.served}  # fmt: skip


def rejected_reason(length: int, context: int) -> str:
    """Why SGLang refuses a request of ``length`` tokens on a ``context``-token model."""
    return (
        f"cannot be served: {length:,} tokens is longer than the model's context length ({context:,} tokens); SGLang "
        "rejects such a request (sglang/srt/managers/tokenizer_manager.py, TokenizerManager._validate_one_request: "
        "input tokens >= context_len, or input + max_new_tokens > context_len). Shorten the request, or raise "
        "--context-length where it is below the model's maximum"
    )


@dataclass(frozen=True)
class FitReport:
    """The fit of one plan: capacity, concurrency per length, the longest request that fits.

    ``max_fitting_length`` is the longest request that fits the pools, at most ``context_len``;
    ``sglang_max_req_len`` is what the engine itself would admit. ``capacity_tokens`` counts the
    first pool's logical tokens (under DCP those of the whole DCP group, ``x dcp``);
    ``answer_tokens`` is SGLang's ``max_total_num_tokens``, what the answer prints and a fix promises.
    """

    capacity_tokens: int
    page_size: int
    max_running_requests: int
    context_len: int
    context_fits: bool
    max_fitting_length: int
    sglang_max_req_len: int
    attn_dp_size: int
    lengths: tuple[LengthFit, ...]
    answer_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "capacity_tokens": self.capacity_tokens,
            "page_size": self.page_size,
            "max_running_requests": self.max_running_requests,
            "context_len": self.context_len,
            "context_fits": self.context_fits,
            "max_fitting_length": self.max_fitting_length,
            "sglang_max_req_len": self.sglang_max_req_len,
            "attn_dp_size": self.attn_dp_size,
            "concurrency": [item.to_dict() for item in self.lengths],
        }


def default_lengths(context: int) -> tuple[int, ...]:
    """The standard lengths below the model's context, then the context itself."""
    return (*(length for length in STANDARD_LENGTHS if length < context), context)


def fit_report(ctx: KVCacheContext, sizes: PoolSizes, lengths: tuple[int, ...] = ()) -> FitReport:
    """Concurrency at each of ``lengths`` (default :func:`default_lengths`) and the length fit."""
    model = fit_model(ctx, sizes)
    context = model.context_len
    items = []
    for length in lengths or default_lengths(context):
        if length > context:
            reason = rejected_reason(length, context)
            items.append(LengthFit(length, 0, reason, model.pools[0].tokens_for(length), served=False))
            continue
        count, bound = model.concurrency(length)
        items.append(LengthFit(length, count, bound, model.pools[0].tokens_for(length)))
    return FitReport(
        capacity_tokens=model.capacity,
        page_size=model.pools[0].page_size,
        max_running_requests=model.max_running_requests,
        context_len=context,
        context_fits=model.fits(context),
        max_fitting_length=model.max_fitting_length(context),
        sglang_max_req_len=min(context - 1, model.capacity - 1),
        attn_dp_size=ctx.parallel.attn_dp_size,
        lengths=tuple(items),
        answer_tokens=sizes.max_total_num_tokens,
    )
