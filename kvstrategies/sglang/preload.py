"""Memory SGLang's process holds before the first weight loads, per rank, by GPU family.

SGLang sizes the KV pool from ``pre_model_load_memory``: the free device memory measured by
``sglang.srt.distributed.bootstrap.measure_pre_model_load_memory`` after the process group is up
and before any weight loads (MIN over the world). What is gone from the device capacity by then
is modelled as ``context + per_peer x peers`` (bytes), ``peers = tp - 1`` (+ 1 for a PP
neighbour), with the constants of the GPU's family (:data:`PROFILES`; ROCm adds a fixed figure
once a rank has a peer). Each constant comes
from public SGLang >= 0.5 start-up logs (``capacity - "Load weight begin. avail mem"``, the MIN
rank; ``Init torch distributed ends. mem usage`` where printed), named in the profile:

* **NVIDIA Hopper / Ampere on NVLink** (H100, H200, H800, A100): context 1.145 GiB, the mean of
  H200 TP8 (sgl-project/sglang#11716: 140.40 - 137.29 - 2.01 = 1.10) and RTX PRO 6000 TP4
  (sgl-project/sglang#40558: 95.59 - 94.01 - 0.39 = 1.19); per peer 2.01 / 7 = 0.287 GiB (the
  H200 TP8 log's ``Init torch distributed ends. mem usage=2.01 GB``).
* **NVIDIA H20** (NVLink, HGX H20): the Hopper context; per peer (2.02 - 1.145) / 7 = 0.125 GiB
  from an H20 TP8 start-up (DeepSeek-V4-Flash-Base, 2026-05-15: 95.58 - ``avail mem=93.56``), a
  sample log kept in a public capacity-planner's tests: the only H20 start-up found (two launches
  of one deployment), so the figure rests on one deployment.
* **NVIDIA Blackwell data-centre** (B200, B300, GB200, GB300): context 1.64 GiB, the mean of two
  TP1 clean start-ups in SGLang's development notes: B200 (179.06 - 177.57 = 1.49, 2026-04-27)
  and GB300 (277.55 - 275.75 = 1.80, 2026-05-24); no published multi-GPU Blackwell log of SGLang
  >= 0.5 prints the pre-load memory, so the NVLink per-peer figure stands in (the plan says so).
* **PCIe cards** (RTX, L40S, L40, L4, A10, T4, H100 PCIe): the Hopper context; per peer 0.39 / 3
  = 0.13 GiB (sgl-project/sglang#40558, RTX PRO 6000 TP4). SGLang drops its custom all-reduce on
  more than two PCIe-only GPUs (``custom_all_reduce_utils.can_use_custom_all_reduce_with_nvlink``),
  and GeForce cards hold less still (docs/validation.md).
* **AMD Instinct** (ROCm, RCCL and aiter's custom all-reduce, ``dispatch_custom_allreduce`` in
  ``sglang/srt/distributed/device_communicators/custom_all_reduce.py``): context 0.748 GiB, the mean
  of three MI355X TP1 start-ups (287.98 GiB capacity): sgl-project/sglang#18263 (287.98 - (230.20 +
  56.98) = 0.80) and a public ROCm bring-up write-up on SGLang 0.5.17 (pip route, Qwen3-0.6B:
  287.98 - ``Load weight begin. avail mem=287.26`` = 0.72; lmsysorg/sglang-rocm v0.5.17 container,
  Qwen3.8-27B-FP8: 287.98 - (258.78 + 28.49) = 0.71). With more than one rank, a fixed 7.63 GiB
  (the all-reduce workspace) plus 0.3625 GiB per peer, fit to the three multi-GPU start-ups of
  2026 images: the same write-up's container at TP2 (287.98 - (264.75 + 14.49) = 8.74), MI300X TP4
  with DP attention (sgl-project/sglang#25118: 191.98 - 182.61 = 9.37) and MI355X TP4 with DP
  attention (a public GLM-5.2 run log: 287.98 - 278.42 = 9.56): per peer ((9.37 + 9.56) / 2 - 8.74)
  / 2, fixed 8.74 - 0.748 - per peer. The TP2 container ran without DP attention and holds as
  much, so the figure belongs to the image, not to DP attention; the same write-up's pip route,
  whose aiter all-reduce failed to set up, held 1.72 at TP2. Older images held less: two MI355X
  TP8 start-ups of rocm/sgl-dev v0.5.8.post1 (GLM-5-FP8 4.50, Kimi-K2.5 4.45;
  github.com/ajith-sirra-amd/Issues) are 6.4 GiB under this profile (docs/validation.md).

The profiles are fits over a handful of published logs, not measurements of every stack: SGLang,
NCCL/RCCL and driver versions move them by a few hundred MiB. ``--gpu-overhead`` replaces them with
a measured figure (``capacity - "Load weight begin. avail mem"`` of your own log).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..planner.gpus import Accelerator

GIB = 2**30
CUDA_CONTEXT_GIB = (1.10 + 1.19) / 2
NVLINK_PER_PEER_GIB = 2.01 / 7
PCIE_PER_PEER_GIB = 0.39 / 3
H20_PER_PEER_GIB = (95.58 - 93.56 - CUDA_CONTEXT_GIB) / 7
BLACKWELL_CONTEXT_GIB = ((183359 / 1024 - 177.57) + (284208 / 1024 - 275.75)) / 2
_MI355X_GIB = 294896 / 1024
HIP_CONTEXT_GIB = (
    (_MI355X_GIB - (230.20 + 56.98)) + (_MI355X_GIB - 287.26) + (_MI355X_GIB - (258.78 + 28.49))
) / 3
_HIP_TP2 = _MI355X_GIB - (264.75 + 14.49)
_HIP_TP4 = ((196592 / 1024 - 182.61) + (_MI355X_GIB - 278.42)) / 2
HIP_PER_PEER_GIB = (_HIP_TP4 - _HIP_TP2) / 2
HIP_ALL_REDUCE_GIB = _HIP_TP2 - HIP_CONTEXT_GIB - HIP_PER_PEER_GIB

_HOPPER_LOGS = "H200 TP8 sgl-project/sglang#11716, RTX PRO 6000 TP4 sgl-project/sglang#40558"


@dataclass(frozen=True)
class PreloadProfile:
    """The two constants of one GPU family and the logs they come from."""

    family: str
    context_gib: float
    per_peer_gib: float
    interconnect: str
    sources: str
    stand_in: str = ""  # what is borrowed from another family, if anything
    multi_rank_gib: float = 0.0  # held once per rank when it has any peer (ROCm: the all-reduce workspace)


PROFILES: dict[str, PreloadProfile] = {
    "nvlink": PreloadProfile(
        "NVIDIA Hopper/Ampere", CUDA_CONTEXT_GIB, NVLINK_PER_PEER_GIB, "NVLink", _HOPPER_LOGS
    ),
    "h20": PreloadProfile(
        "NVIDIA H20", CUDA_CONTEXT_GIB, H20_PER_PEER_GIB, "NVLink",
        "H20 TP8 DeepSeek-V4-Flash-Base start-up (2026-05-15); context: " + _HOPPER_LOGS,
    ),  # fmt: skip
    "blackwell": PreloadProfile(
        "NVIDIA Blackwell", BLACKWELL_CONTEXT_GIB, NVLINK_PER_PEER_GIB, "NVLink",
        "B200 and GB300 TP1 clean start-up logs (2026-04-27, 2026-05-24)",
        "the Hopper NVLink per-peer figure (no multi-GPU Blackwell log)",
    ),  # fmt: skip
    "pcie": PreloadProfile("PCIe cards", CUDA_CONTEXT_GIB, PCIE_PER_PEER_GIB, "PCIe", _HOPPER_LOGS),
    "instinct": PreloadProfile(
        "AMD Instinct", HIP_CONTEXT_GIB, HIP_PER_PEER_GIB, "Infinity Fabric",
        "MI355X TP1 sgl-project/sglang#18263 and SGLang 0.5.17 ROCm bring-up write-up (TP1, TP2); "
        "MI300X TP4 sgl-project/sglang#25118; MI355X TP4 GLM-5.2 run log",
        multi_rank_gib=HIP_ALL_REDUCE_GIB,
    ),  # fmt: skip
}

# Parts whose GPUs talk over NVLink/NVSwitch in their usual 8-GPU boards (SXM, NVL, superchips).
_NVLINK = ("H100-80GB", "H200", "H800", "A100-40GB", "A100-80GB", "H100-NVL")
_BLACKWELL = ("B200", "B300", "GB200", "GB300")


def profile_for(gpu: Accelerator) -> PreloadProfile:
    """The preload profile of ``gpu``'s family."""
    if gpu.is_hip:
        return PROFILES["instinct"]
    if gpu.name == "H20":
        return PROFILES["h20"]
    if gpu.name in _BLACKWELL:
        return PROFILES["blackwell"]
    return PROFILES["nvlink" if gpu.name in _NVLINK else "pcie"]


@dataclass(frozen=True)
class PreloadMemory:
    """Bytes one rank holds before weights load: ``context + communication``."""

    context_bytes: int
    communication_bytes: int
    interconnect: str
    note: str
    family: str = ""
    sources: str = ""

    @property
    def total_bytes(self) -> int:
        return self.context_bytes + self.communication_bytes

    @property
    def origin(self) -> str:
        """Where the figure comes from, short (the breakdown row)."""
        return f"{self.family} profile, from published logs" if self.family else "modelled"

    def describe(self) -> str:
        return (
            f"held before weights load {self.total_bytes / GIB:.2f} GiB = device context "
            f"{self.context_bytes / GIB:.2f} GiB + communication buffers {self.communication_bytes / GIB:.2f} GiB "
            f"({self.family}, {self.interconnect}; {self.note}; constants from {self.sources}; docs/validation.md)"
        )


def preload_memory(gpu: Accelerator, *, tp: int = 1, pp: int = 1) -> PreloadMemory:
    """What ``gpu`` holds per rank before the weights of a ``tp x pp`` deployment load."""
    peers = max(0, tp - 1) + (1 if pp > 1 else 0)
    profile = profile_for(gpu)
    note = "fit to published SGLang >= 0.5 start-up logs"
    if profile.stand_in and peers:
        note += f"; {profile.stand_in} stands in"
    if gpu.is_hip and gpu.name != "MI355X" and not peers:
        note += "; MI355X figures stand in for this part"
    if gpu.is_hip and tp > 4:
        note += "; the per-peer figure comes from TP2 / TP4 logs, extrapolated"
    if gpu.is_npu:
        note += "; CUDA figures stand in for this platform"
    communication = profile.per_peer_gib * peers + (profile.multi_rank_gib if peers else 0.0)
    return PreloadMemory(
        context_bytes=int(profile.context_gib * GIB),
        communication_bytes=int(communication * GIB),
        interconnect=f"{profile.interconnect}, {peers} peer(s)",
        note=note,
        family=profile.family,
        sources=profile.sources,
    )
