"""The fix search's ``--mem-fraction-static``: the smallest fraction (0.001 steps) that fits.

A Mamba hybrid's capacity is not monotone in the fraction: one more Mamba state slot
(``max_mamba_cache_size``, which grows with the budget) costs more KV tokens than 0.001 of the
GPU gives (Falcon-H1-7B on an A100-40GB at TP 1: 262,615 tokens at 0.901, 261,374 at 0.903). A
plain bisection over [current + 0.001, 0.95] then stops at a local step (0.904); the search
starts where the capacity line between the current plan and 0.95 reaches the context, and there
every smaller fraction down to the current one is checked here, plan by plan.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kvstrategies.planner import DeploymentRequest, plan_deployment
from kvstrategies.planner.fixes import _fraction_guess
from kvstrategies.planner.gpus import lookup_gpu


def _fits(req: DeploymentRequest, thousandths: int) -> bool:
    return plan_deployment(req.replace(mem_fraction_static=thousandths / 1000), suggest=False).fit.context_fits


def test_the_fraction_fix_is_the_smallest_that_fits_a_mamba_hybrid() -> None:
    req = DeploymentRequest("falcon-h1-7b", {"preset": "falcon-h1-7b"}, gpu=lookup_gpu("A100-40GB"))
    planned = plan_deployment(req)
    assert not planned.fit.context_fits
    (fix,) = [f for f in planned.fixes if f.setting == "mem_fraction_static"]
    chosen = round(float(fix.value) * 1000)
    now = round((planned.budget.mem_fraction_static or 0) * 1000)
    assert (now, chosen) == (823, 901)
    assert _fits(req, chosen)
    assert not any(_fits(req, m) for m in range(now + 1, chosen))  # 0.824 ... 0.900 do not fit
    assert not _fits(req, 903) and _fits(req, 904)  # the local step a bisection stops at


def test_the_fraction_fix_of_a_dense_model_is_the_step_where_it_starts_to_fit() -> None:
    req = DeploymentRequest("kimi-k2", {"preset": "kimi-k2"}, gpu=lookup_gpu("H200"), tp_size=8)
    planned = plan_deployment(req)
    (fix,) = [f for f in planned.fixes if f.setting == "mem_fraction_static"]
    chosen = round(float(fix.value) * 1000)
    assert _fits(req, chosen) and not _fits(req, chosen - 1)
    assert fix.capacity_tokens >= planned.fit.context_len > planned.fit.capacity_tokens


# ---- the straight-line guess of the smallest --mem-fraction-static -----------------------------------------


def _planned(capacity: int, context: int) -> Any:
    return SimpleNamespace(fit=SimpleNamespace(capacity_tokens=capacity, context_len=context))


def test_the_fraction_guess_draws_its_line_from_one_thousandth() -> None:
    """The fix search's own rule (planner/fixes.py, ``_fraction_guess``): between the current plan
    (``now`` thousandths, ``low`` tokens) and the plan at ``stop`` (``high`` tokens), the context
    ``need`` = context - low more tokens is reached at ``now + ceil(need x (stop - now) / (high - low))``.
    From 0.001 (1,000 tokens) to 0.900 (900,000 tokens) for a 131,072-token context:
    1 + ceil(130,072 x 899 / 899,000) = 1 + ceil(130.072) = 132. Below 1 thousandth there is no plan."""
    search = SimpleNamespace(current=_planned(1_000, 131_072))
    assert _fraction_guess(search, 1, _planned(900_000, 131_072), 900) == 132  # type: ignore[arg-type]
    assert _fraction_guess(search, 0, _planned(900_000, 131_072), 900) is None  # type: ignore[arg-type]
