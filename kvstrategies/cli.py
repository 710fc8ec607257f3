"""``kvstrategies``: plan a deployment from the command line.

Every user error is one line on stderr and exit code 2 (no traceback). Planning never
imports torch unless ``--build-check`` asks to allocate the pools on ``meta``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import KVCacheConfigError


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", help="preset name, HF id of a preset, config.json path or model folder")
    parser.add_argument("--case", type=Path, help="plan a case file (DESIGN.md case format) instead of flags")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel size (default 1)")
    parser.add_argument("--pp-size", type=int, default=1)
    parser.add_argument("--pp-rank", type=int, default=0)
    parser.add_argument("--dcp", type=int, default=1, help="decode-context-parallel size")
    parser.add_argument("--attn-dp", type=int, default=1, help="attention data-parallel size")
    parser.add_argument("--kv-cache-dtype", default="auto")
    parser.add_argument("--model-dtype", default=None, help="serving dtype (default: from the config)")
    parser.add_argument("--page-size", type=int, default=1)
    parser.add_argument("--available-bytes", default=None, help="KV budget per rank, e.g. 40GiB, 42949672960")
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
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--build-check", action="store_true", help="also allocate on meta (imports torch)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kvstrategies", description="Plan SGLang-compatible KV-cache pools.")
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="how many tokens and requests fit, and the pools that hold them")
    _add_model_arguments(plan)
    presets = sub.add_parser("presets", help="list the shipped model presets")
    presets.add_argument("--json", action="store_true")
    return parser


def case_from_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """Translate flags into a case dict, so flags and case files share one code path."""
    from .gpus import parse_bytes

    if args.model is None:
        raise KVCacheConfigError("name a model (preset, config.json or folder) or pass --case FILE")
    if args.available_bytes is None:
        raise KVCacheConfigError("--available-bytes is required (the KV budget per rank, e.g. 40GiB)")
    case: dict[str, Any] = {
        "name": str(args.model),
        "tp_size": args.tp,
        "pp_size": args.pp_size,
        "pp_rank": args.pp_rank,
        "dcp_size": args.dcp,
        "attn_dp_size": args.attn_dp,
        "kv_cache_dtype": args.kv_cache_dtype,
        "page_size": args.page_size,
        "available_bytes": parse_bytes(args.available_bytes),
        "max_tokens": args.max_total_tokens,
        "max_running_requests": args.max_running_requests,
        "context_length": args.context_length,
        "device": args.device,
        "attention_backend": args.attention_backend,
        "speculative_algorithm": args.speculative_algorithm,
        "eagle_draft_num_layers": args.speculative_draft_layers,
        "speculative_num_draft_tokens": args.speculative_num_draft_tokens,
        "swa_full_tokens_ratio": args.swa_full_tokens_ratio,
        "chunked_prefill_size": args.chunked_prefill_size,
        "disable_radix_cache": args.disable_radix_cache,
    }
    case.update(model_source(str(args.model)))
    if args.model_dtype is not None:
        case["model_dtype"] = args.model_dtype
    else:
        case["model_dtype"] = _config_model_dtype(case)
    return case


def model_source(model: str) -> dict[str, Any]:
    """``{"preset": name}`` or ``{"hf_config": dict}`` for a preset, config.json or model folder."""
    from .case import read_json_file
    from .presets import resolve_preset_name

    path = Path(model)
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        return {"hf_config": read_json_file(path)}
    short = resolve_preset_name(model)
    if short is None:
        from .presets import preset_names

        raise KVCacheConfigError(
            f"{model!r} is neither a preset nor a config.json path; presets: {', '.join(preset_names())}"
        )
    return {"preset": short}


def _config_model_dtype(case: dict[str, Any]) -> str:
    from .models.hf import text_config
    from .models.parse import model_dtype_of
    from .presets import load_preset_config

    config = case["hf_config"] if "hf_config" in case else load_preset_config(case["preset"])
    return model_dtype_of(config, text_config(config)).torch_name


def _human(document: dict[str, Any], planned: Any) -> str:
    from .pools.layout import BufferRole

    sizes = document["sizes"]
    ctx = planned.ctx
    lines = [
        f"model          {', '.join(ctx.geometry.architectures) or ctx.geometry.model_type} ({ctx.geometry.family})",
        f"strategy       {document['configurator']}",
        f"kv dtype       {ctx.kv_cache_dtype.name} ({ctx.kv_cache_dtype.dtype}, stored as {ctx.kv_cache_dtype.store_dtype})",
        f"layout         tp={ctx.parallel.tp_size} pp={ctx.parallel.pp_size} (rank {ctx.parallel.pp_rank}) "
        f"dcp={ctx.parallel.dcp_size} page={ctx.page_size}",
        f"budget         {planned.available_bytes:,} B ({planned.available_bytes / 2**30:.2f} GiB)",
        f"cell size      {document['cell_size']:,} B/token",
        f"tokens         {sizes['max_total_num_tokens']:,}",
        f"requests       {sizes['max_running_requests']:,}",
    ]
    for key in ("full_max_total_num_tokens", "swa_max_total_num_tokens", "max_mamba_cache_size"):
        if sizes.get(key) is not None:
            lines.append(f"{key:<15}{sizes[key]:,}")
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
    return "\n".join(lines)


def run_plan(args: argparse.Namespace) -> int:
    from .api import plan
    from .case import load_case, parse_case
    from .report import plan_document

    case = load_case(args.case) if args.case is not None else parse_case(case_from_arguments(args))
    planned = plan(
        case.settings,
        case.available_bytes,
        max_tokens=case.max_tokens,
        pool_max_tokens=case.pool_max_tokens,
        pool_max_running_requests=case.pool_max_running_requests,
        pool_max_mamba_cache_size=case.pool_max_mamba_cache_size,
    )
    document = plan_document(planned, measure=args.build_check)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print(_human(document, planned))
    return 0


def run_presets(args: argparse.Namespace) -> int:
    from .models import parse_hf_config
    from .presets import load_preset_config, preset_index

    rows = []
    for short, hf_id in sorted(preset_index().items()):
        geometry = parse_hf_config(load_preset_config(short))
        rows.append({"name": short, "hf_id": hf_id, "family": geometry.family})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print(f"{row['name']:<24}{row['family']:<16}{row['hf_id']}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "plan":
            return run_plan(args)
        return run_presets(args)
    except KVCacheConfigError as exc:
        print(f"kvstrategies: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
