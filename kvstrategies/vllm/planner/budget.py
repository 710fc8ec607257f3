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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...core.releases import VLLM, EngineRelease, ReleaseRule, parse_release, span, supported_releases
from ...errors import InsufficientMemoryError, KVCacheConfigError, UnsupportedConfigurationError
from ..strategies.sizing import planning_module
from .overhead import STARTUP_HELD_BYTES, ProfileOverhead

GIB = 2**30

#: vLLM 0.34.0 sizes the KV cache with its extensible KV cache by default on CUDA: utilization 1.0 and a cache
#: sized from measured memory. The utilization rule below (and its fitted constants) is 0.33.0's and older logs'
EXTENSIBLE_KV_CACHE = ReleaseRule(
    "vllm-extensible-kv-cache",
    span("0.34.0", engine=VLLM),
    "the extensible KV cache is the CUDA default: gpu_memory_utilization unset means 1.0, the cache sized from "
    "measured memory (the 0.92 utilization rule no longer gives the budget)",
    "vllm/config/cache.py CacheConfig.resolved_gpu_memory_utilization, CacheConfig.enable_extensible_kv_cache",
    topic="budget",
)


def planning_release(version: str | None, *, budget_given: bool) -> EngineRelease:
    """The release a plan is for: ``--vllm-version`` when given; else the newest, unless the budget is to be
    estimated, when it is the newest release whose budget rule is modelled (0.33.0; the report names it)."""
    if version is not None:
        return parse_release(version, VLLM, field="--vllm-version")
    releases = supported_releases(VLLM)
    if budget_given:
        return releases[-1]
    return [r for r in releases if not EXTENSIBLE_KV_CACHE.holds(r)][-1]


def budget_release_note(release: EngineRelease, version: str | None) -> str | None:
    """The report's note when :func:`planning_release` chose an older release than the newest (else ``None``)."""
    newest = supported_releases(VLLM)[-1]
    if version is not None or release == newest:
        return None
    return (f"planned for {release.label}: {newest.label} sizes its KV cache with the extensible KV cache "
            f"({EXTENSIBLE_KV_CACHE.source}), whose budget the planner does not model; --kv-cache-memory-bytes "
            f"plans {newest.label} exactly")  # fmt: skip


def check_budget_rule(release: EngineRelease) -> None:
    """Refuse to estimate a budget for a release whose rule the planner does not model (:data:`EXTENSIBLE_KV_CACHE`)."""
    if EXTENSIBLE_KV_CACHE.holds(release):
        raise UnsupportedConfigurationError(
            f"vLLM {release.text} sizes its KV cache with the extensible KV cache by default (gpu_memory_utilization "
            f"1.0, the cache sized from measured memory: {EXTENSIBLE_KV_CACHE.source}); the planner's budget rule "
            "is vLLM 0.33.0's. Give --kv-cache-memory-bytes (vLLM's sizing from it is exact), or plan "
            "--vllm-version 0.33.0"
        )


def format_gib(nbytes: int) -> str:
    """vLLM's ``format_gib``: ``round(bytes / GiB, 2)`` as Python prints it."""
    return f"{round(nbytes / GIB, 2)}"


@dataclass(frozen=True)
class StageBudget:
    """One pipeline stage's worker: weights, the modelled overhead, and its KV bytes."""

    weights: int
    overhead: ProfileOverhead
    available: int


@dataclass(frozen=True)
class VLLMBudget:
    """The KV budget vLLM sizes the cache from (bytes per worker) and how it came about.

    ``source``: ``"kv_cache_memory_bytes"`` (given, exact) or ``"gpu_memory_utilization"`` (vLLM's rule
    with the modelled profile). ``stages`` is empty for a given budget.
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
