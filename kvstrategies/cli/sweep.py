"""``kvstrategies sweep``: a grid of plans over GPUs, TP sizes, KV dtypes and page sizes.

The grid's lists are comma lists; a repeated value is planned once, and grid-wide values (TP,
page size, the number of cells) are refused before any cell is planned.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import KVCacheConfigError
from .arguments import accelerator, add_deployment_arguments, request_from_arguments

if TYPE_CHECKING:
    from ..planner.gpus import Accelerator


def add_parser(sub: Any, command: str) -> None:
    """The ``sweep`` subparser, added to ``sub`` as ``command``."""
    sweep = sub.add_parser(
        command,
        help="a grid of plans over GPUs, TP sizes, KV dtypes and page sizes",
        description="A grid of plans. The concurrency column is for the first --request-length, else for "
        "8,192-token requests (or the model's context when shorter).",
    )
    add_deployment_arguments(sweep)
    sweep.add_argument("--gpu", default=None, help="comma list of GPU names, e.g. H100-80GB,H200")
    sweep.add_argument("--tp", "--tp-size", "--tensor-parallel-size", dest="tp", default="1",
                       help="comma list, e.g. 1,2,4,8")  # fmt: skip
    sweep.add_argument("--kv-cache-dtype", default=None, help="comma list, e.g. bf16,fp8_e4m3 (default: the launch's)")
    sweep.add_argument("--page-size", default=None, help="comma list, e.g. 1,64 (default: the launch's)")
    sweep.add_argument("--csv", action="store_true", help="CSV instead of a table")
    sweep.add_argument("--json", action="store_true", help="JSON rows instead of a table")
    sweep.add_argument(
        "--plot", type=Path, default=None, help="also draw tokens and concurrency against TP and GPU (matplotlib)"
    )


def run(args: argparse.Namespace) -> int:
    """``sweep``: one plan per cell of the grid, as a table, CSV or JSON rows (:mod:`kvstrategies.planner.sweep`)."""
    from ..planner.sweep import sweep, sweep_csv, sweep_table

    gpus: list[Accelerator | None] = []
    names = _unique(_str_list(args.gpu)) if args.gpu is not None else [None]
    if not names:
        raise KVCacheConfigError(f"--gpu is empty ({args.gpu!r}); give a comma list of GPU names, e.g. H100-80GB,H200")
    for name in names:
        gpus.append(accelerator(name, args.gpu_memory))
    tps = _unique(_int_list("--tp", args.tp))  # a repeated value would plan the same cells again
    kv_dtypes: list[str | None] = list(_unique(_str_list(args.kv_cache_dtype))) if args.kv_cache_dtype else [None]
    pages: list[int | None] = list(_unique(_int_list("--page-size", args.page_size))) if args.page_size else [None]
    from ..planner.request import check_page_size

    for page in pages:
        check_page_size(page)
    _check_grid(tps, pages, len(gpus) * len(kv_dtypes))
    if args.plot is not None:  # a bad --plot is refused before the grid runs
        from ..planner.plot import check_plot_path

        check_plot_path(args.plot)
    base = request_from_arguments(argparse.Namespace(**{**vars(args), "tp": 1, "kv_cache_dtype": None,
                                                        "page_size": None}), gpus[0])  # fmt: skip
    rows = sweep(base, tp_sizes=tps, kv_cache_dtypes=kv_dtypes, page_sizes=pages, gpus=gpus)
    if args.plot is not None:
        from ..planner.sweep_plot import plot_sweep

        written = plot_sweep(rows, args.plot, base.model)
        print(f"kvstrategies: wrote the sweep plot to {written}" if written else f"kvstrategies: --plot {args.plot}: "
              "no cell of the sweep could be planned, nothing to plot (no file written)", file=sys.stderr)  # fmt: skip
    if args.csv:
        print(sweep_csv(rows), end="")
    elif args.json:
        print(json.dumps([asdict(row) for row in rows], indent=2))
    else:
        print(f"{base.release.label} launch defaults")
        print(sweep_table(rows))
        scale = base.attn_dp_size * base.dp_replicas
        if scale > 1:
            print(f"tokens, max req and concurrency are per worker: x {scale} workers "
                  f"({base.attn_dp_size} attention-DP x {base.dp_replicas} replicas) in total")  # fmt: skip
    return 0


#: most cells a sweep plans (each is a full plan: milliseconds)
MAX_SWEEP_CELLS = 10_000


def _check_grid(tps: list[int], pages: list[int | None], other_cells: int) -> None:
    """Grid-wide values are refused up front (a per-cell error would print a table of errors)."""
    from ..core.validate import MAX_PAGE_SIZE, check_int
    from ..planner.config_fields import MAX_PARALLEL

    for tp in tps:
        check_int(tp, "--tp", minimum=1, maximum=MAX_PARALLEL)
    for page in pages:
        if page is not None:
            check_int(page, "--page-size", minimum=1, maximum=MAX_PAGE_SIZE, fix="SGLang's --page-size is positive")
    cells = len(tps) * len(pages) * other_cells
    if cells > MAX_SWEEP_CELLS:
        raise KVCacheConfigError(f"the sweep grid has {cells:,} cells, more than {MAX_SWEEP_CELLS:,}; narrow the lists")


def _int_list(flag: str, text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise KVCacheConfigError(f"{flag} takes a comma list of integers, e.g. 1,2,4,8; got {text!r}") from exc
    if not values:
        raise KVCacheConfigError(f"{flag} is empty; give a comma list, e.g. 1,2,4,8")
    return values


def _str_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _unique(values: list[Any]) -> list[Any]:
    """``values`` without repeats, in their first order (``--tp 1,1,2`` plans TP 1 once)."""
    return list(dict.fromkeys(values))
