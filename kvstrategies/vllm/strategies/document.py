"""The vLLM plan document's shared pieces: how layers are named, vLLM's capacity log line."""

from __future__ import annotations

import re
from typing import Any

_INDEX = re.compile(r"\d+")


def layer_key(name: str) -> int | str:
    """A layer by its global index (the first integer of vLLM's module name), else the name itself."""
    match = _INDEX.search(name)
    return int(match.group()) if match else name


def capacity_log_line(tokens: int, max_model_len: int, concurrency: float, device: str = "GPU") -> str:
    """vLLM's start-up line (``v1/core/kv_cache_utils.py update_kv_cache_capacity``)."""
    return (
        f"{device} KV cache size: {tokens:,} tokens, "
        f"Maximum concurrency for {max_model_len:,} tokens per request: {concurrency:.2f}x"
    )



def vllm_plan_document(planned: Any) -> dict[str, Any]:
    """The vLLM plan document of a :class:`~kvstrategies.api.Plan` made for a vLLM release (the bridge's keys)."""
    from ...errors import KVCacheConfigError
    from .backends import named_backends
    from .launch import nvml_name

    answer = getattr(planned, "vllm", None)
    if answer is None:
        raise KVCacheConfigError("not a vLLM plan: plan it with ctx.release = parse_release('0.33.0', engine='vllm')")
    launch = answer.launch
    return {
        "engine": f"vllm {planned.ctx.release.text}",
        "configurator": type(planned.configurator).__name__,
        "gpu": nvml_name(launch.gpu),
        "vllm_settings": launch.settings_document(),
        "attention_backends": named_backends(answer.backends, planned.ctx.release),
        "block_size": answer.block_size,
        "kv_cache_layout": answer.kv_cache_layout,
        "layer_specs": [{"layers": list(layers), "spec": spec.document()} for layers, spec in answer.layer_specs],
        "kv_cache_groups": [
            {"layers": list(g.layers), "spec": g.spec.document(), "blocks_per_request": g.spec.blocks_per_request(
                _limits(launch))}
            for g in answer.stage_groups
        ],
        "num_gpu_blocks": answer.num_gpu_blocks,
        "kv_cache_tensors": [t.document() for t in answer.tensors],
        "kv_cache_size_tokens": answer.capacity.tokens,
        "max_concurrency": answer.capacity.max_concurrency,
        "capacity_log": answer.capacity.log_line,
        "padding_layers": answer.padding_layers,
    }


def _limits(launch: Any) -> Any:
    from .specs import CacheLimits

    return CacheLimits(launch.max_model_len, launch.max_in_flight_tokens, launch.mamba_cache_mode,
                       launch.deployment.decode_context_parallel_size)
