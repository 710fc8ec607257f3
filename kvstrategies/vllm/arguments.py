"""vLLM's engine arguments on ``kvstrategies plan`` (with ``--engine vllm``), and the checks on them.

:func:`add_vllm_arguments` adds vLLM's own spellings of the settings that change the KV answer
(``--gpu-memory-utilization``, ``--kv-cache-memory-bytes``, ``--max-model-len``, ``--max-num-seqs``,
``--max-num-batched-tokens``, ``--block-size``, ``--enforce-eager``, chunked prefill, prefix caching, async
scheduling, the hybrid KV cache manager, ``--speculative-config`` (the model's MTP layers or an EAGLE head),
``--enable-expert-parallel``);
``--tensor-parallel-size``, ``--pipeline-parallel-size``, ``--data-parallel-size``,
``--decode-context-parallel-size``,
``--kv-cache-dtype``, ``--dtype``, ``--gpu``,
``--gpu-memory``, ``--weight-bytes`` and ``--weight-quantization`` / ``--quantization`` are the
``plan`` flags of the same name. SGLang's spellings of those settings are refused with
``--engine vllm``, naming vLLM's. Kept apart from the
planner so that building the command line (and ``plan --case``) reads no planner module.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..core.releases import NEWEST_VLLM, VLLM
from ..errors import KVCacheConfigError

#: the vLLM flags of :func:`add_vllm_arguments` (their argparse dests): given without ``--engine vllm`` they are refused
VLLM_DESTS = ("gpu_memory_utilization", "kv_cache_memory_bytes", "max_model_len", "max_num_seqs",
              "max_num_batched_tokens", "block_size", "enforce_eager", "enable_prefix_caching", "async_scheduling",
              "disable_hybrid_kv_cache_manager", "speculative_config", "enable_expert_parallel",
              "enable_chunked_prefill")  # fmt: skip

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
    "speculative_algorithm": ("--speculative-algorithm", "use --speculative-config '{\"method\": \"mtp\", "
                              "\"num_speculative_tokens\": N}' (the model's own MTP layers)"),
    "swa_full_tokens_ratio": ("--swa-full-tokens-ratio", "vLLM's hybrid allocator shares one block pool"),
    "checkpoint": ("--checkpoint", "give the checkpoint folder as MODEL"),
    "sglang_version": ("--sglang-version", "use --vllm-version"),
    "mamba_ssm_dtype": ("--mamba-ssm-dtype", "the vLLM plan keeps the SSM state dtype its model rule reads"),
}
_DEFAULTS: dict[str, Any] = {"attn_dp": None, "ep_size": None, "pp_rank": 0,
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
    group.add_argument("--enable-chunked-prefill", dest="enable_chunked_prefill", action="store_const", const=True,
                       default=None)  # fmt: skip
    group.add_argument("--no-enable-chunked-prefill", "--disable-chunked-prefill", dest="enable_chunked_prefill",
                       action="store_const", const=False,
                       help="prefill a prompt in one step: max_num_batched_tokens becomes at least max_model_len")
    group.add_argument("--async-scheduling", dest="async_scheduling", action="store_const", const=True, default=None)
    group.add_argument("--no-async-scheduling", dest="async_scheduling", action="store_const", const=False)
    group.add_argument("--disable-hybrid-kv-cache-manager", action="store_true")
    group.add_argument("--enable-expert-parallel", action="store_true",
                       help="routed experts split whole over the TP ranks (EP = TP at DP 1)")  # fmt: skip
    group.add_argument("--speculative-config", default=None, metavar="JSON",
                       help='speculative decoding with the model\'s own MTP layers (\'{"method": "mtp", '
                            '"num_speculative_tokens": 3}\') or an EAGLE / EAGLE3 head (\'{"method": "eagle3", '
                            '"model": HEAD_FOLDER, "num_speculative_tokens": 3}\')')  # fmt: skip


def is_vllm_plan(args: argparse.Namespace) -> bool:
    """``plan`` asked for vLLM (``--engine vllm``, or ``--vllm-version`` without ``--engine sglang``)."""
    engine = getattr(args, "engine", None)
    return engine == VLLM or (engine is None and getattr(args, "vllm_version", None) is not None)


def check_engine_flags(args: argparse.Namespace) -> None:
    """vLLM's flags need ``--engine vllm``; with it, SGLang's spellings are refused naming vLLM's."""
    if not is_vllm_plan(args):
        given = [d for d in (*VLLM_DESTS, "vllm_version") if getattr(args, d, None) not in (None, False)]
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
