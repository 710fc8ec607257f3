"""Settings that would make a request of the model's whole context fit, each verified by
planning the changed deployment again (never by extrapolating a formula).

Candidates, in order: an FP8 KV cache (when the cache is 16-bit or wider), the smallest larger
TP size up to 8 (the per-rank budget is recomputed from the GPU; a given ``--available-bytes``
is kept per rank, a given ``--weight-bytes`` scaled by ``tp / new_tp``), the smallest
``--mem-fraction-static`` (GPU mode, in steps of 0.001 up to 0.95), and, always, a shorter
``--context-length`` equal to the longest request that fits now.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..api import Plan
from ..errors import KVCacheConfigError
from .budget import KVBudget
from .fit import FitReport
from .request import DeploymentRequest


class PlannedDeployment(Protocol):
    """What the fixes read of a planned deployment (``planner.deployment.DeploymentPlan`` is one).

    A protocol, so that this module does not import the deployment module that calls it.
    """

    @property
    def fit(self) -> FitReport: ...

    @property
    def budget(self) -> KVBudget: ...

    @property
    def planned(self) -> Plan: ...


Replan = Callable[[DeploymentRequest], PlannedDeployment]
MAX_SUGGESTED_TP = 8
MAX_SUGGESTED_MFS = 0.95


@dataclass(frozen=True)
class Fix:
    """One change and what the re-planned deployment gives with it."""

    setting: str
    value: str | int | float
    flag: str
    capacity_tokens: int
    max_fitting_length: int
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.setting, "value": self.value, "flag": self.flag,
                "capacity_tokens": self.capacity_tokens, "max_fitting_length": self.max_fitting_length,
                "note": self.note}  # fmt: skip


def _try(replan: Replan, req: DeploymentRequest) -> PlannedDeployment | None:
    try:
        return replan(req)
    except KVCacheConfigError:
        return None


def _fix(setting: str, value: str | int | float, flag: str, plan: PlannedDeployment, note: str = "") -> Fix:
    return Fix(setting, value, flag, plan.fit.capacity_tokens, plan.fit.max_fitting_length, note)


def _kv_fp8(current: PlannedDeployment, req: DeploymentRequest, replan: Replan) -> Fix | None:
    if current.planned.ctx.kv_cache_dtype.itemsize < 2:
        return None
    changed = _try(replan, req.replace(kv_cache_dtype="fp8_e4m3"))
    if changed is None or not changed.fit.context_fits:
        return None
    return _fix("kv_cache_dtype", "fp8_e4m3", "--kv-cache-dtype fp8_e4m3", changed)


def _tensor_parallel(req: DeploymentRequest, replan: Replan) -> Fix | None:
    tp = req.tp_size * 2
    while tp <= MAX_SUGGESTED_TP:
        weights = None if req.weight_bytes is None else req.weight_bytes * req.tp_size // tp
        changed = _try(replan, req.replace(tp_size=tp, weight_bytes=weights))
        if changed is not None and changed.fit.context_fits:
            note = "same KV budget per rank (--available-bytes)" if req.available_bytes is not None else ""
            return _fix("tp_size", tp, f"--tp {tp}", changed, note)
        tp *= 2
    return None


def _mem_fraction(current: PlannedDeployment, req: DeploymentRequest, replan: Replan) -> Fix | None:
    mfs = current.budget.mem_fraction_static
    if req.available_bytes is not None or mfs is None:
        return None
    start, stop = round(mfs * 1000) + 1, round(MAX_SUGGESTED_MFS * 1000)
    if start > stop:
        return None

    def plan_at(thousandths: int) -> PlannedDeployment | None:
        changed = _try(replan, req.replace(mem_fraction_static=thousandths / 1000))
        return changed if changed is not None and changed.fit.context_fits else None

    if plan_at(stop) is None:
        return None
    lo, hi = start, stop  # binary search for the smallest fitting fraction (fitting is monotone)
    while lo < hi:
        mid = (lo + hi) // 2
        if plan_at(mid) is None:
            lo = mid + 1
        else:
            hi = mid
    changed = plan_at(lo)
    assert changed is not None
    return _fix("mem_fraction_static", lo / 1000, f"--mem-fraction-static {lo / 1000:.3f}", changed)


def _context_length(current: PlannedDeployment) -> Fix | None:
    length = current.fit.max_fitting_length
    if length < 1:
        return None
    return Fix("context_length", length, f"--context-length {length}", current.fit.capacity_tokens, length,
               "serve shorter requests")  # fmt: skip


def suggest_fixes(current: PlannedDeployment, req: DeploymentRequest, replan: Replan) -> tuple[Fix, ...]:
    """Every candidate fix that makes the model's whole context fit (empty when it already does);
    ``current`` is the plan of ``req``, ``replan`` plans a changed request (without fixes)."""
    if current.fit.context_fits:
        return ()
    found = (
        _kv_fp8(current, req, replan),
        _tensor_parallel(req, replan),
        _mem_fraction(current, req, replan),
        _context_length(current),
    )
    return tuple(fix for fix in found if fix is not None)
