"""The vLLM plan document's shared pieces: how layers are named, vLLM's capacity log line."""

from __future__ import annotations

import re

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


def vllm_plan_document(planned: object) -> dict[str, object]:
    from ...errors import UnsupportedConfigurationError

    raise UnsupportedConfigurationError("the vLLM strategies are not written yet")
