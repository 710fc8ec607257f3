"""``kvstrategies plan MODEL --engine vllm ...``: vLLM's flags on ``plan`` and the command that runs them.

:func:`add_vllm_arguments` adds vLLM's own spellings of the settings that change the KV answer
(``--gpu-memory-utilization``, ``--kv-cache-memory-bytes``, ``--max-model-len``, ``--max-num-seqs``,
``--max-num-batched-tokens``, ``--block-size``, ``--enforce-eager``, prefix caching, async
scheduling, the hybrid KV cache manager); ``--tensor-parallel-size``, ``--pipeline-parallel-size``,
``--kv-cache-dtype``, ``--dtype``, ``--gpu``, ``--gpu-memory``, ``--weight-bytes`` and
``--weight-quantization`` / ``--quantization`` are the ``plan`` flags of the same name. SGLang's
spellings of those settings are refused with ``--engine vllm``, naming vLLM's.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ...errors import KVCacheConfigError
from ...releases import NEWEST_VLLM, VLLM, parse_release
from .values import human_readable_int, max_model_len, utilization

#: the vLLM flags of :func:`add_vllm_arguments` (their argparse dests): given without ``--engine vllm`` they are refused
VLLM_DESTS = ("gpu_memory_utilization", "kv_cache_memory_bytes", "max_model_len", "max_num_seqs",
              "max_num_batched_tokens", "block_size", "enforce_eager", "enable_prefix_caching", "async_scheduling",
              "disable_hybrid_kv_cache_manager")  # fmt: skip

#: ``plan`` dests of SGLang's settings -> (SGLang's flag, vLLM's flag for the same setting, or why there is none)
SGLANG_ONLY: dict[str, tuple[str, str]] = {
    "mem_fraction_static": ("--mem-fraction-static", "use --gpu-memory-utilization"),
    "available_bytes": ("--available-bytes", "use --kv-cache-memory-bytes"),
    "page_size": ("--page-size", "use --block-size"),
    "max_running_requests": ("--max-running-requests", "use --max-num-seqs"),
    "context_length": ("--context-length", "use --max-model-len"),
    "chunked_prefill_size": ("--chunked-prefill-size", "use --max-num-batched-tokens"),
    "disable_radix_cache": ("--disable-radix-cache", "use --no-enable-prefix-caching"),
    "max_total_tokens": ("--max-total-tokens", "vLLM has no token cap (--num-gpu-blocks-override is a block count)"),
    "gpu_overhead": ("--gpu-overhead", "vLLM's overhead is its own profile, modelled per launch"),
    "attention_backend": ("--attention-backend", "the vLLM plan models vLLM's own backend choice per GPU"),
    "speculative_algorithm": ("--speculative-algorithm", "speculative decoding is not modelled for vLLM"),
    "swa_full_tokens_ratio": ("--swa-full-tokens-ratio", "vLLM's hybrid allocator shares one block pool"),
    "checkpoint": ("--checkpoint", "give the checkpoint folder as MODEL"),
}
_DEFAULTS: dict[str, Any] = {"dcp": 1, "dp_size": 1, "attn_dp": None, "ep_size": None, "pp_rank": 0,
                             "enable_dp_attention": False, "device": "cuda"}  # fmt: skip


def add_vllm_arguments(parser: argparse.ArgumentParser) -> None:
    """vLLM's engine arguments on ``plan`` (module doc); they apply with ``--engine vllm``."""
    group = parser.add_argument_group(f"vLLM engine arguments (with --engine vllm; {NEWEST_VLLM.label}'s names)")
    group.add_argument("--gpu-memory-utilization", type=str, default=None, metavar="FRACTION",
                       help="share of the GPU vLLM requests (default 0.92)")  # fmt: skip
    group.add_argument("--kv-cache-memory-bytes", type=str, default=None, metavar="BYTES",
                       help="the KV budget per GPU exactly, e.g. 40G (vLLM skips its memory profiling)")  # fmt: skip
    group.add_argument("--max-model-len", type=str, default=None, metavar="TOKENS", help="e.g. 32768 or 32K")
    group.add_argument("--max-num-seqs", type=str, default=None, metavar="N")
    group.add_argument("--max-num-batched-tokens", type=str, default=None, metavar="TOKENS")
    group.add_argument("--block-size", type=str, default=None, metavar="TOKENS", help="default: the backend's")
    group.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs (their memory is not deducted)")
    group.add_argument("--enable-prefix-caching", dest="enable_prefix_caching", action="store_const", const=True,
                       default=None)  # fmt: skip
    group.add_argument("--no-enable-prefix-caching", "--disable-prefix-caching", dest="enable_prefix_caching",
                       action="store_const", const=False)  # fmt: skip
    group.add_argument("--async-scheduling", dest="async_scheduling", action="store_const", const=True, default=None)
    group.add_argument("--no-async-scheduling", dest="async_scheduling", action="store_const", const=False)
    group.add_argument("--disable-hybrid-kv-cache-manager", action="store_true")


def is_vllm_plan(args: argparse.Namespace) -> bool:
    """``plan`` asked for vLLM (``--engine vllm`` or ``--vllm-version``)."""
    return getattr(args, "engine", None) == VLLM or getattr(args, "vllm_version", None) is not None


def check_engine_flags(args: argparse.Namespace) -> None:
    """vLLM's flags need ``--engine vllm``; with it, SGLang's spellings are refused naming vLLM's."""
    if not is_vllm_plan(args):
        given = [d for d in VLLM_DESTS if getattr(args, d, None) not in (None, False)]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise KVCacheConfigError(f"{flag} is a vLLM engine argument; add --engine vllm to plan for vLLM")
        return
    for dest, (flag, hint) in SGLANG_ONLY.items():
        if getattr(args, dest, None) not in (None, False):
            raise KVCacheConfigError(f"{flag} is SGLang's; with --engine vllm {hint}")
    for dest, default in _DEFAULTS.items():
        if getattr(args, dest, default) != default:
            raise KVCacheConfigError(
                f"--{dest.replace('_', '-')} is not modelled for vLLM (data / context / expert parallelism, other "
                "devices); plan it for SGLang, or drop it"
            )


def _int(args: argparse.Namespace, dest: str) -> int | None:
    value = getattr(args, dest, None)
    return None if value is None else human_readable_int(value, "--" + dest.replace("_", "-"))


def vllm_request(args: argparse.Namespace) -> Any:
    """The :class:`~.request.VLLMPlanRequest` of the ``plan`` flags."""
    from ...presets import load_preset_config
    from ..gpus import lookup_gpu, parse_bytes
    from ..launch_command import quantization_for
    from ..model_lookup import resolve_for_planning
    from .request import VLLMPlanRequest

    check_engine_flags(args)
    given = [v for v in (args.model, args.model_path) if v is not None]
    if not given or any(not v.strip() for v in given):
        raise KVCacheConfigError("name a model (preset, HF id, config.json or folder) to plan for vLLM")
    if len(set(given)) > 1:
        raise KVCacheConfigError(f"two models given: {given[0]!r} and --model-path {given[1]!r}; keep one")
    source = resolve_for_planning(given[0])
    config = source.config if source.config is not None else load_preset_config(str(source.preset))
    gpu = None if args.gpu is None else lookup_gpu(args.gpu).name
    memory = None if args.gpu_memory is None else parse_bytes(args.gpu_memory) / 2**20
    quant = args.weight_quantization
    if args.sglang_quantization is not None:
        quant = quant or quantization_for(args.sglang_quantization, "per GPU")
    kv_bytes = None if args.kv_cache_memory_bytes is None else _kv_bytes(args.kv_cache_memory_bytes)
    return VLLMPlanRequest(
        model=given[0],
        source=source.request_source(),
        config=config,
        model_folder=None if source.folder is None else str(source.folder),
        gpu=gpu,
        gpu_memory_mib=memory,
        tensor_parallel_size=args.tp,
        pipeline_parallel_size=args.pp_size,
        kv_cache_dtype=args.kv_cache_dtype or "auto",
        dtype=args.model_dtype,
        block_size=_int(args, "block_size"),
        gpu_memory_utilization=None if args.gpu_memory_utilization is None
        else utilization(args.gpu_memory_utilization),
        kv_cache_memory_bytes=kv_bytes,
        max_model_len=None if args.max_model_len is None else max_model_len(args.max_model_len),
        max_num_seqs=_int(args, "max_num_seqs"),
        max_num_batched_tokens=_int(args, "max_num_batched_tokens"),
        enable_prefix_caching=args.enable_prefix_caching,
        async_scheduling=args.async_scheduling,
        disable_hybrid_kv_cache_manager=args.disable_hybrid_kv_cache_manager,
        enforce_eager=args.enforce_eager,
        weight_quantization=quant,
        weight_bytes=None if args.weight_bytes is None else parse_bytes(args.weight_bytes),
        request_lengths=tuple(args.request_lengths or ()),
        release=parse_release(args.vllm_version or NEWEST_VLLM.text, VLLM, field="--vllm-version"),
    )


def _kv_bytes(text: str) -> int:
    """vLLM's integer (``40G`` = 40 x 2**30); the planner's ``40GiB`` spelling is read too."""
    from ..gpus import parse_bytes

    try:
        return human_readable_int(text, "--kv-cache-memory-bytes")
    except KVCacheConfigError:
        return parse_bytes(text)


def run_vllm_plan(args: argparse.Namespace, notes: tuple[str, ...] = ()) -> int:
    """``plan MODEL --engine vllm``: print the report (text or ``--json``)."""
    from .deployment import plan_vllm
    from .report import plan_json, plan_text

    planned = plan_vllm(vllm_request(args))
    if args.json:
        document = plan_json(planned)
        if notes:
            document["launch_command_notes"] = list(notes)
        print(json.dumps(document, indent=2))
        return 0
    print(plan_text(planned))
    for note in notes:
        print(f"note: {note}")
    return 0
