"""vLLM's extensible KV cache (0.34.0, the CUDA default): the cache sized from memory measured after warmup.

With ``--gpu-memory-utilization`` unset (it resolves to 1.0: ``vllm/config/cache.py
CacheConfig.resolved_gpu_memory_utilization``) and no ``--kv-cache-memory-bytes``, a worker first
profiles as before; the figure it logs as "Available KV cache memory" (the 0.33.0 rule at the resolved
utilization) only reserves address space for that many blocks. After warmup and CUDA-graph capture it
measures (``vllm/v1/worker/extensible_kv_cache.py measure_kv_cache_bytes``)::

    non_kv_used = init_free - free                       (weights, graphs, persistent buffers; not the cache)
    headroom    = free (+ the few committed blocks)
    peak        = the profiled activation peak + the CUDA-graph estimate (``peak_activation_memory``,
                  kept as the cache's ``reserved_headroom_bytes``)
    margin      = max(KV_CACHE_MARGIN_FLOOR_BYTES, int(peak x KV_CACHE_MARGIN_FRACTION))
    kv_bytes    = min(requested - non_kv_used, headroom - margin) - peak

and commits the most blocks whose physical pages fit in ``kv_bytes``: each segment of the allocation (a
layer's region in a layer-outermost, block-compact layout) maps whole granules
(:func:`blocks_within`: ``ExtensibleKVCache.blocks_within``), never more than the reserved capacity
(``v1/core/kv_cache_planning.py finalize_extensible_kv_cache``). The parts of ``non_kv_used`` and
``peak`` come from the profile model of :mod:`.overhead` (fitted to 0.33.0-and-older logs): the weights,
the resident memory with graphs, the multi-GPU extra, the profile run's transient, and the CUDA-graph
estimate as the difference of the two resident figures.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..strategies.sizing import KVCacheTensor
from .overhead import RESIDENT_NO_GRAPHS_BYTES, RESIDENT_WITH_GRAPHS_BYTES, STARTUP_HELD_BYTES, ProfileOverhead

#: ``KV_CACHE_MARGIN_FLOOR_BYTES`` on CUDA (ROCm: 3 GiB): the least memory kept free beyond the peak
MARGIN_FLOOR_BYTES = 1 << 30
#: ``KV_CACHE_MARGIN_FRACTION``: the margin's share of the peak when that is larger than the floor
MARGIN_FRACTION = 0.75
#: ``vllm/utils/extensible_tensor.py granule_size``: the commit granule, the driver's granularity floored at
#: 2 MiB (2 MiB on NVIDIA data-center GPUs)
GRANULE_BYTES = 2 << 20


@dataclass(frozen=True)
class MeasuredStage:
    """One worker's measurement after warmup (bytes)."""

    non_kv_used: int
    headroom: int
    peak: int
    margin: int
    kv_bytes: int


def graph_estimate_bytes(overhead: ProfileOverhead) -> int:
    """The CUDA-graph estimate inside the fitted resident figure (0 when graphs are not deducted)."""
    return overhead.resident - RESIDENT_NO_GRAPHS_BYTES if overhead.resident == RESIDENT_WITH_GRAPHS_BYTES else 0


def measure(total_bytes: int, requested_bytes: int, weights: int, overhead: ProfileOverhead, *,
            graph_estimate: bool = True) -> MeasuredStage:  # fmt: skip
    """``measure_kv_cache_bytes`` for one worker of the model (module doc); ``graph_estimate``: the profiled
    CUDA-graph estimate is part of the peak (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``, on by default)."""
    non_kv_used = weights + overhead.resident + overhead.multi_gpu
    headroom = total_bytes - STARTUP_HELD_BYTES - non_kv_used
    peak = overhead.transient + (graph_estimate_bytes(overhead) if graph_estimate else 0)
    margin = max(MARGIN_FLOOR_BYTES, int(peak * MARGIN_FRACTION))
    kv_bytes = max(min(requested_bytes - non_kv_used, headroom - margin) - peak, 0)
    return MeasuredStage(non_kv_used, headroom, peak, margin, kv_bytes)


def segment_strides(tensors: Iterable[object], layout: str | None, capacity_blocks: int) -> tuple[int, ...]:
    """The block stride of each segment of the allocation (``ExtensibleKVCache._segments``): one per distinct
    layer region of a layer-outermost, block-compact layout (``L`` and ``B`` its two outer dimensions); else
    ``size // (capacity x stride)`` segments of the one stride."""
    items = [t for t in tensors if isinstance(t, KVCacheTensor)]
    if not items:
        return ()
    outer = (layout or "LBNHC")[:2]
    if set(outer) == {"L", "B"} and outer[0] == "L":
        regions: dict[int, int] = {}
        for t in items:
            for index in range(len(t.layers)):
                regions.setdefault(t.offset + index * t.layer_stride, t.block_stride)
        return tuple(regions[offset] for offset in sorted(regions))
    stride = items[0].block_stride
    return (stride,) * max(1, items[0].size // max(1, capacity_blocks * stride))


def physical_bytes(num_blocks: int, strides: tuple[int, ...], granule: int = GRANULE_BYTES) -> int:
    """``ExtensibleKVCache.physical_bytes_for``: each segment's ``num_blocks x stride`` rounded up to granules."""
    return sum(-(-num_blocks * stride // granule) * granule for stride in strides)


def blocks_within(nbytes: int, strides: tuple[int, ...], capacity_blocks: int) -> int:
    """``ExtensibleKVCache.blocks_within``: the most blocks, at most the capacity, whose pages fit in ``nbytes``.

    vLLM steps down one block at a time from ``min(nbytes // bytes_per_block, capacity)``; the footprint grows
    with the block count, so a bisection finds the same count in ``log`` steps (a layout of tiny blocks would
    otherwise take up to a granule's worth of steps)."""
    per_block = sum(strides)
    if per_block <= 0:
        return 0
    low, high = 0, max(0, min(nbytes // per_block, capacity_blocks))
    while low < high:  # the largest count in [low, high] whose footprint fits
        middle = (low + high + 1) // 2
        if physical_bytes(middle, strides) <= nbytes:
            low = middle
        else:
            high = middle - 1
    return low
