"""From ``mem_fraction_static`` to the KV byte budget, without a GPU.

Mirrors ``sglang.srt.mem_cache.kv_cache_configurator.KVCacheConfigurator._profile_available_bytes``:
``available - pre_model_load * (1 - mem_fraction_static) - multimodal`` GiB after the weights
load, the free memory a MIN over ranks of a float32 all-reduce
(``utils.common.get_available_gpu_memory``; ``distributed.bootstrap.measure_pre_model_load_memory``).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from ....errors import InsufficientMemoryError


def float32_round(x: float) -> float:
    """Round to the nearest float32 (the MIN all-reduce runs on a float32 tensor)."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def kv_budget_bytes(pre_gib: float, avail_gib: float, mem_fraction_static: float, multimodal_gib: float = 0.0) -> int:
    """KVCacheConfigurator._profile_available_bytes: ``int((avail - pre * (1 - mfs) - mm) * 2**30)`` bytes (before any
    Mamba share). ``pre``: free GiB before weights load; ``avail``: free GiB after. Raises
    :class:`InsufficientMemoryError` with SGLang's message when nothing is left."""
    rest = avail_gib - pre_gib * (1 - mem_fraction_static) - multimodal_gib
    if rest <= 0:
        minimum = 1 - avail_gib / pre_gib
        raise InsufficientMemoryError(
            f"Loaded weights leave no GPU memory for the KV cache under "
            f"--mem-fraction-static={mem_fraction_static}. Raise --mem-fraction-static above "
            f"{math.ceil(minimum * 1000) / 1000:.3f} (minimum viable = 1 - available/pre = "
            f"{minimum:.4f}). If using speculative decoding, draft weights are now counted."
        )
    return int(rest * 2**30)


@dataclass(frozen=True)
class KVBudgetEstimate:
    """KVCacheConfigurator._profile_available_bytes estimate: GiB floats as SGLang holds them, and the resulting KV
    bytes."""

    pre_gib: float
    avail_gib: float
    slack_gib: float
    available_bytes: int


def estimate_kv_budget(
    capacity_mib: float,
    weights_bytes: int,
    mem_fraction_static: float,
    *,
    overhead_gib: float = 1.0,
    world_size: int = 1,
    multimodal_gib: float = 0.0,
) -> KVBudgetEstimate:
    """Estimate the KV budget without a GPU (KVCacheConfigurator._profile_available_bytes with modelled inputs).

    ``pre = capacity_mib / 1024 - overhead_gib`` (CUDA context, NCCL and custom all-reduce
    buffers; 1.0 GiB by default, a library decision inside the usual 0.5-3 GiB range),
    ``avail = pre - weights_bytes / 2**30``; with ``world_size > 1`` both byte counts are rounded
    to float32 like SGLang's MIN all-reduce. Budget = :func:`kv_budget_bytes`.
    """
    pre_bytes = capacity_mib * 2**20 - overhead_gib * 2**30
    avail_bytes = pre_bytes - weights_bytes
    if world_size > 1:
        pre_bytes, avail_bytes = float32_round(pre_bytes), float32_round(avail_bytes)
    pre, avail = pre_bytes / 2**30, avail_bytes / 2**30
    budget = kv_budget_bytes(pre, avail, mem_fraction_static, multimodal_gib)
    return KVBudgetEstimate(pre, avail, pre * (1 - mem_fraction_static), budget)
