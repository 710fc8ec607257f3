"""What a user asks the planner: one deployment, with every setting they left out as ``None``.

``None`` means "not given": with a GPU named, SGLang 0.5.23's launch defaults fill it
(:mod:`.launch`); without one, the library's plain defaults apply (KV dtype ``auto``, page 1),
as ``kvstrategies plan --available-bytes`` always did.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import KVCacheConfigError
from ..gpus import Accelerator

GIB = 2**30
DEFAULT_OVERHEAD_BYTES = GIB  # CUDA context + NCCL + all-reduce buffers (launch_defaults.py)


@dataclass(frozen=True)
class DeploymentRequest:
    """One deployment to plan, one rank's view.

    ``source`` is ``{"preset": name}`` or ``{"hf_config": dict}`` (``cli.model_source``).
    Budget: ``available_bytes`` (the KV budget per rank, skips the budget step) or ``gpu``
    (capacity as SGLang reads it) with ``mem_fraction_static`` and the resident weights
    (``weight_bytes`` per rank, else estimated from the config with ``weight_dtype`` /
    ``weight_quantization``); ``overhead_bytes`` is what the runtime holds before weights load.
    ``request_lengths`` (tokens) are the lengths the fit report answers for.
    """

    model: str
    source: Mapping[str, Any]
    tp_size: int = 1
    pp_size: int = 1
    pp_rank: int = 0
    dcp_size: int = 1
    attn_dp_size: int = 1
    kv_cache_dtype: str | None = None
    page_size: int | None = None
    model_dtype: str | None = None
    available_bytes: int | None = None
    gpu: Accelerator | None = None
    mem_fraction_static: float | None = None
    weight_bytes: int | None = None
    weight_dtype: str | None = None
    weight_quantization: str | None = None
    overhead_bytes: int = DEFAULT_OVERHEAD_BYTES
    max_total_tokens: int | None = None
    max_running_requests: int | None = None
    context_length: int | None = None
    device: str = "cuda"
    attention_backend: str | None = None
    speculative_algorithm: str | None = None
    speculative_draft_layers: int | None = None
    speculative_num_draft_tokens: int | None = None
    swa_full_tokens_ratio: float | None = None
    chunked_prefill_size: int | None = None
    disable_radix_cache: bool = False
    request_lengths: tuple[int, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        from .config_fields import validate_request  # the bounds live with the config-field rules

        validate_request(self)
        if self.available_bytes is None and self.gpu is None:
            raise KVCacheConfigError(
                "no memory budget: name a GPU (--gpu H100-80GB or --gpu-memory 80GiB) or give the KV "
                "budget per rank (--available-bytes 40GiB)"
            )
        if self.mem_fraction_static is not None and not 0 < self.mem_fraction_static < 1:
            raise KVCacheConfigError(f"--mem-fraction-static must be in (0, 1), got {self.mem_fraction_static}")
        if self.overhead_bytes < 0:
            raise KVCacheConfigError(f"overhead must be >= 0 bytes, got {self.overhead_bytes}")
        for length in self.request_lengths:
            if length < 1:
                raise KVCacheConfigError(f"--request-length must be a positive token count, got {length}")

    @property
    def uses_launch_defaults(self) -> bool:
        """SGLang's launch defaults apply when a GPU is named (launch_defaults.md)."""
        return self.gpu is not None

    def hf_config(self) -> Mapping[str, Any]:
        """The raw HF config of the model (a preset's shipped file or the given dict)."""
        if "hf_config" in self.source:
            config: Mapping[str, Any] = self.source["hf_config"]
            return config
        from ..presets import load_preset_config

        return load_preset_config(str(self.source["preset"]))

    def replace(self, **changes: Any) -> DeploymentRequest:
        return dataclasses.replace(self, **changes)
