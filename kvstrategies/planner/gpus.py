"""Accelerators as SGLang 0.5.23 sees them at launch, and a byte-size parser.

``capacity_mib`` is the number SGLang's ``get_device_memory_capacity`` returns
(``sglang/srt/utils/common.py``): on CUDA nvidia-smi's ``memory.total`` in MiB (not the marketing
"80 GB"), on ROCm rocminfo's "Pool 1" size in KB / 1024, on Ascend the NPU runtime's total. It
drives the capacity tier and the ``mem_fraction_static`` default; the KV budget itself is measured
from *free* memory. Every figure confirmed by a published ``nvidia-smi`` listing carries that
listing as its ``source`` (``kvstrategies gpus`` prints them); the others carry a ``note`` saying
they are unconfirmed and can be replaced with :meth:`Accelerator.with_capacity`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

from ..errors import KVCacheConfigError

Platform = Literal["cuda", "hip", "npu"]

_UNCONFIRMED = "capacity not confirmed by a published nvidia-smi/rocm-smi listing; pass --gpu-memory to override"


@dataclass(frozen=True)
class Accelerator:
    """One device type.

    ``capacity_mib``: MiB as SGLang reads it (float; ``None`` = SGLang could not probe it, which
    selects the fallbacks of memory_hook.handle_gpu_memory_settings). ``compute_capability``: CUDA (major,
    minor), assuming a toolkit new enough for SGLang's probes (>= 12.3 on SM90, >= 12.8 on
    Blackwell, sglang.srt.utils.common probes). ``gfx_arch``: ROCm target (``"gfx942"``, ``"gfx950"``).
    """

    name: str
    capacity_mib: float | None
    platform: Platform
    compute_capability: tuple[int, int] | None = None
    gfx_arch: str | None = None
    note: str | None = None
    source: str | None = None  # the published device listing the capacity was checked against

    @property
    def capacity_bytes(self) -> int | None:
        """``capacity_mib * 2**20`` bytes (``None`` when unknown)."""
        return None if self.capacity_mib is None else int(self.capacity_mib * 2**20)

    @property
    def sm_major(self) -> int | None:
        """Raw CUDA major (the DSA rules test ``major >= 10``, which includes SM120)."""
        if self.platform != "cuda" or self.compute_capability is None:
            return None
        return self.compute_capability[0]

    @property
    def is_cuda(self) -> bool:
        return self.platform == "cuda"

    @property
    def is_hip(self) -> bool:
        return self.platform == "hip"

    @property
    def is_npu(self) -> bool:
        return self.platform == "npu"

    @property
    def is_sm90(self) -> bool:
        """SGLang's ``is_hopper_with_cuda_12_3``: CUDA major 9."""
        return self.sm_major == 9

    @property
    def is_sm100(self) -> bool:
        """CUDA major 10: B200/GB200 (SM100) and B300/GB300 (SM103) alike (sglang.srt.utils.common probes)."""
        return self.sm_major == 10

    @property
    def is_sm120(self) -> bool:
        return self.sm_major == 12

    @property
    def is_blackwell(self) -> bool:
        """CUDA major in {10, 11, 12}."""
        return self.sm_major in (10, 11, 12)

    @property
    def is_gfx95(self) -> bool:
        """ROCm MI350/MI355 generation."""
        return self.is_hip and (self.gfx_arch or "").startswith("gfx95")

    def with_capacity(self, capacity_mib: float | None) -> Accelerator:
        """The same device with a measured capacity (e.g. from your own nvidia-smi)."""
        if capacity_mib is not None and not capacity_mib > 0:
            raise KVCacheConfigError(f"capacity_mib must be > 0, got {capacity_mib!r}")
        return replace(self, capacity_mib=capacity_mib, note=None, source="given (--gpu-memory)")


def _cuda(name: str, mib: float, cc: tuple[int, int], source: str | None = None) -> Accelerator:
    note = None if source is not None else _UNCONFIRMED
    return Accelerator(name, mib, "cuda", compute_capability=cc, note=note, source=source)


_GH = "https://github.com/"
_MODAL = _GH + "modal-labs/modal-client/pull/2797 (nvidia-smi memory.total of Modal's GPU fleet)"
_PUBLIC = "published device listing"

GPUS: tuple[Accelerator, ...] = (
    # Confirmed: each capacity appears as nvidia-smi "<used>MiB / <total>MiB" in the listing cited.
    _cuda("H100-80GB", 81559, (9, 0), _GH + "NVIDIA/nccl/issues/1264 (NVIDIA H100 80GB HBM3, 0MiB / 81559MiB)"),
    _cuda("H200", 143771, (9, 0), _GH + "sgl-project/sglang/issues/3196 (NVIDIA H200, 124585MiB / 143771MiB)"),
    _cuda("B200", 183359, (10, 0), _GH + "NVIDIA/TensorRT-LLM/issues/10278 (NVIDIA B200, 166593MiB / 183359MiB)"),
    _cuda(
        "A100-40GB",
        40960,
        (8, 0),
        _GH + "bottlerocket-os/bottlerocket-core-kit/pull/834 (A100-SXM4-40GB, 598MiB / 40960MiB)",
    ),
    _cuda("A100-80GB", 81920, (8, 0), _MODAL + ": A100 80GB 81920MiB"),
    _cuda("H20", 97871, (9, 0), _GH + "NVIDIA/nvtrust/issues/128 (NVIDIA H20, 0MiB / 97871MiB)"),
    _cuda("L40S", 46068, (8, 9), _GH + "sgl-project/sglang/pull/13023 (NVIDIA L40S, 1MiB / 46068MiB)"),
    _cuda("L4", 23034, (8, 9), _MODAL + ": L4 23034MiB"),
    _cuda("A10", 23028, (8, 6), _MODAL + ": A10 23028MiB"),
    _cuda("T4", 15360, (7, 5), _MODAL + ": T4 15360MiB"),
    _cuda("RTX-4090", 24564, (8, 9), _GH + "vllm-project/vllm/issues/7553 (RTX 4090, 23859MiB / 24564MiB)"),
    _cuda("RTX-5090", 32607, (12, 0), _GH + "noonghunna/club-3090/issues/1229 (RTX 5090, 29324MiB / 32607MiB)"),
    # Listings the search tools found in public repositories whose file the index names only by id.
    _cuda("B300", 275040, (10, 3), _PUBLIC + " (NVIDIA B300 SXM6 AC, 0MiB / 275040MiB)"),
    _cuda("GB200", 189471, (10, 0), _PUBLIC + " (NVIDIA GB200, 0MiB / 189471MiB)"),
    _cuda("GB300", 284208, (10, 3), _PUBLIC + " (NVIDIA GB300, 0MiB / 284208MiB)"),
    Accelerator(
        "MI300X", 196592, "hip", gfx_arch="gfx942",
        source=_PUBLIC + " (rocminfo Pool 1 Size: 201310208(0xbffc000) KB = 196592MiB, gfx942)",
    ),  # fmt: skip
    Accelerator(
        "MI355X", 294896, "hip", gfx_arch="gfx950",
        source=_PUBLIC + " (8 MI355X cards reporting 309220868096 B total = 294896MiB)",
    ),  # fmt: skip
    _cuda("H100-NVL", 95830, (9, 0), _PUBLIC + " (NVIDIA H100 NVL, 0MiB / 95830MiB)"),
    _cuda("L40", 46068, (8, 9), _PUBLIC + " (NVIDIA L40, 39145MiB / 46068MiB, ECC on)"),
    _cuda(
        "RTX-PRO-6000", 97887, (12, 0),
        _PUBLIC + " (NVIDIA RTX PRO 6000 Blackwell, 0MiB / 97887MiB)",
    ),  # fmt: skip
    # Unconfirmed: typical listings, no published nvidia-smi/rocm-smi total found; override with --gpu-memory.
    _cuda("H100-PCIe", 81559, (9, 0)),
    _cuda("H800", 81559, (9, 0)),
    Accelerator("MI325X", 262128, "hip", gfx_arch="gfx942", note=_UNCONFIRMED),
    Accelerator("Ascend-910B", 65536, "npu", note=_UNCONFIRMED),
)

_ALIASES = {
    "h100": "H100-80GB",
    "h100sxm": "H100-80GB",
    "h10080gbhbm3": "H100-80GB",
    "h200141gb": "H200",
    "h200sxm": "H200",
    "a100": "A100-80GB",
    "a100sxm480gb": "A100-80GB",
    "a100sxm440gb": "A100-40GB",
    "4090": "RTX-4090",
    "b300sxm6ac": "B300",
    "5090": "RTX-5090",
    "910b": "Ascend-910B",
}


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.strip().lower())


_BY_KEY = {_key(g.name): g for g in GPUS}


def lookup_gpu(name: str) -> Accelerator:
    """Find an accelerator by name, ignoring case, spaces, dashes and underscores.

    ``"h100"``, ``"H100-80GB"`` and ``"h100_80gb"`` all give the 81559 MiB H100 SXM entry.
    Unknown names raise :class:`KVCacheConfigError` listing the known ones.
    """
    key = _key(name)
    key = _key(_ALIASES.get(key, key))
    found = _BY_KEY.get(key)
    if found is None:
        known = ", ".join(g.name for g in GPUS)
        raise KVCacheConfigError(
            f"unknown GPU {name!r}; known: {known} (or build an Accelerator with your nvidia-smi memory.total in MiB)"
        )
    return found


_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_MAX_SIZE_DIGITS = 40
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_bytes(value: str | int) -> int:
    """Parse a byte size: ``"80GiB"`` (2**30), ``"40GB"`` (10**9), ``"512MiB"``, ``"1234"``.

    Units: B, KB/MB/GB/TB (powers of 10), KiB/MiB/GiB/TiB (powers of 2), case-insensitive; a
    decimal number is allowed when the result is a whole number of bytes (``"1.5GiB"``).
    Negative, fractional-byte or unparseable input raises :class:`KVCacheConfigError`.
    """
    if isinstance(value, bool):
        raise KVCacheConfigError(f"not a byte size: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise KVCacheConfigError(f"byte size must be >= 0, got {value}")
        return int(value)
    if str(value).strip().startswith("-"):
        raise KVCacheConfigError(f"byte size must be >= 0, got {value!r}")
    match = _SIZE_RE.match(str(value))
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise KVCacheConfigError(f"not a byte size: {value!r}; use e.g. '80GiB', '40GB', '512MiB' or a plain integer")
    number = match.group(1)
    if len(number) > _MAX_SIZE_DIGITS:  # int() of thousands of digits is slow, then refused by Python
        raise KVCacheConfigError(f"byte size {value!r:.40}... has {len(number)} digits; the most accepted is 2**63 - 1")
    if "." in number:
        whole, frac = number.split(".")
        scale: int = 10 ** len(frac)
        numerator = int(whole or "0") * scale + int(frac or "0")
        total, rest = divmod(numerator * _UNITS[unit], scale)
        if rest:
            raise KVCacheConfigError(f"byte size {value!r} is not a whole number of bytes")
        return total
    return int(number) * _UNITS[unit]
