"""vLLM's argument value parsers, for ``plan --engine vllm`` flags and pasted ``vllm serve`` commands.

``human_readable_int`` follows ``vllm/utils/argparse_utils.py human_readable_int``: a plain integer,
or a number with a decimal (``k m g t``: 10**3 ...) or binary (``K M G T``: 2**10 ..., whole numbers
only) suffix; ``--max-model-len`` also takes ``auto`` / ``-1`` there, which asks vLLM to fit the
length to the memory (refused here: not modelled).
"""

from __future__ import annotations

import math
import re

from ...errors import KVCacheConfigError

_SUFFIX = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_readable_int(text: str, flag: str) -> int:
    """``text`` as vLLM reads an integer flag (module doc); errors name ``flag``."""
    value = str(text).strip()
    match = _SUFFIX.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise KVCacheConfigError(
                f"{flag} {value}: decimals are not allowed with binary suffixes like {suffix} (vLLM's argparse refuses "
                f"it); did you mean {number}{suffix.lower()}?"
            )
        return int(number) * _BINARY[suffix]
    try:
        return int(value)
    except ValueError:
        raise KVCacheConfigError(
            f"{flag} takes an integer such as 8192, 32k or 32K (vllm/utils/argparse_utils.py human_readable_int), "
            f"got {value!r:.40}"
        ) from None


def max_model_len(text: str) -> int:
    """``--max-model-len``: a human-readable integer; ``auto`` / ``-1`` (fit to memory) is refused."""
    value = str(text).strip()
    if value == "-1" or value.lower() == "auto":
        raise KVCacheConfigError(
            "--max-model-len auto makes vLLM fit the length to the KV memory it finds, which kvstrategies does not "
            "model; give a length (e.g. 32k) and read 'Maximum concurrency' for it"
        )
    return human_readable_int(value, "--max-model-len")


def utilization(text: str) -> float:
    """``--gpu-memory-utilization``: a float in (0, 1] (``vllm/config/cache.py CacheConfig``)."""
    try:
        value = float(text)
    except ValueError:
        raise KVCacheConfigError(f"--gpu-memory-utilization takes a number in (0, 1], got {text!r:.40}") from None
    if not math.isfinite(value) or not 0 < value <= 1:
        raise KVCacheConfigError(
            f"--gpu-memory-utilization must be in (0, 1], got {text!r:.40} (vllm/config/cache.py CacheConfig: "
            "gt=0, le=1)"
        )
    return value
