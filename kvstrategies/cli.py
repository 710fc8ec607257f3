"""``kvstrategies``: plan a deployment from the command line.

``plan MODEL --gpu H100 --tp 8 --kv-cache-dtype fp8_e4m3`` answers "how many tokens and requests
fit": SGLang's launch defaults fill what was left out, the KV budget comes from the GPU, the
weights and the memory fraction, and the report shows the defaults applied, where the memory
goes, the concurrency per request length and the longest request that fits (with the settings
that would make the whole context fit). ``--available-bytes`` gives the KV budget directly.
``plan --case FILE --json`` prints the case document compared with SGLang, unchanged.
``sweep`` runs a grid, ``presets`` lists the shipped models. Every user error is one line on
stderr and exit code 2 (no traceback). Nothing imports torch unless ``--build-check`` asks to
allocate the pools on ``meta``; the planner logic lives in :mod:`kvstrategies.planner`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import KVCacheConfigError

if TYPE_CHECKING:
    from .gpus import Accelerator
    from .planner import DeploymentRequest


def _add_deployment_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags shared by ``plan`` and ``sweep`` (SGLang server-argument names where they exist)."""
    parser.add_argument("model", nargs="?", help="preset name, HF id of a preset, config.json path or model folder")
    parser.add_argument("--pp-size", type=int, default=1)
    parser.add_argument("--dcp", type=int, default=1, help="decode-context-parallel size")
    parser.add_argument("--attn-dp", type=int, default=1, help="attention data-parallel size")
    parser.add_argument("--model-dtype", default=None, help="serving dtype (default: from the config)")
    parser.add_argument("--available-bytes", default=None, help="KV budget per rank, e.g. 40GiB (skips the GPU step)")
    parser.add_argument("--gpu-memory", default=None, help="GPU capacity, e.g. 80GiB (overrides --gpu's figure)")
    parser.add_argument("--mem-fraction-static", type=float, default=None, help="default: SGLang's launch heuristic")
    parser.add_argument(
        "--weight-bytes", default=None, help="resident weights per rank, e.g. 16GiB (default: estimate)"
    )
    parser.add_argument("--weight-dtype", default=None, help="dtype for the weight estimate (default: the config's)")
    parser.add_argument("--weight-quantization", default=None, help="none, fp8, mxfp4, nvfp4, w4a16 (weight estimate)")
    parser.add_argument("--gpu-overhead", default="1GiB", help="memory held before weights load (CUDA context, NCCL)")
    parser.add_argument("--max-total-tokens", type=int, default=None, help="user token cap (SGLang --max-total-tokens)")
    parser.add_argument("--max-running-requests", type=int, default=None)
    parser.add_argument("--context-length", type=int, default=None)
    parser.add_argument("--device", default="cuda", help="cuda, npu, cpu (selects layouts)")
    parser.add_argument("--attention-backend", default=None)
    parser.add_argument("--speculative-algorithm", default=None)
    parser.add_argument("--speculative-draft-layers", type=int, default=None, help="draft model layers")
    parser.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    parser.add_argument("--swa-full-tokens-ratio", type=float, default=None)
    parser.add_argument("--chunked-prefill-size", type=int, default=None)
    parser.add_argument("--disable-radix-cache", action="store_true")
    parser.add_argument(
        "--request-length",
        "--context-length-request",
        dest="request_lengths",
        type=int,
        action="append",
        default=None,
        help="answer the concurrency for requests of this many tokens (repeatable)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kvstrategies", description="Plan SGLang-compatible KV-cache pools.")
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="how many tokens and requests fit, and the pools that hold them")
    _add_deployment_arguments(plan)
    plan.add_argument("--case", type=Path, help="plan a case file (DESIGN.md case format) instead of flags")
    plan.add_argument("--gpu", default=None, help="GPU name (H100-80GB, H200, B200...): apply SGLang's launch defaults")
    plan.add_argument("--tp", type=int, default=1, help="tensor-parallel size (default 1)")
    plan.add_argument("--pp-rank", type=int, default=0)
    plan.add_argument("--kv-cache-dtype", default=None, help="default: auto, or SGLang's launch choice with --gpu")
    plan.add_argument("--page-size", type=int, default=None, help="default: 1, or SGLang's launch choice with --gpu")
    plan.add_argument("--json", action="store_true", help="machine-readable output")
    plan.add_argument("--build-check", action="store_true", help="also allocate on meta (imports torch)")
    plan.add_argument("--plot", type=Path, default=None, help="write the breakdown as a stacked bar PNG (matplotlib)")
    sweep = sub.add_parser("sweep", help="a grid of plans over GPUs, TP sizes, KV dtypes and page sizes")
    _add_deployment_arguments(sweep)
    sweep.add_argument("--gpu", default=None, help="comma list of GPU names, e.g. H100-80GB,H200")
    sweep.add_argument("--tp", default="1", help="comma list, e.g. 1,2,4,8")
    sweep.add_argument("--kv-cache-dtype", default=None, help="comma list, e.g. bf16,fp8_e4m3 (default: the launch's)")
    sweep.add_argument("--page-size", default=None, help="comma list, e.g. 1,64 (default: the launch's)")
    sweep.add_argument("--csv", action="store_true", help="CSV instead of a table")
    sweep.add_argument("--json", action="store_true", help="JSON rows instead of a table")
    presets = sub.add_parser("presets", help="list the shipped model presets and the strategy that sizes each")
    presets.add_argument("--json", action="store_true")
    verify = sub.add_parser("verify", help="compare the plans with a live engine's own (docs/sglang-bridge.md)")
    verify.add_argument("--against", choices=["sglang"], required=True, help="the engine to compare with")
    verify.add_argument("cases", nargs="*", type=Path, help="case files or folders (default: tests/cases)")
    verify.add_argument("-v", "--verbose", action="store_true", help="every difference of every case")
    return parser


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


def accelerator(name: str | None, memory: str | None) -> Accelerator | None:
    """``--gpu`` (looked up) and/or ``--gpu-memory`` (a capacity; alone: a generic CUDA GPU)."""
    from .gpus import Accelerator, lookup_gpu, parse_bytes

    mib = None if memory is None else parse_bytes(memory) / 2**20
    if name is not None:
        gpu = lookup_gpu(name)
        return gpu if mib is None else gpu.with_capacity(mib)
    if mib is None:
        return None
    note = "GPU generation unknown (--gpu-memory without --gpu): launch rules of a generic CUDA GPU"
    return Accelerator(f"GPU {memory}", mib, "cuda", note=note)


def request_from_arguments(args: argparse.Namespace, gpu: Accelerator | None) -> DeploymentRequest:
    """Translate the flags into a :class:`~kvstrategies.planner.DeploymentRequest`."""
    from .gpus import parse_bytes
    from .planner import DeploymentRequest

    if args.model is None:
        raise KVCacheConfigError("name a model (preset, config.json or folder) or pass --case FILE")

    def size(value: str | None) -> int | None:
        return None if value is None else parse_bytes(value)

    return DeploymentRequest(
        model=str(args.model),
        source=model_source(str(args.model)),
        tp_size=args.tp if isinstance(args.tp, int) else 1,
        pp_size=args.pp_size,
        pp_rank=getattr(args, "pp_rank", 0),
        dcp_size=args.dcp,
        attn_dp_size=args.attn_dp,
        kv_cache_dtype=args.kv_cache_dtype if isinstance(args.kv_cache_dtype, str) else None,
        page_size=args.page_size if isinstance(args.page_size, int) else None,
        model_dtype=args.model_dtype,
        available_bytes=size(args.available_bytes),
        gpu=gpu,
        mem_fraction_static=args.mem_fraction_static,
        weight_bytes=size(args.weight_bytes),
        weight_dtype=args.weight_dtype,
        weight_quantization=args.weight_quantization,
        overhead_bytes=parse_bytes(args.gpu_overhead),
        max_total_tokens=args.max_total_tokens,
        max_running_requests=args.max_running_requests,
        context_length=args.context_length,
        device=args.device,
        attention_backend=args.attention_backend,
        speculative_algorithm=args.speculative_algorithm,
        speculative_draft_layers=args.speculative_draft_layers,
        speculative_num_draft_tokens=args.speculative_num_draft_tokens,
        swa_full_tokens_ratio=args.swa_full_tokens_ratio,
        chunked_prefill_size=args.chunked_prefill_size,
        disable_radix_cache=args.disable_radix_cache,
        request_lengths=tuple(args.request_lengths or ()),
    )


def model_source(model: str) -> dict[str, Any]:
    """``{"preset": name}`` or ``{"hf_config": dict}`` for a preset, config.json or model folder."""
    from .jsonio import read_json_object
    from .presets import resolve_preset_name

    path = Path(model)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise KVCacheConfigError(
                f"model folder {path} has no config.json; pass a checkpoint folder, a config.json path or a preset"
            )
        path = path / "config.json"
    if path.is_file():
        return {"hf_config": read_json_object(path, "a model config (config.json)")}
    short = resolve_preset_name(model)
    if short is None:
        from .presets import preset_names

        raise KVCacheConfigError(
            f"{model!r} is neither a preset nor a config.json path; presets: {', '.join(preset_names())}"
        )
    return {"preset": short}


def _human(document: dict[str, Any], planned: Any) -> str:
    from .pools.layout import BufferRole

    sizes = document["sizes"]
    ctx = planned.ctx
    lines = [
        f"model          {', '.join(ctx.geometry.architectures) or ctx.geometry.model_type} ({ctx.geometry.family})",
        f"strategy       {document['configurator']}",
        f"kv dtype       {ctx.kv_cache_dtype.name} ({ctx.kv_cache_dtype.dtype}, "
        f"stored as {ctx.kv_cache_dtype.store_dtype})",
        f"layout         tp={ctx.parallel.tp_size} pp={ctx.parallel.pp_size} (rank {ctx.parallel.pp_rank}) "
        f"dcp={ctx.parallel.dcp_size} page={ctx.page_size}",
        f"budget         {planned.available_bytes:,} B ({planned.available_bytes / 2**30:.2f} GiB)",
        f"cell size      {document['cell_size']:,} B/token",
        f"tokens         {sizes['max_total_num_tokens']:,}",
        f"requests       {sizes['max_running_requests']:,}",
    ]
    for key in ("full_max_total_num_tokens", "swa_max_total_num_tokens", "max_mamba_cache_size"):
        if sizes.get(key) is not None:
            lines.append(f"{key + ' ':<15}{sizes[key]:,}")
    if sizes.get("max_mamba_cache_size") is not None:
        from .request_math import estimated_max_running_requests

        uncapped = estimated_max_running_requests(sizes["max_total_num_tokens"], ctx)
        if sizes["max_running_requests"] < uncapped:
            lines.append(
                f"{'':<15}requests capped by the Mamba state cache: {uncapped:,} -> "
                f"{sizes['max_running_requests']:,} (max_mamba_cache_size // slots per request)"
            )
    final = planned.resolution.sizes
    if final != planned.sizes:
        lines.append(f"after caps     tokens {final.max_total_num_tokens:,}, requests {final.max_running_requests:,}")
    lines.append("")
    lines.append(f"{'pool':<28}{'buffers':>8}{'bytes':>20}")
    for layout in planned.layout.pools:
        by_role = layout.bytes_by_role()
        total = sum(by_role.values())
        lines.append(f"{layout.pool_class:<28}{len(layout.allocations):>8}{total:>20,}")
        for role in BufferRole:
            if role.value in by_role and len(by_role) > 1:
                lines.append(f"  {role.value:<26}{'':>8}{by_role[role.value]:>20,}")
    lines.append(f"{'total':<28}{'':>8}{planned.layout.planned_bytes:>20,}")
    for note in document.get("notes", ()):
        lines.append(f"note: {note}")
    return "\n".join(lines)


def run_plan(args: argparse.Namespace) -> int:
    from .api import LayoutError, plan
    from .case import load_case
    from .planner import deployment_from_case, plan_deployment
    from .planner.report import planner_document, planner_text
    from .report import partial_plan_document, plan_document

    lengths = tuple(args.request_lengths or ())
    if args.case is not None:
        case = load_case(args.case)
        try:
            planned = plan(
                case.settings,
                case.available_bytes,
                max_tokens=case.max_tokens,
                pool_max_tokens=case.pool_max_tokens,
                pool_max_running_requests=case.pool_max_running_requests,
                pool_max_mamba_cache_size=case.pool_max_mamba_cache_size,
            )
        except LayoutError as exc:
            if args.json:  # the sizes stand even when the pool cannot be built: report them
                print(json.dumps(partial_plan_document(exc), indent=2))
            raise
        deployment = None if args.json and args.plot is None else deployment_from_case(case, planned, lengths)
    else:
        deployment = plan_deployment(request_from_arguments(args, accelerator(args.gpu, args.gpu_memory)))
        planned = deployment.planned
    document = plan_document(planned, measure=args.build_check)
    if args.plot is not None and deployment is not None:
        from .planner.plot import plot_breakdown

        plot_breakdown(deployment, args.plot)
    if args.json:
        if args.case is None and deployment is not None:
            document["planner"] = planner_document(deployment)  # case mode stays as SGLang compares it
        print(json.dumps(document, indent=2))
    else:
        print(_human(document, planned))
        if deployment is not None:
            print()
            print(planner_text(deployment))
    return 0


def run_sweep(args: argparse.Namespace) -> int:
    from .planner import sweep, sweep_csv, sweep_table

    gpus: list[Accelerator | None] = []
    for name in _str_list(args.gpu) if args.gpu else [None]:
        gpus.append(accelerator(name, args.gpu_memory))
    tps = _int_list("--tp", args.tp)
    kv_dtypes: list[str | None] = list(_str_list(args.kv_cache_dtype)) if args.kv_cache_dtype else [None]
    pages: list[int | None] = list(_int_list("--page-size", args.page_size)) if args.page_size else [None]
    base = request_from_arguments(argparse.Namespace(**{**vars(args), "tp": 1, "kv_cache_dtype": None,
                                                        "page_size": None}), gpus[0])  # fmt: skip
    rows = sweep(base, tp_sizes=tps, kv_cache_dtypes=kv_dtypes, page_sizes=pages, gpus=gpus)
    if args.csv:
        print(sweep_csv(rows), end="")
    elif args.json:
        import dataclasses

        print(json.dumps([dataclasses.asdict(row) for row in rows], indent=2))
    else:
        print(sweep_table(rows))
    return 0


def run_presets(args: argparse.Namespace) -> int:
    from .case import parse_case
    from .presets import preset_index
    from .strategies.registry import select_configurator

    rows = []
    for short, hf_id in sorted(preset_index().items()):
        settings = parse_case({"preset": short, "available_bytes": 1}).settings  # a default context
        try:
            strategy = type(select_configurator(settings)).__name__
        except KVCacheConfigError as exc:
            strategy = f"none ({exc})"
        rows.append({"name": short, "hf_id": hf_id, "family": settings.geometry.family, "strategy": strategy})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print(f"{row['name']:<24}{row['family']:<16}{row['strategy']:<32}{row['hf_id']}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    """``verify --against ENGINE``: one dispatch per engine (and, later, per mode)."""
    from .integrations.sglang.verify import format_report, verify

    paths: list[Path] = []
    for given in args.cases or [Path("tests") / "cases"]:
        if given.is_dir():
            paths.extend(sorted(given.glob("*.json")))
        elif given.is_file():
            paths.append(given)
        else:
            raise KVCacheConfigError(f"verify: no case file or folder {given}")
    if not paths:
        raise KVCacheConfigError("verify: no case files found; pass case files or a folder of them")
    report = verify(paths)
    for line in format_report(report, verbose=args.verbose):
        print(line)
    return 0 if report.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "plan":
            return run_plan(args)
        if args.command == "sweep":
            return run_sweep(args)
        if args.command == "verify":
            return run_verify(args)
        return run_presets(args)
    except KVCacheConfigError as exc:
        print(f"kvstrategies: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `kvstrategies plan ... | head`
        sys.stderr.close()
        return 0
    except OSError as exc:  # e.g. --plot into a folder that does not exist
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"kvstrategies: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
