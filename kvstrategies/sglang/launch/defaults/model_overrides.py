"""Model and scheduler overrides: hybrid-SWA memory, the Mamba radix strategy, PP overlap, the
SWA ratio, the radix-cache capability and the multimodal reserve.

Mirrors ``sglang.srt.arg_groups.overrides`` (``_mamba_radix_cache_resolution``, the forced
``--disable-hybrid-swa-memory``, ``_pipeline_parallel_overlap_disable``, the
``swa_full_tokens_ratio`` fallback, the radix cache off for PD decode and Whisper) and
``mem_cache.kv_cache_configurator.mm_runtime_reservation_gb`` with
``arg_groups.model_overrides.qwen3_vl._qwen3vl_hopper_serving_overrides`` (multimodal reserve).
"""

from __future__ import annotations

from ....core.releases import ReleaseRule, span
from ....errors import KVCacheConfigError
from ....models.architectures import LaunchBackendRule, names_holding, names_where
from .core import (
    MAMBA_RADIX_HOOK,
    OVERRIDES_HOOK,
    LaunchInputs,
    ResolutionDraft,
    _declare,
    _multimodal_active,
    _refuse,
    large_hopper_qwen3_vl,
)
from .facts import _AUDIO_ENCODER_DECODER

#: GPT-OSS with the trtllm_mha backend turns hybrid-SWA memory off (no SWA index translation in that backend yet)
GPT_OSS_TRTLLM_NO_HYBRID_SWA = ReleaseRule(
    "launch-gpt-oss-trtllm-no-hybrid-swa",
    span("0.5.8", "0.5.9"),
    "GPT-OSS with the trtllm_mha attention backend disables hybrid-SWA memory",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (GptOssForCausalLM)",
    topic="launch",
)
#: GPT-OSS with speculative decoding turns hybrid-SWA memory off (the SWA cache did not serve speculation yet)
GPT_OSS_SPEC_NO_HYBRID_SWA = ReleaseRule(
    "launch-gpt-oss-spec-no-hybrid-swa",
    span("0.5.8", "0.5.8"),
    "GPT-OSS with speculative decoding disables hybrid-SWA memory",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (GptOssForCausalLM)",
    topic="launch",
)
#: GPT-OSS always turns hybrid-SWA memory off (the two conditions above came with 0.5.8)
GPT_OSS_NO_HYBRID_SWA = ReleaseRule(
    "launch-gpt-oss-no-hybrid-swa",
    span(last="0.5.7"),
    "GPT-OSS disables hybrid-SWA memory whatever the backend and speculation",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (GptOssForCausalLM)",
    topic="launch",
)
_TRTLLM_NO_HYBRID_SWA = names_where(lambda r: r.trtllm_disables_hybrid_swa)


def hybrid_swa_memory_override(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """Model override (arg_groups.overrides): Gemma-2/3, Exaone-4 (with pattern), Olmo2/3 force hybrid-SWA memory
    off; up to 0.5.9 GPT-OSS on trtllm_mha too (:data:`GPT_OSS_TRTLLM_NO_HYBRID_SWA`), 0.5.7 always."""
    if inp.model.forces_disable_hybrid_swa_memory and not res.disable_hybrid_swa_memory:
        _declare(res, "disable_hybrid_swa_memory", True, f"model override ({OVERRIDES_HOOK.at(inp.release)})")
    backends = (res.attention_backend, res.prefill_attention_backend, res.decode_attention_backend)
    trtllm = "trtllm_mha" in backends and inp.model.has_arch(_TRTLLM_NO_HYBRID_SWA)
    spec = inp.settings.speculative_algorithm is not None and GPT_OSS_SPEC_NO_HYBRID_SWA.holds(inp.release)
    if inp.model.has_arch(_TRTLLM_NO_HYBRID_SWA) and GPT_OSS_NO_HYBRID_SWA.holds(inp.release):
        if not res.disable_hybrid_swa_memory:
            _declare(res, "disable_hybrid_swa_memory", True, "GPT-OSS (sglang.srt.server_args.ServerArgs."
                     "_handle_model_specific_adjustments)")  # fmt: skip
        return
    if (spec and inp.model.has_arch(_TRTLLM_NO_HYBRID_SWA)) and not res.disable_hybrid_swa_memory:
        _declare(res, "disable_hybrid_swa_memory", True, "GPT-OSS with speculative decoding (sglang.srt.server_args."
                 "ServerArgs._handle_model_specific_adjustments)")  # fmt: skip
    if trtllm and GPT_OSS_TRTLLM_NO_HYBRID_SWA.holds(inp.release) and not res.disable_hybrid_swa_memory:
        _declare(res, "disable_hybrid_swa_memory", True, "GPT-OSS with trtllm_mha (sglang.srt.server_args."
                 "ServerArgs._handle_model_specific_adjustments)")  # fmt: skip


#: ``auto`` is resolved per model by the Mamba radix hook; before, ``auto`` becomes ``no_buffer`` for every model while
#: the missing defaults are filled, and the no_buffer radix cache forces page 1 and refuses speculation
MAMBA_AUTO_PER_MODEL = ReleaseRule(
    "launch-mamba-auto-per-model",
    span("0.5.14"),
    "the Mamba radix strategy 'auto' is chosen per model (extra_buffer when overlap or paging wants it); before: "
    "'no_buffer' for every model, whose radix cache forces page 1, turns overlap off without speculation, keeps it "
    "with trtllm_mha by turning the radix cache off, and refuses speculation on CUDA",
    "sglang.srt.server_args.ServerArgs._handle_missing_default_values and _handle_mamba_radix_cache",
    topic="launch",
)
_OLD_MAMBA_HOOK = "sglang.srt.server_args.ServerArgs._handle_mamba_radix_cache"
#: the no_buffer Mamba radix cache sets the page to 1 (with a warning); before, the page given is kept
NO_BUFFER_FORCES_PAGE_ONE = ReleaseRule(
    "launch-no-buffer-forces-page-one",
    span("0.5.11"),
    "the no_buffer Mamba radix cache sets page_size to 1 (before: the --page-size given is kept)",
    _OLD_MAMBA_HOOK,
    topic="launch",
)
#: speculation with the no_buffer radix cache turns the radix cache off on every device (0.5.10: refused on CUDA)
NO_BUFFER_SPEC_DISABLES_RADIX = ReleaseRule(
    "launch-no-buffer-spec-disables-radix",
    span(last="0.5.9"),
    "speculative decoding with the no_buffer Mamba radix cache turns the radix cache off (0.5.10 refuses it on CUDA)",
    _OLD_MAMBA_HOOK,
    topic="launch",
)
#: speculation with the no_buffer radix cache on ROCm turns the radix cache off; before, it is refused there too
NO_BUFFER_SPEC_ROCM_FALLBACK = ReleaseRule(
    "launch-no-buffer-spec-rocm-fallback",
    span("0.5.11"),
    "speculative decoding with the no_buffer Mamba radix cache on ROCm turns the radix cache off (before: refused as "
    "on CUDA)",
    _OLD_MAMBA_HOOK,
    topic="launch",
)


def mamba_auto_default_step(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """Before :data:`MAMBA_AUTO_PER_MODEL`: ``auto`` -> ``no_buffer`` for every model, first thing
    (``ServerArgs._handle_missing_default_values``); declared for Mamba-radix models, set silently for
    the others (their value is never read)."""
    if MAMBA_AUTO_PER_MODEL.holds(inp.release) or res.mamba_radix_cache_strategy != "auto":
        return
    if inp.model.is_mamba_radix:
        _declare(res, "mamba_radix_cache_strategy", "no_buffer",
                 "'auto' is no_buffer (sglang.srt.server_args.ServerArgs._handle_missing_default_values)")  # fmt: skip
    else:
        res.mamba_radix_cache_strategy = "no_buffer"


def _no_buffer_radix_cache(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """Before :data:`MAMBA_AUTO_PER_MODEL` (``ServerArgs._handle_mamba_radix_cache``): a model whose
    state the radix cache cannot hold (row fact ``mamba_cache``) runs without it; with the no_buffer
    strategy the page is forced to 1 (a warning, not a refusal); without speculation the overlap
    scheduler goes off, unless the backend is trtllm_mha, which turns the radix cache off instead;
    with speculation ROCm turns the radix cache off and CUDA refuses. Up to 0.5.10 the page is kept
    (:data:`NO_BUFFER_FORCES_PAGE_ONE`) and ROCm refuses too (:data:`NO_BUFFER_SPEC_ROCM_FALLBACK`)."""
    m = inp.model
    if res.disable_radix_cache:
        return
    if not m.has_arch(names_holding("mamba_cache", inp.release)):
        _declare(res, "disable_radix_cache", True, f"{m.architectures[0]}: no Mamba radix cache ({_OLD_MAMBA_HOOK})")
        return
    if res.mamba_radix_cache_strategy != "no_buffer":
        return
    if (res.page_size or 1) > 1 and NO_BUFFER_FORCES_PAGE_ONE.holds(inp.release):
        _declare(res, "page_size", 1, f"no_buffer Mamba radix cache needs page 1 ({_OLD_MAMBA_HOOK})")
    if inp.settings.speculative_algorithm is None:
        _declare(res, "disable_overlap_schedule", True, f"no_buffer Mamba radix cache ({_OLD_MAMBA_HOOK})")
        if res.attention_backend == "trtllm_mha":
            why = f"trtllm_mha cannot run page 1 ({_OLD_MAMBA_HOOK})"
            _declare(res, "disable_radix_cache", True, why)
            _declare(res, "disable_overlap_schedule", False, why)
        return
    if NO_BUFFER_SPEC_DISABLES_RADIX.holds(inp.release):
        _declare(res, "disable_radix_cache", True, f"speculation with the no_buffer radix cache ({_OLD_MAMBA_HOOK})")
        return
    if inp.gpu.is_hip and NO_BUFFER_SPEC_ROCM_FALLBACK.holds(inp.release):
        _declare(res, "disable_radix_cache", True, f"speculation on ROCm ({_OLD_MAMBA_HOOK})")
        return
    raise _refuse(_OLD_MAMBA_HOOK, f"speculative decoding for {m.architectures[0]} is not compatible with the radix "
                  f"cache under the no_buffer Mamba strategy of {inp.release.label} (add --disable-radix-cache)")


#: the Mamba radix-cache handling is one shared hook; before, each model's override had its own (and the no_buffer
#: block sat in GLM-4 MoE's): Nemotron-H, Falcon-H1 and Qwen3-Next keep a given page, Qwen3-Next keeps the overlap
#: scheduler, Falcon-H1 keeps the radix cache under speculation
MAMBA_SHARED_RADIX_HOOK = ReleaseRule(
    "launch-mamba-shared-radix-hook",
    span("0.5.9"),
    "one Mamba radix-cache hook for every Mamba model (before: per-model overrides; the no_buffer block sits in "
    "GLM-4 MoE's, so GLM-4.5 loses the overlap scheduler and Qwen3-Next keeps it)",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (0.5.9: _handle_mamba_radix_cache)",
    topic="launch",
)
#: 0.5.8's misplaced no_buffer block: in GLM-4 MoE's override; before, in Qwen3-Next's own (overlap off there)
NO_BUFFER_BLOCK_IN_GLM4_MOE = ReleaseRule(
    "launch-no-buffer-block-in-glm4-moe",
    span("0.5.8", "0.5.8"),
    "the no_buffer Mamba radix block sits in GLM-4 MoE's override (before: in Qwen3-Next's, which turns the overlap "
    "scheduler off with the radix cache on and no extra buffer)",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments",
    topic="launch",
)
#: Nemotron-H under speculative decoding turns the radix cache off; before, it keeps it (and its SM100 backend rule)
NEMOTRON_H_SPEC_NO_RADIX = ReleaseRule(
    "launch-nemotron-h-spec-no-radix",
    span("0.5.8"),
    "Nemotron-H with speculative decoding disables the radix cache (before: the radix cache stays, with the overlap "
    "scheduler off and flashinfer on SM100)",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (NemotronHForCausalLM)",
    topic="launch",
)
#: Nemotron-H and Falcon-H1 handle the Mamba radix cache in their overrides (overlap off, their SM100 backend), and
#: Qwen3-Next's SM100 triton is a default; before, those two have no such override and Qwen3-Next takes triton on
#: SM100 over any given backend
MAMBA_HOOKS_NEMOTRON_FALCON = ReleaseRule(
    "launch-mamba-hooks-nemotron-falcon",
    span("0.5.7"),
    "Nemotron-H and Falcon-H1 turn the overlap scheduler off with the radix cache on (and pick their SM100 backend); "
    "Qwen3-Next's SM100 triton applies only when no backend is given (before: no such Nemotron-H / Falcon-H1 "
    "override, and Qwen3-Next takes triton on SM100 whatever the launch)",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments",
    topic="launch",
)
#: Qwen3-Next has a Mamba override (the overlap scheduler off with the radix cache on, triton on SM100); before, none
QWEN3_NEXT_MAMBA_OVERRIDE = ReleaseRule(
    "launch-qwen3-next-mamba-override",
    span("0.5.6"),
    "Qwen3-Next turns the overlap scheduler off with the radix cache on and takes triton on SM100 (before: no such "
    "override; the overlap scheduler stays on, the generic backend applies)",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (Qwen3NextForCausalLM)",
    topic="launch",
)
_LEGACY_MAMBA_BLOCK = names_where(lambda r: r.legacy_mamba_block)
_NEMOTRON_H = names_where(lambda r: r.launch_backend_rule is LaunchBackendRule.NEMOTRON_H)
_FALCON_H1 = names_where(lambda r: r.launch_backend_rule is LaunchBackendRule.FALCON_H1)
_QWEN3_NEXT = names_where(lambda r: r.launch_backend_rule is LaunchBackendRule.QWEN3_NEXT)


def uses_legacy_mamba_hooks(inp: LaunchInputs) -> bool:
    """Whether the per-model Mamba overrides of 0.5.8 and older apply (:data:`MAMBA_SHARED_RADIX_HOOK`)."""
    m = inp.model
    return not MAMBA_SHARED_RADIX_HOOK.holds(inp.release) and (
        m.has_arch(_NEMOTRON_H | _FALCON_H1 | _QWEN3_NEXT | _LEGACY_MAMBA_BLOCK)
    )


def _legacy_mamba_hooks(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """0.5.8's per-model overrides (``ServerArgs._handle_model_specific_adjustments``): Nemotron-H turns the radix cache
    off under speculation, else the overlap scheduler off (SM100: flashinfer unless a backend is given; trtllm_mha
    turns the radix cache off and the overlap scheduler back on); Falcon-H1 the same without the speculation branch
    (SM100: triton); Qwen3-Next only its SM100 backend (triton; trtllm_mha turns the radix cache off); GLM-4 MoE runs
    the no_buffer block (overlap off with the radix cache on). Older: 0.5.7 keeps that block in Qwen3-Next's override
    and Nemotron-H keeps its radix cache under speculation; 0.5.6 has no Nemotron-H / Falcon-H1 override and forces
    Qwen3-Next's SM100 triton; 0.5.5 has no Qwen3-Next override either (the release rules above)."""
    m, g, s = inp.model, inp.gpu, inp.settings
    hook = "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments"
    radix = not res.disable_radix_cache
    no_buffer = not res.mamba_radix_cache_strategy.startswith("extra_buffer")
    block_in_glm = NO_BUFFER_BLOCK_IN_GLM4_MOE.holds(inp.release)
    own_hooks = MAMBA_HOOKS_NEMOTRON_FALCON.holds(inp.release)
    if m.has_arch(_LEGACY_MAMBA_BLOCK):
        if radix and no_buffer and block_in_glm:
            _declare(res, "disable_overlap_schedule", True, f"the no_buffer block in GLM-4 MoE's override ({hook})")
        return
    if m.has_arch(_QWEN3_NEXT):
        if not QWEN3_NEXT_MAMBA_OVERRIDE.holds(inp.release):  # 0.5.5: no Qwen3-Next override
            return
        if not own_hooks and radix:  # 0.5.6: overlap off first, then triton on SM100 over any backend
            _declare(res, "disable_overlap_schedule", True, f"Mamba radix cache in Qwen3-Next's override ({hook})")
        if g.is_sm100 and (res.attention_backend is None or not own_hooks):
            _declare(res, "attention_backend", "triton", f"Qwen3-Next on SM100 ({hook})")
        if g.is_sm100 and radix and res.attention_backend == "trtllm_mha":
            _declare(res, "disable_radix_cache", True, f"trtllm_mha cannot run page 1 ({hook})")
            _declare(res, "disable_overlap_schedule", False, f"trtllm_mha cannot run page 1 ({hook})")
        if own_hooks and not block_in_glm and no_buffer and not res.disable_radix_cache:
            why = f"no_buffer Mamba radix cache in Qwen3-Next's override ({hook})"
            _declare(res, "disable_overlap_schedule", True, why)
        return
    if not own_hooks:  # 0.5.6: Nemotron-H and Falcon-H1 have no Mamba override
        return
    nemotron = m.has_arch(_NEMOTRON_H)
    if nemotron and radix and s.speculative_algorithm is not None and NEMOTRON_H_SPEC_NO_RADIX.holds(inp.release):
        _declare(res, "disable_radix_cache", True, f"Nemotron-H speculation ({hook})")
        return
    if not radix:
        return
    _declare(res, "disable_overlap_schedule", True, f"Mamba radix cache ({hook})")
    if g.is_sm100:
        if res.attention_backend is None:
            backend = "flashinfer" if nemotron else "triton"
            _declare(res, "attention_backend", backend, f"{m.architectures[0]} on SM100 ({hook})")
        if res.attention_backend == "trtllm_mha":
            _declare(res, "disable_radix_cache", True, f"trtllm_mha cannot run page 1 ({hook})")
            _declare(res, "disable_overlap_schedule", False, f"trtllm_mha cannot run page 1 ({hook})")


def mamba_strategy_override(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """Mamba radix cache (overrides._mamba_radix_cache_resolution): ``auto`` -> ``extra_buffer`` when (overlap on or
    page > 1) and supported in the release (the rows' ``mamba_extra_buffer`` with their ``releases``), else
    ``no_buffer`` with the overlap scheduler forced off; ``no_buffer`` takes page 1 only (SGLang:
    ``arg_groups.mamba_hook.validate_mamba_no_buffer``). Radix off -> no strategy. Assumes the
    default ``linear_attn_backend`` triton. Older releases: :func:`_no_buffer_radix_cache`; 0.5.8:
    :func:`_legacy_mamba_hooks`."""
    m = inp.model
    if uses_legacy_mamba_hooks(inp):
        _legacy_mamba_hooks(inp, res)
        return
    if m.is_mamba_radix and not MAMBA_AUTO_PER_MODEL.holds(inp.release):
        _no_buffer_radix_cache(inp, res)
        return
    if not m.is_mamba_radix or res.disable_radix_cache or res.mamba_radix_cache_strategy != "auto":
        return
    overlap = not res.disable_overlap_schedule
    extra = m.mamba_extra_buffer and m.has_arch(names_holding("mamba_extra_buffer", inp.release))
    if (overlap or (res.page_size or 1) > 1) and extra:
        _declare(res, "mamba_radix_cache_strategy", "extra_buffer",
                 f"Mamba radix auto ({MAMBA_RADIX_HOOK.at(inp.release)})")  # fmt: skip
        return
    if (res.page_size or 1) > 1:
        raise _refuse("sglang.srt.arg_groups.mamba_hook.validate_mamba_no_buffer",
                      f"no_buffer only supports page_size=1 (the {m.architectures[0]} Mamba radix cache has no "
                      f"extra_buffer strategy in {inp.release.label}), got --page-size {res.page_size}")  # fmt: skip
    _declare(res, "mamba_radix_cache_strategy", "no_buffer",
             f"Mamba radix auto ({MAMBA_RADIX_HOOK.at(inp.release)})")  # fmt: skip
    _declare(res, "disable_overlap_schedule", True,
             f"no_buffer Mamba radix cache ({MAMBA_RADIX_HOOK.at(inp.release)})")  # fmt: skip


def pipeline_overlap_step(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """PP > 1 turns the overlap scheduler off, after the Mamba strategy was chosen with it on
    (SGLang: ``arg_groups.overrides._pipeline_parallel_overlap_disable``, run just before the
    speculative hook); the Mamba state slots per request follow the final value."""
    if inp.pp_size > 1 and not res.disable_overlap_schedule:
        _declare(res, "disable_overlap_schedule", True, "pipeline parallelism disables the overlap scheduler")


#: the cache hook records whether --swa-full-tokens-ratio counts as explicitly set
#: (``_swa_full_tokens_ratio_explicitly_set``); before, the configurators read the ratio as it is
SWA_RATIO_EXPLICIT_FLAG = ReleaseRule(
    "launch-swa-ratio-explicit-flag",
    span("0.5.21"),
    "SGLang records _swa_full_tokens_ratio_explicitly_set (a ratio non-None before the 0.8 fallback)",
    "sglang.srt.arg_groups.kv_cache_hook (_handle_cache_compatibility)",
    topic="launch",
)


def swa_ratio_step(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """SWA ratio (arg_groups.overrides): "explicit" = non-None at this point, so DSV4's model-declared 0.1
    counts as explicit (SGLang's order: its model override ran earlier) and V4/V4-Pro size in ratio mode;
    the effective value falls back to 0.8."""
    ratio = res.swa_full_tokens_ratio
    res.swa_full_tokens_ratio_explicit = ratio is not None
    if ratio is None:
        _declare(res, "swa_full_tokens_ratio", 0.8, f"field fallback ({OVERRIDES_HOOK.at(inp.release)})")
    value = res.swa_full_tokens_ratio
    if value is None or not 0 < value <= 1:
        raise KVCacheConfigError(f"swa_full_tokens_ratio must be in (0, 1], got {value!r}")


#: the KV budget holds back the multimodal memory allocated after sizing; before, nothing
MULTIMODAL_KV_RESERVE = ReleaseRule(
    "launch-multimodal-kv-reserve",
    span("0.5.18"),
    "the multimodal embedding cache / feature pools are reserved out of the KV budget",
    "sglang.srt.mem_cache.kv_cache_configurator.mm_runtime_reservation_gb",
    topic="launch",
)
VLM_CACHE_MIB = 100  # SGLANG_VLM_CACHE_SIZE_MB default
MM_FEATURE_CACHE_MIB = 1024  # SGLANG_MM_FEATURE_CACHE_MB default


def multimodal_reserve_step(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """The KV-budget share held for multimodal allocations made after sizing (MiB): the embedding
    cache (100) for an active multimodal part; Qwen3-VL on a large Hopper GPU turns that cache
    off and moves features over CUDA IPC, whose pool is reserved instead (1024 MiB, 3072 with a
    user ``--max-running-requests >= 400``). SGLang: ``mem_cache.kv_cache_configurator.
    mm_runtime_reservation_gb`` with the environment ``qwen3_vl._qwen3vl_hopper_serving_overrides``
    sets. Nothing before :data:`MULTIMODAL_KV_RESERVE`."""
    if not _multimodal_active(inp) or not MULTIMODAL_KV_RESERVE.holds(inp.release):
        return
    if not large_hopper_qwen3_vl(inp):
        res.multimodal_reserve_mib = float(VLM_CACHE_MIB)
        return
    mrr = inp.settings.max_running_requests
    feature = 3 * 1024 if mrr is not None and mrr >= 400 else MM_FEATURE_CACHE_MIB
    _declare(res, "multimodal_reserve_mib", float(feature), "Qwen3-VL on a large Hopper GPU: CUDA-IPC "
             "feature pool, no embedding cache (qwen3_vl._qwen3vl_hopper_serving_overrides)")  # fmt: skip


def capability_step(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """Capability (arg_groups.overrides): PD decode and Whisper run without the radix cache."""
    if res.disable_radix_cache:
        return
    if inp.settings.disaggregation_mode == "decode":
        _declare(res, "disable_radix_cache", True, f"PD decode role ({OVERRIDES_HOOK.at(inp.release)})")
        return
    if inp.model.has_arch(_AUDIO_ENCODER_DECODER):
        _declare(res, "disable_radix_cache", True, f"Whisper encoder-decoder ({OVERRIDES_HOOK.at(inp.release)})")
