"""``sweep --plot FILE.png``: the sweep as two line charts against the TP size, one line per GPU
(and KV dtype / page size when several are swept): the KV tokens per worker (log scale) and the
concurrency at the sweep's request length. Cells that could not be planned are left out of
their line and counted in the title; when no cell could be planned there is nothing to draw and
no file is written. matplotlib comes from the ``plot`` extra (:mod:`.plot`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .plot import _plain, _pyplot, check_plot_path
from .sweep import SweepRow

#: one colour per line, in order (matplotlib's "tab10", colour-blind friendly)
SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                  "#bcbd22", "#17becf")  # fmt: skip


def series_label(row: SweepRow, *, kv: bool, page: bool) -> str:
    """The line a cell belongs to: its GPU, and its asked KV dtype / page when those vary."""
    parts = [row.gpu or "given budget"]
    if kv:
        parts.append(f"KV {row.kv_request or 'default'}")
    if page:
        parts.append(f"page {'default' if row.page_request is None else row.page_request}")
    return ", ".join(parts)


def sweep_series(rows: Sequence[SweepRow]) -> dict[str, list[SweepRow]]:
    """Cells grouped into lines (first-seen order), each sorted by TP."""
    kv = len({row.kv_request for row in rows}) > 1
    page = len({row.page_request for row in rows}) > 1
    lines: dict[str, list[SweepRow]] = {}
    for row in rows:
        lines.setdefault(series_label(row, kv=kv, page=page), []).append(row)
    return {label: sorted(cells, key=lambda r: r.tp) for label, cells in lines.items()}


def plot_sweep(rows: Sequence[SweepRow], path: str | Path, model: str) -> Path | None:
    """Write the sweep chart to ``path`` (see the module doc); returns the path, or None (nothing
    written) when no cell could be planned."""
    out = check_plot_path(path)
    if not any(row.error is None and row.tokens is not None for row in rows):
        return None
    plt = _pyplot()
    lines = sweep_series(rows)
    tps = sorted({row.tp for row in rows})
    fig, (tokens_ax, conc_ax) = plt.subplots(1, 2, figsize=(12, 5))
    for index, (label, cells) in enumerate(lines.items()):
        planned = [cell for cell in cells if cell.error is None and cell.tokens is not None]
        colour = SERIES_COLOURS[index % len(SERIES_COLOURS)]
        xs = [tps.index(cell.tp) for cell in planned]
        name = _plain(label)
        tokens_ax.plot(xs, [cell.tokens for cell in planned], marker="o", color=colour, label=name, linewidth=2)
        conc_ax.plot(xs, [cell.concurrency for cell in planned], marker="o", color=colour, label=name, linewidth=2)
    length = next((row.request_length for row in rows if row.request_length is not None), None)
    for ax, title in ((tokens_ax, "KV cache tokens per worker"),
                      (conc_ax, f"{length:,}-token requests at once" if length else "requests at once")):  # fmt: skip
        ax.set_xticks(range(len(tps)), [f"TP {tp}" for tp in tps])
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
    tokens_ax.set_yscale("log")
    conc_ax.legend(loc="best", fontsize=8, frameon=False)
    failed = sum(1 for row in rows if row.error is not None)
    note = f" ({failed} cell{'s' if failed > 1 else ''} could not be planned)" if failed else ""
    fig.suptitle(_plain(f"{model}: sweep over TP and GPU{note}"), fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
