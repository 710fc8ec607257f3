"""The device memory vLLM's budget rule starts from: the total CUDA reports, per GPU of ``kvstrategies gpus``.

vLLM multiplies ``--gpu-memory-utilization`` by ``MemorySnapshot.total_memory``
(``vllm/utils/mem_utils.py MemorySnapshot.measure``: ``torch.accelerator.get_memory_info``, i.e.
``cudaMemGetInfo``), which is below nvidia-smi's ``memory.total`` on data-centre parts (the driver
keeps a reserved region). Each figure below is the total a public vLLM start-up log printed
("Free memory on device (free/TOTAL GiB) on startup", ``vllm/v1/worker/gpu_worker.py``), two
decimals as vLLM's ``format_gib`` prints it. A GPU without a logged
figure gets nvidia-smi's capacity (:mod:`kvstrategies.planner.gpus`) minus
:data:`MEDIAN_RESERVED_MIB`, the median reservation of the GPUs that have one, and says so.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ...errors import KVCacheConfigError

GIB = 2**30
MIB = 2**20

#: name (as ``kvstrategies gpus`` spells it) -> the total GiB public vLLM start-up logs print for it; the
#: lines (and where they were published) are kept in ``tests/fixtures/vllm_logs/gpu_totals.json``
LOGGED_TOTAL_GIB: dict[str, float] = {
    "H100-80GB": 79.18, "H200": 139.8, "A100-80GB": 79.25, "A100-40GB": 39.49, "L40S": 44.42, "L4": 22.03,
    "RTX-4090": 23.99, "RTX-5090": 31.36, "B200": 178.35,
}  # fmt: skip
_SOURCE = "tests/fixtures/vllm_logs/gpu_totals.json keeps the public vLLM log lines"


def _nvml_mib(name: str) -> float | None:
    from ...planner.gpus import lookup_gpu

    return lookup_gpu(name).capacity_mib


def _reservations() -> list[float]:
    out = []
    for name, gib in LOGGED_TOTAL_GIB.items():
        nvml = _nvml_mib(name)
        if nvml is not None:
            out.append(nvml - gib * 1024)
    return out


#: nvidia-smi ``memory.total`` minus the CUDA total, median over the GPUs of :data:`LOGGED_TOTAL_GIB`
MEDIAN_RESERVED_MIB: float = statistics.median(_reservations())


@dataclass(frozen=True)
class CudaTotal:
    """What vLLM reads as the device's total memory (bytes) and where the figure comes from."""

    gpu: str
    total_bytes: int
    source: str


def cuda_total(gpu: str, nvml_mib: float | None = None) -> CudaTotal:
    """The CUDA total of ``gpu`` (a name of ``kvstrategies gpus``; ``nvml_mib`` overrides its capacity)."""
    if nvml_mib is None and gpu in LOGGED_TOTAL_GIB:
        gib = LOGGED_TOTAL_GIB[gpu]
        return CudaTotal(gpu, round(gib * GIB), f"the total vLLM logs on {gpu} ({_SOURCE})")
    mib = nvml_mib if nvml_mib is not None else _nvml_mib(gpu)
    if mib is None:
        raise KVCacheConfigError(f"GPU {gpu!r} has no known capacity; give --gpu-memory (e.g. 80GiB)")
    total = int((mib - MEDIAN_RESERVED_MIB) * MIB)
    if total <= 0:
        raise KVCacheConfigError(f"--gpu-memory {mib:g} MiB is below the driver's reserved region; give the real size")
    return CudaTotal(
        gpu, total,
        f"nvidia-smi {mib:g} MiB minus the median driver reservation {MEDIAN_RESERVED_MIB:.0f} MiB of the GPUs whose "
        "vLLM logs print their CUDA total (no vLLM log of this GPU's total was found)",
    )  # fmt: skip
