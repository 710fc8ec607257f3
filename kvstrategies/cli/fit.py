"""``kvstrategies fit``: what fits my machine -- every shipped model ranked by what it serves on
the GPUs given (:mod:`kvstrategies.planner.machine_fit`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import KVCacheConfigError
from .arguments import accelerator


def add_parser(sub: Any, command: str) -> None:
    """The ``fit`` subparser, added to ``sub`` as ``command``."""
    fit = sub.add_parser(
        command,
        help="what fits my machine: rank every shipped model by what it serves on the GPUs given",
        description="Plan every shipped preset and checkpoint on COUNT GPUs in each layout (TP dividing COUNT, "
        "EP for MoE models, each KV dtype) and rank them by the requests of --request-length tokens the best "
        "layout holds at once on the whole machine; a model that fits no layout shows the planner's refusal.",
    )
    fit.add_argument("--gpu", default=None, help="GPU name, e.g. H100, RTX-4090, MI300X (kvstrategies gpus)")
    fit.add_argument("--gpu-memory", default=None, help="GPU capacity, e.g. 24GiB (overrides --gpu's figure)")
    fit.add_argument("--count", type=int, default=1, help="how many GPUs the machine has (default 1)")
    fit.add_argument("--request-length", type=int, default=None, metavar="TOKENS",
                     help="request length answered (default 8192, or the model's context when shorter)")  # fmt: skip
    fit.add_argument("--kv-cache-dtype", default=None,
                     help="comma list of KV dtypes to try (default: the launch's choice and fp8_e4m3)")  # fmt: skip
    fit.add_argument("--json", action="store_true", help="JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    """``fit``: the ranking as a table or JSON."""
    from ..planner.machine_fit import DEFAULT_FIT_LENGTH, DEFAULT_KV_DTYPES, fit_machine, fit_table

    gpu = accelerator(args.gpu, args.gpu_memory)
    if gpu is None:
        raise KVCacheConfigError("name the GPUs: --gpu H100 (kvstrategies gpus lists them) or --gpu-memory 80GiB")
    kv_dtypes: tuple[str | None, ...] = DEFAULT_KV_DTYPES
    if args.kv_cache_dtype is not None:
        names = [part.strip() for part in args.kv_cache_dtype.split(",") if part.strip()]
        kv_dtypes = tuple(dict.fromkeys(None if name == "auto" else name for name in names))
    result = fit_machine(gpu, args.count, request_length=args.request_length, kv_dtypes=kv_dtypes)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    fitting = sum(m.fits for m in result.models)
    length = f"{DEFAULT_FIT_LENGTH:,} (or the model's context when shorter)" if args.request_length is None \
        else f"{args.request_length:,}"
    print(f"{result.count} x {result.gpu}, requests of {length} tokens: {fitting} of "
          f"{len(result.models)} shipped models fit (tokens and requests on the whole machine)")  # fmt: skip
    print(fit_table(result))
    return 0
