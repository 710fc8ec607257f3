"""``kvstrategies plan``: how many tokens and requests fit, and the pools that hold them.

``plan MODEL --gpu H100 --tp 8 --kv-cache-dtype fp8_e4m3`` answers "how many tokens and requests
fit": SGLang's launch defaults fill what was left out, the KV budget comes from the GPU, the
weights and the memory fraction, and the report shows the defaults applied, where the memory
goes, the concurrency per request length and the longest request that fits (with the settings
that would make the whole context fit). ``--available-bytes`` gives the KV budget directly.
``plan --case FILE --json`` prints the case document compared with SGLang, unchanged, and reads
no planner module. Nothing imports torch unless ``--build-check`` asks to allocate the pools on
``meta``; the planner logic lives in :mod:`kvstrategies.planner`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .arguments import accelerator, add_deployment_arguments, request_from_arguments

if TYPE_CHECKING:
    from ..planner.deployment import DeploymentPlan
    from ..sglang.pasted_command import LaunchCommand


def add_parser(sub: Any, command: str) -> None:
    """The ``plan`` subparser, added to ``sub`` as ``command``."""
    plan = sub.add_parser(
        command,
        usage="%(prog)s [MODEL] [flags] [-- SGLANG LAUNCH COMMAND]",
        help="how many tokens and requests fit, and the pools that hold them",
        description="Plan one deployment. After `--`, paste an SGLang launch command "
        "(python -m sglang.launch_server ... / sglang serve ...): its memory flags are planned, the others listed "
        "as ignored.",
    )
    add_deployment_arguments(plan)
    plan.add_argument("--case", type=Path, help="plan a case file (the format of cases/*.json) instead of flags")
    plan.add_argument("--gpu", default=None, help="GPU name (H100-80GB, H200, B200...): apply SGLang's launch defaults")
    plan.add_argument("--tp", "--tp-size", "--tensor-parallel-size", dest="tp", type=int, default=1,
                      help="tensor-parallel size (default 1)")  # fmt: skip
    plan.add_argument("--pp-rank", type=int, default=0)
    plan.add_argument("--kv-cache-dtype", default=None, help="default: auto, or SGLang's launch choice with --gpu")
    plan.add_argument("--page-size", type=int, default=None, help="default: 1, or SGLang's launch choice with --gpu")
    plan.add_argument("--json", action="store_true", help="machine-readable output (errors too: one JSON object)")
    plan.add_argument(
        "--brief", action="store_true",
        help="only the answer, the SGLang command that realizes it and, when the context does not fit, the fixes",
    )  # fmt: skip
    plan.add_argument("--build-check", action="store_true", help="also allocate on meta (imports torch)")
    from ..core.releases import NEWEST_VLLM
    from ..vllm.arguments import add_vllm_arguments

    plan.add_argument("--engine", choices=["sglang", "vllm"], default=None,
                      help=f"plan for this engine (vllm: {NEWEST_VLLM.label}'s budget rule and sizing, "
                      "docs/vllm-bridge.md)")
    plan.add_argument("--vllm-version", default=None,
                      help=f"with --engine vllm: the vLLM release (default: {NEWEST_VLLM.text})")  # fmt: skip
    add_vllm_arguments(plan)
    plan.add_argument("--plot", type=Path, default=None, help="write the breakdown as a stacked bar PNG (matplotlib)")


def run(args: argparse.Namespace) -> int:
    """``plan``: from a case file (the core library only, unless the text report or a plot
    needs the planner's view of it) or from flags (the planner)."""
    command: LaunchCommand | None = getattr(args, "launch_command", None)
    from ..api import LayoutError, plan
    from ..document import partial_plan_document, plan_document

    lengths = tuple(args.request_lengths or ())
    if args.plot is not None:  # refuse a bad --plot before planning, not after
        from ..planner.plot import check_plot_path

        check_plot_path(args.plot)
    from ..vllm.arguments import check_engine_flags, is_vllm_plan

    check_engine_flags(args)
    if is_vllm_plan(args):
        if args.case is not None:
            return _plan_vllm_case(args)
        from ..vllm.planner.cli import run_vllm_plan

        return run_vllm_plan(args, () if command is None else command.notes)
    deployment: DeploymentPlan | None
    if args.case is not None:
        from ..case import load_case

        case = load_case(args.case, sglang_version=args.sglang_version)
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
                exc.reported_as_json = True  # type: ignore[attr-defined]  # (the one JSON object)
            raise
        deployment = None
        if not args.json or args.plot is not None:
            from ..planner.deployment import deployment_from_case

            deployment = deployment_from_case(case, planned, lengths)
    else:
        from ..planner.replan import plan_or_replan

        deployment = plan_or_replan(request_from_arguments(args, accelerator(args.gpu, args.gpu_memory)))
        planned = deployment.planned
    from .. import __version__

    document = {"version": __version__, **plan_document(planned, measure=args.build_check)}
    if args.plot is not None and deployment is not None:
        from ..planner.plot import plot_breakdown

        written = plot_breakdown(deployment, args.plot)
        print(f"kvstrategies: wrote the memory breakdown plot to {written}", file=sys.stderr)
    if args.json:
        if args.case is None and deployment is not None:
            from ..planner.report import planner_document

            document["planner"] = planner_document(deployment)  # case mode stays as SGLang compares it
            if command is not None:
                document["planner"]["launch_command"] = {"plan_args": list(command.plan_args),
                                                         "ignored": list(command.ignored)}  # fmt: skip
        print(json.dumps(document, indent=2))
        return 0
    if deployment is not None:
        from ..planner.report import answer_text, fixes_text, run_text

        print("\n".join([*answer_text(deployment), *run_text(deployment)]))
        if args.brief:
            print("\n".join(fixes_text(deployment)), end="\n" if deployment.fixes else "")
            return 0
        print()
    if command is not None:
        print("\n".join(f"note: {text}" for text in command.notes) or "note: every flag of the launch command planned")
        print()
    print(_human(document, planned))
    if deployment is not None:
        from ..planner.report import planner_text

        print()
        print(planner_text(deployment))
    return 0


def _plan_vllm_case(args: argparse.Namespace) -> int:
    """``plan --case FILE --engine vllm``: the vLLM strategies' document (the keys vLLM's bridge answers)."""
    from ..api import plan
    from ..case import load_case
    from ..vllm.strategies.document import vllm_plan_document

    case = load_case(args.case, engine="vllm", vllm_version=args.vllm_version)
    document = vllm_plan_document(plan(case.settings, case.available_bytes))
    if args.json:
        print(json.dumps(document, indent=2))
        return 0
    settings = document["vllm_settings"]
    print(f"{document['engine']} on {document['gpu']}: {document['capacity_log']}")
    print(f"  num_gpu_blocks {document['num_gpu_blocks']:,} of {document['block_size']} tokens, "
          f"{len(document['kv_cache_groups'])} KV cache groups, backends {', '.join(document['attention_backends'])}")
    print(f"  max_model_len {settings['max_model_len']:,}, max_num_batched_tokens "
          f"{settings['max_num_batched_tokens']:,}, max_in_flight_tokens {settings['max_in_flight_tokens']:,}, "
          f"padding layers {document['padding_layers']}")
    return 0


def _strategy_name(document: dict[str, Any]) -> str:
    """SGLang's configurator class in the plan's release; the project's own class in parentheses where it is
    another (DeepSeek-V4 up to 0.5.20: ``DSV4PoolConfigurator (kvstrategies: RatioOnlyDSV4PoolConfigurator)``)."""
    ours = str(document["configurator"])
    engine = str(document.get("sglang_configurator") or ours)
    return engine if engine == ours else f"{engine} (kvstrategies: {ours})"


def _human(document: dict[str, Any], planned: Any) -> str:
    from ..pools.layout import BufferRole

    sizes = document["sizes"]
    ctx = planned.ctx
    lines = [
        f"model          {', '.join(ctx.geometry.architectures) or ctx.geometry.model_type} ({ctx.geometry.family})",
        f"strategy       {_strategy_name(document)}",
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
        from ..strategies.request_math import estimated_max_running_requests

        uncapped = estimated_max_running_requests(sizes["max_total_num_tokens"], ctx)
        if sizes["max_running_requests"] < uncapped:
            lines.append(
                f"{'':<15}requests capped by the Mamba state cache: {uncapped:,} -> "
                f"{sizes['max_running_requests']:,} (max_mamba_cache_size // slots per request)"
            )
    if planned.pool_sizes not in (planned.sizes, planned.resolution.sizes):
        lines.append(
            f"what-if pool   the pools below are built for {planned.pool_sizes.max_total_num_tokens:,} tokens, "
            f"{planned.pool_sizes.max_running_requests or 0:,} requests (the case's pool_max_* sizes), "
            "not for the planned capacity above"
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
