"""From a KV byte budget to final sizes: a pipeline of small named steps
(KVCacheConfigurator._resolve_memory_pool_config, KVCacheConfigurator._profile_available_bytes,
KVCacheConfigurator._handle_max_mamba_cache, KVCacheConfigurator.config_from_budget,
KVCacheConfigurator.resolve_max_num_reqs).

``available bytes -> state reservation -> configurator sizes -> user cap -> PP minimum ->
re-derivation -> max_running_requests -> finalise``. Each step is a function of the previous
result; :func:`resolve` runs them and records what each did.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..context import KVCacheContext
from ..core.releases import ReleaseRule, span
from ..core.sizing import PoolSizes
from ..errors import KVCacheConfigError
from .base import PoolConfigurator, StateReservation, Strategy
from .layer_setup import check_layer_setup
from .registry import select_pool_configurator
from .request_math import estimated_max_running_requests, speculative_pool_headroom


def reserve_state(configurator: PoolConfigurator, available_bytes: int) -> StateReservation:
    """Step 1: request-scoped state (Mamba) comes out of the budget first
    (KVCacheConfigurator._handle_max_mamba_cache)."""
    if available_bytes <= 0:
        raise KVCacheConfigError(
            f"available_bytes must be positive, got {available_bytes}; pass the KV budget in bytes "
            "(e.g. 40GiB on the command line)"
        )
    return configurator.reserve_state_bytes(available_bytes)


def profiled_sizes(configurator: PoolConfigurator, reservation: StateReservation) -> PoolSizes:
    """Step 2: ``calculate_pool_sizes`` on what the reservation left, plus the state sizes."""
    sizes = configurator.calculate_pool_sizes(reservation.kv_available_bytes, configurator.ctx.page_size)
    return sizes.replace(**dict(reservation.size_fields))


def sizes_for_max_tokens(
    configurator: PoolConfigurator, max_total_num_tokens: int, reservation: StateReservation | None = None
) -> PoolSizes:
    """``calculate_pool_sizes_from_max_tokens`` plus the reservation's state sizes."""
    if max_total_num_tokens <= 0:
        raise KVCacheConfigError(f"max_tokens must be positive, got {max_total_num_tokens}")
    sizes = configurator.calculate_pool_sizes_from_max_tokens(max_total_num_tokens, configurator.ctx.page_size)
    if reservation is not None:
        sizes = sizes.replace(**dict(reservation.size_fields))
    return sizes


#: the pipeline stages agree on the smallest profiled token count (an ``all_reduce`` MIN over the world group); before,
#: each stage keeps its own
PP_STAGES_TAKE_THE_MIN = ReleaseRule(
    "pp-stages-take-the-min",
    span("0.5.2"),
    "every pipeline stage takes the smallest stage's profiled max_total_num_tokens (before: each stage its own)",
    "sglang.srt.model_executor.model_runner.ModelRunner.init_memory_pool (all_reduce MIN over the world group)",
)


def pp_min_tokens(ctx: KVCacheContext, available_bytes: int) -> int:
    """The PP-wide MIN of every stage's profiled ``max_total_num_tokens`` (KVCacheConfigurator.config_from_budget).

    Assumes every stage has the same budget. A zero-KV stage reports ``2**63 - 1`` and never
    wins; as in SGLang, the value compared is whatever ``max_total_num_tokens`` means on that stage.
    """
    counts = []
    for rank in range(ctx.parallel.pp_size):
        stage = select_pool_configurator(ctx.at_pp_rank(rank))
        counts.append(profiled_sizes(stage, reserve_state(stage, available_bytes)).max_total_num_tokens)
    return min(counts)


def apply_token_constraints(
    configurator: PoolConfigurator,
    sizes: PoolSizes,
    reservation: StateReservation,
    *,
    max_total_tokens: int | None,
    pp_min: int | None,
) -> PoolSizes:
    """Steps 3-4: ``M = min(profiled, user cap, PP min)``; re-derive when it changed
    (KVCacheConfigurator.config_from_budget)."""
    target = sizes.max_total_num_tokens
    if max_total_tokens is not None:
        target = min(target, max_total_tokens)
    if pp_min is not None:
        target = min(target, pp_min)
    if target == sizes.max_total_num_tokens:
        return sizes
    return sizes_for_max_tokens(configurator, target, reservation)


def with_speculative_headroom(
    configurator: PoolConfigurator,
    profiled: PoolSizes,
    reservation: StateReservation,
    *,
    cap: int | None = None,
) -> PoolSizes:
    """Step 2b, up to SGLang 0.5.6: an EAGLE-family target's pool is its profiled count plus the draft's share
    (:func:`.request_math.speculative_pool_headroom`), at most ``cap``, aligned down to the page
    (ModelRunner.init_memory_pool); ``profiled`` as it is elsewhere. The share is priced with the request pool's
    size: the estimate from the profiled count (or the user's count), capped by the Mamba slots."""
    profiled_count = profiled_token_count(configurator, reservation)
    requests = estimated_max_running_requests(profiled.max_total_num_tokens, configurator.ctx, profiled_count)
    headroom = speculative_pool_headroom(configurator.ctx, configurator.cap_max_running_requests(requests, profiled))
    if not headroom:
        return profiled
    tokens = profiled_count + headroom if cap is None else min(profiled_count + headroom, cap)
    return sizes_for_max_tokens(configurator, tokens, reservation)


def profiled_token_count(configurator: PoolConfigurator, reservation: StateReservation) -> int:
    """The count ``profile_max_num_token`` measures: ``kv_available_bytes // cell`` (before any cap, alignment or
    split); up to SGLang 0.5.9 the request pool is sized from it
    (:data:`.request_math.REQUESTS_FROM_RESOLVED_TOKENS`)."""
    cell = configurator.cell_size_bytes
    return int(reservation.kv_available_bytes // cell) if cell else 0


def finalize(
    configurator: PoolConfigurator,
    sizes: PoolSizes,
    max_running_requests: int | None = None,
    *,
    profiled_tokens: int | None = None,
) -> PoolSizes:
    """Steps 5-6: ``max_running_requests`` (KVCacheConfigurator.resolve_max_num_reqs), strategy caps, then finalise.

    An explicit ``max_running_requests`` (what-if layouts) is used as the per-worker count; ``profiled_tokens`` is
    what the requests are sized from up to SGLang 0.5.9 (:func:`profiled_token_count`).
    """
    if max_running_requests is None:
        requests = estimated_max_running_requests(sizes.max_total_num_tokens, configurator.ctx, profiled_tokens)
    else:
        requests = max_running_requests
    requests = configurator.cap_max_running_requests(requests, sizes)
    if requests <= 0:
        raise KVCacheConfigError(
            f"the plan serves {requests} requests; raise the budget or lower max_running_requests"
        )
    return configurator.finalize_with_max_running_requests(sizes.replace(max_running_requests=requests))


@dataclass(frozen=True)
class Resolution:
    """What :func:`resolve` produced and how (a vLLM plan's: its strategy and its sizes as they are)."""

    configurator: Strategy
    available_bytes: int
    reservation: StateReservation
    profiled: PoolSizes
    sizes: PoolSizes
    pp_min_tokens: int | None


def resolve(ctx: KVCacheContext, available_bytes: int, *, pp_sync: bool = True) -> Resolution:
    """The whole resolve pipeline for one rank (KVCacheConfigurator._resolve_memory_pool_config, steps 2-6)."""
    check_layer_setup(ctx)
    configurator = select_pool_configurator(ctx)
    reservation = reserve_state(configurator, available_bytes)
    profiled = with_speculative_headroom(configurator, profiled_sizes(configurator, reservation), reservation)
    pp_sync = pp_sync and ctx.parallel.pp_size > 1 and PP_STAGES_TAKE_THE_MIN.holds(ctx.release)
    pp_min = pp_min_tokens(ctx, available_bytes) if pp_sync else None
    constrained = apply_token_constraints(
        configurator,
        profiled,
        reservation,
        max_total_tokens=ctx.scheduling.max_total_tokens,
        pp_min=pp_min,
    )
    final = finalize(configurator, constrained, profiled_tokens=profiled_token_count(configurator, reservation))
    return Resolution(configurator, available_bytes, reservation, profiled, final, pp_min)
