"""The device facts vLLM reads when it sizes a KV cache: compute capability and NVML total memory.

vLLM picks attention backends by compute capability (``platforms/cuda.py _get_backend_priorities``)
and batch defaults by total memory and name (``engine/arg_utils.py get_batch_defaults``). The
figures are those of ``kvstrategies gpus`` (the planner's table, each with the nvidia-smi listing it
was checked against); ``tests/vllm/test_vllm_strategies.py`` asserts they stay equal to it, so the core
strategies read them without importing the planner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import KVCacheConfigError


@dataclass(frozen=True)
class VLLMDevice:
    """A CUDA GPU as vLLM sees it: ``name`` (``kvstrategies gpus``), compute capability, NVML MiB."""

    name: str
    capability: tuple[int, int]
    memory_mib: int

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * 2**20

    @property
    def nvml_name(self) -> str:
        """The device name vLLM reads from NVML (its A100 check reads it)."""
        return f"NVIDIA {self.name}"


DEVICES: tuple[VLLMDevice, ...] = tuple(
    VLLMDevice(name, capability, mib)
    for name, capability, mib in (
        ("H100-80GB", (9, 0), 81559), ("H200", (9, 0), 143771), ("B200", (10, 0), 183359),
        ("A100-40GB", (8, 0), 40960), ("A100-80GB", (8, 0), 81920), ("H20", (9, 0), 97871),
        ("L40S", (8, 9), 46068), ("L4", (8, 9), 23034), ("A10", (8, 6), 23028), ("T4", (7, 5), 15360),
        ("RTX-4090", (8, 9), 24564), ("RTX-5090", (12, 0), 32607), ("H100-PCIe", (9, 0), 81559),
        ("H100-NVL", (9, 0), 95830), ("H800", (9, 0), 81559), ("GB200", (10, 0), 189471), ("B300", (10, 3), 275040),
        ("GB300", (10, 3), 284208), ("L40", (8, 9), 46068), ("RTX-PRO-6000", (12, 0), 97887),
    )
)  # fmt: skip
_ALIASES = {"h100": "H100-80GB", "h100sxm": "H100-80GB", "a100": "A100-80GB", "h200sxm": "H200"}


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.strip().lower())


_BY_KEY = {_key(d.name): d for d in DEVICES}


def vllm_device(name: str) -> VLLMDevice:
    """The device by name (case, spaces, dashes ignored; ``H100`` is the 80 GB SXM part)."""
    key = _key(name)
    found = _BY_KEY.get(_key(_ALIASES.get(key, key)))
    if found is None:
        known = ", ".join(d.name for d in DEVICES)
        raise KVCacheConfigError(f"unknown CUDA GPU {name!r} for a vLLM plan; known: {known}")
    return found
