"""``--plot FILE.png``: the breakdown as one stacked bar (matplotlib, the optional ``plot`` extra).

matplotlib is imported only here, only when a plot is asked for; without it the user gets a
:class:`~kvstrategies.errors.KVCacheConfigError` naming ``pip install 'kvstrategies[plot]'``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import MissingDependencyError
from .deployment import DeploymentPlan

GIB = 2**30
# one colour family per kind of segment (muted, colour-blind friendly base: matplotlib "tab10")
_COLOURS = {
    "overhead": "#7f7f7f",
    "weights": "#1f77b4",
    "kv": "#2ca02c",
    "state": "#9467bd",
    "index": "#bcbd22",
    "workspace": "#17becf",
    "unused": "#d9f2d9",
    "multimodal": "#e377c2",
    "slack": "#ff7f0e",
}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise MissingDependencyError("--plot needs matplotlib: pip install 'kvstrategies[plot]'") from exc
    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    return plt


def _title(plan: DeploymentPlan) -> str:
    ctx = plan.planned.ctx
    req = plan.request
    where = plan.budget.gpu_name or "given KV budget"
    parallel = f"TP {ctx.parallel.tp_size}" + (f" PP {ctx.parallel.pp_size}" if ctx.parallel.pp_size > 1 else "")
    name = req.model if req is not None else plan.case.name
    return (
        f"{name} on {where}, {parallel}, KV {ctx.kv_cache_dtype.name}, page {ctx.page_size}\n"
        f"{plan.sizes.max_total_num_tokens:,} tokens, max_running_requests {plan.sizes.max_running_requests:,}"
    )


def plot_breakdown(plan: DeploymentPlan, path: str | Path) -> Path:
    """Write the breakdown of ``plan`` as a stacked bar (GiB) to ``path``; returns the path."""
    plt = _pyplot()
    rows = [row for row in plan.breakdown.rows if row.nbytes > 0]
    fig, ax = plt.subplots(figsize=(9, 6.5))
    bottom = 0.0
    shades: dict[str, int] = {}
    for row in rows:
        size = row.nbytes / GIB
        base = _COLOURS.get(row.kind, "#8c564b")
        shade = shades.get(row.kind, 0)
        shades[row.kind] = shade + 1
        alpha = max(0.45, 1.0 - 0.18 * shade)  # successive pools of one kind: lighter
        ax.bar(0, size, bottom=bottom, width=0.5, color=base, alpha=alpha, edgecolor="white",
               label=f"{row.label}: {size:,.2f} GiB")  # fmt: skip
        bottom += size
    budget = plan.breakdown
    if budget.capacity_bytes is not None:
        ax.axhline(budget.capacity_bytes / GIB, color="black", linestyle="--", linewidth=1)
        ax.text(0.27, budget.capacity_bytes / GIB, f" capacity {budget.capacity_bytes / GIB:,.2f} GiB",
                va="bottom", fontsize=8)  # fmt: skip
    ax.set_xlim(-0.5, 2.6)
    ax.set_xticks([])
    ax.set_ylabel("GiB (one rank)")
    ax.set_title(_title(plan), fontsize=10)
    ax.legend(loc="upper right", fontsize=7.5, frameon=False, reverse=True)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
