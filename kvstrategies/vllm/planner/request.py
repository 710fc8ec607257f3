"""What ``kvstrategies plan MODEL --engine vllm`` was asked: a vLLM launch, in vLLM's own argument names.

Each field is the ``vllm serve`` argument of the same name (``vllm/engine/arg_utils.py
EngineArgs``); ``None`` leaves vLLM's default, which the plan resolves and reports. Planner-only
fields: ``estimate_cudagraphs`` (vLLM's ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``), ``gpu`` (a name of
``kvstrategies gpus``), ``gpu_memory_mib`` (``--gpu-memory``: the
capacity when the table's is not yours), ``weight_bytes`` / ``weight_quantization`` (the weight
estimate), ``request_lengths`` (concurrency at further request lengths).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...core.releases import NEWEST_VLLM, EngineRelease
from ...core.validate import MAX_INT64
from ...errors import KVCacheConfigError

#: vLLM 0.33.0's ``--gpu-memory-utilization`` default (``vllm/config/cache.py CacheConfig.gpu_memory_utilization``)
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92


@dataclass(frozen=True)
class VLLMPlanRequest:
    """One vLLM deployment to plan (module doc)."""

    model: str
    source: Mapping[str, Any] = field(repr=False)
    config: Mapping[str, Any] = field(repr=False)
    model_folder: str | None = None
    gpu: str | None = None
    gpu_memory_mib: float | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    kv_cache_dtype: str = "auto"
    dtype: str | None = None
    block_size: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_prefix_caching: bool | None = None
    async_scheduling: bool | None = None
    disable_hybrid_kv_cache_manager: bool = False
    enforce_eager: bool = False
    #: ``--enable-expert-parallel``: the routed experts split whole over the TP ranks
    enable_expert_parallel: bool = False
    #: ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` (default 1): deduct the CUDA-graph estimate from the budget;
    #: ``False`` is also how a release before 0.21 sized its budget
    estimate_cudagraphs: bool = True
    weight_quantization: str | None = None
    weight_bytes: int | None = None
    request_lengths: tuple[int, ...] = ()
    release: EngineRelease = NEWEST_VLLM
    #: ``--speculative-config '{"method": "mtp", "num_speculative_tokens": N}'``: N (``None``: no speculation)
    num_speculative_tokens: int | None = None
    #: ``--speculative-config``'s method: ``mtp`` (the model's MTP layers), ``eagle`` or ``eagle3`` (a draft head)
    speculative_method: str = "mtp"
    #: a draft head's ``model`` (its folder or config.json, as given) and its config.json
    draft_model: str | None = None
    draft_config: Mapping[str, Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("tensor_parallel_size", "pipeline_parallel_size"):
            _check_int(getattr(self, name), f"--{name.replace('_', '-')}", minimum=1, maximum=4096)
        for name in ("block_size", "max_model_len", "max_num_seqs", "max_num_batched_tokens"):
            value = getattr(self, name)
            if value is not None:
                _check_int(value, f"--{name.replace('_', '-')}", minimum=1, maximum=2**31 - 1)
        if self.kv_cache_memory_bytes is not None:
            _check_int(self.kv_cache_memory_bytes, "--kv-cache-memory-bytes", minimum=1, maximum=MAX_INT64)
        if self.weight_bytes is not None:
            # weights of 0 B are a budget no GPU has (SGLang's path refuses them the same way); with
            # --kv-cache-memory-bytes the budget is given and the weights only reported
            least = 0 if self.kv_cache_memory_bytes is not None else 1
            _check_int(self.weight_bytes, "--weight-bytes" + (" with a GPU budget" if least else ""), minimum=least,
                       maximum=MAX_INT64)  # fmt: skip
        utilization = self.gpu_memory_utilization
        if utilization is not None and (
            isinstance(utilization, bool) or not isinstance(utilization, (int, float))
            or not math.isfinite(utilization) or not 0 < utilization <= 1
        ):  # fmt: skip
            raise KVCacheConfigError(
                f"--gpu-memory-utilization must be in (0, 1], got {utilization!r} (vllm/config/cache.py CacheConfig: "
                "gt=0, le=1)"
            )
        if self.num_speculative_tokens is not None:
            _check_int(self.num_speculative_tokens, "--speculative-config num_speculative_tokens", minimum=1,
                       maximum=64)  # fmt: skip
        if self.enable_expert_parallel:
            from .weights import EXPERT_PARALLEL

            if not EXPERT_PARALLEL.holds(self.release):
                raise KVCacheConfigError(f"--enable-expert-parallel is planned for vLLM "
                                         f"{EXPERT_PARALLEL.span.describe()} (its weights recorded there); plan "
                                         "without it or for a later --vllm-version")  # fmt: skip
        if self.speculative_method not in ("mtp", "eagle", "eagle3"):
            raise KVCacheConfigError(f"--speculative-config method {self.speculative_method!r:.40}: mtp, eagle and "
                                     "eagle3 are planned")  # fmt: skip
        if self.speculative_method != "mtp" and self.num_speculative_tokens is not None \
                and not isinstance(self.draft_config, Mapping):  # fmt: skip
            raise KVCacheConfigError(f"--speculative-config method {self.speculative_method}: give the draft head's "
                                     "\"model\" (its folder or config.json)")  # fmt: skip
        for length in self.request_lengths:
            _check_int(length, "--request-length", minimum=1, maximum=2**31 - 1)
        if self.gpu is None and self.gpu_memory_mib is None and self.kv_cache_memory_bytes is None:
            raise KVCacheConfigError(
                "name a GPU (--gpu H100, kvstrategies gpus lists them) or give the KV budget with "
                "--kv-cache-memory-bytes (vLLM then skips its memory profiling)"
            )

    @property
    def utilization(self) -> float:
        """The utilization vLLM uses: the one given, else its default."""
        return DEFAULT_GPU_MEMORY_UTILIZATION if self.gpu_memory_utilization is None else self.gpu_memory_utilization

    @property
    def world_size(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size


def _check_int(value: Any, flag: str, *, minimum: int, maximum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise KVCacheConfigError(f"{flag} must be an integer in [{minimum}, {maximum:,}], got {value!r:.40}")
