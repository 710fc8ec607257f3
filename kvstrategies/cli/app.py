"""``kvstrategies``: plan a deployment from the command line.

``plan MODEL --gpu H100 --tp 8 --kv-cache-dtype fp8_e4m3`` answers "how many tokens and requests
fit": SGLang's launch defaults fill what was left out, the KV budget comes from the GPU, the
weights and the memory fraction, and the report shows the defaults applied, where the memory
goes, the concurrency per request length and the longest request that fits (with the settings
that would make the whole context fit). ``--available-bytes`` gives the KV budget directly.
``plan --case FILE --json`` prints the case document compared with SGLang, unchanged.
``sweep`` runs a grid, ``presets`` lists the shipped models, ``architectures`` the served
architectures the table knows (docs/adding-a-model.md). Every user error is one line on
stderr and exit code 2 (no traceback). Nothing imports torch unless ``--build-check`` asks to
allocate the pools on ``meta``; the planner logic lives in :mod:`kvstrategies.planner`.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ..core.quantization_names import QUANTIZATION
from ..errors import KVCacheConfigError

if TYPE_CHECKING:
    from ..planner.deployment import DeploymentPlan
    from ..planner.gpus import Accelerator
    from ..planner.request import DeploymentRequest
    from ..sglang.pasted_command import LaunchCommand


def _add_deployment_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags shared by ``plan`` and ``sweep``: SGLang's server-argument spellings are accepted
    as given (``--tp-size``, ``--pp-size``, ``--dcp-size``, ``--model-path``, ...)."""
    parser.add_argument(
        "model", nargs="?", help="preset name, HF id (local HF cache, or downloaded with the hub extra), "
        "config.json path or model folder"
    )  # fmt: skip
    model = parser.add_argument_group("model")
    model.add_argument("--model-path", "--model", dest="model_path", default=None, help="same as MODEL (SGLang)")
    model.add_argument("--model-dtype", "--dtype", dest="model_dtype", default=None,
                       help="serving dtype (default: from the config)")  # fmt: skip
    model.add_argument(
        "--assume-architecture", default=None, metavar="NAME",
        help="plan a config whose architecture SGLang does not serve as the served architecture NAME",
    )  # fmt: skip
    par = parser.add_argument_group("parallelism (SGLang names accepted)")
    par.add_argument("--pp-size", "--pipeline-parallel-size", dest="pp_size", type=int, default=1)
    par.add_argument("--dcp", "--dcp-size", "--decode-context-parallel-size", dest="dcp", type=int, default=1,
                     help="decode-context-parallel size")  # fmt: skip
    par.add_argument("--attn-dp", "--attn-dp-size", "--attention-data-parallel-size", dest="attn_dp", type=int,
                     default=None, help="attention data-parallel size (concurrency is per worker)")  # fmt: skip
    par.add_argument("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1,
                     help="data-parallel replicas (with --enable-dp-attention: the attention-DP size)")  # fmt: skip
    par.add_argument("--enable-dp-attention", action="store_true", help="SGLang's deprecated spelling: --dp-size "
                     "N becomes --attn-dp-size N")  # fmt: skip
    par.add_argument("--ep-size", "--expert-parallel-size", "--ep", dest="ep_size", type=int, default=None,
                     help="expert-parallel size: experts split over EP ranks, each over tp / ep")  # fmt: skip
    par.add_argument("--moe-runner-backend", default=None, help="SGLang's MoE runner (default: SGLang's choice)")
    mem = parser.add_argument_group("memory")
    mem.add_argument("--available-bytes", default=None, help="KV budget per rank, e.g. 40GiB (skips the GPU step)")
    mem.add_argument("--gpu-memory", default=None, help="GPU capacity, e.g. 80GiB (overrides --gpu's figure)")
    mem.add_argument("--mem-fraction-static", type=float, default=None, help="default: SGLang's launch heuristic")
    mem.add_argument("--weight-bytes", default=None, help="resident weights per rank, e.g. 16GiB (default: estimate)")
    mem.add_argument("--weight-dtype", default=None, help="dtype for the weight estimate (default: the config's)")
    mem.add_argument("--weight-quantization", default=None, help="none, fp8, mxfp4, nvfp4, w4a16 (weight estimate)")
    mem.add_argument("--quantization", dest="sglang_quantization", default=None, metavar="METHOD",
                     help=f"SGLang's spelling for the weight estimate: {', '.join(sorted(QUANTIZATION))}")  # fmt: skip
    mem.add_argument(
        "--gpu-overhead", default=None, help="memory held before weights load (default: modelled per GPU and TP)"
    )
    mem.add_argument(
        "--checkpoint", default=None, help="checkpoint folder whose safetensors headers/index give the weights"
    )
    srv = parser.add_argument_group("SGLang server arguments (same names and meaning)")
    srv.add_argument("--max-total-tokens", type=int, default=None, help="user token cap")
    srv.add_argument("--max-running-requests", type=int, default=None)
    srv.add_argument("--context-length", type=int, default=None)
    srv.add_argument(
        "--allow-context-length-override", action="store_true",
        help="accept --context-length above the model's maximum (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1)",
    )  # fmt: skip
    srv.add_argument("--device", default="cuda", help="cuda, npu, cpu (selects layouts)")
    srv.add_argument("--no-rocm-aiter", action="store_true",
                     help="ROCm without aiter (SGLANG_USE_AITER=0; SGLang's ROCm images set it to 1)")  # fmt: skip
    srv.add_argument("--attention-backend", default=None)
    srv.add_argument("--speculative-algorithm", default=None)
    srv.add_argument("--speculative-draft-layers", type=int, default=None, help="draft model layers (kvstrategies)")
    srv.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    srv.add_argument("--speculative-num-steps", type=int, default=None, help="default: SGLang's auto choice")
    srv.add_argument("--speculative-eagle-topk", type=int, default=None, help="default: SGLang's auto choice")
    srv.add_argument(
        "--speculative-draft-model-path", default=None, help="draft model folder or config.json (DFLASH needs one)"
    )
    srv.add_argument("--swa-full-tokens-ratio", type=float, default=None)
    srv.add_argument("--chunked-prefill-size", type=int, default=None)
    srv.add_argument("--disable-radix-cache", action="store_true")
    for flag, kind in LAUNCH_EXTRAS.items():
        if kind is bool:
            srv.add_argument(flag, action="store_true")
        else:
            srv.add_argument(flag, type=kind, default=None)
    from ..core.releases import NEWEST_SGLANG, SGLANG_RELEASES, release_labels

    parser.add_argument(
        "--sglang-version", default=None, metavar="X",
        help=f"the SGLang release to plan for: its launch defaults, flags and sizing (default: the newest "
        f"supported, {NEWEST_SGLANG.text}; supported: {release_labels(SGLANG_RELEASES)})",
    )  # fmt: skip
    parser.add_argument(
        "--request-length",
        "--context-length-request",
        dest="request_lengths",
        type=int,
        action="append",
        default=None,
        metavar="TOKENS",
        help="answer the concurrency for requests of this many tokens (repeatable)",
    )


class _OneLineErrors(argparse.ArgumentParser):
    """argparse, but a usage error is reported like every other user error (one stderr line,
    exit 2; with ``--json`` also a JSON object, :mod:`kvstrategies.planner.error_report`)."""

    def error(self, message: str) -> NoReturn:
        from ..planner.error_report import UsageError

        raise UsageError(f"{message} (see {self.prog} --help)")


#: further SGLang server arguments the launch defaults read (flag -> type); passed to
#: :class:`~kvstrategies.sglang.launch.defaults.LaunchSettings` under the flag's field name
LAUNCH_EXTRAS: dict[str, type] = {
    "--max-prefill-tokens": int,
    "--prefill-attention-backend": str,
    "--decode-attention-backend": str,
    "--disable-hybrid-swa-memory": bool,
    "--mamba-radix-cache-strategy": str,
    "--disable-cuda-graph": bool,
    "--disable-prefill-cuda-graph": bool,
    "--disable-overlap-schedule": bool,
    "--cuda-graph-max-bs-decode": int,
    "--moe-a2a-backend": str,
    "--disaggregation-mode": str,
    "--enable-multimodal": bool,
    "--language-only": bool,
}
#: LaunchSettings field of a flag whose name differs
_LAUNCH_FIELD = {"--cuda-graph-max-bs-decode": "cuda_graph_max_bs"}


def launch_extras(args: argparse.Namespace) -> dict[str, Any]:
    """The :data:`LAUNCH_EXTRAS` the user gave, keyed by LaunchSettings field."""
    out: dict[str, Any] = {}
    for flag, kind in LAUNCH_EXTRAS.items():
        dest = flag[2:].replace("-", "_")
        value = getattr(args, dest, None)
        if value is None or (kind is bool and not value):
            continue
        out[_LAUNCH_FIELD.get(flag, dest)] = value
    return out


#: the subcommands, in the order ``kvstrategies --help`` lists them
COMMANDS = ("plan", "sweep", "compare", "verify", "presets", "checkpoints", "architectures", "gpus", "releases")


class _VersionAction(argparse.Action):
    """``--version``: the package and the SGLang releases it models (worked out only when asked)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        from .. import __version__
        from ..core.releases import NEWEST_SGLANG, SGLANG_RELEASES

        span_text = f"SGLang {SGLANG_RELEASES[0].text}-{NEWEST_SGLANG.text} rules, default {NEWEST_SGLANG.text}"
        print(f"kvstrategies {__version__} ({span_text})")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``kvstrategies`` parser: every subcommand, or (``command``) only that one, which is
    all that parsing a command line starting with it needs (each subcommand costs its flags)."""
    parser = _OneLineErrors(
        prog="kvstrategies",
        description="Plan SGLang-compatible KV-cache pools: how many tokens and requests fit.",
        epilog="Paste a launch command: kvstrategies plan --gpu H100 -- python -m sglang.launch_server "
        "--model-path meta-llama/Llama-3.1-8B-Instruct --tp-size 1",
    )
    parser.add_argument("--version", action=_VersionAction, nargs=0, help="show program's version number and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS if command is None else (command,):
        _SUBCOMMANDS[name](sub)
    return parser


@functools.cache
def _parser(command: str | None) -> argparse.ArgumentParser:
    """:func:`build_parser`, built once per subcommand in a process (parsing leaves it unchanged)."""
    return build_parser(command)


def _plan_parser(sub: Any) -> None:
    plan = sub.add_parser(
        "plan",
        usage="%(prog)s [MODEL] [flags] [-- SGLANG LAUNCH COMMAND]",
        help="how many tokens and requests fit, and the pools that hold them",
        description="Plan one deployment. After `--`, paste an SGLang launch command "
        "(python -m sglang.launch_server ... / sglang serve ...): its memory flags are planned, the others listed "
        "as ignored.",
    )
    _add_deployment_arguments(plan)
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


def _sweep_parser(sub: Any) -> None:
    sweep = sub.add_parser(
        "sweep",
        help="a grid of plans over GPUs, TP sizes, KV dtypes and page sizes",
        description="A grid of plans. The concurrency column is for the first --request-length, else for "
        "8,192-token requests (or the model's context when shorter).",
    )
    _add_deployment_arguments(sweep)
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


def _compare_parser(sub: Any) -> None:
    from ..core.releases import NEWEST_VLLM

    compare = sub.add_parser(
        "compare",
        help="one deployment answered for SGLang and for vLLM side by side (tokens, concurrency, why they differ)",
        description=f"SGLang's planned deployment (its launch defaults and KV budget) beside {NEWEST_VLLM.label}'s "
        "sizing of the same model, GPU, TP and KV dtype on the same KV budget, at each --request-length (default: "
        "8192 and the model's context); with --gpu, a second table has each engine on its own rule's budget "
        "and why the budgets differ.",
    )
    _add_deployment_arguments(compare)
    compare.add_argument("--gpu", default=None, help="GPU name (H100-80GB, H200, B200...)")
    compare.add_argument("--tp", "--tp-size", "--tensor-parallel-size", dest="tp", type=int, default=1)
    compare.add_argument("--pp-rank", type=int, default=0)
    compare.add_argument("--kv-cache-dtype", default=None)
    compare.add_argument("--page-size", type=int, default=None, help="SGLang's page size (vLLM picks its block)")
    compare.add_argument("--own-budgets", dest="own_budgets", action="store_const", const=True, default=None,
                         help="also plan vLLM on its own budget (its gpu_memory_utilization rule); the default "
                         "with --gpu, unless the KV budget is given")  # fmt: skip
    compare.add_argument("--no-own-budgets", dest="own_budgets", action="store_const", const=False,
                         help="only the same-budget table")  # fmt: skip


def _verify_parser(sub: Any) -> None:
    from ..core.releases import NEWEST_VLLM

    verify = sub.add_parser(
        "verify", help="compare with SGLang's own code: case files (docs/sglang-bridge.md) or launch defaults"
    )
    verify.add_argument("--against", choices=["sglang", "vllm"], required=True,
                        help="the engine to compare with (vllm: docs/vllm-bridge.md)")  # fmt: skip
    verify.add_argument("cases", nargs="*", type=Path, help="case files or folders (default: cases/)")
    verify.add_argument("-v", "--verbose", action="store_true", help="every difference of every case")
    verify.add_argument(
        "--launch", nargs="?", const="", default=None, metavar="GRID",
        help="launch defaults: resolve each launch of GRID (a JSON list; default: the shipped grid) with "
        "SGLang's ServerArgs.resolve_once and with the planner, and diff every field",
    )  # fmt: skip
    verify.add_argument("--recorded", action="store_true",
                        help="use the engine's recorded answers (golden/sglang-*, golden/vllm-*; no engine needed)")
    verify.add_argument("--vllm-version", default=None, metavar="X",
                        help=f"with --against vllm --recorded: the release (default {NEWEST_VLLM.text})")  # fmt: skip
    verify.add_argument(
        "--sglang-version", default=None, metavar="X",
        help="the SGLang release to check (default: the installed one; with --recorded the newest recorded); "
        "with --launch live it must be the installed one",
    )  # fmt: skip
    verify.add_argument("--record", type=Path, default=None, metavar="DIR", help="write SGLang's live answers to DIR")
    verify.add_argument("--jobs", type=int, default=None, help="resolution workers (default: the CPUs, at most 8)")
    verify.add_argument("--show-equal", action="store_true", help="also list the launches that agree")
    verify.add_argument("--json", action="store_true")


def _releases_parser(sub: Any) -> None:
    rels = sub.add_parser(
        "releases", help="the engine releases modelled; with two releases, every rule that differs between them"
    )
    rels.add_argument("pair", nargs="*", metavar="RELEASE", help="two SGLang releases, e.g. 0.5.18 0.5.23")


def _newest_label() -> str:
    from ..core.releases import NEWEST_SGLANG

    return NEWEST_SGLANG.label


def _listing_parser(name: str, text: str | Callable[[], str]) -> Any:
    def add(sub: Any) -> None:
        sub.add_parser(name, help=text if isinstance(text, str) else text()).add_argument("--json", action="store_true")

    return add


_SUBCOMMANDS: dict[str, Any] = {
    "plan": _plan_parser,
    "sweep": _sweep_parser,
    "verify": _verify_parser,
    "presets": _listing_parser("presets", "list the shipped model presets and the strategy that sizes each"),
    "checkpoints": _listing_parser(
        "checkpoints", "list the shipped HF checkpoints (planned offline by their HF id) and their sources"
    ),
    "architectures": _listing_parser(
        "architectures", lambda: f"list the architectures {_newest_label()} serves that the planner knows"
    ),
    "gpus": _listing_parser("gpus", "list the GPU table: capacity as SGLang reads it and where it was checked"),
    "compare": _compare_parser,
    "releases": _releases_parser,
}


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


def accelerator(name: str | None, memory: str | None) -> Accelerator | None:
    """``--gpu`` (looked up) and/or ``--gpu-memory`` (a capacity; alone: a generic CUDA GPU)."""
    from ..planner.gpus import Accelerator, lookup_gpu, parse_bytes

    mib = None if memory is None else parse_bytes(memory) / 2**20
    if mib is not None and not 0 < mib * 2**20 <= 2**63 - 1:
        raise KVCacheConfigError(f"--gpu-memory must be a positive size up to 2**63 - 1 bytes, got {memory!r:.40}")
    if name is not None:
        gpu = lookup_gpu(name)
        return gpu if mib is None else gpu.with_capacity(mib)
    if mib is None:
        return None
    note = "GPU generation unknown (--gpu-memory without --gpu): launch rules of a generic CUDA GPU"
    return Accelerator(f"GPU {memory}", mib, "cuda", note=note)


def model_argument(args: argparse.Namespace) -> str:
    """MODEL, given positionally or as ``--model-path`` (not both, unless equal)."""
    given = [value for value in (args.model, args.model_path) if value is not None]
    if any(not value.strip() for value in given):
        raise KVCacheConfigError("the model name is empty; give a preset, HF id, config.json path or model folder")
    if not given:
        raise KVCacheConfigError(
            "name a model (preset, HF id, config.json or folder; or --model-path) or pass --case FILE"
        )
    if len(set(given)) > 1:
        raise KVCacheConfigError(f"two models given: {given[0]!r} and --model-path {given[1]!r}; keep one")
    return str(given[0])


def parallel_sizes(args: argparse.Namespace) -> tuple[int, int]:
    """``(attention-DP size, data-parallel replicas)`` from ``--attn-dp`` / ``--dp-size`` /
    ``--enable-dp-attention`` (SGLang's parallel_hook.handle_deprecated_dp_attention rule)."""
    dp = args.dp_size
    if dp < 1:
        raise KVCacheConfigError(f"--dp-size must be >= 1, got {dp}")
    if args.enable_dp_attention:
        if args.attn_dp not in (None, dp):
            raise KVCacheConfigError(
                f"--enable-dp-attention makes --dp-size {dp} the attention-DP size, "
                f"but --attn-dp-size is {args.attn_dp}"
            )
        return dp, 1
    return (1 if args.attn_dp is None else args.attn_dp), dp


def request_from_arguments(args: argparse.Namespace, gpu: Accelerator | None) -> DeploymentRequest:
    """Translate the flags into a :class:`~kvstrategies.planner.DeploymentRequest`."""
    from ..core.releases import parse_release
    from ..planner.gpus import parse_bytes
    from ..planner.model_lookup import resolve_for_planning
    from ..planner.request import DeploymentRequest

    model = model_argument(args)
    source = resolve_for_planning(model)
    tp = args.tp if isinstance(args.tp, int) else 1
    weight_quantization = args.weight_quantization
    if args.sglang_quantization is not None:
        from ..core.quantization_names import quantization_for

        weight_quantization = weight_quantization or quantization_for(args.sglang_quantization)
    attn_dp, replicas = parallel_sizes(args)

    def size(flag: str, value: str | None) -> int | None:
        """``value`` parsed as a byte size; a bad one is refused naming ``flag``."""
        try:
            return None if value is None else parse_bytes(value)
        except KVCacheConfigError as exc:
            raise KVCacheConfigError(f"{flag}: {exc}") from exc

    request_source = source.request_source()
    given_checkpoint = getattr(args, "checkpoint", None)
    if given_checkpoint is not None:
        from ..planner.checkpoint import require_checkpoint_files

        require_checkpoint_files(given_checkpoint)
    checkpoint = given_checkpoint or source.folder  # its safetensors give the weights
    if checkpoint is not None:
        request_source = {**request_source, "checkpoint": str(checkpoint)}
    return DeploymentRequest(
        model=model,
        source=request_source,
        model_folder=source.folder,
        model_description=source.description,
        tp_size=tp,
        pp_size=args.pp_size,
        pp_rank=getattr(args, "pp_rank", 0),
        dcp_size=args.dcp,
        attn_dp_size=attn_dp,
        dp_replicas=replicas,
        kv_cache_dtype=args.kv_cache_dtype if isinstance(args.kv_cache_dtype, str) else None,
        page_size=args.page_size if isinstance(args.page_size, int) else None,
        model_dtype=args.model_dtype,
        available_bytes=size("--available-bytes", args.available_bytes),
        gpu=gpu,
        mem_fraction_static=args.mem_fraction_static,
        weight_bytes=size("--weight-bytes", args.weight_bytes),
        weight_dtype=args.weight_dtype,
        weight_quantization=weight_quantization,
        overhead_bytes=size("--gpu-overhead", args.gpu_overhead),
        max_total_tokens=args.max_total_tokens,
        max_running_requests=args.max_running_requests,
        context_length=args.context_length,
        device=args.device,
        attention_backend=args.attention_backend,
        speculative_algorithm=args.speculative_algorithm,
        speculative_draft_layers=args.speculative_draft_layers,
        speculative_num_draft_tokens=args.speculative_num_draft_tokens,
        speculative_num_steps=args.speculative_num_steps,
        speculative_eagle_topk=args.speculative_eagle_topk,
        speculative_draft_model_path=args.speculative_draft_model_path,
        swa_full_tokens_ratio=args.swa_full_tokens_ratio,
        chunked_prefill_size=args.chunked_prefill_size,
        disable_radix_cache=args.disable_radix_cache,
        request_lengths=tuple(args.request_lengths or ()),
        assume_architecture=args.assume_architecture,
        allow_context_length_override=args.allow_context_length_override,
        launch_extras=launch_extras(args),
        ep_size=args.ep_size if isinstance(args.ep_size, int) else 1,
        moe_runner_backend=getattr(args, "moe_runner_backend", None),
        rocm_aiter=not getattr(args, "no_rocm_aiter", False),
        release=parse_release(getattr(args, "sglang_version", None)),
    )


def model_source(model: str) -> dict[str, Any]:
    """``{"preset": name}`` or ``{"hf_config": dict}`` for MODEL (see :mod:`kvstrategies.planner.model_source`)."""
    from ..planner.model_source import resolve_model

    return resolve_model(model).request_source()


def _human(document: dict[str, Any], planned: Any) -> str:
    from ..pools.layout import BufferRole

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


def run_plan(args: argparse.Namespace) -> int:
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


def run_sweep(args: argparse.Namespace) -> int:
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


def run_presets(args: argparse.Namespace) -> int:
    from ..presets import preset_index

    rows = []
    for short, hf_id in sorted(preset_index().items()):
        family, strategy = _family_and_strategy({"preset": short})
        rows.append({"name": short, "hf_id": hf_id, "family": family, "strategy": strategy})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print(f"{row['name']:<24}{row['family']:<16}{row['strategy']:<32}{row['hf_id']}")
    return 0


def _family_and_strategy(source: dict[str, Any]) -> tuple[str, str]:
    """A model's family and the strategy that sizes it in a default context (``none (why)``)."""
    from ..case import parse_case
    from ..strategies.registry import select_configurator

    settings = parse_case({**source, "available_bytes": 1}).settings
    try:
        return settings.geometry.family, type(select_configurator(settings)).__name__
    except KVCacheConfigError as exc:
        return settings.geometry.family, f"none ({exc})"


def run_checkpoints(args: argparse.Namespace) -> int:
    """``kvstrategies checkpoints``: every shipped checkpoint, its strategy, quantization and sources."""
    from ..checkpoints import shipped_checkpoints
    from ..planner.known_models import shipped_model

    rows = []
    for hf_id, ckpt in sorted(shipped_checkpoints().items(), key=lambda item: item[0].lower()):
        model = shipped_model(hf_id)
        assert model is not None  # every index entry resolves to itself
        family, strategy = _family_and_strategy({"hf_config": dict(model.config)})
        quant = model.config.get("quantization_config")
        method = str(quant.get("quant_method", "?")) if isinstance(quant, dict) else "none"
        rows.append({"hf_id": hf_id, "family": family, "strategy": strategy, "quantization": method,
                     "files": dict(ckpt.sources)})  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print(f"{row['hf_id']:<48}{row['family']:<16}{row['quantization']:<20}{row['strategy']}")
    return 0


def run_architectures(args: argparse.Namespace) -> int:
    from ..models.architectures import served_listing

    rows = served_listing()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print(f"{row['name']:<44}{row['family']:<28}{row['sglang_model']}{' (draft)' if row['draft'] else ''}")
    return 0


def _sm(cc: tuple[int, int] | None) -> str | None:
    return None if cc is None else f"sm{cc[0]}{cc[1]}"


def run_gpus(args: argparse.Namespace) -> int:
    """``kvstrategies gpus``: every accelerator, its capacity in MiB and the listing it was checked against."""
    from ..planner.gpus import GPUS

    rows = [
        {
            "name": g.name,
            "capacity_mib": g.capacity_mib,
            "platform": g.platform,
            "arch": g.gfx_arch if g.is_hip else _sm(g.compute_capability),
            "source": g.source,
            "note": g.note,
        }
        for g in GPUS
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        where = row["source"] or f"UNCONFIRMED: {row['note']}"
        print(f"{row['name']:<14}{row['capacity_mib']:>9g} MiB  {row['platform']:<5}{row['arch'] or '':<8}{where}")
    return 0


def split_launch_command(argv: Sequence[str]) -> tuple[list[str], LaunchCommand | None]:
    """``plan [flags] -- <SGLang launch command>``: the ``plan`` arguments with the command's
    memory flags first (flags before ``--`` win, being later), and the translated command."""
    args = list(argv)
    if not args or args[0] != "plan" or "--" not in args:
        return args, None
    from ..core.releases import parse_release
    from ..sglang.pasted_command import translate
    from ..vllm.planner.command import is_vllm_command, translate_vllm

    cut = args.index("--")
    pasted = args[cut + 1 :]
    if is_vllm_command(pasted):
        command = translate_vllm(pasted)
    else:
        command = translate(pasted, parse_release(_option_value(args[1:cut], "--sglang-version")))
    return ["plan", *command.plan_args, *args[1:cut]], command


def _option_value(args: Sequence[str], option: str) -> str | None:
    """The last value given to ``option`` (``--opt X`` or ``--opt=X``) among ``args``, else None."""
    value = None
    for index, token in enumerate(args):
        if token == option and index + 1 < len(args):
            value = args[index + 1]
        elif token.startswith(option + "="):
            value = token.partition("=")[2]
    return value


def run_releases(args: argparse.Namespace) -> int:
    """``releases [A B]``: the supported releases, or the rules that differ between two of them."""
    from ..core.releases import ENGINE_NAMES, parse_release, supported_releases
    from .releases import rule_lines

    if not args.pair:
        for engine, name in ENGINE_NAMES.items():
            print(f"{name}: {', '.join(r.text for r in supported_releases(engine))}")
        return 0
    if len(args.pair) != 2:
        raise KVCacheConfigError("releases: give two SGLang releases to compare, e.g. 'releases 0.5.18 0.5.23'")
    first, second = (parse_release(text, field="RELEASE") for text in args.pair)
    print("\n".join(rule_lines(first, second)))
    return 0


def run_verify(args: argparse.Namespace) -> int:
    """``verify --against sglang``: the catalog's cases through SGLang's own sizing and pool
    builders (:mod:`kvstrategies.sglang.bridge.verify`), or with ``--launch [GRID]`` the
    launch defaults against SGLang's own resolution (:mod:`kvstrategies.sglang.bridge.launch`)."""
    if args.launch is not None and args.against == "vllm":
        raise KVCacheConfigError("verify: --launch compares SGLang's launch defaults; use --against sglang")
    if args.launch is not None:
        if args.cases:
            raise KVCacheConfigError("verify: case files and --launch are separate checks; run them one at a time")
        from ..sglang.bridge.launch import run_verify_launch

        grid = Path(args.launch) if args.launch else None
        return run_verify_launch(
            grid, recorded=args.recorded, record=args.record, workers=args.jobs, as_json=args.json,
            show_equal=args.show_equal, sglang_version=args.sglang_version,
        )
    if args.record is not None or args.json or args.show_equal or args.jobs is not None:
        raise KVCacheConfigError("verify: --record, --jobs, --show-equal and --json go with --launch")
    if args.against == "vllm":
        from ..vllm.bridge.verify import format_report as format_vllm
        from ..vllm.bridge.verify import verify as verify_vllm

        if args.recorded:
            from ..core.releases import NEWEST_VLLM, parse_release
            from ..vllm.bridge.verify import verify_recorded as verify_vllm_recorded

            release = parse_release(args.vllm_version or NEWEST_VLLM.text, "vllm", field="--vllm-version")
            recorded = Path(__file__).resolve().parents[2] / "golden" / f"vllm-{release.text}"
            vllm_report = verify_vllm_recorded(_case_paths(args.cases), recorded, release.text)
        else:
            vllm_report = verify_vllm(_case_paths(args.cases))
        for line in format_vllm(vllm_report, verbose=args.verbose):
            print(line)
        return 0 if vllm_report.ok else 1
    from ..sglang.bridge.verify import format_report, verify, verify_recorded

    paths = _case_paths(args.cases)
    if args.recorded:
        from ..core.releases import parse_release

        release = parse_release(args.sglang_version)
        recorded = Path(__file__).resolve().parents[2] / "golden" / f"sglang-{release.text}"
        report = verify_recorded(paths, recorded, release.text)
    else:
        report = verify(paths, args.sglang_version)
    for line in format_report(report, verbose=args.verbose):
        print(line)
    return 0 if report.ok else 1


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


def run_compare(args: argparse.Namespace) -> int:
    """``compare``: the SGLang plan beside vLLM's sizing on the same budget (:mod:`kvstrategies.planner.compare`)."""
    from ..planner.compare import compare_engines, comparison_text
    from ..planner.replan import plan_or_replan

    lengths = tuple(args.request_lengths or ())
    deployment = plan_or_replan(request_from_arguments(args, accelerator(args.gpu, args.gpu_memory)))
    if not lengths:
        context = deployment.fit.context_len
        lengths = tuple(sorted({min(8192, context), context}))
        deployment = plan_or_replan(
            request_from_arguments(argparse.Namespace(**{**vars(args), "request_lengths": list(lengths)}),
                                   accelerator(args.gpu, args.gpu_memory))  # fmt: skip
        )
    gpu = deployment.request.gpu.name if deployment.request is not None and deployment.request.gpu else None
    print("\n".join(comparison_text(compare_engines(deployment, lengths, gpu))))
    own = args.own_budgets
    if own is None:  # each engine's own rule when both have one: a GPU named, SGLang's budget not given
        own = gpu is not None and deployment.request is not None and deployment.budget.source == "gpu"
    if own:
        from ..planner.compare_budgets import own_budget_rows, own_budget_text

        print("\n".join(own_budget_text(deployment, own_budget_rows(deployment, lengths, gpu))))
    return 0


def _case_paths(given_paths: Sequence[Path]) -> list[Path]:
    """The case files of ``verify``'s arguments (default: the catalog, cases/)."""
    paths: list[Path] = []
    for given in given_paths or [Path("cases")]:
        if given.is_dir():
            paths.extend(sorted(given.glob("*.json")))
        elif given.is_file():
            paths.append(given)
        else:
            raise KVCacheConfigError(f"verify: no case file or folder {given}")
    if not paths:
        raise KVCacheConfigError("verify: no case files found; pass case files or a folder of them")
    from ..case_validation import validate_case_files

    validate_case_files(paths)  # every case checked before SGLang is imported or a child process starts
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; ``argv`` defaults to the process's own arguments."""
    for stream in (sys.stdout, sys.stderr):  # a lone surrogate in a name prints as \udcxx, never crashes
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    args: argparse.Namespace | None = None
    raw = list(sys.argv[1:] if argv is None else argv)
    try:
        argv_list, command = split_launch_command(raw)
        parser = _parser(argv_list[0] if argv_list and argv_list[0] in COMMANDS else None)
        args = parser.parse_args(argv_list)
        args.launch_command = command
        if args.command == "plan":
            return run_plan(args)
        if args.command == "sweep":
            return run_sweep(args)
        if args.command == "architectures":
            return run_architectures(args)
        if args.command == "releases":
            return run_releases(args)
        if args.command == "checkpoints":
            return run_checkpoints(args)
        if args.command == "gpus":
            return run_gpus(args)
        if args.command == "verify":
            return run_verify(args)
        if args.command == "compare":
            return run_compare(args)
        return run_presets(args)
    except KVCacheConfigError as exc:
        message = str(exc)
        if args is not None and args.command in ("plan", "sweep") and getattr(args, "case", None) is None:
            from ..planner.flag_names import flag_wording

            message = flag_wording(message)  # planned from flags: name the flags, not the case fields
        return _report_error(exc, message, raw)
    except BrokenPipeError:  # `kvstrategies plan ... | head`
        sys.stderr.close()
        return 0
    except OSError as exc:  # e.g. --plot into a folder that does not exist
        where = f"{exc.filename}: " if exc.filename else ""
        return _report_error(exc, f"{where}{exc.strerror or exc}", raw)


def one_line(message: str) -> str:
    """``message`` on one line: a control character the user typed (``--pp-rank $'\\r'``, a model
    name with a newline) is shown escaped instead of breaking the line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


def _report_error(exc: BaseException, message: str, argv: Sequence[str]) -> int:
    """One line on stderr; with ``--json`` the JSON object on stdout, else a does-not-fit's options."""
    from ..planner.error_report import error_json, json_requested, options_text

    message = one_line(message)
    print(f"kvstrategies: error: {message}", file=sys.stderr)
    if json_requested(argv):
        if not getattr(exc, "reported_as_json", False):
            print(error_json(exc, message))
    else:
        options = options_text(exc)
        if options is not None:
            print(options)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
