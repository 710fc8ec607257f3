"""The arguments ``plan``, ``sweep`` and ``compare`` share, and their reading into a request.

:func:`add_deployment_arguments` adds the model, parallelism, memory and SGLang server arguments
(SGLang's spellings accepted as given); :func:`request_from_arguments` reads them into a
:class:`~kvstrategies.planner.request.DeploymentRequest`, with :func:`accelerator` for
``--gpu`` / ``--gpu-memory``. vLLM's own spellings (``plan --engine vllm``) are
:mod:`kvstrategies.vllm.arguments`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..core.quantization_names import QUANTIZATION
from ..errors import KVCacheConfigError

if TYPE_CHECKING:
    from ..planner.gpus import Accelerator
    from ..planner.request import DeploymentRequest


def add_deployment_arguments(parser: argparse.ArgumentParser) -> None:
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
    par.add_argument("--pp", "--pp-size", "--pipeline-parallel-size", dest="pp_size", type=int, default=1)
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
    srv.add_argument("--mamba-ssm-dtype", default=None, choices=("float32", "bfloat16", "float16"),
                     help="Mamba / linear-attention SSM state dtype (default: the config's, else float32)")  # fmt: skip
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
        mamba_ssm_dtype=getattr(args, "mamba_ssm_dtype", None),
        release=parse_release(getattr(args, "sglang_version", None)),
    )
