"""The public entry points: :func:`plan` a deployment, :func:`build` its pools."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .context import KVCacheContext, KVCacheSettings
from .core.releases import VLLM
from .core.sizing import PoolSizes
from .core.torch_import import import_torch
from .core.validate import MAX_INT64, check_bool, check_instance, check_int, check_opt_int
from .errors import InsufficientMemoryError, KVCacheConfigError, UnsupportedConfigurationError
from .pools.layout import KVPoolsLayout
from .strategies.base import PoolConfigurator, StateReservation, Strategy, require_pool_configurator
from .strategies.budget_check import check_layout_within_budget, overshoot_note
from .strategies.registry import select_configurator, select_pool_configurator
from .strategies.request_math import (
    REQUESTS_FROM_RESOLVED_TOKENS,
    SPEC_TARGET_POOL_HEADROOM,
    has_speculative_headroom,
)
from .strategies.resolve import (
    Resolution,
    finalize,
    profiled_sizes,
    profiled_token_count,
    reserve_state,
    resolve,
    sizes_for_max_tokens,
    with_speculative_headroom,
)

if TYPE_CHECKING:  # what building needs: loaded by build() and Plan.binding only
    from .pools.binding import AllocatorSpec, PoolBinding
    from .pools.build import KVPools
    from .vllm.strategies.strategies import VLLMKVCachePlan

#: the most requests (rows of the request table) a what-if layout (``pool_max_running_requests``) may
#: ask for: a what-if is a small size, and a build on a real device allocates the table for real
MAX_WHAT_IF_REQUESTS = 2**20


class LayoutError(KVCacheConfigError):
    """Sizing succeeded but the pools cannot be laid out (e.g. a page size the pool rejects).

    Carries what was planned so far, so ``plan --json`` can still report the sizes.
    """

    def __init__(
        self,
        message: str,
        configurator: PoolConfigurator,
        sizes: PoolSizes,
        sizes_from_max_tokens: PoolSizes | None,
        pool_sizes: PoolSizes | None = None,
        adopted_sizes: PoolSizes | None = None,
    ) -> None:
        super().__init__(message)
        self.configurator = configurator
        self.sizes = sizes
        self.sizes_from_max_tokens = sizes_from_max_tokens
        #: what the refused layout was asked for (as :attr:`Plan.pool_sizes`)
        self.pool_sizes = pool_sizes
        #: a draft worker's adopted target sizes (as :attr:`Plan.adopted_sizes`)
        self.adopted_sizes = adopted_sizes


def _layout(
    configurator: PoolConfigurator,
    pool_sizes: PoolSizes,
    sizes: PoolSizes,
    capped: PoolSizes | None,
    adopted: PoolSizes | None = None,
) -> KVPoolsLayout:
    try:
        return configurator.layout(pool_sizes)
    except LayoutError:
        raise
    except KVCacheConfigError as exc:
        raise LayoutError(str(exc), configurator, sizes, capped, pool_sizes, adopted) from exc


@dataclass(frozen=True)
class Plan:
    """A planned deployment (torch-free).

    ``sizes`` is ``calculate_pool_sizes(available_bytes)`` finalised with its request count;
    ``sizes_from_max_tokens`` is ``calculate_pool_sizes_from_max_tokens(max_tokens)`` finalised,
    when a token cap was given; ``pool_sizes`` is what :attr:`layout` describes (the capped sizes
    when given, else ``sizes``, or a what-if size); ``resolution`` is the whole SGLang pipeline
    (user cap and PP-wide minimum included) as an operator's server would run it.
    """

    configurator: Strategy
    available_bytes: int
    sizes: PoolSizes
    sizes_from_max_tokens: PoolSizes | None
    pool_sizes: PoolSizes
    layout: KVPoolsLayout
    resolution: Resolution
    #: a draft worker's adopted target sizes (mapped by ``derive_draft_sizes``): what its pools are
    #: built for; ``None`` for a target
    adopted_sizes: PoolSizes | None = None
    #: a vLLM plan's whole answer (specs, groups, blocks, tensors, capacity); ``None`` for SGLang
    vllm: VLLMKVCachePlan | None = None
    #: what the plan wants an operator to know beyond the reservation's notes (pools the release's own sizing
    #: undercounts: by how much they exceed the budget)
    notes: tuple[str, ...] = ()

    @property
    def ctx(self) -> KVCacheContext:
        return self.configurator.ctx

    @property
    def cell_size_bytes(self) -> int | float:
        """The SGLang strategy's cell (its cost's slope), or the vLLM plan's bytes per block token."""
        if self.vllm is not None:
            return self.vllm.cell_size_bytes
        return require_pool_configurator(self.configurator).cell_size_bytes

    @property
    def planned_bytes(self) -> int:
        return self.layout.planned_bytes

    @property
    def binding(self) -> PoolBinding:
        """What ``build`` needs beyond the layout: ``start_layer``, logical KV dtype, allocator."""
        from .pools.binding import pool_binding

        return pool_binding(self.ctx, self.pool_sizes)

    @property
    def allocator_spec(self) -> AllocatorSpec | None:
        """The token allocator ``build`` constructs (KVCacheConfigurator._build_token_to_kv_pool_allocator); ``None``
        for a draft worker."""
        return self.binding.allocator


def plan(
    ctx: KVCacheContext | KVCacheSettings,
    available_bytes: int,
    *,
    max_tokens: int | None = None,
    pool_max_tokens: int | None = None,
    pool_max_running_requests: int = 8,
    pool_max_mamba_cache_size: int | None = None,
) -> Plan:
    """Plan one rank: select the strategy, size every pool, describe the layout.

    ``pool_max_tokens`` asks for a what-if layout at a small size (a case file's ``pool_max_*`` fields):
    the pools are described for ``calculate_pool_sizes_from_max_tokens(pool_max_tokens)`` with
    ``pool_max_running_requests`` requests, at most :data:`MAX_WHAT_IF_REQUESTS` (2**20), and
    ``pool_max_mamba_cache_size`` state slots (default 3 x requests, at most 4 x 2**20); the sizing
    fields are unaffected. An engine's own context object is
    read once and validated (:func:`as_settings`); ``Plan.ctx`` is that snapshot. Bad arguments raise
    :class:`KVCacheConfigError` naming the argument. Whatever strategy sized the pools, K/V buffers
    larger than the budget (plus two pages of padding) are refused with :class:`InsufficientMemoryError`
    (:mod:`kvstrategies.strategies.budget_check`).
    """
    return size_plan(
        ctx,
        available_bytes,
        max_tokens=max_tokens,
        pool_max_tokens=pool_max_tokens,
        pool_max_running_requests=pool_max_running_requests,
        pool_max_mamba_cache_size=pool_max_mamba_cache_size,
    ).laid_out()


@dataclass(frozen=True)
class SizedPlan:
    """A rank sized, its pools not yet laid out: ``plan(...)`` is ``size_plan(...).laid_out()``.

    For a caller that reads the sizes first and lays out only some plans: the planner's fix
    search sizes a dozen changed deployments and lays out those it offers. ``sizes`` are the
    final sizes (``resolution.sizes``). A draft worker or a vLLM plan is planned whole here (its
    sizes come with its layout).
    """

    ctx: KVCacheSettings
    available_bytes: int
    target: _TargetSizes | None = None  # a target rank's sizes, laid out by laid_out()
    whole: Plan | None = None  # a draft worker's or vLLM plan, planned whole

    def __post_init__(self) -> None:
        if (self.target is None) == (self.whole is None):
            raise KVCacheConfigError(
                "a SizedPlan holds either a target rank's sizes or a whole plan (not both, not neither); "
                "build it with kvstrategies.api.size_plan"
            )

    @property
    def resolution(self) -> Resolution:
        return self.target.resolution if self.target is not None else self._whole.resolution

    @property
    def _whole(self) -> Plan:
        whole = self.whole
        if whole is None:  # __post_init__ holds one of the two
            raise KVCacheConfigError("a SizedPlan without a target holds a whole plan")
        return whole

    @property
    def sizes(self) -> PoolSizes:
        return self.resolution.sizes

    def laid_out(self) -> Plan:
        """The plan: the target's pools laid out, and refused when their K/V buffers exceed the
        budget (:func:`~kvstrategies.strategies.budget_check.check_layout_within_budget`); a plan made
        whole as it is."""
        target = self.target
        if target is None:
            return self._whole
        configurator = require_pool_configurator(target.resolution.configurator)
        layout = _layout(configurator, target.pool_sizes, target.sizes, target.capped)
        notes: tuple[str, ...] = ()
        undercounts = configurator.engine_undercounts()
        headroom = (SPEC_TARGET_POOL_HEADROOM,) if has_speculative_headroom(configurator.ctx) else ()
        if target.pool_sizes is target.sizes and (undercounts or headroom):  # the engine plans them anyway
            note = overshoot_note(layout, self.available_bytes, self.ctx.parallel.dcp_size, self.ctx.release,
                                  undercounts, adding=headroom)  # fmt: skip
            notes = () if note is None else (note,)
        elif target.pool_sizes is target.sizes:  # a layout at an asked size (max_tokens, what-if) follows that size
            check_layout_within_budget(type(configurator).__name__, layout, self.available_bytes, self.ctx.page_size,
                                       self.ctx.parallel.dcp_size, float(configurator.cell_size_bytes))  # fmt: skip
        return Plan(
            configurator=configurator,
            available_bytes=self.available_bytes,
            sizes=target.sizes,
            sizes_from_max_tokens=target.capped,
            pool_sizes=target.pool_sizes,
            layout=layout,
            resolution=target.resolution,
            notes=notes,
        )


def size_plan(
    ctx: KVCacheContext | KVCacheSettings,
    available_bytes: int,
    *,
    max_tokens: int | None = None,
    pool_max_tokens: int | None = None,
    pool_max_running_requests: int = 8,
    pool_max_mamba_cache_size: int | None = None,
) -> SizedPlan:
    """:func:`plan` up to the layout: select the strategy and size every pool (same arguments,
    same checks and refusals of the sizing); :meth:`SizedPlan.laid_out` finishes it."""
    ctx = as_settings(ctx)
    _check_arguments(ctx, available_bytes, max_tokens, pool_max_tokens, pool_max_running_requests,
                     pool_max_mamba_cache_size)  # fmt: skip
    if ctx.release.engine == VLLM:
        whole = _plan_vllm(ctx, available_bytes, max_tokens)
        return SizedPlan(ctx, available_bytes, whole=whole)
    if ctx.is_draft_worker:
        whole = _plan_draft_worker(
            ctx,
            available_bytes,
            max_tokens=max_tokens,
            pool_max_tokens=pool_max_tokens,
            pool_max_running_requests=pool_max_running_requests,
            pool_max_mamba_cache_size=pool_max_mamba_cache_size,
        )
        return SizedPlan(ctx, available_bytes, whole=whole)
    target = _size_target(ctx, available_bytes, max_tokens, pool_max_tokens, pool_max_running_requests,
                          pool_max_mamba_cache_size)  # fmt: skip
    return SizedPlan(ctx, available_bytes, target=target)


def _plan_vllm(ctx: KVCacheContext, available_bytes: int, max_tokens: int | None) -> Plan:
    """A vLLM deployment (``ctx.release.engine == "vllm"``): the vLLM strategy's whole answer.

    ``available_bytes`` is ``--kv-cache-memory-bytes``; SGLang's what-if pool sizes do not apply
    (vLLM allocates its ``kv_cache_tensors`` whole). ``sizes.max_total_num_tokens`` is vLLM's "GPU
    KV cache size", ``sizes.max_running_requests`` its ``max_num_seqs``.
    """
    from .vllm.strategies.engine_args import check_vllm_scope
    from .vllm.strategies.strategies import VLLMStrategy

    check_vllm_scope(ctx)  # the settings a vLLM plan cannot answer, before anything else
    configurator = select_configurator(ctx)
    if not isinstance(configurator, VLLMStrategy):
        raise UnsupportedConfigurationError(
            f"{type(configurator).__name__} is registered for vLLM contexts but is not a VLLMStrategy "
            "(kvstrategies.vllm.strategies.strategies): it cannot answer a vLLM plan"
        )
    if max_tokens is not None:
        configurator.refuse_max_tokens()
    planned = configurator.vllm_plan(available_bytes)
    sizes = configurator.sizes(planned)
    layout = configurator.layout(planned)
    resolution = Resolution(configurator, available_bytes, StateReservation(available_bytes), sizes, sizes, None)
    return Plan(configurator, available_bytes, sizes, None, sizes, layout, resolution, vllm=planned)


@dataclass(frozen=True)
class _TargetSizes:
    """A target rank's sizes before any layout: what :func:`plan` lays out and a draft adopts."""

    resolution: Resolution
    sizes: PoolSizes
    capped: PoolSizes | None
    pool_sizes: PoolSizes


def _size_target(
    ctx: KVCacheContext,
    available_bytes: int,
    max_tokens: int | None,
    pool_max_tokens: int | None,
    pool_max_running_requests: int,
    pool_max_mamba_cache_size: int | None,
) -> _TargetSizes:
    """Resolve, size and finalise a (non-draft) rank; the pools are not laid out here."""
    resolution = resolve(ctx, available_bytes)
    configurator = require_pool_configurator(resolution.configurator)
    reservation = reserve_state(configurator, available_bytes)
    profiled = profiled_token_count(configurator, reservation)
    first = profiled_sizes(configurator, reservation)
    own_sizes = with_speculative_headroom(configurator, first, reservation)
    sizes = finalize(configurator, own_sizes, profiled_tokens=profiled)
    capped = None
    if max_tokens is not None:
        own = sizes_for_max_tokens(configurator, max_tokens, reservation)
        if has_speculative_headroom(ctx):  # up to 0.5.6: min(profiled + headroom, cap)
            own = with_speculative_headroom(configurator, first, reservation, cap=max_tokens)
        capped = finalize(configurator, own, profiled_tokens=profiled)
    pool_sizes = capped or sizes
    if pool_max_tokens is not None:
        if pool_max_running_requests <= 0:
            raise KVCacheConfigError(f"pool_max_running_requests must be positive, got {pool_max_running_requests}")
        what_if = sizes_for_max_tokens(configurator, pool_max_tokens)
        if sizes.max_mamba_cache_size is not None:
            slots = pool_max_mamba_cache_size or 3 * pool_max_running_requests
            what_if = what_if.replace(max_mamba_cache_size=slots)
        requests = pool_max_running_requests
        if not REQUESTS_FROM_RESOLVED_TOKENS.holds(ctx.release):  # init_memory_pool caps a given count too
            requests = configurator.cap_max_running_requests(requests, what_if, user_requests=requests)
        pool_sizes = configurator.finalize_with_max_running_requests(what_if.replace(max_running_requests=requests))
    return _TargetSizes(resolution, sizes, capped, pool_sizes)


_CONTEXT_FIELDS = (
    "geometry", "kv_cache_dtype", "page_size", "parallel", "speculative", "device", "platform", "backends",
    "scheduling", "knobs", "is_draft_worker", "release",
)  # fmt: skip


def as_settings(ctx: object) -> KVCacheSettings:
    """The protocol's values of ``ctx`` read once into a validated :class:`KVCacheSettings`.

    A :class:`KVCacheSettings` is returned as is (it validated itself when built). An engine's
    own context object (any :class:`KVCacheContext`) is read field by field and every value
    goes through the same checks (types, ``page_size`` in ``[1, 2**20]``, the parallel layout's
    ranges...), so a bad engine value is a :class:`KVCacheConfigError` naming the field, never a
    ``ZeroDivisionError`` deep in a strategy; a property that raises (or recurses) is reported
    the same way. The plan then depends on this snapshot only: its ``at_pp_rank`` /
    ``target_context`` are the library's, so an engine whose ``target_context()`` returns a
    draft again cannot recurse.
    """
    if isinstance(ctx, KVCacheSettings):
        return ctx
    try:  # a runtime Protocol check reads every member: an engine property may raise here already
        conforms = isinstance(ctx, KVCacheContext)
    except Exception as exc:
        raise KVCacheConfigError(
            f"ctx of {type(ctx).__name__} cannot be read as a KVCacheContext ({type(exc).__name__}: {str(exc):.80})"
        ) from exc
    if not conforms:
        raise KVCacheConfigError(
            f"plan() needs a KVCacheContext (e.g. KVCacheSettings or kvstrategies.case.parse_case(...).settings), "
            f"got {type(ctx).__name__}"
        )
    values: dict[str, Any] = {}
    for name in _CONTEXT_FIELDS:
        try:
            values[name] = getattr(ctx, name)
        except Exception as exc:  # an engine property: any failure is the engine's bad value
            raise KVCacheConfigError(
                f"ctx.{name} of {type(ctx).__name__} cannot be read ({type(exc).__name__}: {str(exc):.80})"
            ) from exc
    return KVCacheSettings(**values)  # validates every value, naming the field


def _check_arguments(
    ctx: object,
    available_bytes: object,
    max_tokens: object,
    pool_max_tokens: object,
    pool_max_running_requests: object,
    pool_max_mamba_cache_size: object,
) -> None:
    """Types and ranges of :func:`plan`'s arguments (the context is checked by :func:`as_settings`)."""
    check_int(available_bytes, "available_bytes", minimum=1, maximum=MAX_INT64,
              fix="pass the KV budget in bytes, e.g. 40 * 2**30")  # fmt: skip
    check_opt_int(max_tokens, "max_tokens", minimum=1, maximum=MAX_INT64, fix="pass a token cap or None")
    check_opt_int(pool_max_tokens, "pool_max_tokens", minimum=1, maximum=MAX_INT64,
                  fix="pass a small what-if token count or None")  # fmt: skip
    check_int(pool_max_running_requests, "pool_max_running_requests", minimum=1, maximum=MAX_WHAT_IF_REQUESTS,
              fix="a what-if layout is a small size; pass e.g. 8 (the default)")  # fmt: skip
    check_opt_int(pool_max_mamba_cache_size, "pool_max_mamba_cache_size", minimum=1,
                  maximum=4 * MAX_WHAT_IF_REQUESTS, fix="pass a slot count or None (3 x requests)")  # fmt: skip


def _plan_draft_worker(
    ctx: KVCacheContext,
    available_bytes: int,
    *,
    max_tokens: int | None,
    pool_max_tokens: int | None,
    pool_max_running_requests: int,
    pool_max_mamba_cache_size: int | None,
) -> Plan:
    """A draft worker's own sizing beside the target sizes it adopts (KVCacheConfigurator._resolve_memory_pool_config,
    its draft branch).

    ``sizes`` (and ``sizes_from_max_tokens``) are the draft configurator's own
    ``calculate_pool_sizes`` results, finalised (as every plan's ``sizes``: docs/golden.md, "What a snapshot holds").
    SGLang's draft never uses them: it takes the target's finished sizes. So the target (same
    settings, ``is_draft_worker`` false) is planned, its final sizes are mapped by the draft's
    strategy (``derive_draft_sizes``: DCP widening, DSV4's zeroed compressed pools) into
    ``adopted_sizes``, and the draft's pools are laid out for those.
    """
    # the target's sizes only: a target whose own pool layout is refused still hands them over
    target = _size_target(ctx.target_context(), available_bytes, max_tokens, pool_max_tokens,
                          pool_max_running_requests, pool_max_mamba_cache_size)  # fmt: skip
    configurator = select_pool_configurator(ctx)
    reservation = reserve_state(configurator, available_bytes)
    profiled = profiled_token_count(configurator, reservation)
    sizes = finalize(configurator, profiled_sizes(configurator, reservation), profiled_tokens=profiled)
    capped = None
    if max_tokens is not None:
        capped = finalize(configurator, sizes_for_max_tokens(configurator, max_tokens, reservation),
                          profiled_tokens=profiled)  # fmt: skip
    # up to 0.5.8 the target hands its profiled count and the draft applies the user's cap (a what-if's too)
    target_profiled = profiled_token_count(require_pool_configurator(target.resolution.configurator),
                                           target.resolution.reservation)  # fmt: skip

    def handed(cap: int | None) -> int:
        return target_profiled if cap is None else min(target_profiled, cap)

    adopted = configurator.derive_draft_sizes(target.capped or target.sizes, handed_tokens=handed(max_tokens))
    final = configurator.derive_draft_sizes(target.resolution.sizes,
                                            handed_tokens=handed(ctx.scheduling.max_total_tokens))  # fmt: skip
    resolution = Resolution(configurator, available_bytes, target.resolution.reservation, sizes, final, None)
    pool_sizes = configurator.derive_draft_sizes(target.pool_sizes, handed_tokens=handed(pool_max_tokens or max_tokens))
    return Plan(
        configurator=configurator,
        available_bytes=available_bytes,
        sizes=sizes,
        sizes_from_max_tokens=capped,
        pool_sizes=pool_sizes,
        layout=_layout(configurator, pool_sizes, sizes, capped, adopted),
        resolution=resolution,
        adopted_sizes=adopted,
    )


def _device_reachable(torch: Any, kind: str) -> bool:
    """Whether this torch can allocate on a ``kind`` device (``torch.<kind>.is_available()``;
    MPS under ``torch.backends.mps``); a backend with no such check is tried as it is."""
    module = torch.backends.mps if kind == "mps" else getattr(torch, kind, None)
    check = getattr(module, "is_available", None)
    return True if not callable(check) else bool(check())


def build(
    planned: Plan,
    device: str = "meta",
    *,
    allocator: Any = None,
    use_triton: bool | None = None,
    check_bounds: bool = True,
) -> KVPools:
    """Allocate exactly ``planned.layout`` on ``device`` (imports torch), as typed pools.

    ``token_to_kv_pool`` / ``req_to_token_pool`` are the typed pools of
    :mod:`kvstrategies.pools.runtime` (``set_kv_buffer``, ``get_key_buffer``, ``alloc``, ...;
    still indexable by buffer name); ``allocator`` is built from :attr:`Plan.allocator_spec`
    unless one is passed (a draft worker reuses the target's). ``use_triton`` and
    ``check_bounds`` are handed to every pool (see :class:`~kvstrategies.pools.runtime.TypedPool`).

    On ``"meta"`` nothing is allocated: every tensor (host-side ones such as ``req_generation``
    included) is a meta tensor and the allocators' free lists are meta tensors or lazy ranges, so
    host memory does not grow with the plan's sizes.

    A device torch does not know or cannot reach, and running out of device memory, raise
    :class:`KVCacheConfigError` (:class:`InsufficientMemoryError` for the latter); on ``"cpu"`` a
    plan larger than the host's available memory (:mod:`kvstrategies.core.host_memory`) is refused with
    :class:`InsufficientMemoryError` before anything is allocated.
    """
    check_instance(planned, Plan, "planned", "get one from kvstrategies.plan(ctx, available_bytes)")
    if use_triton is not None:
        check_bool(use_triton, "use_triton")
    check_bool(check_bounds, "check_bounds")
    torch = import_torch()
    try:
        target = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise KVCacheConfigError(
            f"device {device!r} is not a torch device; use 'meta', 'cpu', 'cuda' or 'cuda:N' ({exc})"
        ) from exc
    if target.type == "cuda" and not torch.cuda.is_available():
        raise UnsupportedConfigurationError(
            f"device {device!r}: this torch sees no CUDA device; build on 'meta' to check a plan without one"
        )
    if target.type not in ("cpu", "meta", "cuda") and not _device_reachable(torch, target.type):
        raise UnsupportedConfigurationError(
            f"device {device!r}: this torch cannot reach a {target.type} device (not built for it, or none "
            "attached); build on 'meta' to check a plan without one"
        )
    if target.type == "cpu":  # refuse what the host cannot hold instead of meeting the OOM killer
        from .core.host_memory import available_host_bytes

        room = available_host_bytes()
        if room is not None and planned.planned_bytes > room:
            raise InsufficientMemoryError(
                f"building on 'cpu' would allocate the planned {planned.planned_bytes:,} bytes "
                f"({planned.planned_bytes / 2**30:.1f} GiB) but this host has {room / 2**30:.1f} GiB available; "
                "build on 'meta' to check the plan, or plan with a smaller available_bytes"
            )
    try:
        from .pools.runtime.factory import build_typed_pools

        return build_typed_pools(planned.layout, device, planned.binding, allocator=allocator, use_triton=use_triton,
                                 check_bounds=check_bounds)  # fmt: skip
    except torch.cuda.OutOfMemoryError as exc:
        raise InsufficientMemoryError(
            f"allocating the planned {planned.planned_bytes:,} bytes on {device!r} ran out of memory; "
            "plan with a smaller available_bytes"
        ) from exc
    except (AssertionError, NotImplementedError) as exc:  # torch's lazy init of a backend it was not built with
        raise UnsupportedConfigurationError(
            f"device {device!r}: this torch cannot allocate there ({type(exc).__name__}: {str(exc)[:200]}); "
            "build on 'meta' to check a plan without one"
        ) from exc
