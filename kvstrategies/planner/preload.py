"""Memory SGLang's process holds before the first weight loads, per rank.

SGLang sizes the KV pool from ``pre_model_load_memory``: the free device memory measured by
``sglang.srt.distributed.bootstrap.measure_pre_model_load_memory`` after the process group is up
and before any weight loads (MIN over the world). What is gone from the device capacity by then
is modelled as two parts (bytes):

``context``
    The CUDA context, the PyTorch caching allocator's first blocks and the kernels' module
    images, held before ``init_torch_distributed`` starts measuring. Public SGLang >= 0.5
    start-up logs give ``capacity - avail_before_load - distributed_mem_usage``:

    * H200 (143771 MiB), TP8, sgl-project/sglang#11716 (2025-10-16): 140.40 - 137.29 - 2.01
      = 1.10 GiB on TP1-TP6 (TP0 140.40 - 137.34 - 1.96 = 1.10);
    * RTX PRO 6000 Blackwell (97887 MiB), TP4, sgl-project/sglang#40558 (2026-09-21):
      95.59 - 94.01 - 0.39 = 1.19 GiB.

    :data:`CUDA_CONTEXT_GIB` is their mean, 1.145 GiB. ROCm holds less: MI355X (294896 MiB)
    at TP1, sgl-project/sglang#18263 (2026-02): 287.98 - (230.20 + 56.98) = 0.80 GiB
    (:data:`HIP_CONTEXT_GIB`). Ascend publishes no such breakdown in the logs found; the CUDA
    figure stands in and the plan says so.

``communication``
    NCCL communicators (PyNccl and the torch process groups, one channel set per peer) and the
    custom all-reduce buffers that ``init_distributed_environment`` / ``initialize_model_parallel``
    create; zero at TP1 x PP1. The logs' ``Init torch distributed ends. mem usage=`` line
    measures it: 2.01 GiB at TP8 on NVLink H200 (sgl-project/sglang#11716), i.e. 0.287 GiB per
    peer, and 0.39 GiB at TP4 on PCIe RTX PRO 6000 (sgl-project/sglang#40558), 0.13 GiB per
    peer. NCCL keeps one buffer set per peer, so the model is ``per_peer * (tp - 1)`` with the
    NVLink figure for SXM/NVL parts and the PCIe figure otherwise, plus one peer for a PP
    neighbour. Check: H200 TP4 with DP attention (sgl-project/sglang#17392, 2026-05-07) holds
    ``140.40 - (121.95 + 16.39) = 2.06`` GiB before load; the model gives 1.145 + 3 * 0.287 =
    2.006 GiB.

    ROCm (RCCL plus aiter's custom all-reduce, MI355X, Infinity Fabric) holds more per peer:
    zai-org/GLM-5-FP8 at TP8 on MI355X (rocm/sgl-dev v0.5.8.post1 image, 2026-02-26; log in
    github.com/ajith-sirra-amd/Issues, GLM-5-FP8-MI355X-SGLANG-ERROR.md) prints
    ``Init torch distributed ends ... mem usage=3.41..3.83 GB`` and, on the fullest rank,
    ``Load weight begin. avail mem=283.48 GB``: 287.98 - 283.48 = 4.50 GiB held, i.e.
    (4.50 - 0.80) / 7 = 0.529 GiB per peer (:data:`HIP_PER_PEER_GIB`). Both ROCm figures come
    from MI355X logs; they stand in for the other Instinct parts.

The split is a fit over a handful of published logs, not a measurement of every stack: SGLang,
NCCL and driver versions move it by a few hundred MiB. ``--gpu-overhead`` replaces it with a
measured figure (``capacity - "Load weight begin. avail mem"`` of your own log).
"""

from __future__ import annotations

from dataclasses import dataclass

from .gpus import Accelerator

GIB = 2**30
CUDA_CONTEXT_GIB = (1.10 + 1.19) / 2
NVLINK_PER_PEER_GIB = 2.01 / 7
PCIE_PER_PEER_GIB = 0.39 / 3
HIP_CONTEXT_GIB = 294896 / 1024 - (230.20 + 56.98)
HIP_PER_PEER_GIB = (294896 / 1024 - 283.48 - HIP_CONTEXT_GIB) / 7

# Parts whose GPUs talk over NVLink/NVSwitch in their usual 8-GPU boards (SXM, NVL, superchips).
_NVLINK = ("H100-80GB", "H200", "H800", "H20", "B200", "B300", "GB200", "A100-40GB", "A100-80GB", "H100-NVL")


@dataclass(frozen=True)
class PreloadMemory:
    """Bytes one rank holds before weights load: ``context + communication``."""

    context_bytes: int
    communication_bytes: int
    interconnect: str
    note: str

    @property
    def total_bytes(self) -> int:
        return self.context_bytes + self.communication_bytes

    def describe(self) -> str:
        return (
            f"held before weights load {self.total_bytes / GIB:.2f} GiB = device context "
            f"{self.context_bytes / GIB:.2f} GiB + communication buffers {self.communication_bytes / GIB:.2f} GiB "
            f"({self.interconnect}; {self.note}; docs/validation.md)"
        )


def preload_memory(gpu: Accelerator, *, tp: int = 1, pp: int = 1) -> PreloadMemory:
    """What ``gpu`` holds per rank before the weights of a ``tp x pp`` deployment load."""
    peers = max(0, tp - 1) + (1 if pp > 1 else 0)
    note = "fit to published SGLang >= 0.5 start-up logs"
    if gpu.is_hip:
        context, per_peer, link = HIP_CONTEXT_GIB, HIP_PER_PEER_GIB, "Infinity Fabric"
        if gpu.name != "MI355X":
            note += "; MI355X figures stand in for this part"
    else:
        nvlink = gpu.name in _NVLINK
        context = CUDA_CONTEXT_GIB
        per_peer = NVLINK_PER_PEER_GIB if nvlink else PCIE_PER_PEER_GIB
        link = "NVLink" if nvlink else "PCIe"
        if not gpu.is_cuda:
            note += "; CUDA figures stand in for this platform"
    return PreloadMemory(
        context_bytes=int(context * GIB),
        communication_bytes=int(per_peer * peers * GIB),
        interconnect=f"{link}, {peers} peer(s)",
        note=note,
    )
