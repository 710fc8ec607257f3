"""vLLM's resolved launch settings that sizing reads: max model length, batch defaults, in-flight tokens.

* ``max_model_len``: ``--max-model-len``, else the model's own (``config/model.py
  _get_and_verify_max_len``; the project's :attr:`ModelGeometry.context_len` reads the same keys);
* ``max_num_batched_tokens`` / ``max_num_seqs`` for the OpenAI server
  (``engine/arg_utils.py EngineArgs.get_batch_defaults``): >= 160 GiB of device memory 16384 / 1024;
  >= 70 GiB and not an A100 8192 / 1024; otherwise 2048 / 256;
* ``max_concurrent_batches`` (``config/vllm.py VllmConfig.max_concurrent_batches``): ``pp + 1`` with
  async scheduling (the default) on Model Runner V2, else ``pp`` (the V1 runner: 2 with async at PP 1);
  V2 runs every model from 0.29.0, before only those :func:`uses_model_runner_v2` names;
* ``max_in_flight_tokens = max_concurrent_batches x max_num_batched_tokens`` (``VllmConfig.max_in_flight_tokens``);
* ``mamba_cache_mode``: ``"align"`` for a Mamba hybrid with prefix caching on
  (``model_executor/models/config.py``), else ``"none"``.

vLLM refuses a launch whose resolved batch budget is below its request cap
(``config/scheduler.py SchedulerConfig.verify_max_model_len``, run by ``__post_init__``:
``max_num_batched_tokens >= max_num_seqs``); so does :func:`resolve_launch`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.releases import NEWEST_VLLM, VLLM, EngineRelease, ReleaseRule, parse_release, span
from ...errors import UnsupportedConfigurationError
from ...models import ModelGeometry
from ...models.architectures import VLLM_V2_RUNNER_ARCHITECTURES, vllm_model_rule
from .devices import VLLMDevice, vllm_device
from .engine_args import VLLMDeployment
from .specs import MAMBA_CACHE_MODE

_GIB = 2**30


def nvml_name(gpu: VLLMDevice) -> str:
    """The device name vLLM reads from NVML for a GPU of ``kvstrategies gpus`` (its A100 check reads it)."""
    return gpu.nvml_name


@dataclass(frozen=True)
class VLLMLaunch:
    """The settings of one vLLM launch after vLLM's defaults (the plan document's ``vllm_settings``)."""

    deployment: VLLMDeployment
    gpu: VLLMDevice
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    async_scheduling: bool
    enable_prefix_caching: bool
    mamba_cache_mode: str
    disable_hybrid_kv_cache_manager: bool
    kv_cache_dtype: str
    release: EngineRelease | None = None
    model_runner_v2: bool = True
    in_flight_bound: bool = True
    #: :data:`V2_EXTRA_BATCH` holds in the release
    v2_extra_batch: bool = True
    #: :data:`MAMBA_CACHE_MODE` holds in the release (the settings name the mode)
    mamba_cache_mode_setting: bool = True

    @property
    def max_concurrent_batches(self) -> int:
        """``VllmConfig.max_concurrent_batches``: PP batches, one more with async scheduling on V2 (the V1
        runner overlaps two batches at PP 1 only; so does every runner before :data:`V2_EXTRA_BATCH`)."""
        pp = self.deployment.pipeline_parallel_size
        if self.async_scheduling:
            if self.model_runner_v2 and self.v2_extra_batch:
                return pp + 1
            if pp <= 1:
                return 2
        return pp

    @property
    def max_in_flight_tokens(self) -> int:
        """The tokens a sliding window or chunk holds beyond itself: ``max_concurrent_batches x
        max_num_batched_tokens`` (``VllmConfig.max_in_flight_tokens``), before :data:`IN_FLIGHT_BOUND`
        ``max_num_batched_tokens``."""
        if not self.in_flight_bound:
            return self.max_num_batched_tokens
        return self.max_concurrent_batches * self.max_num_batched_tokens

    def settings_document(self) -> dict[str, object]:
        d = self.deployment
        return {
            "tensor_parallel_size": d.tensor_parallel_size,
            "pipeline_parallel_size": d.pipeline_parallel_size,
            "pp_rank": d.pp_rank,
            "kv_cache_dtype": self.kv_cache_dtype,
            "dtype": d.dtype,
            "requested_block_size": d.block_size,
            "max_model_len": self.max_model_len,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "max_num_seqs": self.max_num_seqs,
            "max_in_flight_tokens": self.max_in_flight_tokens if self.in_flight_bound else None,
            "enable_prefix_caching": self.enable_prefix_caching,
            "async_scheduling": self.async_scheduling,
            "max_concurrent_batches": self.max_concurrent_batches,
            "mamba_cache_mode": self.mamba_cache_mode if self.mamba_cache_mode_setting else None,
            "disable_hybrid_kv_cache_manager": self.disable_hybrid_kv_cache_manager,
            "kv_cache_memory_bytes": d.kv_cache_memory_bytes,
            **({} if d.enable_chunked_prefill is not False else {"enable_chunked_prefill": False}),
            **({} if d.draft is None else {"num_speculative_tokens": d.draft.num_speculative_tokens}),
            **({} if d.data_parallel_size == 1 else {"data_parallel_size": d.data_parallel_size}),
            **({} if d.decode_context_parallel_size == 1
               else {"decode_context_parallel_size": d.decode_context_parallel_size}),
            **{key.lower(): value for key, value in d.environment().items()},
        }


#: vLLM 0.28.0 added the batch-default tier of devices with >= 160 GiB (B200 / B300: 16384 tokens); before,
#: they take the >= 70 GiB tier (8192)
BATCH_TIER_160_GIB = ReleaseRule(
    "vllm-batch-defaults-160-gib",
    span("0.28.0", engine=VLLM),
    "devices of >= 160 GiB take 16384 batched tokens and 1024 sequences (before: the >= 70 GiB tier, 8192)",
    "vllm/engine/arg_utils.py EngineArgs.get_batch_defaults",
    topic="launch",
)
#: from vLLM 0.26.0 a sliding window holds the tokens of every batch in flight (``VllmConfig.max_in_flight_tokens``);
#: 0.25.1 counts one batch, ``max_num_batched_tokens`` (``SlidingWindowSpec.max_memory_usage_bytes``)
IN_FLIGHT_BOUND = ReleaseRule(
    "vllm-max-in-flight-tokens",
    span("0.26.0", engine=VLLM),
    "sliding-window and chunked-local layers hold max_concurrent_batches x max_num_batched_tokens tokens in flight "
    "(before: max_num_batched_tokens)",
    "vllm/config/vllm.py VllmConfig.max_in_flight_tokens; vllm/v1/kv_cache_interface.py "
    "SlidingWindowSpec.max_memory_usage_bytes",
    topic="sizing",
)
#: hybrid (Mamba) models take prefix caching by default from vLLM 0.28.0; up to 0.27.1 it is opt-in for them
HYBRID_PREFIX_CACHING = ReleaseRule(
    "vllm-hybrid-prefix-caching-default",
    span("0.28.0", engine=VLLM),
    "Mamba hybrids take prefix caching by default (mamba_cache_mode align); before, it is opt-in for them",
    "vllm/engine/arg_utils.py EngineArgs._set_default_chunked_prefill_and_prefix_caching_args (default_prefix_caching)",
    topic="launch",
)


#: from vLLM 0.14.1 async scheduling is on by default (``SchedulerConfig.async_scheduling`` None, resolved by
#: ``VllmConfig.__post_init__``); 0.13.0's is False, on only with ``--async-scheduling``
ASYNC_SCHEDULING_DEFAULT = ReleaseRule(
    "vllm-async-scheduling-default",
    span("0.14.1", engine=VLLM),
    "async scheduling is on by default (before: off unless --async-scheduling)",
    "vllm/config/scheduler.py SchedulerConfig.async_scheduling (0.13.0: False)",
    topic="launch",
)
#: from vLLM 0.14.1 ``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE`` defaults to 1 (``vllm/envs.py``); 0.13.0's
#: defaults to 0, so ``VllmConfig.__post_init__`` turns the hybrid KV cache manager off for a model with chunked
#: local attention (Llama-4), whose chunked layers are then kept as full attention
CHUNKED_LOCAL_WITH_HYBRID = ReleaseRule(
    "vllm-chunked-local-with-hybrid-manager",
    span("0.14.1", engine=VLLM),
    "a model with chunked local attention keeps the hybrid KV cache manager by default (before: turned off, "
    "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0)",
    "vllm/envs.py VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE; vllm/config/vllm.py VllmConfig.__post_init__",
    topic="launch",
)
#: from vLLM 0.15.1 async scheduling stays on by default at PP > 1; 0.14.1's ``VllmConfig.__post_init__`` turns the
#: default off there ("Async scheduling is not yet supported with pipeline_parallel_size > 1 and will be disabled")
#: and refuses an explicit ``--async-scheduling`` with PP > 1 (the V1 runner overlaps no batch at PP > 1 either way)
ASYNC_SCHEDULING_WITH_PP = ReleaseRule(
    "vllm-async-scheduling-with-pp",
    span("0.15.1", engine=VLLM),
    "async scheduling is on by default at PP > 1 (before: off there, and an explicit --async-scheduling refused)",
    "vllm/config/vllm.py VllmConfig.__post_init__ (0.14.1: pipeline_parallel_size > 1 disables it)",
    topic="launch",
)


def batch_defaults(gpu: VLLMDevice, release: EngineRelease | None = None) -> tuple[int, int]:
    """``(max_num_batched_tokens, max_num_seqs)`` of vLLM's OpenAI server on ``gpu`` (see module doc) in
    ``release`` (the newest when ``None``)."""
    memory = gpu.memory_bytes
    if memory >= 160 * _GIB and BATCH_TIER_160_GIB.holds(release or NEWEST_VLLM):
        return 16384, 1024
    if memory >= 70 * _GIB and "a100" not in nvml_name(gpu).lower() and gpu.capability != (12, 1):
        return 8192, 1024
    return 2048, 256


#: from vLLM 0.23.0 ``VllmConfig.max_concurrent_batches`` gives Model Runner V2 one batch more than the pipeline
#: stages with async scheduling; 0.22.1 asks its executor (``MultiprocExecutor`` / ``UniProcExecutor``), which
#: overlaps two batches at PP 1 with async scheduling and ``pp`` otherwise, whatever the runner
V2_EXTRA_BATCH = ReleaseRule(
    "vllm-v2-runner-extra-batch",
    span("0.23.0", engine=VLLM),
    "Model Runner V2 with async scheduling overlaps pp + 1 batches (0.22.1: the executor's pp, 2 at PP 1)",
    "vllm/config/vllm.py VllmConfig.max_concurrent_batches; vllm/v1/executor/multiproc_executor.py "
    "MultiprocExecutor.max_concurrent_batches (0.22.1)",
    topic="launch",
)


#: Model Runner V2 is every model's default from vLLM 0.29.0; before, only for the release's
#: :data:`~kvstrategies.models.architectures.VLLM_V2_RUNNER_ARCHITECTURES` and for models neither MoE nor hybrid
MODEL_RUNNER_V2_FOR_ALL = ReleaseRule(
    "vllm-model-runner-v2-for-all",
    span("0.29.0", engine=VLLM),
    "Model Runner V2 by default for every model (before: listed architectures and dense, non-hybrid models; "
    "with pipeline parallelism and async scheduling V2 runs pp + 1 batches, V1 pp)",
    "vllm/config/vllm.py VllmConfig.use_v2_model_runner, VllmConfig._is_default_v2_model_runner_model",
    topic="launch",
)


#: from vLLM 0.25.1 Model Runner V2 runs every dense, non-hybrid model; 0.24.0 runs it for its listed
#: architectures only (Llama, Mistral, Qwen3, ...)
MODEL_RUNNER_V2_FOR_DENSE = ReleaseRule(
    "vllm-model-runner-v2-for-dense",
    span("0.25.1", engine=VLLM),
    "Model Runner V2 by default for dense, non-hybrid models (before: the listed architectures only)",
    "vllm/config/vllm.py VllmConfig._is_default_v2_model_runner_model",
    topic="launch",
)


#: from vLLM 0.24.0 a listed architecture runs Model Runner V2 whatever its experts and quantization; 0.23.0 runs
#: it for a listed one (Llama, Mistral, Qwen3) only when the model is neither MoE nor quantized
MODEL_RUNNER_V2_FOR_LISTED = ReleaseRule(
    "vllm-model-runner-v2-for-listed",
    span("0.24.0", engine=VLLM),
    "Model Runner V2 for every listed architecture (0.23.0: a listed one that is neither MoE nor quantized)",
    "vllm/config/vllm.py VllmConfig._is_default_v2_model_runner_model",
    topic="launch",
)


#: from vLLM 0.31.0 Model Runner V2 runs a separate draft model (``--speculative-config`` method ``draft_model``);
#: before, ``VllmConfig._get_v2_model_runner_unsupported_features`` names the method (0.29.0: not among the V2
#: speculators; 0.30.0: "speculative method 'draft_model'") and ``use_v2_model_runner`` falls back to the V1 runner,
#: which overlaps ``pp`` batches at PP > 1 (recorded by 0.29.0 and 0.30.0: Qwen3-8B + 2 draft layers at PP 2 runs 2)
DRAFT_MODEL_RUNNER_V2 = ReleaseRule(
    "vllm-draft-model-runner-v2",
    span("0.31.0", engine=VLLM),
    "Model Runner V2 runs a separate draft model (method draft_model; before: the V1 runner, pp batches at PP > 1)",
    "vllm/config/vllm.py VllmConfig._get_v2_model_runner_unsupported_features, VllmConfig.use_v2_model_runner",
    topic="launch",
)


#: from vLLM 0.28.0 async scheduling stays on by default beside a separate draft model; 0.27.1's
#: ``VllmConfig.__post_init__`` turns the default off for a speculative method not of the EAGLE / MTP / n-gram GPU /
#: DSpark kind, ``draft_model`` among them (recorded by 0.27.1: Qwen3-8B + 2 draft layers, one batch in flight)
DRAFT_MODEL_ASYNC_SCHEDULING = ReleaseRule(
    "vllm-draft-model-async-scheduling",
    span("0.28.0", engine=VLLM),
    "async scheduling is on by default beside a separate draft model (before: off, one batch in flight at PP 1)",
    "vllm/config/vllm.py VllmConfig.__post_init__ (async_scheduling None: the speculative methods it keeps)",
    topic="launch",
)
#: up to vLLM 0.27.1 ``VllmConfig._set_max_num_scheduled_tokens`` takes the drafting slots of every running request
#: off the step's budget: ``max_num_scheduled_tokens = max_num_batched_tokens - slots x max_num_seqs``, ``slots`` from
#: ``SpeculativeConfig.max_num_new_slots_for_drafting`` (a DFlash draft drafts in parallel: K - 1; a draft model: 1),
#: and refuses a budget of no token; 0.28.0 keeps ``max_num_batched_tokens`` and checks the slots of one request (read
#: from 0.20.2, the first release whose drafts are modelled)
DRAFT_SLOTS_PER_REQUEST = ReleaseRule(
    "vllm-draft-slots-per-request",
    span("0.20.2", "0.27.1", engine=VLLM),
    "the drafting slots of every running request come off max_num_scheduled_tokens, and a budget of no token is "
    "refused (a DFlash draft of 15 tokens at 1,024 sequences and 8,192 batched tokens)",
    "vllm/config/vllm.py VllmConfig._set_max_num_scheduled_tokens; vllm/config/speculative.py "
    "SpeculativeConfig.max_num_new_slots_for_drafting",
    topic="launch",
)


def check_draft_slots(launch: VLLMLaunch, release: EngineRelease) -> None:
    """vLLM's refusal of a step budget the drafting slots leave no token of (:data:`DRAFT_SLOTS_PER_REQUEST`), in
    its words."""
    draft = launch.deployment.draft
    if draft is None or not DRAFT_SLOTS_PER_REQUEST.holds(release):
        return
    slots = {"dflash": draft.num_speculative_tokens - 1, "draft_model": 1}.get(draft.method, 0)
    scheduled = launch.max_num_batched_tokens - slots * launch.max_num_seqs
    if scheduled <= 0:
        raise UnsupportedConfigurationError(
            f"vLLM {release.text} refuses: max_num_scheduled_tokens is set to {scheduled} based on the speculative "
            "decoding settings, which does not allow any tokens to be scheduled. (vllm/config/vllm.py "
            f"VllmConfig._set_max_num_scheduled_tokens: {launch.max_num_batched_tokens} batched tokens less {slots} "
            f"drafting slot(s) x {launch.max_num_seqs} sequences); give --max-num-batched-tokens above "
            f"{slots * launch.max_num_seqs} or fewer --max-num-seqs, or plan vLLM 0.28.0 or later"
        )


def uses_model_runner_v2(architectures: tuple[str, ...], *, is_moe: bool, is_hybrid: bool, version: str,
                         is_quantized: bool = False) -> bool:  # fmt: skip
    """Whether vLLM runs the model on Model Runner V2 (:data:`MODEL_RUNNER_V2_FOR_ALL`): from 0.29.0 always;
    from 0.25.1 a model that is not hybrid and either not MoE or of a listed architecture
    (``_is_default_v2_model_runner_model``; no listed architecture is a hybrid); 0.24.0 a listed one only;
    0.23.0 a listed one neither MoE nor quantized (``quantization_config`` in its config)."""
    release = parse_release(version or None, VLLM, field="--vllm-version")
    if MODEL_RUNNER_V2_FOR_ALL.holds(release):
        return True
    listed = any(a in VLLM_V2_RUNNER_ARCHITECTURES.at(release) for a in architectures)
    if not MODEL_RUNNER_V2_FOR_LISTED.holds(release):
        return listed and not is_moe and not is_quantized
    if not MODEL_RUNNER_V2_FOR_DENSE.holds(release):
        return listed
    return not is_hybrid and (listed or not is_moe)


def _async_scheduling(deployment: VLLMDeployment, release: EngineRelease, version: str) -> bool:
    """``scheduler_config.async_scheduling`` after ``VllmConfig.__post_init__`` (:data:`ASYNC_SCHEDULING_WITH_PP`,
    :data:`DRAFT_MODEL_ASYNC_SCHEDULING`)."""
    if deployment.async_scheduling is False:
        return False
    if deployment.async_scheduling is None and not ASYNC_SCHEDULING_DEFAULT.holds(release):
        return False
    draft = deployment.draft
    if deployment.async_scheduling is None and draft is not None and draft.method == "draft_model" \
            and not DRAFT_MODEL_ASYNC_SCHEDULING.holds(release):  # fmt: skip
        return False
    if deployment.pipeline_parallel_size == 1 or ASYNC_SCHEDULING_WITH_PP.holds(release):
        return True
    if deployment.async_scheduling:
        raise UnsupportedConfigurationError(
            f"vLLM {version or release.text} refuses: Async scheduling is not yet compatible with "
            "pipeline_parallel_size > 1 (vllm/config/vllm.py VllmConfig.__post_init__): drop --async-scheduling"
        )
    return False


def resolve_launch(
    deployment: VLLMDeployment, model_max_len: int, *, is_mamba_hybrid: bool, version: str = "", model_type: str = "",
    model_runner_v2: bool = True, chunked_local: bool = False,
) -> VLLMLaunch:
    """The launch after vLLM's defaults for a model whose own maximum length is ``model_max_len``
    (and the cache dtype its model config hook sets, :func:`model_cache_dtype`)."""
    gpu = vllm_device(deployment.gpu)
    release = parse_release(version or None, VLLM, field="--vllm-version")
    tokens, seqs = batch_defaults(gpu, release)
    prefix = deployment.enable_prefix_caching
    if prefix is None:  # vLLM's default: on, but opt-in for hybrids before HYBRID_PREFIX_CACHING
        prefix = not (is_mamba_hybrid and not HYBRID_PREFIX_CACHING.holds(release))
    max_model_len = deployment.max_model_len or model_max_len
    if deployment.enable_chunked_prefill is False:  # a prompt in one step: at least max_model_len tokens a batch
        tokens = chunked_prefill_off_tokens(deployment, max_model_len, tokens, version)
    check_batch_budget(deployment.max_num_batched_tokens or tokens, deployment.max_num_seqs or seqs, deployment,
                       version)  # fmt: skip
    return VLLMLaunch(
        deployment=deployment,
        gpu=gpu,
        max_model_len=max_model_len,
        max_num_batched_tokens=deployment.max_num_batched_tokens or tokens,
        max_num_seqs=deployment.max_num_seqs or seqs,
        async_scheduling=_async_scheduling(deployment, release, version),
        enable_prefix_caching=prefix,
        mamba_cache_mode="align" if is_mamba_hybrid and prefix else "none",
        disable_hybrid_kv_cache_manager=bool(deployment.disable_hybrid_kv_cache_manager)
        or (chunked_local and not CHUNKED_LOCAL_WITH_HYBRID.holds(release)),
        kv_cache_dtype=model_cache_dtype(deployment.kv_cache_dtype, model_type, gpu, version),
        model_runner_v2=model_runner_v2,
        in_flight_bound=IN_FLIGHT_BOUND.holds(release),
        v2_extra_batch=V2_EXTRA_BATCH.holds(release),
        mamba_cache_mode_setting=MAMBA_CACHE_MODE.holds(release),
    )


def resolve_model_launch(deployment: VLLMDeployment, geometry: ModelGeometry, version: str) -> VLLMLaunch:
    """:func:`resolve_launch` for a model: its own maximum length, Mamba hybrid or not, cache dtype hook and
    model runner (:func:`uses_model_runner_v2`; a draft model's V1 runner before :data:`DRAFT_MODEL_RUNNER_V2`)."""
    hybrid = geometry.mamba is not None
    runner_v2 = uses_model_runner_v2(geometry.architectures, is_moe=geometry.num_experts > 0, is_hybrid=hybrid,
                                     version=version, is_quantized=geometry.quantization is not None)  # fmt: skip
    draft, release = deployment.draft, parse_release(version or None, VLLM, field="--vllm-version")
    if draft is not None and draft.method == "draft_model" and not DRAFT_MODEL_RUNNER_V2.holds(release):
        runner_v2 = False
    from .layers import chunked_local_layers

    chunked = bool(chunked_local_layers(geometry)[1])
    return resolve_launch(deployment, geometry.context_len, is_mamba_hybrid=hybrid, version=version,
                          chunked_local=chunked,
                          model_type=geometry.model_type, model_runner_v2=runner_v2)  # fmt: skip


#: vLLM 0.17.1's ``DeepseekV32ForCausalLM.verify_and_update_config`` turns any fp8 cache of DeepSeek-V3.2
#: (``VLLMModelRule.fp8_cache_is_ds_mla``) into ``fp8_ds_mla``, FlashMLA's sparse layout (656 bytes a token, one
#: FLASHMLA_SPARSE takes on Hopper and SM 10.x); from 0.18.1 ``fp8`` / ``fp8_e4m3`` stay as given
DSA_FP8_DS_MLA = ReleaseRule(
    "vllm-dsa-fp8-ds-mla-cache",
    span(last="0.17.1", engine=VLLM),
    "DeepSeek-V3.2's fp8 cache (fp8, fp8_e4m3, fp8_e5m2) becomes fp8_ds_mla: 656 bytes a token on FLASHMLA_SPARSE",
    "vllm/model_executor/models/config.py DeepseekV32ForCausalLM.verify_and_update_config (0.17.1)",
    topic="launch",
)
FP8_DS_MLA = "fp8_ds_mla"


def model_cache_dtype(kv_cache_dtype: str, model_type: str, gpu: VLLMDevice, version: str) -> str:
    """The cache dtype after the model's ``verify_and_update_config`` (``vllm/model_executor/models/config.py``;
    :class:`~kvstrategies.models.architectures.VLLMModelRule`): DeepSeek-V3.2 reads ``bfloat16`` as
    ``auto`` (and an fp8 cache as ``fp8_ds_mla`` in vLLM 0.17.1: :data:`DSA_FP8_DS_MLA`); GLM-5 on SM 10.x takes
    ``fp8_e4m3`` for ``auto`` from vLLM 0.32.0."""
    rule = vllm_model_rule(model_type)
    if rule.bf16_cache_is_auto and kv_cache_dtype == "bfloat16":
        return "auto"
    if (rule.fp8_cache_is_ds_mla and kv_cache_dtype.startswith("fp8") and version
            and DSA_FP8_DS_MLA.holds(parse_release(version, VLLM))):  # fmt: skip
        return FP8_DS_MLA
    first = rule.sm100_fp8_cache_from
    if first is None or kv_cache_dtype != "auto" or gpu.capability[0] != 10 or not version:
        return kv_cache_dtype
    return "fp8_e4m3" if parse_release(version, VLLM) >= parse_release(first, VLLM) else kv_cache_dtype


def chunked_prefill_off_tokens(deployment: VLLMDeployment, max_model_len: int, default: int, version: str) -> int:
    """``max_num_batched_tokens`` without chunked prefill: ``max(max_model_len, default)`` when not given
    (``EngineArgs._set_default_args``); a given one below ``max_model_len`` is refused in vLLM's words
    (``SchedulerConfig.verify_max_model_len``)."""
    given = deployment.max_num_batched_tokens
    if given is None:
        return max(max_model_len, default)
    if given < max_model_len:
        raise UnsupportedConfigurationError(
            f"vLLM {version} refuses: max_num_batched_tokens ({given}) is smaller than max_model_len "
            f"({max_model_len}). This effectively limits the maximum sequence length to max_num_batched_tokens and "
            "makes vLLM reject longer sequences. (vllm/config/scheduler.py SchedulerConfig.verify_max_model_len, "
            "chunked prefill off); give a larger --max-num-batched-tokens or a smaller --max-model-len"
        )
    return given


def check_batch_budget(
    max_num_batched_tokens: int, max_num_seqs: int, deployment: VLLMDeployment, version: str = ""
) -> None:
    """``SchedulerConfig.verify_max_model_len``: a step schedules at least one token per running request,
    so ``max_num_batched_tokens >= max_num_seqs`` (the resolved values, defaults included)."""
    if max_num_batched_tokens >= max_num_seqs:
        return
    given = [f"--{name.replace('_', '-')}" for name in ("max_num_batched_tokens", "max_num_seqs")
             if getattr(deployment, name) is not None]  # fmt: skip
    origin = " and ".join(given) if given else "vLLM's batch defaults"
    engine = f"vLLM {version}" if version else "vLLM"
    raise UnsupportedConfigurationError(
        f"{engine} refuses: max_num_batched_tokens ({max_num_batched_tokens}) must be greater than or equal to "
        f"max_num_seqs ({max_num_seqs}). (vllm/config/scheduler.py SchedulerConfig.verify_max_model_len, "
        f"from {origin} on {deployment.gpu}); give --max-num-batched-tokens {max_num_seqs} or more, "
        f"or --max-num-seqs {max_num_batched_tokens} or fewer"
    )
