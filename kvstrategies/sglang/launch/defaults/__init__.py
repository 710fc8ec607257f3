"""What SGLang 0.5.23 resolves at launch before any KV sizing (ServerArgs.resolve_once).

A pipeline of small steps in SGLang's order (ServerArgs.resolve_once order); each reads the frozen
inputs and writes its decisions into one :class:`ResolutionDraft` (the ``ServerArgs`` object the
hooks change in place), frozen into the :class:`LaunchResolution` once after the last step::

    LaunchModelFacts + Accelerator + tp/pp/attn-dp + LaunchSettings (None = not given)
      -> cuda graphs (arg_groups.cuda_graph_hook) -> platform (platform_hook.handle_platform_defaults, NPU) -> capacity
      tier (memory_hook.handle_gpu_memory_settings) -> prefill graph sizes
      -> mem_fraction_static (memory_hook.handle_gpu_memory_settings) -> model overrides (arg_groups.model_overrides,
      arg_groups.overrides, overrides._page_size_default, arg_groups.overrides kv_cache_dtype defaults,
      arg_groups.overrides, speculative_hook.handle_speculative_decoding)
      -> generic backend + page snaps + HIP aiter cut (get_default_attn_backend, overrides._page_size_default,
      memory_hook.handle_gpu_memory_settings) -> page default -> DP division (parallel_hook.handle_data_parallelism) ->
      speculative defaults (speculative_hook.handle_speculative_decoding) -> SWA ratio (arg_groups.overrides) ->
      capability (arg_groups.overrides) -> LaunchResolution (every resolved setting + one AppliedDefault per default
      applied)

The order matters: ``mem_fraction_static`` is computed before the model overrides, the
speculative defaults and the DP division, so it never sees DeepSeek-V4's 256 requests, the
speculative 48 or the per-DP chunk (ServerArgs.resolve_once order). :func:`estimate_kv_budget` turns the
fraction into a KV byte budget (KVCacheConfigurator._profile_available_bytes). Nothing here reads the environment or
imports torch.

Not modelled (outside the fixtures; their settings are not inputs): XPU/MUSA/CPU/HPU platforms,
prefill context parallel, two-batch overlap, PD KV sharding, post-capture KV sizing,
deterministic inference, HiSparse, ``--enable-mis``, embedding-only heads and the ``llama-2`` path
rule. DCP enters through its prefill-graph and DSA-backend rules only.

Every rule is checked against SGLang's own resolution, launch by launch, by
``kvstrategies verify --against sglang --launch`` (:mod:`kvstrategies.sglang.bridge.launch_check`).

The steps live in one module per topic (each names the SGLang functions it mirrors):

* :mod:`.core`: the values (:class:`LaunchSettings`, :class:`LaunchModelFacts`,
  :class:`LaunchInputs`, :class:`ResolutionDraft`, :class:`LaunchResolution`, :class:`AppliedDefault`), ``_declare``,
  ``_refuse``, :class:`SglangHook` (the SGLang source a reason cites);
* :mod:`.facts`: :func:`model_facts_from_hf_config` and the architecture name sets;
* :mod:`.memory`: capacity tier, NPU platform table, reserved memory, ``mem_fraction_static``;
* :mod:`.graphs`: decode/prefill CUDA graphs, prefill-graph batch list, DP chunk split, page default;
* :mod:`.deepseek`: DSA and DeepSeek-V4 overrides;
* :mod:`.family_backends`: per-architecture backends and pages, the Llama-4/Gemma-4 checks;
* :mod:`.backends`: the generic backend, page snaps, trtllm_mla check, HIP aiter cut;
* :mod:`.model_overrides`: hybrid-SWA memory, Mamba strategy, PP overlap, SWA ratio,
  capability, multimodal reserve;
* :mod:`.speculative`: EAGLE family, NGRAM, DFLASH, DSPARK;
* :mod:`.pipeline`: :data:`PIPELINE` and :func:`resolve_launch_defaults`;
* :mod:`.kv_budget`: :func:`estimate_kv_budget` and its helpers.
"""

from __future__ import annotations

from .backends import (
    generic_attention_backend,
    generic_backend_step,
)
from .core import (
    AppliedDefault,
    DisaggregationMode,
    LaunchInputs,
    LaunchModelFacts,
    LaunchResolution,
    LaunchSettings,
    ResolutionDraft,
    SettingValue,
    SglangHook,
    Step,
    large_hopper_qwen3_vl,
)
from .deepseek import (
    dsa_override,
    dsv4_override,
)
from .facts import (
    model_facts_from_hf_config,
)
from .family_backends import (
    attention_override,
    model_backend_check,
)
from .graphs import (
    cuda_graph_step,
    dp_attention_step,
    page_default_step,
    prefill_graph_batch_sizes,
    prefill_graph_bs_count,
    prefill_graph_step,
)
from .kv_budget import (
    KVBudgetEstimate,
    estimate_kv_budget,
    float32_round,
    kv_budget_bytes,
)
from .memory import (
    capacity_tier,
    capacity_tier_step,
    mem_fraction_from_reserve,
    mem_fraction_step,
    platform_step,
    reserved_memory_mib,
    vlm_fraction_factor,
)
from .model_overrides import (
    MM_FEATURE_CACHE_MIB,
    VLM_CACHE_MIB,
    capability_step,
    hybrid_swa_memory_override,
    mamba_strategy_override,
    multimodal_reserve_step,
    pipeline_overlap_step,
    swa_ratio_step,
)
from .pipeline import (
    PIPELINE,
    resolve_launch_defaults,
)
from .speculative import (
    DFLASH_DEFAULT_BLOCK_SIZE,
    NGRAM_MAX_BFS_BREADTH,
    speculative_step,
)

__all__ = [
    "AppliedDefault",
    "DFLASH_DEFAULT_BLOCK_SIZE",
    "DisaggregationMode",
    "KVBudgetEstimate",
    "LaunchInputs",
    "LaunchModelFacts",
    "LaunchResolution",
    "LaunchSettings",
    "ResolutionDraft",
    "MM_FEATURE_CACHE_MIB",
    "NGRAM_MAX_BFS_BREADTH",
    "PIPELINE",
    "SettingValue",
    "SglangHook",
    "Step",
    "VLM_CACHE_MIB",
    "attention_override",
    "capability_step",
    "capacity_tier",
    "capacity_tier_step",
    "cuda_graph_step",
    "dp_attention_step",
    "dsa_override",
    "dsv4_override",
    "estimate_kv_budget",
    "float32_round",
    "generic_attention_backend",
    "generic_backend_step",
    "hybrid_swa_memory_override",
    "kv_budget_bytes",
    "large_hopper_qwen3_vl",
    "mamba_strategy_override",
    "mem_fraction_from_reserve",
    "mem_fraction_step",
    "model_backend_check",
    "model_facts_from_hf_config",
    "multimodal_reserve_step",
    "page_default_step",
    "pipeline_overlap_step",
    "platform_step",
    "prefill_graph_batch_sizes",
    "prefill_graph_bs_count",
    "prefill_graph_step",
    "reserved_memory_mib",
    "resolve_launch_defaults",
    "speculative_step",
    "swa_ratio_step",
    "vlm_fraction_factor",
]
