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
    #: ``--no-enable-chunked-prefill`` (``False``): ``max_num_batched_tokens`` at least ``max_model_len``
    enable_chunked_prefill: bool | None = None
    async_scheduling: bool | None = None
    disable_hybrid_kv_cache_manager: bool = False
    enforce_eager: bool = False
    #: ``--enable-expert-parallel``: the routed experts split whole over the DP x TP ranks
    enable_expert_parallel: bool = False
    #: ``--data-parallel-size``: engine cores (each its own TP x PP workers and KV cache; the plan is one's)
    data_parallel_size: int = 1
    #: ``--decode-context-parallel-size``: the TP ranks a request's token positions are spread over (MLA models)
    decode_context_parallel_size: int = 1
    #: ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` (default 1): deduct the CUDA-graph estimate from the budget;
    #: ``False`` is also how a release before 0.21 sized its budget
    estimate_cudagraphs: bool = True
    weight_quantization: str | None = None
    weight_bytes: int | None = None
    request_lengths: tuple[int, ...] = ()
    release: EngineRelease = NEWEST_VLLM
    #: ``--speculative-config '{"method": "mtp", "num_speculative_tokens": N}'``: N (``None``: no speculation)
    num_speculative_tokens: int | None = None
    #: ``--speculative-config``'s method: ``mtp`` (the model's MTP layers), ``eagle`` or ``eagle3`` (a draft head),
    #: ``draft_model`` (a separate draft model), ``dflash`` (a DFlash draft), ``ngram`` (n-gram lookup, no draft)
    speculative_method: str = "mtp"
    #: a draft head's or draft model's ``model`` (its folder or config.json, as given) and its config.json
    draft_model: str | None = None
    draft_config: Mapping[str, Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                     "decode_context_parallel_size"):
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
        if self.data_parallel_size > 1:
            from ..strategies.engine_args import DATA_PARALLEL

            if not DATA_PARALLEL.holds(self.release):
                raise KVCacheConfigError(f"--data-parallel-size is planned for vLLM {DATA_PARALLEL.span.describe()} "
                                         "(its weights recorded there); plan one DP rank without it (a dense "
                                         "model's DP ranks are independent) or for a later --vllm-version")  # fmt: skip
            if self.enable_expert_parallel and self.tensor_parallel_size > 1 and self.is_moe:
                raise KVCacheConfigError(
                    "--data-parallel-size with --enable-expert-parallel at --tensor-parallel-size > 1: vLLM runs the "
                    "MoE layers sequence-parallel (vllm/config/parallel.py ParallelConfig.use_sequence_parallel_moe, "
                    "the default all2all backend allgather_reducescatter), and a model class may then replicate its "
                    "shared experts on every rank, which the vLLM plan does not model; plan --tensor-parallel-size 1 "
                    "with --data-parallel-size (vLLM's DP + EP layout), or without --enable-expert-parallel"
                )
        if self.enable_chunked_prefill is False:
            from ..strategies.engine_args import CHUNKED_PREFILL_OFF

            if not CHUNKED_PREFILL_OFF.holds(self.release):
                raise KVCacheConfigError(f"--no-enable-chunked-prefill is planned for vLLM "
                                         f"{CHUNKED_PREFILL_OFF.span.describe()} (recorded there); plan without it or "
                                         "for a later --vllm-version")  # fmt: skip
            if self.max_num_batched_tokens is not None:
                raise KVCacheConfigError("--no-enable-chunked-prefill with --max-num-batched-tokens is not planned "
                                         "(vLLM then takes the given count, at least max_model_len); give one of "
                                         "them")  # fmt: skip
        if self.speculative_method not in ("mtp", "ngram", "eagle", "eagle3", "draft_model", "dflash"):
            raise KVCacheConfigError(f"--speculative-config method {self.speculative_method!r:.40}: mtp, ngram, "
                                     "eagle, eagle3, draft_model and dflash are planned")  # fmt: skip
        if self.speculative_method not in ("mtp", "ngram") and self.num_speculative_tokens is not None \
                and not isinstance(self.draft_config, Mapping):  # fmt: skip
            raise KVCacheConfigError(f"--speculative-config method {self.speculative_method}: give the draft's "
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
        """The GPUs one engine core drives (TP x PP)."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def is_moe(self) -> bool:
        """Whether the model has routed experts (``num_routed_experts`` of its config)."""
        from ...planner.moe_layout import num_routed_experts

        return num_routed_experts(self.config) > 0

    @property
    def moe_parallel_size(self) -> int:
        """The ranks a MoE layer's routed experts span: DP x TP (``FusedMoEParallelConfig.make``:
        ``flatten_tp_across_dp_and_pcp``); a dense model's DP ranks are independent engines."""
        return self.data_parallel_size * self.tensor_parallel_size if self.is_moe else self.tensor_parallel_size

    @property
    def coupled_gpus(self) -> int:
        """The GPUs whose ranks communicate with one engine core's: TP x PP, and x DP for a MoE model (its
        experts' all-to-all / all-reduce spans the DP ranks)."""
        return self.world_size * (self.data_parallel_size if self.is_moe else 1)


def _check_int(value: Any, flag: str, *, minimum: int, maximum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise KVCacheConfigError(f"{flag} must be an integer in [{minimum}, {maximum:,}], got {value!r:.40}")
