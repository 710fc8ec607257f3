"""A :class:`~kvstrategies.context.KVCacheContext` read as a vLLM launch: the engine arguments it stands for.

The same context that plans an SGLang rank plans a vLLM deployment when ``ctx.release.engine``
is ``"vllm"``. :func:`vllm_deployment` maps it onto vLLM's own arguments
(``vllm/engine/arg_utils.py EngineArgs``) -- the only mapping the vLLM strategies and the vLLM
bridge (``kvstrategies.vllm.bridge``) both read, so they answer the same question:

=============================  ==============================================================
context                        vLLM argument
=============================  ==============================================================
``parallel.tp_size / pp_size`` ``--tensor-parallel-size / --pipeline-parallel-size``
``parallel.attn_dp_size``      ``--data-parallel-size`` (vLLM 0.33.0 on), with ``--tensor-parallel-size``
                               ``tp_size / attn_dp_size``: SGLang's attention-TP group is one vLLM engine core
``parallel.pp_rank``           the stage whose layers and tensors a plan describes
``parallel.dcp_size``          ``--decode-context-parallel-size`` (vLLM 0.33.0 on; MLA models)
``parallel.pp_layer_partition``  ``VLLM_PP_LAYER_PARTITION`` (vLLM 0.33.0 on; SGLang's
                               ``SGLANG_PP_LAYER_PARTITION``: the same layer counts a stage)
``kv_cache_dtype.name``        ``--kv-cache-dtype`` (``bf16`` is vLLM's ``bfloat16``)
``geometry.model_dtype``       ``--dtype``
``page_size``                  ``--block-size`` (1: not given, the attention backend picks)
``scheduling.context_length``  ``--max-model-len`` (None: vLLM derives it from the config)
``scheduling.max_running_requests``  ``--max-num-seqs``
``scheduling.chunked_prefill_size``  ``--max-num-batched-tokens`` (positive values)
``scheduling.disable_radix_cache``   ``--no-enable-prefix-caching``
``scheduling.disable_overlap_schedule``  ``--no-async-scheduling``
``scheduling.disable_hybrid_swa_memory`` ``--disable-hybrid-kv-cache-manager``
``platform.gpu``               the GPU whose facts vLLM reads (else B200 for ``is_sm100``, else
                               :data:`DEFAULT_VLLM_GPU`)
=============================  ==============================================================

SGLang's own pool knobs (``swa_full_tokens_ratio``, the Mamba slot settings, its attention
backend names, its environment knobs) have no vLLM counterpart and do not change a vLLM plan;
settings that change *what* is deployed and that these strategies do not model (speculative
decoding other than with the model's own MTP layers or an EAGLE / EAGLE3 head, :mod:`.drafts`;
attention context parallelism, PD disaggregation, a draft worker, a token cap, a
non-CUDA device) are refused with :class:`UnsupportedConfigurationError`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...context import DeviceKind, DisaggregationMode, KVCacheContext
from ...core.releases import VLLM, ReleaseRule, span
from ...errors import UnsupportedConfigurationError
from .drafts import MTP_DRAFTS, VLLMDraft, vllm_draft

#: the GPU a vLLM plan is for when the context names none (the bridge's default too)
DEFAULT_VLLM_GPU = "H200"
VLLM_KV_DTYPE_NAMES: dict[str, str] = {"bf16": "bfloat16", "fp16": "float16"}

#: ``--data-parallel-size`` is planned from this release (recorded by 0.33.0 and 0.34.0 through the bridge: the KV
#: cache of a DP rank, and the weights with a DP group; older releases: refused, not recorded)
DATA_PARALLEL = ReleaseRule(
    "vllm-data-parallel",
    span("0.33.0", engine=VLLM),
    "--data-parallel-size is planned: one engine core a DP rank, each with its own KV cache; a MoE model's routed "
    "experts split over DP x TP ranks (older releases: refused, not recorded)",
    "vllm/model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make (flatten_tp_across_dp_and_pcp)",
    topic="weights",
)
#: ``--decode-context-parallel-size`` is mapped from this release (recorded by 0.33.0 and 0.34.0 through the bridge;
#: older releases: refused, not recorded)
DECODE_CONTEXT_PARALLEL = ReleaseRule(
    "vllm-decode-context-parallel",
    span("0.33.0", engine=VLLM),
    "--decode-context-parallel-size is planned for MLA models: each rank's latent holds every D-th token, so a "
    "block spans D x block_size tokens of a request (older releases: refused, not recorded)",
    "vllm/v1/kv_cache_interface.py FullAttentionSpec.max_memory_usage_bytes (dcp_sharded)",
)
#: ``VLLM_PP_LAYER_PARTITION`` is mapped from this release (recorded by 0.33.0 and 0.34.0 through the bridge; older
#: releases: refused, not recorded)
PP_LAYER_PARTITION = ReleaseRule(
    "vllm-pp-layer-partition",
    span("0.33.0", engine=VLLM),
    "a case's pipeline layer partition is VLLM_PP_LAYER_PARTITION (older releases: refused, not recorded)",
    "vllm/distributed/utils.py get_pp_indices",
    topic="launch",
)

#: SGLang's ``--chunked-prefill-size -1`` (no chunking) is vLLM's ``--no-enable-chunked-prefill`` from this release
#: (recorded by 0.33.0 and 0.34.0): vLLM warns that the model "does not officially support disabling chunked prefill"
#: and runs, its ``max_num_batched_tokens`` at least ``max_model_len`` (``EngineArgs._set_default_args``), which the
#: sliding-window layers' blocks a request and the one-request memory check read
CHUNKED_PREFILL_OFF = ReleaseRule(
    "vllm-chunked-prefill-off",
    span("0.33.0", engine=VLLM),
    "a case without chunked prefill (chunked_prefill_size -1) is --no-enable-chunked-prefill: max_num_batched_tokens "
    "= max(max_model_len, the default) (older releases: refused, not recorded)",
    "vllm/engine/arg_utils.py EngineArgs._set_default_args, _set_default_chunked_prefill_and_prefix_caching_args; "
    "vllm/config/scheduler.py SchedulerConfig.verify_max_model_len",
    topic="launch",
)


@dataclass(frozen=True)
class VLLMDeployment:
    """vLLM's engine arguments for one deployment (``None``: not given, vLLM's default)."""

    tensor_parallel_size: int
    pipeline_parallel_size: int
    pp_rank: int
    kv_cache_dtype: str
    dtype: str
    kv_cache_memory_bytes: int
    gpu: str = DEFAULT_VLLM_GPU
    block_size: int | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    #: ``--no-enable-chunked-prefill`` (``False``; SGLang's ``--chunked-prefill-size -1``): a prompt is prefilled
    #: in one step, so ``max_num_batched_tokens`` becomes at least ``max_model_len`` (``None``: vLLM's default, on)
    enable_chunked_prefill: bool | None = None
    #: ``False`` turns it off; ``None`` leaves vLLM's own default (which may turn it off itself)
    enable_prefix_caching: bool | None = None
    async_scheduling: bool | None = None
    disable_hybrid_kv_cache_manager: bool | None = None
    #: speculative decoding: the model's MTP layers or an EAGLE / EAGLE3 head (``None``: none)
    draft: VLLMDraft | None = None
    #: the draft head's folder (``--speculative-config``'s ``model``; the bridge writes one for a case)
    draft_model: str | None = None
    #: ``--data-parallel-size``: engine cores, each with ``tensor_parallel_size`` x PP workers and its own KV cache
    data_parallel_size: int = 1
    #: ``--decode-context-parallel-size``: the TP ranks over which a request's token positions are spread
    decode_context_parallel_size: int = 1
    #: ``VLLM_PP_LAYER_PARTITION``: each stage's layer count (``None``: vLLM's own split)
    pp_layer_partition: tuple[int, ...] | None = None

    def environment(self) -> dict[str, str]:
        """The ``VLLM_*`` variables this launch sets (the bridge sets them around vLLM's build)."""
        parts = self.pp_layer_partition
        return {} if parts is None else {"VLLM_PP_LAYER_PARTITION": ",".join(map(str, parts))}

    def engine_arguments(self) -> dict[str, object]:
        """Keyword arguments of ``EngineArgs`` (the bridge adds the model folder and ``load_format``)."""
        arguments: dict[str, object] = {
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "kv_cache_dtype": self.kv_cache_dtype,
            "dtype": self.dtype,
            "kv_cache_memory_bytes": self.kv_cache_memory_bytes,
        }
        for name in ("block_size", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill",
                     "enable_prefix_caching", "async_scheduling", "disable_hybrid_kv_cache_manager"):  # fmt: skip
            value = getattr(self, name)
            if value is not None:
                arguments[name] = value
        if self.draft is not None:
            arguments["speculative_config"] = self.draft.speculative_config(self.draft_model)
        if self.data_parallel_size > 1:
            arguments["data_parallel_size"] = self.data_parallel_size
        if self.decode_context_parallel_size > 1:
            arguments["decode_context_parallel_size"] = self.decode_context_parallel_size
        return arguments


def attention_dp_layout(tp_size: int, attn_dp_size: int) -> tuple[int, int]:
    """``(--tensor-parallel-size, --data-parallel-size)`` of SGLang's attention DP ``A`` over ``tp_size`` GPUs:
    vLLM's ``tp_size / A`` attention TP in each of ``A`` DP ranks (a MoE model's experts span all of them)."""
    return tp_size // attn_dp_size, attn_dp_size


def _refuse(field: str, why: str) -> UnsupportedConfigurationError:
    return UnsupportedConfigurationError(
        f"{field}: {why}; the vLLM strategies (and the vLLM bridge) do not model it -- plan it for SGLang, "
        "or drop the setting"
    )


def check_vllm_scope(ctx: KVCacheContext) -> None:
    """Refuse the settings that change what a vLLM deployment is but are not modelled (see module doc)."""
    parallel, scheduling = ctx.parallel, ctx.scheduling
    if ctx.device is not DeviceKind.CUDA:
        raise _refuse(f"device {ctx.device.value}", "the vLLM plans are for vLLM's CUDA platform")
    if ctx.is_draft_worker:
        raise _refuse("is_draft_worker", "vLLM plans draft layers inside the target's KV cache groups")
    if ctx.speculative.enabled:
        try:
            vllm_draft(ctx)
        except ValueError as exc:
            why = "vLLM's speculative decoding adds draft layers and lookahead slots"
            raise _refuse(f"speculative_algorithm {ctx.speculative.algorithm.value}",
                          f"{why} ({exc})" if MTP_DRAFTS.holds(ctx.release) else why) from None  # fmt: skip
    if parallel.attn_cp_size != 1:
        raise _refuse(f"attn_cp_size {parallel.attn_cp_size}", "context parallelism")
    if parallel.dcp_size != 1 and not DECODE_CONTEXT_PARALLEL.holds(ctx.release):
        raise _refuse(f"dcp_size {parallel.dcp_size}", "context parallelism (vLLM's --decode-context-parallel-size "
                      f"is planned for vLLM {DECODE_CONTEXT_PARALLEL.span.describe()})")  # fmt: skip
    if parallel.attn_dp_size != 1 and not DATA_PARALLEL.holds(ctx.release):
        raise _refuse(f"attn_dp_size {parallel.attn_dp_size}", "attention data parallelism (vLLM's "
                      f"--data-parallel-size is planned for vLLM {DATA_PARALLEL.span.describe()})")  # fmt: skip
    if scheduling.disaggregation_mode is not DisaggregationMode.NULL:
        raise _refuse(f"disaggregation_mode {scheduling.disaggregation_mode.value}", "PD disaggregation")
    if scheduling.max_total_tokens is not None:
        raise _refuse("max_tokens", "SGLang's --max-total-tokens has no vLLM counterpart (vLLM has "
                      "--num-gpu-blocks-override, a block count)")  # fmt: skip
    if parallel.pp_layer_partition is not None and not PP_LAYER_PARTITION.holds(ctx.release):
        raise _refuse("pp_layer_partition", "a pipeline layer partition (vLLM's VLLM_PP_LAYER_PARTITION is mapped for "
                      f"vLLM {PP_LAYER_PARTITION.span.describe()})")  # fmt: skip
    chunk = scheduling.chunked_prefill_size
    if chunk is not None and chunk <= 0 and not CHUNKED_PREFILL_OFF.holds(ctx.release):
        raise _refuse(f"chunked_prefill_size {chunk}", "chunked prefill off (vLLM's --no-enable-chunked-prefill is "
                      f"mapped for vLLM {CHUNKED_PREFILL_OFF.span.describe()})")  # fmt: skip


def check_layer_partition(parts: tuple[int, ...], pp: int, num_layers: int, version: str) -> None:
    """vLLM's own checks of ``VLLM_PP_LAYER_PARTITION`` (``vllm/distributed/utils.py get_pp_indices``), in its words,
    and a stage of no layer, which vLLM's sizing divides by (a ``ZeroDivisionError`` while it sizes the stage)."""
    where = "(vllm/distributed/utils.py get_pp_indices)"
    if len(parts) != pp:
        raise UnsupportedConfigurationError(
            f"vLLM {version} refused: ValueError: len(partitions)={len(parts)} does not match pp_size={pp}. {where}"
        )
    if sum(parts) != num_layers:
        raise UnsupportedConfigurationError(f"vLLM {version} refused: ValueError: sum(partitions)={sum(parts)} does "
                                            f"not match num_hidden_layers={num_layers}. {where}")  # fmt: skip
    if 0 in parts:
        raise UnsupportedConfigurationError(
            f"vLLM {version} refused: ZeroDivisionError: integer division or modulo by zero (VLLM_PP_LAYER_PARTITION "
            f"{','.join(map(str, parts))} leaves pipeline stage {parts.index(0)} without a layer, and vLLM divides by "
            "its layers while it sizes the stage's KV cache); give every stage a layer"
        )


def vllm_deployment(ctx: KVCacheContext, kv_cache_memory_bytes: int) -> VLLMDeployment:
    """The vLLM launch ``ctx`` stands for, with ``--kv-cache-memory-bytes kv_cache_memory_bytes``."""
    check_vllm_scope(ctx)
    parts = ctx.parallel.pp_layer_partition if ctx.parallel.pp_size > 1 else None
    tp, dp = attention_dp_layout(ctx.parallel.tp_size, ctx.parallel.attn_dp_size)
    if parts is not None:
        check_layer_partition(parts, ctx.parallel.pp_size, ctx.geometry.num_hidden_layers, ctx.release.text)
    scheduling = ctx.scheduling
    chunk = scheduling.chunked_prefill_size  # -1: SGLang's prefill in one step
    name = ctx.kv_cache_dtype.name
    platform = ctx.platform
    gpu = getattr(platform, "gpu", None) or ("B200" if platform.is_sm100 else DEFAULT_VLLM_GPU)
    return VLLMDeployment(
        tensor_parallel_size=tp,
        data_parallel_size=dp,
        decode_context_parallel_size=ctx.parallel.dcp_size,
        pipeline_parallel_size=ctx.parallel.pp_size,
        pp_layer_partition=parts,
        pp_rank=ctx.parallel.pp_rank,
        kv_cache_dtype=VLLM_KV_DTYPE_NAMES.get(name, name),
        dtype=ctx.geometry.model_dtype.torch_name,
        kv_cache_memory_bytes=kv_cache_memory_bytes,
        gpu=gpu,
        block_size=ctx.page_size if ctx.page_size > 1 else None,
        max_model_len=scheduling.context_length,
        max_num_seqs=scheduling.max_running_requests,
        max_num_batched_tokens=chunk if chunk is not None and chunk > 0 else None,
        enable_chunked_prefill=False if chunk is not None and chunk <= 0 else None,
        enable_prefix_caching=False if scheduling.disable_radix_cache else None,
        async_scheduling=False if scheduling.disable_overlap_schedule else None,
        disable_hybrid_kv_cache_manager=True if scheduling.disable_hybrid_swa_memory else None,
        draft=vllm_draft(ctx),
    )
