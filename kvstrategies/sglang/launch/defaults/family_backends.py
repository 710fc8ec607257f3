"""Per-architecture attention backends and pages, and the backend checks after them.

Mirrors the family hooks of ``sglang.srt.arg_groups.model_overrides``: DeepSeek (trtllm_mla on
SM100), GPT-OSS, Llama-4, MiMo-V2, ``qwen3_5._qwen3_5_hybrid_overrides`` (Qwen3-Next / Qwen3.5),
``gemma4._gemma4_overrides``, ``nemotron_h._nemotron_h_overrides``, Falcon-H1, Granite hybrid,
``qwen3_vl._qwen3vl_hopper_serving_overrides``; then
``arg_groups.model_hook.handle_model_specific_adjustments`` (Llama-4 and Gemma-4 backends).
"""

from __future__ import annotations

from ....core.releases import ByRelease, ReleaseRule, span
from ....models.architectures import LaunchBackendCheck, LaunchBackendRule, names_where, row_for
from .backends import generic_attention_backend
from .core import (
    MODEL_OVERRIDES_HOOK,
    PAGE_SIZE_HOOK,
    LaunchInputs,
    ResolutionDraft,
    SglangHook,
    _declare,
    _no_backend_flags,
    _refuse,
    large_hopper_qwen3_vl,
)
from .facts import _DEEPSEEK_FAMILY
from .model_overrides import uses_legacy_mamba_hooks


def _backend_rule_names(rule: LaunchBackendRule) -> frozenset[str]:
    return names_where(lambda row: row.launch_backend_rule is rule)


# arg_groups.model_overrides: one name set per architecture backend rule
_BACKEND_RULE = {rule: _backend_rule_names(rule) for rule in LaunchBackendRule}

#: Nemotron-H on Blackwell: trtllm_mha on SM100 (page 64 and extra_buffer with a topk-1
#: speculation), triton for other speculation; before, flashinfer on SM100 whatever the speculation
NEMOTRON_H_BLACKWELL_BACKENDS = ReleaseRule(
    "launch-nemotron-h-blackwell-backends",
    span("0.5.19"),
    "Nemotron-H on Blackwell takes trtllm_mha / triton by speculation (before: flashinfer on SM100)",
    "sglang.srt.arg_groups.model_overrides.nemotron_h._nemotron_h_overrides (0.5.18: arg_groups.overrides)",
    topic="launch",
)


#: DeepSeek-V3 (not DSA) on SM100 takes trtllm_mla when no backend is given; before, the field stays unset (the
#: ModelRunner picks the backend at load)
DEEPSEEK_SM100_TRTLLM_MLA = ReleaseRule(
    "launch-deepseek-sm100-trtllm-mla",
    span("0.5.4"),
    "DeepSeek-V3 on SM100 defaults to trtllm_mla (page 64) (before: no launch default; the ModelRunner picks)",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (DeepseekV3ForCausalLM)",
    topic="launch",
)
#: Llama-4 without a given backend gets one per GPU; before, the model check refuses the unset backend
LLAMA4_AUTO_BACKEND = ReleaseRule(
    "launch-llama4-auto-backend",
    span("0.5.6"),
    "Llama-4 without --attention-backend gets trtllm_mha / fa3 / aiter / triton by GPU (before: refused: 'fa3, "
    "aiter, triton, or trtllm_mha is required for Llama4 model')",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (Llama4)",
    topic="launch",
)


def _family_backend(inp: LaunchInputs, res: ResolutionDraft) -> tuple[str | None, int | None]:
    """arg_groups.model_overrides per-architecture backend (and page) when the family's flag condition holds."""
    m, g, s = inp.model, inp.gpu, inp.settings
    free, unset = _no_backend_flags(s), s.attention_backend is None
    spec, topk = s.speculative_algorithm is not None, s.speculative_eagle_topk
    if m.has_arch(_DEEPSEEK_FAMILY) and not m.is_dsa and g.is_sm100 and free:
        return ("trtllm_mla" if DEEPSEEK_SM100_TRTLLM_MLA.holds(inp.release) else None), None
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.GPT_OSS]) and free:
        return ("trtllm_mha" if g.is_sm100 else "fa3" if g.is_sm90 else "aiter" if g.is_hip
                else "triton"), None  # fmt: skip
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.LLAMA4]) and unset and LLAMA4_AUTO_BACKEND.holds(inp.release):
        return ("trtllm_mha" if g.is_sm100 else "fa3" if g.is_sm90 else "aiter" if g.is_hip
                else "triton"), None  # fmt: skip
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.MIMO_V2]) and g.is_sm100 and free:
        return "fa4", None
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.QWEN3_NEXT]) and g.is_sm100 and unset:
        return _qwen3_5_hybrid_backend(inp, res)
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.GEMMA4]) and unset:
        return _gemma4_backend(inp), None
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.NEMOTRON_H]) and not NEMOTRON_H_BLACKWELL_BACKENDS.holds(inp.release):
        return ("flashinfer" if g.is_sm100 and unset else None), None
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.NEMOTRON_H]) and g.is_blackwell and free:
        if g.is_sm100 and (not spec or (topk or 1) <= 1):
            return "trtllm_mha", 64 if spec else None
        # model_overrides.nemotron_h._nemotron_h_overrides: any other speculative launch -> triton
        return ("triton", None) if spec else (None, None)
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.FALCON_H1]) and g.is_sm100 and unset:
        return "triton", None
    if m.has_arch(_BACKEND_RULE[LaunchBackendRule.GRANITE_HYBRID]) and m.is_mamba_radix and g.is_sm100 and unset:
        return "flashinfer", None
    return None, None


#: Gemma-4 takes trtllm_mha on SM100 and its backends are checked; before, triton everywhere and no check
#: Qwen3-Next / Qwen3.5 on SM100 take trtllm_mha when the generic default is trtllm_mha and page 1 is not needed;
#: before, triton always
QWEN3_NEXT_SM100_TRTLLM = ReleaseRule(
    "launch-qwen3-next-sm100-trtllm",
    span("0.5.10"),
    "Qwen3-Next / Qwen3.5 on SM100 take trtllm_mha (page 64) when the generic default is trtllm_mha and page 1 is not "
    "needed (before: triton always)",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (Qwen3-Next family)",
    topic="launch",
)
#: Qwen3-Next / Qwen3.5 on SM100 force their page over a user's ``--page-size``; before, the model override picks
#: the attention backend only and a given page stays
QWEN3_NEXT_PAGE_FORCED = ReleaseRule(
    "launch-qwen3-next-page-forced",
    span("0.5.11"),
    "Qwen3-Next / Qwen3.5 on SM100 force the page of their backend (trtllm_mha 64, triton 1) over --page-size "
    "(before: only the backend is chosen; a given page stays)",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (Qwen3-Next family; 0.5.19: "
    "arg_groups.model_overrides.qwen3_5._qwen3_5_hybrid_overrides)",
    topic="launch",
)
GEMMA4_SM100_TRTLLM = ReleaseRule(
    "launch-gemma4-sm100-trtllm",
    span("0.5.13"),
    "Gemma-4 defaults to trtllm_mha on SM100 and needs a Gemma-4 backend for prefill and decode (before: triton "
    "on every GPU, no backend check)",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (Gemma4ForConditionalGeneration)",
    topic="launch",
)


def _gemma4_backend(inp: LaunchInputs) -> str:
    """Gemma-4 without ``--attention-backend``: ``trtllm_mha`` on SM100, ``triton`` elsewhere
    (Hopper and Ampere included) and for the diffusion variant (SGLang:
    ``arg_groups.model_overrides.gemma4._gemma4_overrides``); ``triton`` everywhere up to 0.5.12
    (:data:`GEMMA4_SM100_TRTLLM`)."""
    first = row_for(inp.model.architectures[0])
    diffusion = first is not None and first.block_diffusion
    sm100 = inp.gpu.is_sm100 and GEMMA4_SM100_TRTLLM.holds(inp.release)
    return "trtllm_mha" if sm100 and not diffusion else "triton"


def _qwen3_vl_hopper_decode_backend(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """Qwen3-VL on a large Hopper GPU decodes with ``flashinfer`` when no attention or decode
    backend was given (SGLang: ``arg_groups.model_overrides.qwen3_vl.
    _qwen3vl_hopper_serving_overrides``)."""
    if not large_hopper_qwen3_vl(inp) or res.attention_backend is not None or res.decode_attention_backend:
        return
    _declare(res, "decode_attention_backend", "flashinfer", "Qwen3-VL on a large Hopper GPU "
             "(qwen3_vl._qwen3vl_hopper_serving_overrides)")  # fmt: skip


def _qwen3_5_hybrid_backend(inp: LaunchInputs, res: ResolutionDraft) -> tuple[str, int]:
    """Qwen3-Next / Qwen3.5 on SM100 without ``--attention-backend``: ``trtllm_mha`` with page 64
    when the generic default is trtllm_mha and page 1 is not required (it is with the radix cache
    on, no extra buffer and no speculation), else ``triton`` with page 1; the page is **forced**
    over a user's ``--page-size`` (SGLang:
    ``arg_groups.model_overrides.qwen3_5._qwen3_5_hybrid_overrides``).

    As in SGLang's attention_hook.handle_attention_backend_compatibility, the Mamba strategy is still "auto" here, which
    is not extra-buffer, so a default launch gets triton / page 1 although extra_buffer is chosen right after.
    """
    if not QWEN3_NEXT_SM100_TRTLLM.holds(inp.release):
        return "triton", 1
    generic = generic_attention_backend(inp, res)
    extra = res.mamba_radix_cache_strategy.startswith("extra_buffer")
    page_one_needed = not extra and not res.disable_radix_cache and inp.settings.speculative_algorithm is None
    if generic == "trtllm_mha" and not page_one_needed:
        return "trtllm_mha", 64
    return "triton", 1


def attention_override(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """Model override (arg_groups.model_overrides, overrides._page_size_default): per-architecture attention backend
    and page size (fill-only page)."""
    if inp.model.is_dsv4 or inp.model.is_dsa or inp.gpu.is_npu or uses_legacy_mamba_hooks(inp):
        return  # 0.5.8's Mamba models choose their backend in their own override (model_overrides)
    _qwen3_vl_hopper_decode_backend(inp, res)
    backend, page = _family_backend(inp, res)
    if backend is not None:
        _declare(res, "attention_backend", backend,
                 f"{inp.model.architectures[0]} override ({MODEL_OVERRIDES_HOOK.at(inp.release)})")  # fmt: skip
    # qwen3_5._qwen3_5_hybrid_overrides forces the page over a user's
    forced = inp.model.has_arch(_BACKEND_RULE[LaunchBackendRule.QWEN3_NEXT])
    forced = forced and QWEN3_NEXT_PAGE_FORCED.holds(inp.release)
    if page is not None and (res.page_size is None or (forced and res.page_size != page)):
        _declare(res, "page_size", page,
                 f"{inp.model.architectures[0]} override ({PAGE_SIZE_HOOK.at(inp.release)})")  # fmt: skip
    nemotron_spec = inp.model.has_arch(_BACKEND_RULE[LaunchBackendRule.NEMOTRON_H]) and inp.gpu.is_sm100
    spec = inp.settings.speculative_algorithm is not None
    if nemotron_spec and backend == "trtllm_mha" and spec and res.mamba_radix_cache_strategy == "auto":
        _declare(res, "mamba_radix_cache_strategy", "extra_buffer",
                 f"Nemotron-H SM100 with speculation ({MODEL_OVERRIDES_HOOK.at(inp.release)})")  # fmt: skip


#: where the Llama-4 / Gemma-4 backend checks run (a ServerArgs method up to 0.5.18)
MODEL_CHECK_HOOK = SglangHook(
    "sglang.srt.arg_groups.model_hook.handle_model_specific_adjustments",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments",
)
#: the attention backends SGLang's Llama-4 check takes
LLAMA4_BACKENDS: ByRelease[tuple[str, ...]] = ByRelease(
    "launch-llama4-backends",
    (
        ("0.5.1", ("aiter", "fa3")),
        ("0.5.2", ("aiter", "fa3", "triton")),
        ("0.5.5", ("aiter", "fa3", "triton", "trtllm_mha")),
        ("0.5.6", ("aiter", "fa3", "intel_xpu", "triton", "trtllm_mha")),
        ("0.5.10", ("aiter", "ascend", "fa3", "intel_xpu", "triton", "trtllm_mha")),
    ),
    "the attention backends Llama-4 takes (else the launch is refused: '... is required for Llama4 model')",
    "sglang.srt.arg_groups.model_hook.handle_model_specific_adjustments (up to 0.5.18: "
    "ServerArgs._handle_model_specific_adjustments)",
)
_GEMMA4_BACKENDS = frozenset({"trtllm_mha", "triton", "fa4", "ascend", "intel_xpu", "intel_amx", "aiter"})


def model_backend_check(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """After the model overrides: Llama-4 needs one of the release's :data:`LLAMA4_BACKENDS` as the
    attention backend; Gemma-4 needs trtllm_mha/triton/fa4/ascend/intel_xpu/intel_amx/aiter for
    prefill and decode (SGLang: ``arg_groups.model_hook.handle_model_specific_adjustments``)."""
    first = row_for(inp.model.architectures[0])
    check = first.launch_backend_check if first is not None else None
    hook = MODEL_CHECK_HOOK.at(inp.release)
    llama4 = LLAMA4_BACKENDS.at(inp.release)
    if check is LaunchBackendCheck.LLAMA4 and res.attention_backend not in llama4:
        raise _refuse(hook, f"Llama-4 needs one of {sorted(llama4)} as the attention backend, got "
                      f"{res.attention_backend}")  # fmt: skip
    if check is LaunchBackendCheck.GEMMA4 and GEMMA4_SM100_TRTLLM.holds(inp.release):
        prefill = res.prefill_attention_backend or res.attention_backend
        decode = res.decode_attention_backend or res.attention_backend
        if prefill not in _GEMMA4_BACKENDS or decode not in _GEMMA4_BACKENDS:
            raise _refuse(hook, f"Gemma-4 needs one of {sorted(_GEMMA4_BACKENDS)} for prefill and decode, got "
                          f"prefill={prefill}, decode={decode}")  # fmt: skip
