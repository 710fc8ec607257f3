"""The fix search lays out only what it offers (planner.fixes): every changed deployment is sized,
and its pools are laid out (kvstrategies.api.SizedPlan.laid_out) only when the search would offer
it, so a candidate whose layout is refused is never offered, exactly as when every candidate was
planned whole.

Llama-4-Scout on 8 x H200 does not hold its 10,485,760-token context; the search sizes FP8 KV,
FP8 weights, ``--mem-fraction-static 0.95`` (still short: no fix), a shorter context, TP 8 x PP 2,
then the larger GPUs in order of memory: B200 and GB200 gain but stay short, B300 fits.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kvstrategies.errors import UnsupportedConfigurationError
from kvstrategies.planner import DeploymentRequest, plan_deployment
from kvstrategies.planner.deployment import SizedDeployment, replan_deployment
from kvstrategies.planner.fit import FitReport
from kvstrategies.planner.fixes import Fix, suggest_fixes
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.sglang.budget import KVBudget

REQ = DeploymentRequest("llama-4-scout", {"preset": "llama-4-scout"}, gpu=lookup_gpu("H200"), tp_size=8)


class Watched:
    """A sized candidate whose layout is recorded, and refused when ``refuse`` says so."""

    def __init__(self, sized: SizedDeployment, laid_out: list[DeploymentRequest], refuse: bool) -> None:
        self.sized, self.log, self.refuse = sized, laid_out, refuse

    @property
    def fit(self) -> FitReport:
        return self.sized.fit

    @property
    def budget(self) -> KVBudget:
        return self.sized.budget

    def laid_out(self) -> object:
        self.log.append(self.sized.request)
        if self.refuse:
            raise UnsupportedConfigurationError("this pool cannot be laid out (test)")
        return self.sized.laid_out()


def _search(refuse: Callable[[DeploymentRequest], bool] = lambda req: False) -> tuple[dict[str, Fix], list[str]]:
    laid_out: list[DeploymentRequest] = []

    def replan(changed: DeploymentRequest) -> Watched:
        return Watched(replan_deployment(changed), laid_out, refuse(changed))

    current = plan_deployment(REQ, suggest=False)
    assert not current.fit.context_fits
    fixes = {fix.setting: fix for fix in suggest_fixes(current, REQ, replan)}
    return fixes, [_change(req) for req in laid_out]


def _change(req: DeploymentRequest) -> str:
    """What a laid-out request changed, in words."""
    if req.kv_cache_dtype != REQ.kv_cache_dtype:
        return f"kv {req.kv_cache_dtype}"
    if req.weight_quantization != REQ.weight_quantization:
        return f"weights {req.weight_quantization}"
    if req.mem_fraction_static != REQ.mem_fraction_static:
        return f"mfs {req.mem_fraction_static}"
    if req.context_length != REQ.context_length:
        return "context"
    if (req.tp_size, req.pp_size) != (REQ.tp_size, REQ.pp_size):
        return f"tp {req.tp_size} pp {req.pp_size}"
    assert req.gpu is not None
    return f"gpu {req.gpu.name}"


def _gpu(req: DeploymentRequest) -> str:
    return "" if req.gpu is None else req.gpu.name


def test_only_the_offered_fixes_are_laid_out() -> None:
    fixes, laid_out = _search()
    assert sorted(fixes) == ["context_length", "gpu", "kv_cache_dtype", "tp_size", "weight_quantization"]
    assert fixes["gpu"].value == "B300" and fixes["gpu"].context_fits
    # the fraction 0.95 (short), B200 and GB200 (gain, short, then B300 fits) are sized only
    assert laid_out == ["kv fp8_e4m3", "weights fp8", "context", "tp 8 pp 2", "gpu B300"]


def test_a_fitting_gpu_whose_layout_is_refused_is_passed_over_for_the_next() -> None:
    fixes, laid_out = _search(lambda req: _gpu(req) == "B300")
    assert fixes["gpu"].value == "GB300" and fixes["gpu"].context_fits
    assert laid_out[-2:] == ["gpu B300", "gpu GB300"]


def test_without_a_fitting_gpu_the_smallest_that_gains_and_lays_out_is_offered() -> None:
    fixes, laid_out = _search(lambda req: _gpu(req) in ("B300", "GB300"))
    assert fixes["gpu"].value == "B200" and not fixes["gpu"].context_fits
    assert laid_out[-3:] == ["gpu B300", "gpu GB300", "gpu B200"]
    fixes, laid_out = _search(lambda req: _gpu(req) in ("B300", "GB300", "B200"))
    assert fixes["gpu"].value == "GB200"
    assert laid_out[-4:] == ["gpu B300", "gpu GB300", "gpu B200", "gpu GB200"]
    fixes, _ = _search(lambda req: _gpu(req) not in ("", "H200"))
    assert "gpu" not in fixes


def test_a_refused_layout_removes_that_fix_only() -> None:
    fixes, _ = _search(lambda req: req.kv_cache_dtype == "fp8_e4m3")
    assert "kv_cache_dtype" not in fixes
    assert sorted(fixes) == ["context_length", "gpu", "tp_size", "weight_quantization"]
    fixes, _ = _search(lambda req: req.pp_size == 2)
    assert "tp_size" not in fixes


def test_the_offered_fixes_equal_a_search_that_plans_every_candidate_whole() -> None:
    current = plan_deployment(REQ, suggest=False)
    whole = suggest_fixes(current, REQ, lambda changed: plan_deployment(changed, suggest=False))
    assert {fix.setting: fix for fix in whole} == _search()[0]


def test_a_sized_plan_holds_exactly_one_of_target_sizes_and_a_whole_plan() -> None:
    from kvstrategies.api import SizedPlan, size_plan
    from kvstrategies.errors import KVCacheConfigError

    from ..helpers import GIB, case_settings

    sized = size_plan(case_settings("llama-3.1-8b"), 16 * GIB)
    assert sized.target is not None and sized.whole is None and sized.sizes == sized.laid_out().resolution.sizes
    with pytest.raises(KVCacheConfigError, match="either a target rank's sizes or a whole plan"):
        SizedPlan(sized.ctx, sized.available_bytes)
    with pytest.raises(KVCacheConfigError, match="not both"):
        SizedPlan(sized.ctx, sized.available_bytes, target=sized.target, whole=sized.laid_out())
