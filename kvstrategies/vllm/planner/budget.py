"""vLLM's KV budget of one worker: its ``gpu_memory_utilization`` rule, or ``--kv-cache-memory-bytes`` exactly.

``vllm/v1/worker/gpu_worker.py Worker.determine_available_memory`` (vLLM 0.33.0):

* ``--kv-cache-memory-bytes N`` given: the profile run still runs, but the budget is ``N`` as
  given ("skipped memory profiling"), then ``reserve_mm_ipc_gpu_memory`` (nothing for a text model);
* else ``requested = ceil(total x gpu_memory_utilization)`` (``vllm/v1/worker/utils.py
  request_memory``, which refuses a request above the free memory at start), and

      available = requested - non_kv_cache_memory - cudagraph_memory_estimate
      non_kv_cache_memory = total_consumed + transient_peak_headroom        (vllm/utils/mem_utils.py memory_profiling)

  ``total_consumed`` is the weights plus what stays allocated after them; the planner takes the
  weights from :mod:`.weights` and everything else from :mod:`.overhead` (a model fitted to public
  start-up logs). vLLM logs the result as "Available KV cache memory: X GiB".

Every worker sizes from its own figure and vLLM takes the smallest number of blocks over them
(``vllm/v1/core/kv_cache_planning.py get_kv_cache_configs``); with pipeline stages of equal layer
counts that is the smallest budget, which is what :func:`vllm_budget` returns.

From vLLM 0.34.0 (:data:`EXTENSIBLE_KV_CACHE`) that figure, at the resolved utilization (1.0 when unset),
only reserves the cache's capacity; the cache is sized from the memory measured after warmup
(:func:`extensible_budget`, :mod:`.extensible`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...core.releases import VLLM, EngineRelease, ReleaseRule, parse_release, span, supported_releases
from ...errors import InsufficientMemoryError, KVCacheConfigError
from ..strategies.sizing import planning_module
from .extensible import MeasuredStage, measure
from .overhead import STARTUP_HELD_BYTES, ProfileOverhead

GIB = 2**30

#: vLLM 0.34.0 sizes the KV cache with its extensible KV cache by default on CUDA: utilization 1.0 and a cache
#: sized from measured memory (:func:`extensible_budget`); 0.33.0 and older take the utilization rule
EXTENSIBLE_KV_CACHE = ReleaseRule(
    "vllm-extensible-kv-cache",
    span("0.34.0", engine=VLLM),
    "the extensible KV cache is the CUDA default: gpu_memory_utilization unset means 1.0, the profiled figure "
    "reserves capacity and the cache is sized from the memory measured after warmup and CUDA-graph capture, "
    "less a margin and the activation peak",
    "vllm/config/cache.py CacheConfig.resolved_gpu_memory_utilization; vllm/v1/worker/extensible_kv_cache.py "
    "measure_kv_cache_bytes",
    topic="budget",
)


def planning_release(version: str | None) -> EngineRelease:
    """The release a plan is for: ``--vllm-version`` when given, else the newest (every release's budget rule is
    modelled: :data:`EXTENSIBLE_KV_CACHE` from 0.34.0, the utilization rule before)."""
    if version is not None:
        return parse_release(version, VLLM, field="--vllm-version")
    return supported_releases(VLLM)[-1]


def format_gib(nbytes: int) -> str:
    """vLLM's ``format_gib``: ``round(bytes / GiB, 2)`` as Python prints it."""
    return f"{round(nbytes / GIB, 2)}"


@dataclass(frozen=True)
class StageBudget:
    """One pipeline stage's worker: weights, the modelled overhead, and its KV bytes (``measured``: the
    extensible KV cache's measurement, whose ``kv_bytes`` is ``available``; ``profiled`` is then the figure
    logged as "Available KV cache memory", which reserves the capacity)."""

    weights: int
    overhead: ProfileOverhead
    available: int
    measured: MeasuredStage | None = None
    profiled: int | None = None


@dataclass(frozen=True)
class VLLMBudget:
    """The KV budget vLLM sizes the cache from (bytes per worker) and how it came about.

    ``source``: ``"kv_cache_memory_bytes"`` (given, exact), ``"gpu_memory_utilization"`` (vLLM's rule
    with the modelled profile) or ``"extensible_kv_cache"`` (0.34.0's measured sizing, :func:`extensible_budget`).
    ``stages`` is empty for a given budget.
    """

    available_bytes: int
    source: str
    total_bytes: int | None = None
    total_source: str | None = None
    gpu_memory_utilization: float | None = None
    requested_bytes: int | None = None
    stages: tuple[StageBudget, ...] = ()

    @property
    def limiting(self) -> StageBudget | None:
        """The stage whose budget is the smallest (the one vLLM's block count follows)."""
        return min(self.stages, key=lambda s: s.available) if self.stages else None

    @property
    def logged_available_bytes(self) -> int:
        """What vLLM logs as "Available KV cache memory": the budget, or under the extensible KV cache the
        profiled figure that reserves its capacity (the smallest over the stages)."""
        profiled = [s.profiled for s in self.stages if s.profiled is not None]
        return min(profiled) if profiled else self.available_bytes


def requested_memory(total_bytes: int, utilization: float) -> int:
    """``ceil(total x gpu_memory_utilization)`` (``vllm/v1/worker/utils.py request_memory``)."""
    if not 0 < utilization <= 1:
        raise KVCacheConfigError(
            f"--gpu-memory-utilization must be in (0, 1], got {utilization!r} (vllm/config/cache.py CacheConfig: "
            "gt=0, le=1)"
        )
    return math.ceil(total_bytes * utilization)


def given_budget(kv_cache_memory_bytes: int) -> VLLMBudget:
    """``--kv-cache-memory-bytes``: vLLM sizes from it as given."""
    if kv_cache_memory_bytes < 1:
        raise KVCacheConfigError(f"--kv-cache-memory-bytes must be positive, got {kv_cache_memory_bytes}")
    return VLLMBudget(kv_cache_memory_bytes, "kv_cache_memory_bytes")


def vllm_budget(
    total_bytes: int,
    utilization: float,
    stages: list[tuple[int, ProfileOverhead]],
    *,
    total_source: str,
    release: str,
) -> VLLMBudget:
    """The utilization rule for each stage's ``(weights, overhead)`` (module doc); the smallest is the budget."""
    requested = requested_memory(total_bytes, utilization)
    free = total_bytes - STARTUP_HELD_BYTES
    if requested > free:
        raise InsufficientMemoryError(
            f"vLLM {release} refuses: Free memory on device ({format_gib(free)}/{format_gib(total_bytes)} GiB) on "
            f"startup is less than desired GPU memory utilization ({utilization}, {format_gib(requested)} GiB). "
            "Decrease GPU memory utilization or reduce GPU memory used by other processes (vllm/v1/worker/utils.py "
            f"request_memory; a one-GPU process holds about {format_gib(STARTUP_HELD_BYTES)} GiB before it)"
        )
    planned = tuple(StageBudget(w, o, requested - w - o.total) for w, o in stages)
    low = min(planned, key=lambda s: s.available)
    if low.available <= 0:
        raise InsufficientMemoryError(
            f"vLLM {release} refuses: No available memory for the cache blocks. Try increasing "
            f"`gpu_memory_utilization` when initializing the engine ({planning_module(release)}): "
            f"{format_gib(requested)} GiB requested, {format_gib(low.weights)} GiB of weights and "
            f"{format_gib(low.overhead.total)} GiB of modelled activation, CUDA-graph and non-torch memory leave "
            f"{format_gib(low.available)} GiB; use more GPUs (--tensor-parallel-size), a quantized checkpoint, or a "
            "larger GPU"
        )
    return VLLMBudget(low.available, "gpu_memory_utilization", total_bytes, total_source, utilization, requested,
                      planned)  # fmt: skip


def extensible_budget(
    total_bytes: int,
    utilization: float | None,
    stages: list[tuple[int, ProfileOverhead]],
    *,
    total_source: str,
    release: str,
    graph_estimate: bool = True,
) -> VLLMBudget:
    """0.34.0's extensible KV cache (:mod:`.extensible`) for each stage's ``(weights, overhead)``: the profiled
    figure at the resolved utilization reserves the capacity, the measurement after warmup gives the bytes the
    cache may take; the smallest stage is the budget. No free-memory refusal: "with the extensible KV cache
    the budget is only a cap" (``vllm/v1/worker/utils.py request_memory``). ``graph_estimate``
    (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``, default on): the CUDA-graph estimate joins the peak kept free."""
    resolved = 1.0 if utilization is None else utilization
    requested = requested_memory(total_bytes, resolved)
    planned = []
    for weights, overhead in stages:
        measured = measure(total_bytes, requested, weights, overhead, graph_estimate=graph_estimate)
        planned.append(StageBudget(weights, overhead, measured.kv_bytes, measured,
                                   requested - weights - overhead.total))  # fmt: skip
    low = min(planned, key=lambda s: min(s.available, s.profiled or 0))
    if low.available <= 0 or (low.profiled or 0) <= 0:
        raise InsufficientMemoryError(
            f"vLLM {release} refuses: No available memory for the cache blocks ({planning_module(release)}): "
            f"{format_gib(requested)} GiB requested, {format_gib(low.weights)} GiB of weights, "
            f"{format_gib(low.overhead.total)} GiB of modelled activation, CUDA-graph and non-torch memory, and the "
            "margin the extensible KV cache keeps free leave none (vllm/v1/worker/extensible_kv_cache.py "
            "measure_kv_cache_bytes); use more GPUs (--tensor-parallel-size), a quantized checkpoint, or a larger "
            "GPU"
        )
    low = min(planned, key=lambda s: s.available)
    return VLLMBudget(low.available, "extensible_kv_cache", total_bytes, total_source, resolved, requested,
                      tuple(planned))  # fmt: skip
