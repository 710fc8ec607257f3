"""The budget step: from a GPU, the memory fraction and the weights to one rank's KV budget.

``budget = avail - P0 * (1 - mfs) - mm`` bytes (resolve.md §2, launch_defaults.md §5) with
``P0 = capacity - overhead`` (free memory before weights load, OPEN-L2: the overhead is an
input, 1 GiB by default) and ``avail = P0 - weights`` (the fullest rank's resident weights,
given per rank or estimated from the config by :mod:`kvstrategies.weights`). The arithmetic
is :func:`~kvstrategies.launch_defaults.estimate_kv_budget`; this module chooses its inputs
and records every assumption so the plan can print them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import InsufficientMemoryError, KVCacheConfigError
from ..launch_defaults import LaunchResolution, estimate_kv_budget
from ..weights import estimate_weights
from .request import GIB, DeploymentRequest


@dataclass(frozen=True)
class KVBudget:
    """One rank's KV budget (bytes) and the figures that produced it.

    ``source`` is ``"given"`` (``--available-bytes``) or ``"gpu"``. In GPU mode the capacity
    splits as ``overhead + weights + slack + multimodal + available`` (up to int truncation and
    the float32 rounding of a multi-rank world); ``slack = P0 * (1 - mfs)`` holds activations,
    CUDA graphs and the request table.
    """

    available_bytes: int
    source: Literal["given", "gpu"]
    gpu_name: str | None = None
    capacity_bytes: int | None = None
    mem_fraction_static: float | None = None
    overhead_bytes: int | None = None
    weight_bytes: int | None = None
    weight_source: str | None = None
    slack_bytes: int | None = None
    multimodal_bytes: int = 0
    assumptions: tuple[str, ...] = ()


def weights_per_rank(req: DeploymentRequest, config: Mapping[str, Any]) -> tuple[int, str]:
    """Resident weight bytes of the fullest rank, and where the number came from.

    Given (``--weight-bytes``) wins; else the estimate of :mod:`kvstrategies.weights` at
    ``tp x pp``, MTP layers included when speculative decoding is on (the draft shares the GPU).
    """
    if req.weight_bytes is not None:
        return req.weight_bytes, "given per rank (--weight-bytes)"
    dtype = req.weight_dtype or req.model_dtype
    estimate = estimate_weights(config, dtype=dtype, quantization=req.weight_quantization)
    include_mtp = req.speculative_algorithm is not None and estimate.mtp_params > 0
    nbytes = estimate.weight_bytes_per_rank(req.tp_size, req.pp_size, include_mtp=include_mtp)
    mtp = f" + {estimate.mtp_params / 1e9:.2f}B MTP draft" if include_mtp else ""
    return nbytes, (
        f"estimated from the config: {estimate.main_params / 1e9:.2f}B parameters{mtp}, {estimate.fmt.name}, "
        f"split over TP {req.tp_size} x PP {req.pp_size} (fullest rank)"
    )


def kv_budget(req: DeploymentRequest, config: Mapping[str, Any], launch: LaunchResolution | None) -> KVBudget:
    """The KV budget of one rank: given, or derived from the GPU (see the module doc)."""
    if req.available_bytes is not None:
        return KVBudget(
            available_bytes=req.available_bytes,
            source="given",
            gpu_name=None if req.gpu is None else req.gpu.name,
            assumptions=("KV budget per rank given (--available-bytes): the GPU budget step is skipped",),
        )
    gpu = req.gpu
    if gpu is None or launch is None:
        raise KVCacheConfigError("name a GPU (--gpu / --gpu-memory) or give --available-bytes")
    if gpu.capacity_mib is None or launch.mem_fraction_static is None:
        raise KVCacheConfigError(f"GPU {gpu.name!r} has no known capacity; give --gpu-memory (e.g. 80GiB)")
    weights, weight_source = weights_per_rank(req, config)
    mm_gib = launch.multimodal_reserve_mib / 1024  # kv_cache_configurator.mm_runtime_reservation_gb
    mfs = launch.mem_fraction_static
    world = req.tp_size * req.pp_size
    free_before = gpu.capacity_mib * 2**20 - req.overhead_bytes
    if weights >= free_before:
        raise InsufficientMemoryError(
            f"the weights ({weights / GIB:.2f} GiB per rank) do not fit the {free_before / GIB:.2f} GiB free on "
            f"{gpu.name} before loading; use more GPUs (--tp, --pp-size), smaller weights (--weight-dtype / "
            f"--weight-quantization fp8) or a larger GPU (weights {weight_source})"
        )
    estimate = estimate_kv_budget(
        gpu.capacity_mib,
        weights,
        mfs,
        overhead_gib=req.overhead_bytes / GIB,
        world_size=world,
        multimodal_gib=mm_gib,
    )
    assumptions = [
        f"GPU capacity {gpu.capacity_mib:g} MiB ({gpu.name}) as nvidia-smi reports memory.total "
        f"(launch_defaults.md §1.1){'; ' + gpu.note if gpu.note else ''}",
        f"free memory before weights P0 = capacity - {req.overhead_bytes / GIB:.2f} GiB runtime overhead "
        "(CUDA context, NCCL, custom all-reduce; OPEN-L2, --gpu-overhead)",
        f"weights {weight_source}",
        "free memory after weights = P0 - weights"
        + (f"; both float32-rounded by the world MIN all-reduce ({world} ranks, resolve.md §2)" if world > 1 else ""),
        f"KV budget = free after weights - P0 x (1 - mem_fraction_static {mfs:g})"
        + (f" - {mm_gib:.4f} GiB multimodal cache (resolve.md §2)" if mm_gib else "")
        + "; the slack P0 x (1 - mfs) holds activations, CUDA graphs and the request table",
    ]
    if req.attn_dp_size > 1:
        assumptions.append(
            "DP attention: weights counted TP-sharded (attention weights replicated per DP group are not)"
        )
    if req.speculative_algorithm is not None and "MTP" not in weight_source and req.weight_bytes is None:
        assumptions.append("speculative draft: an external draft model's weights are not counted")
    return KVBudget(
        available_bytes=estimate.available_bytes,
        source="gpu",
        gpu_name=gpu.name,
        capacity_bytes=gpu.capacity_bytes,
        mem_fraction_static=mfs,
        overhead_bytes=req.overhead_bytes,
        weight_bytes=weights,
        weight_source=weight_source,
        slack_bytes=int(estimate.slack_gib * GIB),
        multimodal_bytes=int(mm_gib * GIB),
        assumptions=tuple(assumptions),
    )
