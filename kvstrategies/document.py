"""Machine output of a plan: the ``plan --json`` / ``plan --case FILE --json`` document.

``{"configurator", "cell_size", "sizes", "sizes_from_max_tokens", "pools", "allocations",
"planned_bytes", "allocated_bytes", ...}`` (docs/golden.md, "What a snapshot holds"). ``pools`` lists every
engine-facing tensor (views included) of the token-to-KV pool and any state pools;
``allocations`` every backing allocation with its bytes; ``notes`` what the plan wants an
operator to know (state reservations, where SGLang itself would size differently).
``allocated_bytes`` is what ``build(sizes, "meta")`` allocates: computed from the layout without
torch, and measured on ``meta`` when ``measure=True`` (tests assert both agree for every golden case).
"""

from __future__ import annotations

from typing import Any

from .api import LayoutError, Plan
from .core.releases import EngineRelease
from .core.sizing import PoolSizes
from .pools.layout import BufferSpec, PoolLayout


def _cell(value: int | float) -> int | float:
    if isinstance(value, float) and value.is_integer():
        return value  # keep the float type: SGLang reports hybrid cells as floats
    return value


def _sizes_or_none(sizes: PoolSizes | None) -> dict[str, Any] | None:
    return None if sizes is None else sizes.to_dict()


def buffer_entry(buf: BufferSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": buf.name, "shape": list(buf.shape), "dtype": str(buf.dtype)}
    if buf.is_view:
        assert buf.view is not None
        entry["view_of"] = buf.view.source
    return entry


def allocation_entry(buf: BufferSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": buf.name, "shape": list(buf.shape), "dtype": str(buf.dtype), "nbytes": buf.nbytes}
    if buf.device is not None:
        entry["device"] = buf.device
    return entry


def kv_side_layouts(planned: Plan) -> tuple[PoolLayout, ...]:
    """The token-to-KV pool and the extra (state) pools: what ``pools`` reports."""
    return (planned.layout.token_to_kv, *planned.layout.extra)


def release_document(release: EngineRelease) -> dict[str, str]:
    """``{"engine": "sglang", "version": "0.5.20", "label": "SGLang 0.5.20"}``: what a plan is for."""
    return {"engine": release.engine, "version": release.text, "label": release.label}


def plan_document(planned: Plan, *, measure: bool = False) -> dict[str, Any]:
    """The JSON-able plan document for one rank."""
    layouts = kv_side_layouts(planned)
    pools = [buffer_entry(b) for layout in layouts for b in layout.engine_buffers]
    allocations = [allocation_entry(b) for layout in layouts for b in layout.allocations]
    planned_bytes = sum(layout.planned_bytes for layout in layouts)
    allocated = planned_bytes
    if measure:
        from .api import build

        built = build(planned, "meta")
        allocated = built.token_to_kv_pool.allocated_bytes + sum(p.allocated_bytes for p in built.extra)
    req = planned.layout.req_to_token
    document = {
        "release": release_document(planned.configurator.ctx.release),
        "configurator": type(planned.configurator).__name__,
        "sglang_configurator": planned.configurator.engine_class_name(),
        "cell_size": _cell(planned.cell_size_bytes),
        "sizes": planned.sizes.to_dict(),
        "sizes_from_max_tokens": _sizes_or_none(planned.sizes_from_max_tokens),
        "pool_sizes": planned.pool_sizes.to_dict(),
        "token_to_kv_pool_class": planned.layout.token_to_kv.pool_class,
        "pools": pools,
        "allocations": allocations,
        "planned_bytes": planned_bytes,
        "allocated_bytes": allocated,
        "req_to_token_pool": {
            "pool_class": req.pool_class,
            "buffers": [allocation_entry(b) for b in req.allocations],
            "nbytes": req.planned_bytes,
        },
        "notes": [*planned.resolution.reservation.notes, *planned.notes],
    }
    if planned.adopted_sizes is not None:  # a draft worker: the target sizes its pools are built for
        document["adopted_sizes"] = planned.adopted_sizes.to_dict()
    return document


def partial_plan_document(error: LayoutError) -> dict[str, Any]:
    """The plan document when sizing succeeded but the pool cannot be laid out: no pools."""
    return {
        "release": release_document(error.configurator.ctx.release),
        "configurator": type(error.configurator).__name__,
        "sglang_configurator": error.configurator.sglang_class_name(),
        "cell_size": _cell(error.configurator.cell_size_bytes),
        "sizes": error.sizes.to_dict(),
        "sizes_from_max_tokens": _sizes_or_none(error.sizes_from_max_tokens),
        "pool_sizes": _sizes_or_none(error.pool_sizes),
        "pools": None,
        "allocations": None,
        "planned_bytes": None,
        "allocated_bytes": None,
        "layout_error": str(error),
        **({} if error.adopted_sizes is None else {"adopted_sizes": error.adopted_sizes.to_dict()}),
    }
