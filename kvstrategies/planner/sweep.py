"""A grid of deployments: every combination of GPU, TP size, KV dtype and page size.

Each cell is a full :func:`~kvstrategies.planner.deployment.plan_deployment` (launch defaults
included, so a forced page or KV dtype shows in the ``page`` / ``kv`` columns). A cell that
cannot be planned (weights do not fit, a strategy rejects the setting) keeps its error text
instead of stopping the sweep.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from ..errors import KVCacheConfigError
from .deployment import plan_deployment
from .flag_names import flag_wording
from .gpus import Accelerator
from .model_reading import ModelReading
from .request import GIB, DeploymentRequest


@dataclass(frozen=True)
class SweepRow:
    """One cell: what was asked (``gpu``, ``tp``, ``kv_request``, ``page_request``) and the plan.

    ``concurrency`` is for requests of ``request_length`` tokens (the first ``--request-length``,
    else :data:`DEFAULT_REQUEST_LENGTH` or the model's context when shorter), per attention-DP worker.
    ``sglang_version`` is the SGLang release the cell is planned for.
    """

    gpu: str | None
    tp: int
    kv_request: str | None
    page_request: int | None
    kv: str | None = None
    page: int | None = None
    mem_fraction_static: float | None = None
    kv_budget_bytes: int | None = None
    tokens: int | None = None
    max_running_requests: int | None = None
    request_length: int | None = None
    concurrency: int | None = None
    context_fits: bool | None = None
    max_fitting_length: int | None = None
    error: str | None = None
    sglang_version: str | None = None


COLUMNS = tuple(f.name for f in fields(SweepRow))
#: the request length (tokens) a sweep answers for without ``--request-length``: a typical chat /
#: RAG request, capped at the model's context
DEFAULT_REQUEST_LENGTH = 8192


def sweep_cell(
    base: DeploymentRequest, gpu: Accelerator | None, tp: int, kv: str | None, page: int | None,
    model: ModelReading | None = None,
) -> SweepRow:
    """Plan one cell (``None`` = the launch's choice); a :class:`KVCacheConfigError` becomes ``error``.
    ``model``: the reading of ``base``'s config, shared by every cell of a sweep."""
    asked = SweepRow(None if gpu is None else gpu.name, tp, kv, page, sglang_version=base.release.text)
    req = base.replace(tp_size=tp, kv_cache_dtype=kv, page_size=page, gpu=gpu if gpu is not None else base.gpu)
    try:
        plan = plan_deployment(req, suggest=False, model=model)
    except KVCacheConfigError as exc:
        return SweepRow(**{**asdict(asked), "error": flag_wording(str(exc))})
    fit = plan.fit
    if base.request_lengths:
        first = fit.lengths[0]
    else:
        length = min(DEFAULT_REQUEST_LENGTH, fit.context_len)
        first = next((item for item in fit.lengths if item.request_length == length), fit.lengths[-1])
    return SweepRow(
        gpu=asked.gpu,
        tp=tp,
        kv_request=kv,
        page_request=page,
        kv=plan.planned.ctx.kv_cache_dtype.name,
        page=plan.planned.ctx.page_size,
        mem_fraction_static=plan.budget.mem_fraction_static,
        kv_budget_bytes=plan.budget.available_bytes,
        tokens=plan.sizes.max_total_num_tokens,
        max_running_requests=plan.sizes.max_running_requests,
        request_length=first.request_length,
        concurrency=first.requests,
        context_fits=fit.context_fits,
        max_fitting_length=fit.max_fitting_length,
        sglang_version=base.release.text,
    )


def sweep(
    base: DeploymentRequest,
    *,
    tp_sizes: Sequence[int],
    kv_cache_dtypes: Sequence[str | None],
    page_sizes: Sequence[int | None],
    gpus: Sequence[Accelerator | None] = (None,),
) -> tuple[SweepRow, ...]:
    """Every ``gpu x tp x kv x page`` cell, in that nesting order."""
    grid = itertools.product(gpus, tp_sizes, kv_cache_dtypes, page_sizes)
    try:
        model: ModelReading | None = ModelReading(base.hf_config())
    except KVCacheConfigError:  # each cell reports it
        model = None
    return tuple(sweep_cell(base, gpu, tp, kv, page, model) for gpu, tp, kv, page in grid)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def sweep_table(rows: Sequence[SweepRow]) -> str:
    """A fixed-width table (budget in GiB); errors on their own line under the cell."""
    header = ("gpu", "tp", "kv", "page", "mfs", "budget GiB", "tokens", "max req", "req len", "concurrency",
              "fits ctx", "max len")  # fmt: skip
    body = []
    for r in rows:
        kv_asked = r.kv_request or "default"
        page_asked = "default" if r.page_request is None else str(r.page_request)
        kv = kv_asked if r.kv in (None, r.kv_request) else f"{kv_asked}->{r.kv}"
        page = page_asked if r.page in (None, r.page_request) else f"{page_asked}->{r.page}"
        budget = "-" if r.kv_budget_bytes is None else f"{r.kv_budget_bytes / GIB:,.2f}"
        body.append((_cell(r.gpu), _cell(r.tp), kv, page, _cell(r.mem_fraction_static), budget, _cell(r.tokens),
                     _cell(r.max_running_requests), _cell(r.request_length), _cell(r.concurrency),
                     _cell(r.context_fits), _cell(r.max_fitting_length)))  # fmt: skip
    widths = [max([len(h), *(len(row[i]) for row in body)]) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    for r, cells in zip(rows, body, strict=True):
        lines.append("  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)))
        if r.error:
            first = r.error.split("; ")[0].split(". ")[0]
            lines.append(f"    error: {first[:160]}")
    return "\n".join(lines)


def sweep_csv(rows: Sequence[SweepRow]) -> str:
    """CSV with one column per :class:`SweepRow` field (raw numbers, empty for None)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in asdict(row).items()})
    return out.getvalue()
