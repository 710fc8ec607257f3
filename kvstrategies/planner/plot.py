"""``--plot FILE.png``: the breakdown as one stacked bar (matplotlib, the optional ``plot`` extra).

matplotlib is imported only here, only when a plot is asked for; without it the user gets a
:class:`~kvstrategies.errors.KVCacheConfigError` naming ``pip install 'kvstrategies[plot]'``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import KVCacheConfigError, MissingDependencyError
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


def _plain(text: str) -> str:
    """``text`` shown as written: matplotlib reads ``$...$`` as mathtext (a model named
    ``my$model`` broke the plot), so every ``$`` is escaped; a file name that is not UTF-8 (its
    bytes kept as surrogates by ``os.fsdecode``, which matplotlib cannot draw) shows U+FFFD."""
    drawable = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return drawable.replace("$", r"\$")


def _title(plan: DeploymentPlan) -> str:
    ctx = plan.planned.ctx
    req = plan.request
    where = plan.budget.gpu_name or "a given KV budget"
    parallel = f"TP {ctx.parallel.tp_size}" + (f" PP {ctx.parallel.pp_size}" if ctx.parallel.pp_size > 1 else "")
    name = req.model if req is not None else plan.case.name
    kv = ctx.kv_cache_dtype
    kv_name = f"{kv.dtype.name.lower()} (auto)" if kv.name == "auto" else kv.name
    return (
        f"{name} on {where}, {parallel}, KV {kv_name}, page {ctx.page_size}\n"
        f"{plan.sizes.max_total_num_tokens:,} tokens, max_running_requests {plan.sizes.max_running_requests:,}"
    )


#: image formats ``--plot`` writes (matplotlib picks the format from the suffix)
PLOT_SUFFIXES = (".png", ".svg", ".pdf", ".eps", ".ps", ".jpg", ".jpeg")


def check_plot_path(path: str | Path) -> Path:
    """``path`` when it can take the image: a known image suffix, not a folder, not a device/FIFO.

    Checked before planning so that a bad ``--plot`` is refused up front (no silent ``.png``).
    """
    out = Path(path)
    if out.is_dir():
        raise KVCacheConfigError(f"--plot {out}: it is a folder; give a file name such as {out / 'plan.png'}")
    if out.exists() and not out.is_file():
        raise KVCacheConfigError(f"--plot {out}: not a regular file (a device or a pipe); give an image file name")
    if out.suffix.lower() not in PLOT_SUFFIXES:
        raise KVCacheConfigError(
            f"--plot {out}: unknown image suffix {out.suffix or '(none)'!r}; use one of {', '.join(PLOT_SUFFIXES)}"
        )
    return out


def plot_breakdown(plan: DeploymentPlan, path: str | Path) -> Path:
    """Write the breakdown of ``plan`` as a stacked bar (GiB) to ``path``; returns the path.

    Segments under 1 MiB (request-generation counters, index maps) are left out of the drawing.
    """
    out = check_plot_path(path)
    plt = _pyplot()
    rows = [row for row in plan.breakdown.rows if row.nbytes >= 2**20]
    total = sum(row.nbytes for row in rows) / GIB
    fig, ax = plt.subplots(figsize=(10, 6))
    bottom = 0.0
    shades: dict[str, int] = {}
    for row in rows:
        size = row.nbytes / GIB
        shade = shades.get(row.kind, 0)
        shades[row.kind] = shade + 1
        alpha = max(0.45, 1.0 - 0.2 * shade)  # successive pools of one kind: lighter
        colour = _COLOURS.get(row.kind, "#8c564b")
        ax.bar(0, size, bottom=bottom, width=0.6, color=colour, alpha=alpha, edgecolor="white",
               label=_plain(f"{row.label}: {size:,.2f} GiB"))  # fmt: skip
        if size >= 0.05 * total:
            ax.text(0, bottom + size / 2, f"{size:,.2f} GiB", ha="center", va="center", fontsize=9, color="white")
        bottom += size
    capacity = plan.breakdown.capacity_bytes
    if capacity is not None:
        ax.axhline(capacity / GIB, color="black", linestyle="--", linewidth=1)
        ax.text(0.32, capacity / GIB, f"capacity {capacity / GIB:,.2f} GiB", va="bottom", ha="right", fontsize=8)
    ax.set_xlim(-0.5, 0.5)
    ax.set_xticks([])
    ax.set_ylabel("GiB (one rank)")
    ax.set_title(_plain(_title(plan)), fontsize=10)
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8, frameon=False, reverse=True)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
