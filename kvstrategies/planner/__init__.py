"""The deployment planner behind ``kvstrategies plan`` / ``sweep``: "how many tokens and
requests of this model fit on this GPU with these settings?"

``request`` (what the user asked) -> ``launch`` (SGLang's launch defaults for what was left
out) -> ``budget`` (GPU, fraction, weights -> KV bytes) -> :func:`kvstrategies.api.plan` ->
``breakdown`` (where the memory goes) -> ``fit`` (concurrency, longest request) -> ``fixes``.
``sweep`` runs a grid, ``plot`` draws the breakdown, ``report`` prints it. ``launch_defaults``
(SGLang's launch rules), ``gpus`` (the accelerator table) and ``weights`` / ``weight_quant`` (the
weight estimate) serve these steps only. Torch-free. The core library never imports this package
(``tests/package/test_import_graph.py``); the CLI and ``kvstrategies.integrations`` do.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from ..core.lazy_exports import lazy_exports

#: public name -> the module that defines it; imported on first use (PEP 562), so that importing
#: one planner module (``kvstrategies.planner.gpus``) does not load the whole planner
_EXPORTS = {
    "Breakdown": "kvstrategies.planner.breakdown",
    "BreakdownRow": "kvstrategies.planner.breakdown",
    "build_breakdown": "kvstrategies.planner.breakdown",
    "KVBudget": "kvstrategies.sglang.budget",
    "kv_budget": "kvstrategies.sglang.budget",
    "DeploymentPlan": "kvstrategies.planner.deployment",
    "deployment_from_case": "kvstrategies.planner.deployment",
    "plan_deployment": "kvstrategies.planner.deployment",
    "FitModel": "kvstrategies.planner.fit",
    "FitReport": "kvstrategies.planner.fit",
    "LengthFit": "kvstrategies.planner.fit",
    "TokenPool": "kvstrategies.planner.fit",
    "fit_model": "kvstrategies.planner.fit",
    "fit_report": "kvstrategies.planner.fit",
    "Fix": "kvstrategies.planner.fixes",
    "suggest_fixes": "kvstrategies.planner.fixes",
    "DeploymentRequest": "kvstrategies.planner.request",
    "SweepRow": "kvstrategies.planner.sweep",
    "sweep": "kvstrategies.planner.sweep",
    "sweep_csv": "kvstrategies.planner.sweep",
    "sweep_table": "kvstrategies.planner.sweep",
}

if TYPE_CHECKING:
    from ..sglang.budget import KVBudget, kv_budget
    from .breakdown import Breakdown, BreakdownRow, build_breakdown
    from .deployment import DeploymentPlan, deployment_from_case, plan_deployment
    from .fit import FitModel, FitReport, LengthFit, TokenPool, fit_model, fit_report
    from .fixes import Fix, suggest_fixes
    from .request import DeploymentRequest
    from .sweep import SweepRow, sweep, sweep_csv, sweep_table


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


class _Package(types.ModuleType):
    """This package, keeping ``sweep`` the function: importing the submodule of the same name
    makes Python bind the module over it, which the eager ``from .sweep import sweep`` of old
    undid by importing it first."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "sweep" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = [
    "Breakdown",
    "BreakdownRow",
    "DeploymentPlan",
    "DeploymentRequest",
    "Fix",
    "FitModel",
    "FitReport",
    "KVBudget",
    "LengthFit",
    "SweepRow",
    "TokenPool",
    "build_breakdown",
    "deployment_from_case",
    "fit_model",
    "fit_report",
    "kv_budget",
    "plan_deployment",
    "suggest_fixes",
    "sweep",
    "sweep_csv",
    "sweep_table",
]
