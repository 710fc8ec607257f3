"""The strategy contracts: ``Strategy`` (what the registry selects) and SGLang's ``PoolConfigurator``.

A :class:`Strategy` is one engine's sizing of one architecture family for one
:class:`~kvstrategies.context.KVCacheContext`, the only thing it reads. SGLang's strategies are
:class:`PoolConfigurator`: each turns a byte budget into token counts through its cost, a
:class:`~kvstrategies.core.cost.CacheCost` (``bytes = T * slope + intercept``, the draft's cost added
to the target's) and its inverse, finalises them with the request count, describes the pools as
pure data (``layout``) and allocates exactly that (``build``). The vLLM strategies have an
interface of their own (:class:`kvstrategies.vllm.strategies.strategies.VLLMStrategy`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from ..context import DisaggregationMode, KVCacheContext, context_len, draft_loc_space_scale
from ..core.releases import SGLANG, ByRelease, ReleaseRule, span
from ..core.sizing import PoolSizes
from ..pools.basic import REQ_GENERATION_COUNTER, REQ_PADDING_ROW, req_to_token_layout
from ..pools.layout import KVPoolsLayout, PoolLayout
from .request_math import req_to_token_max_context_len, req_to_token_pre_alloc

if TYPE_CHECKING:
    from ..pools.build import KVPools


@dataclass(frozen=True)
class StateReservation:
    """Bytes taken for request-scoped state before KV sizing, and the sizes it fixes.

    Hybrid linear models reserve their Mamba state here (KVCacheConfigurator._handle_max_mamba_cache); the rest of the
    budget (``kv_available_bytes``) goes to the KV configurator.
    """

    kv_available_bytes: int
    size_fields: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


class Strategy(ABC):
    """One engine's sizing of one architecture family, for one context (the registry's unit)."""

    #: short family label for listings and the CLI
    family: ClassVar[str] = ""
    #: the engine whose sizing this strategy reproduces: the registry asks a strategy only about
    #: contexts of that engine (``ctx.release.engine``)
    engine: ClassVar[str] = SGLANG

    def __init__(self, ctx: KVCacheContext) -> None:
        self.ctx = ctx

    @classmethod
    @abstractmethod
    def is_applicable(cls, ctx: KVCacheContext) -> bool:
        """Whether this strategy sizes ``ctx`` (the registry asks in its order, engine by engine)."""

    def engine_class_name(self) -> str:
        """The engine's class whose numbers this strategy reproduces (plans report it); this class's name."""
        return type(self).__name__


#: SGLang sizes through one configurator class per family (``model_executor/pool_configurator.py``); before,
#: ``ModelRunnerKVCacheMixin`` profiles and sizes inline, so a plan names that class
POOL_CONFIGURATOR_CLASSES = ReleaseRule(
    "pool-configurator-classes",
    span("0.5.11"),
    "the pools are sized by a configurator class per family (before: ModelRunnerKVCacheMixin sizes them inline)",
    "sglang.srt.model_executor.pool_configurator.create_memory_pool_configurator "
    "(before: model_runner_kv_cache_mixin.ModelRunnerKVCacheMixin._resolve_memory_pool_config)",
)
#: the class a plan names for SGLang's sizing where :data:`POOL_CONFIGURATOR_CLASSES` does not hold
RUNNER_SIZING_CLASS = "ModelRunnerKVCacheMixin"


class PoolConfigurator(Strategy):
    """One architecture family's SGLang sizing and pool layout (docs/maintainers.md, "Sizing flow")."""

    #: the SGLang class whose numbers this strategy reproduces: SGLang has four concrete
    #: configurators, so Mamba hybrids and Ascend layouts (Default numbers) say
    #: ``DefaultPoolConfigurator``; a :class:`~kvstrategies.core.releases.ByRelease` where SGLang renamed
    #: it; empty means the same name as this class (plugins)
    sglang_configurator: ClassVar[str | ByRelease[str]] = ""

    def sglang_class_name(self) -> str:
        """SGLang's class for these numbers in this plan's release (else this class's name)."""
        name = self.sglang_configurator
        if self.ctx.release.engine == SGLANG and not POOL_CONFIGURATOR_CLASSES.holds(self.ctx.release):
            return RUNNER_SIZING_CLASS
        if isinstance(name, ByRelease):
            return name.at(self.ctx.release)
        return name or type(self).__name__

    def engine_class_name(self) -> str:
        """:meth:`sglang_class_name`."""
        return self.sglang_class_name()

    def engine_undercounts(self) -> tuple[ReleaseRule, ...]:
        """The release rules this plan's release lacks whose absence makes the engine's own sizing price less
        than its pools store (its pools then exceed the budget, and the engine still plans them); empty here."""
        return ()

    # ---- selection ---------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def is_applicable(cls, ctx: KVCacheContext) -> bool:
        """Whether this strategy sizes ``ctx`` (the registry asks in create_memory_pool_configurator order)."""

    # ---- sizing ------------------------------------------------------------------------
    @property
    @abstractmethod
    def cell_size_bytes(self) -> int | float:
        """Bytes per unit of ``max_total_num_tokens`` (the value a plan reports: the configurator's
        ``cell_size`` in SGLang's pool_configurator; the slope of the strategy's ``CacheCost``)."""

    @abstractmethod
    def calculate_pool_sizes(self, available_bytes: int, page_size: int) -> PoolSizes:
        """Profiling path: a byte budget (after state reservations) to token counts."""

    @abstractmethod
    def calculate_pool_sizes_from_max_tokens(self, max_total_num_tokens: int, page_size: int) -> PoolSizes:
        """Constraint path: re-derive every sub-pool for a (smaller) token count."""

    def finalize_with_max_running_requests(self, sizes: PoolSizes) -> PoolSizes:
        """Sizes that depend on the resolved request count; identity except DSV4."""
        return sizes

    def reserve_state_bytes(self, available_bytes: int) -> StateReservation:
        """The state sizes that go with SGLang's KV budget ``available_bytes``; nothing by default.

        ``available_bytes`` is what SGLang hands ``calculate_pool_sizes`` (any state reservation
        already out of it), so ``kv_available_bytes`` is always ``available_bytes``.
        """
        return StateReservation(available_bytes)

    def reserve_before_kv(self, budget_bytes: int) -> StateReservation:
        """From a budget *before* state reservations (a planner's ``rest``) to SGLang's KV budget."""
        return StateReservation(budget_bytes)

    def derive_draft_sizes(self, target_sizes: PoolSizes, *, handed_tokens: int | None = None) -> PoolSizes:
        """A draft worker's sizes from the target's finished ones (KVCacheConfigurator._derive_pool_sizes,
        KVCacheConfigurator._resolve_memory_pool_config draft branch).

        Token counts are multiplied by ``loc_space_scale`` (the DCP size for a draft under DCP:
        it indexes the target allocator's DCP-widened ids); the hybrid counts only for hybrid SWA.
        ``handed_tokens``: the count an older target hands its draft (hybrid SWA re-splits it; unused here).
        """
        scale = draft_loc_space_scale(self.ctx)

        def scaled(value: int | None) -> int | None:
            return None if value is None else value * scale

        return target_sizes.replace(
            max_total_num_tokens=target_sizes.max_total_num_tokens * scale,
            full_max_total_num_tokens=scaled(target_sizes.full_max_total_num_tokens),
            swa_max_total_num_tokens=scaled(target_sizes.swa_max_total_num_tokens),
        )

    def cap_max_running_requests(self, requests: int, sizes: PoolSizes, *, user_requests: int | None = None) -> int:
        """Further caps on ``max_running_requests`` (Mamba slots); none by default. ``user_requests``: the
        ``--max-running-requests`` a cap reads (default: the context's)."""
        return requests

    # ---- layout and build --------------------------------------------------------------
    @abstractmethod
    def token_to_kv_layout(self, sizes: PoolSizes) -> PoolLayout:
        """The token-to-KV pool for ``sizes`` as pure data."""

    def req_to_token_layout(self, sizes: PoolSizes) -> PoolLayout:
        """The request table: ``(R + 1 [+ pre_alloc], context_len + extra)`` int32
        (KVCacheConfigurator._build_req_to_token_pool)."""
        requests = _require_requests(sizes)
        pre_alloc = req_to_token_pre_alloc(self.ctx, requests)
        return req_to_token_layout(
            max_running_requests=requests,
            max_context_len=req_to_token_max_context_len(self.ctx),
            pre_alloc_size=pre_alloc,
            # SGLang builds DecodeReqToTokenPool for every decode role, even with no extra rows
            pool_class="DecodeReqToTokenPool" if self.ctx.scheduling.disaggregation_mode is DisaggregationMode.DECODE
            else "ReqToTokenPool",
            generation_counter=REQ_GENERATION_COUNTER.holds(self.ctx.release),
            padding_row=REQ_PADDING_ROW.holds(self.ctx.release),
        )

    def extra_layouts(self, sizes: PoolSizes) -> tuple[PoolLayout, ...]:
        """Pools beyond the request table and the token-to-KV pool; none by default."""
        return ()

    def layout(self, sizes: PoolSizes) -> KVPoolsLayout:
        """Everything ``build(sizes, device)`` allocates, as pure data (no torch)."""
        return KVPoolsLayout(
            req_to_token=self.req_to_token_layout(sizes),
            token_to_kv=self.token_to_kv_layout(sizes),
            extra=self.extra_layouts(sizes),
        )

    def build(self, sizes: PoolSizes, device: str = "meta") -> KVPools:
        """Allocate exactly :meth:`layout` on ``device`` (``"meta"`` needs no memory) as typed pools
        with their allocator (:func:`kvstrategies.pools.runtime.build_typed_pools`)."""
        from ..pools.binding import pool_binding
        from ..pools.runtime.factory import build_typed_pools

        return build_typed_pools(self.layout(sizes), device, pool_binding(self.ctx, sizes))

    # ---- helpers -----------------------------------------------------------------------
    @property
    def context_len(self) -> int:
        return context_len(self.ctx)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(cell_size_bytes={self.cell_size_bytes!r})"


def require_pool_configurator(strategy: Strategy) -> PoolConfigurator:
    """``strategy`` where SGLang's sizing steps need a :class:`PoolConfigurator`; a strategy of another
    engine (the vLLM ones) has none of those steps, and is refused."""
    if not isinstance(strategy, PoolConfigurator):
        from ..errors import UnsupportedConfigurationError

        raise UnsupportedConfigurationError(
            f"{type(strategy).__name__} sizes {strategy.engine} contexts, not through SGLang's pool "
            "configurator steps; plan it with kvstrategies.plan"
        )
    return strategy


def _require_requests(sizes: PoolSizes) -> int:
    from ..errors import KVCacheConfigError

    if sizes.max_running_requests is None:
        raise KVCacheConfigError(
            "sizes have no max_running_requests yet; finalise them first "
            "(kvstrategies.strategies.resolve.finalize or plan())"
        )
    return sizes.max_running_requests
