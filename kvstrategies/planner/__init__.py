"""The deployment planner behind ``kvstrategies plan`` / ``sweep``: "how many tokens and
requests of this model fit on this GPU with these settings?"

``request`` (what the user asked) -> ``launch`` (SGLang's launch defaults for what was left
out) -> ``budget`` (GPU, fraction, weights -> KV bytes) -> :func:`kvstrategies.api.plan` ->
``breakdown`` (where the memory goes) -> ``fit`` (concurrency, longest request) -> ``fixes``.
``sweep`` runs a grid, ``plot`` draws the breakdown, ``report`` prints it. ``launch_defaults``
(SGLang's launch rules), ``gpus`` (the accelerator table) and ``weights`` / ``weight_quant`` (the
weight estimate) serve these steps only. Torch-free. The core library never imports this package
(``tests/test_import_graph.py``); the CLI and ``kvstrategies.integrations`` do.
"""

from __future__ import annotations

from .breakdown import Breakdown, BreakdownRow, build_breakdown
from .budget import KVBudget, kv_budget
from .deployment import DeploymentPlan, deployment_from_case, plan_deployment
from .fit import FitModel, FitReport, LengthFit, TokenPool, fit_model, fit_report
from .fixes import Fix, suggest_fixes
from .request import DeploymentRequest
from .sweep import SweepRow, sweep, sweep_csv, sweep_table

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
