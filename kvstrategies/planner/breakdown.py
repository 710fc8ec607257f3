"""Where one rank's memory goes: weights, every KV pool by kind, state pools, the request
table, the slack, and what is left of the KV budget.

Pools are read through the generic layout API only: each allocation of a pool is grouped by
its sub-pool (the name's ``prefix.``, e.g. ``full.`` / ``swa.`` / ``c4.`` / ``mamba.``; else the
buffer's name without its layer index) and its :class:`~kvstrategies.pools.layout.BufferRole`.
The token-to-KV pool and the extra (state) pools are charged to the KV budget; the request
table lives in the slack ``P0 * (1 - mfs)`` (KVCacheConfigurator._build_req_to_token_pool), not in the budget.
A speculative draft worker's own pools (:mod:`.draft_pool`) are charged to the budget when the
target priced them into its cell, else to the slack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..pools.layout import KVPoolsLayout, PoolLayout
from ..sglang.budget import KVBudget
from .draft_pool import DraftPools

Area = Literal["gpu", "kv-budget", "slack"]
_INDEX = re.compile(r"\[\d+\]")


@dataclass(frozen=True)
class BreakdownRow:
    """One segment: ``nbytes`` of ``kind`` (a buffer role, or overhead/weights/slack/unused)."""

    label: str
    nbytes: int
    kind: str
    area: Area
    pool_class: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "bytes": self.nbytes, "kind": self.kind, "area": self.area,
                "pool_class": self.pool_class}  # fmt: skip


@dataclass(frozen=True)
class Breakdown:
    """The segments in stacking order (bottom first) and the totals.

    ``pools_bytes`` = bytes the KV budget pays for (token-to-KV + state pools);
    ``left_bytes = budget_bytes - pools_bytes`` (negative by a few pages when the pools' padding
    slot, which SGLang does not charge, exceeds the alignment remainder).
    """

    rows: tuple[BreakdownRow, ...]
    budget_bytes: int
    pools_bytes: int
    request_table_bytes: int
    capacity_bytes: int | None
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def left_bytes(self) -> int:
        return self.budget_bytes - self.pools_bytes

    @property
    def total_bytes(self) -> int:
        """Sum of the segments: the GPU capacity in GPU mode, else budget + request table."""
        return sum(max(row.nbytes, 0) for row in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [row.to_dict() for row in self.rows],
            "kv_budget_bytes": self.budget_bytes,
            "kv_pools_bytes": self.pools_bytes,
            "kv_left_bytes": self.left_bytes,
            "request_table_bytes": self.request_table_bytes,
            "capacity_bytes": self.capacity_bytes,
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }


def pool_groups(layout: PoolLayout) -> tuple[tuple[str, str, int], ...]:
    """``(group, role, bytes)`` per sub-pool and role, in buffer order (allocations only)."""
    totals: dict[tuple[str, str], int] = {}
    for buf in layout.allocations:
        head, dot, _ = buf.name.partition(".")
        group = _INDEX.sub("", head if dot else buf.name)
        key = (group, buf.role.value)
        totals[key] = totals.get(key, 0) + buf.nbytes
    return tuple((group, role, nbytes) for (group, role), nbytes in totals.items())


def _pool_rows(layout: PoolLayout, area: Area) -> list[BreakdownRow]:
    sub_classes = {key[: -len(".pool_class")]: value for key, value in layout.attributes if key.endswith(".pool_class")}
    rows = []
    for group, role, nbytes in pool_groups(layout):
        sub = f" ({sub_classes[group]})" if group in sub_classes else ""
        rows.append(BreakdownRow(f"{layout.pool_class} {group}{sub} [{role}]", nbytes, role, area, layout.pool_class))
    return rows


def _draft_rows(draft: DraftPools, area: Area) -> list[BreakdownRow]:
    where = "priced into the target's cell" if draft.in_budget else "allocated after the pool is sized"
    head = f"draft worker ({draft.layers} layer{'s' if draft.layers != 1 else ''}, {where})"
    return [replace(row, label=f"{head} {row.label}") for pool in draft.pools for row in _pool_rows(pool, area)]


def build_breakdown(
    budget: KVBudget, layout: KVPoolsLayout, draft: DraftPools | None = None, *, undercounted: bool = False
) -> Breakdown:
    """Segments of one rank for the final pools ``layout`` under ``budget``, the draft worker's pools
    included (``draft``); ``undercounted``: the release's own sizing prices less than its pools
    store, ``PoolConfigurator.engine_undercounts``."""
    charged = (layout.token_to_kv, *layout.extra)
    in_budget = draft is not None and draft.in_budget
    pools_bytes = sum(pool.planned_bytes for pool in charged) + (draft.planned_bytes if in_budget and draft else 0)
    pool_rows = [row for pool in charged for row in _pool_rows(pool, "kv-budget")]
    if draft is not None and draft.in_budget:
        pool_rows += _draft_rows(draft, "kv-budget")
    table_rows = _pool_rows(layout.req_to_token, "slack")
    table_bytes = layout.req_to_token.planned_bytes
    if draft is not None and not draft.in_budget:
        table_rows += _draft_rows(draft, "slack")
        table_bytes += draft.planned_bytes
    left = budget.available_bytes - pools_bytes
    unused = [BreakdownRow("KV budget left unused", left, "unused", "kv-budget")] if left > 0 else []
    warnings: list[str] = []
    notes: list[str] = []
    if left < 0:
        why = (
            "this release's own sizing prices less than its pools store"
            if undercounted
            else "the padding slots/pages SGLang allocates beyond the budgeted tokens, which its sizing does not charge"
        )
        notes.append(f"the pools exceed the KV budget by {-left:,} B: {why}")
    if budget.source == "given" or budget.capacity_bytes is None:
        rows = (*pool_rows, *unused, *table_rows)
        return Breakdown(
            tuple(rows), budget.available_bytes, pools_bytes, table_bytes, None, tuple(warnings), tuple(notes)
        )
    overhead = budget.overhead_bytes or 0
    weights = budget.weight_bytes or 0
    front = [
        BreakdownRow(f"held before weights load ({budget.overhead_origin or 'modelled'})", overhead, "overhead", "gpu"),
        BreakdownRow(f"weights (per rank, {budget.weight_origin or 'estimate'})", weights, "weights", "gpu"),
    ]
    mm = [BreakdownRow("multimodal cache reserve", budget.multimodal_bytes, "multimodal", "gpu")]
    kv_area = max(pools_bytes, budget.available_bytes)
    accounted = overhead + weights + kv_area + budget.multimodal_bytes + table_bytes
    slack_rest = budget.capacity_bytes - accounted
    if slack_rest < 0:
        draft_after = draft is not None and not draft.in_budget
        what = "the request table and the draft worker's KV pool" if draft_after else "the request table"
        fix = ("name the draft model (--speculative-draft-model-path, or its layer count with "
               "--speculative-draft-layers), or lower --mem-fraction-static, --context-length or "
               "--max-running-requests") if draft_after else \
            "lower --context-length or --max-running-requests, or --mem-fraction-static"
        warnings.append(
            f"{what} ({table_bytes / 2**30:.2f} GiB) {'do' if draft_after else 'does'} not fit the runtime slack "
            f"({(budget.slack_bytes or 0) / 2**30:.2f} GiB): SGLang would run out of memory at startup; {fix}"
        )
    slack = [BreakdownRow("runtime slack (activations, CUDA graphs)", slack_rest, "slack", "slack")]
    rows = (*front, *pool_rows, *unused, *(mm if budget.multimodal_bytes else []), *table_rows, *slack)
    capacity = budget.capacity_bytes
    return Breakdown(
        tuple(rows), budget.available_bytes, pools_bytes, table_bytes, capacity, tuple(warnings), tuple(notes)
    )
