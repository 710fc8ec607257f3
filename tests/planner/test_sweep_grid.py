"""A sweep's cells equal one plan each (not timed; ``tools/bench_sweep.py`` times the grid).

A sweep plans its whole grid in one call; each expected cell here is planned alone and read
through ``kvstrategies plan``'s own request path, so an answer that leaked from one cell into
another (another GPU, TP, KV dtype, page) would show as a difference.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from kvstrategies.cli.app import main
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.planner.flag_names import flag_wording
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.planner.request import DeploymentRequest
from kvstrategies.planner.sweep import DEFAULT_REQUEST_LENGTH, SweepRow, sweep

#: one preset per family: dense GQA, MoE, MLA + MTP, Mamba hybrid, hybrid SWA, MXFP4 experts, Nemotron-H
PRESETS = ("llama-3.1-8b", "qwen3-235b-a22b", "deepseek-v3", "falcon-h1-7b", "gemma-3-27b", "gpt-oss-120b",
           "nemotron-h-8b")  # fmt: skip
GPUS = ("H100-80GB", "B200")
TPS = (1, 8)
KV_DTYPES = (None, "fp8_e4m3")
PAGES = (None, 64)


def alone(preset: str, gpu: str, tp: int, kv: str | None, page: int | None) -> SweepRow:
    """The cell planned by itself, as :func:`~kvstrategies.planner.sweep.sweep_cell` reports it."""
    from kvstrategies.planner.deployment import plan_deployment

    req = DeploymentRequest(preset, {"preset": preset}, gpu=lookup_gpu(gpu), tp_size=tp, kv_cache_dtype=kv,
                            page_size=page)  # fmt: skip
    asked = SweepRow(gpu, tp, kv, page, sglang_version=req.release.text)
    try:
        plan = plan_deployment(req, suggest=False)
    except KVCacheConfigError as exc:
        return SweepRow(gpu, tp, kv, page, error=flag_wording(str(exc)), sglang_version=req.release.text)
    fit = plan.fit
    length = min(DEFAULT_REQUEST_LENGTH, fit.context_len)
    first = next(item for item in fit.lengths if item.request_length == length)
    return SweepRow(
        gpu=asked.gpu, tp=tp, kv_request=kv, page_request=page, kv=plan.planned.ctx.kv_cache_dtype.name,
        page=plan.planned.ctx.page_size, mem_fraction_static=plan.budget.mem_fraction_static,
        kv_budget_bytes=plan.budget.available_bytes, tokens=plan.sizes.max_total_num_tokens,
        max_running_requests=plan.sizes.max_running_requests, request_length=first.request_length,
        concurrency=first.requests, context_fits=fit.context_fits, max_fitting_length=fit.max_fitting_length,
        sglang_version=asked.sglang_version,
    )  # fmt: skip


@pytest.mark.parametrize("preset", PRESETS)
def test_every_cell_of_a_sweep_equals_its_own_plan(preset: str) -> None:
    base = DeploymentRequest(preset, {"preset": preset}, gpu=lookup_gpu(GPUS[0]))
    rows = sweep(base, tp_sizes=TPS, kv_cache_dtypes=KV_DTYPES, page_sizes=PAGES,
                 gpus=[lookup_gpu(g) for g in GPUS])  # fmt: skip
    expected = [alone(preset, lookup_gpu(g).name, tp, kv, page)
                for g in GPUS for tp in TPS for kv in KV_DTYPES for page in PAGES]  # fmt: skip
    assert len(rows) == len(expected) == 16
    assert rows == tuple(expected)
    assert any(row.error is None for row in rows)


def test_a_sweep_cell_equals_the_plan_command() -> None:
    """The same cell through ``kvstrategies plan --json`` (the CLI's own request, another session)."""
    b200 = lookup_gpu("B200")
    (row,) = sweep(DeploymentRequest("qwen3-235b-a22b", {"preset": "qwen3-235b-a22b"}, gpu=b200),
                   tp_sizes=[8], kv_cache_dtypes=["fp8_e4m3"], page_sizes=[None], gpus=[b200])  # fmt: skip
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["plan", "qwen3-235b-a22b", "--gpu", "B200", "--tp", "8", "--kv-cache-dtype", "fp8_e4m3",
                     "--json"]) == 0  # fmt: skip
    planner = json.loads(out.getvalue())["planner"]
    assert row.error is None
    assert row.tokens == planner["tokens"] and row.max_running_requests == planner["max_running_requests"]
    assert row.kv_budget_bytes == planner["budget"]["available_bytes"]
    assert row.mem_fraction_static == planner["budget"]["mem_fraction_static"]
    assert row.max_fitting_length == planner["fit"]["max_fitting_length"]
