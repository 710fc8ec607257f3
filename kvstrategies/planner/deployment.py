"""The planner pipeline: request -> launch defaults -> case -> budget -> plan -> breakdown,
fit, fixes. Each step is its own module; this one only runs them in order.

Everything here is torch-free: ``kvstrategies plan`` answers in milliseconds for any preset
(``tools/bench_plan.py`` measures it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

from ..api import Plan, SizedPlan, size_plan
from ..case import Case, at_budget, parse_case
from ..core.sizing import PoolSizes
from ..pools.layout import KVPoolsLayout
from ..sglang.budget import KVBudget, kv_budget
from ..sglang.launch.apply import case_fields, resolve_launch
from ..sglang.launch.defaults import AppliedDefault, LaunchResolution
from ..sglang.launch_refusals import admit
from ..strategies.base import PoolConfigurator, StateReservation
from .breakdown import Breakdown, build_breakdown
from .config_fields import check_budget_sane, validate_planner_inputs
from .fit import FitReport, fit_report
from .model_reading import ModelReading
from .request import DeploymentRequest, model_dtype_name

if TYPE_CHECKING:
    from .fixes import Fix


@dataclass(frozen=True)
class DeploymentPlan:
    """A planned deployment with everything the planner reports.

    ``sizes`` / ``layout`` are the final ones (user token cap and PP minimum applied), which
    may differ from ``planned.pool_sizes`` (what ``plan --json``'s ``pools`` describe).
    ``request`` is ``None`` for a plan made from a case file. ``breakdown`` is worked out on
    first use (the fix search's re-plans read only the fit and the budget).
    """

    request: DeploymentRequest | None
    launch: LaunchResolution | None
    budget: KVBudget
    case: Case
    planned: Plan
    sizes: PoolSizes
    layout: KVPoolsLayout
    fit: FitReport
    fixes: tuple[Fix, ...] = ()

    derived: tuple[AppliedDefault, ...] = ()

    @cached_property
    def breakdown(self) -> Breakdown:
        """Where one rank's memory goes (:func:`~kvstrategies.planner.breakdown.build_breakdown`),
        the draft worker's pools included (:mod:`.draft_pool`)."""
        from .draft_pool import draft_pools

        draft = draft_pools(self.case) if self.request is not None else None
        undercounted = bool(self.planned.notes)  # the release's own sizing prices less than its pools store
        return build_breakdown(self.budget, self.layout, draft, undercounted=undercounted)

    def laid_out(self) -> DeploymentPlan:
        """Itself: its pools are laid out (so a whole plan is a fix-search candidate too, :class:`SizedDeployment`)."""
        return self

    @property
    def defaults(self) -> tuple[AppliedDefault, ...]:
        """Every default applied: SGLang's launch declarations in pipeline order (last one wins),
        then the values the plan derived for settings left out (:func:`derived_defaults`)."""
        return (() if self.launch is None else self.launch.applied) + self.derived


def final_layout(planned: Plan) -> tuple[PoolSizes, KVPoolsLayout]:
    """The final sizes (``resolution.sizes``) and their layout (reused when unchanged)."""
    sizes = planned.resolution.sizes
    configurator = planned.configurator
    if sizes == planned.pool_sizes or not isinstance(configurator, PoolConfigurator):  # vLLM: its one layout
        return sizes, planned.layout
    return sizes, configurator.layout(sizes)


def derived_defaults(
    req: DeploymentRequest | None, launch: LaunchResolution | None, planned: Plan, sizes: PoolSizes
) -> tuple[AppliedDefault, ...]:
    """Settings left out that no launch step declares: the library defaults without a GPU,
    what ``auto`` KV resolved to (sglang.srt.mem_cache.kv_cache_dtype.configure_kv_cache_dtype), and the derived
    ``max_running_requests``."""
    if req is None:
        return ()
    out: list[AppliedDefault] = []
    if launch is None:
        if req.kv_cache_dtype is None:
            out.append(AppliedDefault("kv_cache_dtype", "auto", "not given, no --gpu: SGLang's field default"))
        if req.page_size is None:
            out.append(AppliedDefault("page_size", 1, "not given, no --gpu: SGLang's field default"))
    kv = planned.ctx.kv_cache_dtype
    asked_auto = req.kv_cache_dtype in (None, "auto") and (launch is None or launch.kv_cache_dtype == "auto")
    if kv.name == "auto" or (asked_auto and planned.ctx.geometry.checkpoint_kv_fp8):
        source = "the checkpoint's FP8 KV quantization" if planned.ctx.geometry.checkpoint_kv_fp8 else "the model dtype"
        why = f"auto resolves to {source} (sglang.srt.mem_cache.kv_cache_dtype.configure_kv_cache_dtype)"
        out.append(AppliedDefault("kv_cache_dtype", str(kv.dtype), why))
    given = req.max_running_requests if launch is None else launch.max_running_requests
    if given is None:
        reason = (
            "derived from the KV size: min(clamp(int(T / context_len * 512), 2048, 4096), T // 2) "
            "(sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator.resolve_max_num_reqs)"
        )
        if sizes.max_mamba_cache_size is not None:
            reason += ", then capped by the Mamba state slots"
        out.append(AppliedDefault("max_running_requests", sizes.max_running_requests, reason))
    return tuple(out)


def _assemble(
    request: DeploymentRequest | None,
    launch: LaunchResolution | None,
    budget: KVBudget,
    case: Case,
    planned: Plan,
    fit: FitReport,
    config_defaults: tuple[AppliedDefault, ...] = (),
) -> DeploymentPlan:
    sizes, layout = final_layout(planned)
    return DeploymentPlan(
        request=request,
        launch=launch,
        budget=budget,
        case=case,
        planned=planned,
        sizes=sizes,
        layout=layout,
        fit=fit,
        fixes=(),
        derived=(*config_defaults, *derived_defaults(request, launch, planned, sizes)),
    )


@dataclass(frozen=True)
class SizedDeployment:
    """A deployment sized, its pools not laid out yet: what the fix search reads of a changed
    deployment (its fit and budget); :meth:`laid_out` makes it the :class:`DeploymentPlan`
    (the layout and its refusals, :meth:`kvstrategies.api.SizedPlan.laid_out`)."""

    request: DeploymentRequest
    launch: LaunchResolution | None
    budget: KVBudget
    case: Case
    sized: SizedPlan
    fit: FitReport
    config_defaults: tuple[AppliedDefault, ...] = ()

    def laid_out(self) -> DeploymentPlan:
        planned = self.sized.laid_out()
        return _assemble(self.request, self.launch, self.budget, self.case, planned, self.fit, self.config_defaults)


def state_reserved_fields(fields: Mapping[str, Any], budget_bytes: int) -> dict[str, Any]:
    """Case fields for a budget *before* state reservations (the GPU step's ``rest``).

    ``available_bytes`` of a case is what SGLang hands ``calculate_pool_sizes``: for Mamba hybrids
    the state reservation comes out first (SGLang's ``KVCacheConfigurator._handle_max_mamba_cache``).
    The planner runs it here and pins the slot count it chose (``max_mamba_cache_size``, global:
    per-DP slots times attention DP), so the plan sizes exactly that reservation's KV budget.
    """
    return _reserved(fields, budget_bytes)[0]


def state_reserved_case(fields: Mapping[str, Any], budget_bytes: int) -> Case:
    """``parse_case(state_reserved_fields(fields, budget_bytes))``, parsing the settings once when
    the reservation changed only the budget (:func:`kvstrategies.case.at_budget`)."""
    out, before = _reserved(fields, budget_bytes)
    return at_budget(before, out) if out.keys() == fields.keys() | {"available_bytes"} else parse_case(out)


def _reserved(fields: Mapping[str, Any], budget_bytes: int) -> tuple[dict[str, Any], Case]:
    from ..strategies.registry import select_configurator

    before = parse_case({**fields, "available_bytes": budget_bytes})
    settings = before.settings
    strategy = select_configurator(settings)
    # a vLLM budget (--kv-cache-memory-bytes) reserves nothing before its KV blocks
    reservation = (strategy.reserve_before_kv(budget_bytes) if isinstance(strategy, PoolConfigurator)
                   else StateReservation(budget_bytes))  # fmt: skip
    out = {**fields, "available_bytes": reservation.kv_available_bytes}
    slots = reservation.size_fields.get("max_mamba_cache_size")
    if slots is not None and fields.get("max_mamba_cache_size") is None:
        out["max_mamba_cache_size"] = slots * settings.parallel.attn_dp_size
    return out, before


def plan_deployment(
    req: DeploymentRequest, *, suggest: bool = True, model: ModelReading | None = None
) -> DeploymentPlan:
    """Plan ``req`` end to end; ``suggest`` also searches the fixes when the context does not fit.
    ``model``: the reading of ``req``'s config when the caller has one (a sweep plans one model
    many times), else a new one.

    What SGLang would refuse at launch is refused first (:func:`.refusals.admit`)."""
    model = ModelReading(req.hf_config()) if model is None else model
    validate_planner_inputs(req, model.config)  # before any reader (the refusals' parse included) loops
    result = _size_deployment(req, model).laid_out()
    if not suggest or result.fit.context_fits:
        return result
    from .fixes import suggest_fixes  # a deployment that fits searches no fixes

    fixes = suggest_fixes(result, req, partial(replan_deployment, model=model))
    return replace(result, fixes=fixes)


def replan_deployment(changed: DeploymentRequest, *, model: ModelReading | None = None) -> SizedDeployment:
    """A changed request of the fix search (:mod:`.fixes`), sized without fixes; the search lays
    out the ones it offers. Its fields are not checked again: the search built it with
    :meth:`DeploymentRequest.replace`, which checks them (``DeploymentRequest.__post_init__``).
    ``model``: the reading of the config the search plans (the same for every change)."""
    model = ModelReading(changed.hf_config()) if model is None else model
    validate_planner_inputs(changed, model.config, request_checked=True)
    return _size_deployment(changed, model)


def _size_deployment(req: DeploymentRequest, model: ModelReading) -> SizedDeployment:
    req, model, config_defaults = admit(req, model)
    config = model.config
    launch = resolve_launch(req, config)
    fields = case_fields(req, model_dtype_name(req, config), launch)
    budget = kv_budget(launched_request(req, launch), model, launch)
    check_budget_sane(budget, None if req.gpu is None else req.gpu.capacity_bytes)
    case = state_reserved_case(fields, budget.available_bytes)
    sized = size_plan(case.settings, case.available_bytes, max_tokens=case.max_tokens)
    fit = fit_report(sized.resolution.configurator.ctx, sized.sizes, req.request_lengths)
    return SizedDeployment(req, launch, budget, case, sized, fit, config_defaults)


def launched_request(req: DeploymentRequest, launch: LaunchResolution | None) -> DeploymentRequest:
    """``req`` as its launch resolved it, for the budget: a launch that forces DP attention (DSA up to
    SGLang 0.5.5) replicates the attention weights over its DP ranks."""
    forced_dp = None if launch is None else launch.attn_dp_size
    return req if forced_dp is None or forced_dp == req.attn_dp_size else req.replace(attn_dp_size=forced_dp)


def deployment_from_case(case: Case, planned: Plan, lengths: tuple[int, ...] = ()) -> DeploymentPlan:
    """The planner's view of a case-file plan (budget given, no launch defaults, no fixes)."""
    budget = KVBudget(
        available_bytes=case.available_bytes,
        source="given",
        assumptions=("KV budget per rank from the case file (available_bytes)",),
    )
    return _assemble(None, None, budget, case, planned, fit_report(planned.ctx, planned.resolution.sizes, lengths))
