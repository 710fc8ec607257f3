"""The generic attention backend and the backend rules that follow it.

Mirrors ``sglang.srt.arg_groups.model_override_base.get_default_attn_backend`` (the default
per GPU and attention kind), ``arg_groups.attention_hook.handle_attention_backend_compatibility``
(the per-backend page rules, the fa3 + fp8_e5m2 fallback, the late prefill-graph disables),
``arg_groups.overrides._mla_kv_cache_dtype_checks`` (trtllm_mla) and the HIP aiter cut of
``arg_groups.memory_hook.handle_gpu_memory_settings``.
"""

from __future__ import annotations

from ....core.releases import ReleaseRule, span
from ....models.architectures import (
    FA3_DEFAULT_ADDED_0_5_7,
    FA3_DEFAULT_ARCHITECTURES_0_5_7,
    names_holding,
    names_where,
)
from .core import (
    CUDA_GRAPH_HOOK,
    DEFAULT_BACKEND_HOOK,
    GPU_MEMORY_HOOK,
    PAGE_SIZE_HOOK,
    LaunchInputs,
    ResolutionDraft,
    _declare,
    _refuse,
)
from .facts import _AUDIO_ENCODER_DECODER
from .graph_rules import PIECEWISE_OFF_FOR_TRTLLM_MOE

_LATE_TRTLLM_MLA_PREFILL = names_where(lambda r: r.late_trtllm_mla_prefill_graph)

#: DeepSeek-V3 on the trtllm_mla prefill backend loses the prefill graph after the reserve was counted
LATE_TRTLLM_MLA_PREFILL_GRAPH_OFF = ReleaseRule(
    "launch-late-trtllm-mla-prefill-graph-off",
    span("0.5.15"),
    "DeepSeek-V3 with the trtllm_mla prefill backend disables the prefill cuda graph (after the memory reserve)",
    "sglang.srt.server_args.ServerArgs._disable_prefill_cuda_graph_for_deepseek_trtllm_mla "
    "(0.5.19: arg_groups.cuda_graph_hook)",
    topic="launch",
)
#: DFLASH counts as an explicit topk for the SM100 MHA default (its topk 1 is declared later)
DFLASH_SM100_TOPK_ONE = ReleaseRule(
    "launch-dflash-sm100-mha-default",
    span("0.5.23"),
    "DFLASH without --speculative-eagle-topk gets the SM100 MHA default (trtllm_mha / fa4), not flashinfer",
    "sglang.srt.arg_groups.model_override_base._forces_eagle_topk_one (get_default_attn_backend)",
    topic="launch",
)


#: fa3 is the Hopper default for every MHA model; before, for the models on a list (others take flashinfer)
FA3_DEFAULT_ANY_MODEL = ReleaseRule(
    "launch-fa3-default-any-model",
    span("0.5.8"),
    "an MHA model on Hopper defaults to fa3 (before: only the architectures of is_fa3_default_architecture, "
    "the others flashinfer)",
    "sglang.srt.server_args.ServerArgs._get_default_attn_backend (0.5.7: utils.common.is_fa3_default_architecture)",
    topic="launch",
)


#: Qwen3-VL and the dense GLM-4V join the fa3-by-default list (0.5.6's has neither)
FA3_LIST_GROWN = ReleaseRule(
    "launch-fa3-list-grown",
    span("0.5.7"),
    "Qwen3-VL (dense and MoE) and GLM-4V are on is_fa3_default_architecture (before: flashinfer on Hopper)",
    "sglang.srt.utils.common.is_fa3_default_architecture",
    topic="launch",
)
#: an MHA model on SM100 defaults to trtllm_mha (fa4 where K and V head sizes differ); before, flashinfer
SM100_MHA_TRTLLM_DEFAULT = ReleaseRule(
    "launch-sm100-mha-trtllm-default",
    span("0.5.7"),
    "an MHA model on SM100 (no speculation, or top-k 1 given) defaults to trtllm_mha (before: flashinfer)",
    "sglang.srt.server_args.ServerArgs._handle_attention_backend_compatibility",
    topic="launch",
)


#: ``ServerArgs`` picks the default attention backend; before, it stays unset there and the ModelRunner picks one at
#: start-up (``model_specific_adjustment``), after the launch checks that read it (a paged EAGLE tree then needs a
#: given flashinfer)
BACKEND_DEFAULT_IN_SERVER_ARGS = ReleaseRule(
    "launch-backend-default-in-server-args",
    span("0.5.5"),
    "ServerArgs picks the default attention backend (before: it stays unset until the ModelRunner picks it, after the "
    "launch checks)",
    "sglang.srt.server_args.ServerArgs._handle_attention_backend_compatibility (0.5.4: "
    "model_executor.model_runner.ModelRunner.model_specific_adjustment)",
    topic="launch",
)
#: fa3 with an fp8_e5m2 KV cache falls back to triton; before, fa3 stays
FA3_E5M2_FALLBACK = ReleaseRule(
    "launch-fa3-e5m2-fallback",
    span("0.5.5"),
    "fa3 with kv_cache_dtype fp8_e5m2 falls back to triton (before: fa3 stays)",
    "sglang.srt.server_args.ServerArgs._handle_attention_backend_compatibility",
    topic="launch",
)


def generic_attention_backend(inp: LaunchInputs, res: ResolutionDraft) -> str:
    """SGLang's ``get_default_attn_backend`` with the *user* speculative topk (auto topk comes
    later)."""
    m, g, s = inp.model, inp.gpu, inp.settings
    if m.has_arch(_AUDIO_ENCODER_DECODER):
        return "flashinfer"
    spec, topk = s.speculative_algorithm is not None, s.speculative_eagle_topk
    # utils.common.is_no_spec_infer_or_topk_one: an unset topk passes at any page size.
    spec_ok = topk is None or (topk == 1 and res.page_size in (None, 1))
    if m.is_mla:
        if g.is_sm90:
            return "fa3"
        if g.is_sm100:
            return "flashinfer"
        if g.is_hip:
            # the HIP MLA rule's head count: total KV heads over attention TP (floored at 1).
            attn_tp = max(1, inp.tp_size // inp.attn_dp_size)
            return "aiter" if max(1, m.num_kv_heads // attn_tp) in (16, 128) else "triton"
        return "triton"
    fa3_list = FA3_DEFAULT_ARCHITECTURES_0_5_7
    if not FA3_LIST_GROWN.holds(inp.release):
        fa3_list = fa3_list - FA3_DEFAULT_ADDED_0_5_7
    listed = FA3_DEFAULT_ANY_MODEL.holds(inp.release) or inp.model.architectures[0] in fa3_list
    if g.is_sm90 and spec_ok and listed:
        return "fa3"
    dflash = (s.speculative_algorithm or "").upper() == "DFLASH" and DFLASH_SM100_TOPK_ONE.holds(inp.release)
    sm100_mha = SM100_MHA_TRTLLM_DEFAULT.holds(inp.release)
    if g.is_sm100 and sm100_mha and spec_ok and (not spec or topk is not None or dflash):
        return "fa4" if m.kv_head_dims_differ else "trtllm_mha"
    if g.is_hip:
        return "aiter"
    return "triton" if m.has_attention_sinks else "flashinfer"  # flashinfer assumed installed


def generic_backend_step(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """The generic backend (get_default_attn_backend): fill the backend, snap the page per backend
    (overrides._page_size_default), fa3+fp8_e5m2 fallback, HIP aiter x0.85 (memory_hook.handle_gpu_memory_settings
    (HIP aiter cut)), late prefill-graph disables (arg_groups.cuda_graph_hook)."""
    s = inp.settings
    if res.attention_backend is None and BACKEND_DEFAULT_IN_SERVER_ARGS.holds(inp.release):
        pre, dec = res.prefill_attention_backend, res.decode_attention_backend
        if pre is not None and pre == dec:
            _declare(res, "attention_backend", pre,
                     f"prefill == decode backend ({DEFAULT_BACKEND_HOOK.at(inp.release)})")  # fmt: skip
        else:
            _declare(res, "attention_backend", generic_attention_backend(inp, res),
                     f"generic default ({DEFAULT_BACKEND_HOOK.at(inp.release)})")  # fmt: skip
    if res.attention_backend == "fa3" and res.kv_cache_dtype == "fp8_e5m2" and FA3_E5M2_FALLBACK.holds(inp.release):
        _declare(res, "attention_backend", "triton",
                 f"fa3 does not take fp8_e5m2 KV ({DEFAULT_BACKEND_HOOK.at(inp.release)})")  # fmt: skip
    _page_snap(inp, res)
    _trtllm_mla_check(inp, res)
    ctx = s.context_length or inp.model.context_length
    if res.attention_backend == "aiter" and ctx > 8192 and res.mem_fraction_static is not None:
        honored = s.mem_fraction_static is not None and s.aiter_honor_explicit_mem_fraction
        # as SGLang's memory_hook.handle_gpu_memory_settings (HIP aiter cut) does: it also scales a user-given fraction
        if not honored:
            _declare(res, "mem_fraction_static", res.mem_fraction_static * 0.85,
                     f"HIP aiter with context {ctx} > 8192 ({GPU_MEMORY_HOOK.at(inp.release)})")  # fmt: skip
    prefill = res.prefill_attention_backend or res.attention_backend
    late_mla = LATE_TRTLLM_MLA_PREFILL_GRAPH_OFF.holds(inp.release) and inp.model.has_arch(_LATE_TRTLLM_MLA_PREFILL)
    late = (late_mla and prefill == "trtllm_mla") or prefill in (
        "torch_native",
        "flex_attention",
    )
    late_moe = res.prefill_cuda_graph == "tc_piecewise" and _trtllm_moe_runner(inp)
    if late_moe and PIECEWISE_OFF_FOR_TRTLLM_MOE.holds(inp.release):
        # ServerArgs._handle_moe_kernel_config runs after _handle_gpu_memory_settings: the reserve counted the graph
        _declare(res, "prefill_cuda_graph", "disabled", "flashinfer_trtllm MoE runner (bypassed top-k) "
                 "(sglang.srt.server_args.ServerArgs._handle_moe_kernel_config)")  # fmt: skip
    if late and res.prefill_cuda_graph != "disabled":
        # SGLang's order (ServerArgs.resolve_once): the reserve already counted this graph (1536 MiB for MLA).
        _declare(res, "prefill_cuda_graph", "disabled",
                 f"{prefill} prefill backend ({CUDA_GRAPH_HOOK.at(inp.release)})")  # fmt: skip


def _trtllm_moe_runner(inp: LaunchInputs) -> bool:
    """SGLang's SM100 model override picks the FlashInfer TRT-LLM MoE runner (no all-to-all backend; a 16-bit
    checkpoint only where the release's rule takes one: row fact ``sm100_trtllm_moe_unquantized``)."""
    quant = inp.model.sm100_trtllm_moe_quantization
    if not inp.gpu.is_sm100 or inp.settings.moe_a2a_backend != "none" or quant is None:
        return False
    # a release without the model's override, or whose override reads only a given --quantization (row facts
    # sm100_moe_override / sm100_moe_flag_only; the flag is not a launch input here)
    if inp.model.has_arch(names_holding("sm100_moe_flag_only", inp.release)):
        return False
    if not inp.model.has_arch(names_holding("sm100_moe_override", inp.release)):
        return False
    return quant != "none" or inp.model.has_arch(names_holding("sm100_trtllm_moe_unquantized", inp.release))


def _trtllm_mla_check(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """``trtllm_mla`` (as the backend or decode backend) needs Blackwell and an fp8_e4m3 / bf16 /
    auto KV cache (SGLang: ``arg_groups.overrides._mla_kv_cache_dtype_checks``)."""
    if "trtllm_mla" not in (res.attention_backend, res.decode_attention_backend):
        return
    check = "sglang.srt.arg_groups.overrides._mla_kv_cache_dtype_checks"
    if not inp.gpu.is_blackwell:
        raise _refuse(check, f"the trtllm_mla backend needs a Blackwell GPU (SM100/SM12x), not {inp.gpu.name}")
    if res.kv_cache_dtype not in ("fp8_e4m3", "bf16", "auto"):
        raise _refuse(check, f"the trtllm_mla backend takes kv_cache_dtype fp8_e4m3, bf16 or auto, not "
                      f"{res.kv_cache_dtype}")  # fmt: skip


def _page_snap(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """overrides._page_size_default backend page rules; they compare the current value, set or not."""
    main, pre, dec = res.attention_backend, res.prefill_attention_backend, res.decode_attention_backend
    any_phase, attn_or_decode = {main, pre, dec}, {main, dec}
    page, topk = res.page_size, inp.settings.speculative_eagle_topk
    new: int | None = None
    if "flashmla" in attn_or_decode or "hpc_ops" in any_phase:
        new = 64
    elif attn_or_decode & {"trtllm_mla"} or "cutedsl_mla" in any_phase:
        new = page if page in (32, 64) else 64
    elif "trtllm_mha" in any_phase:
        new = page if page in (16, 32, 64, 128) else 64
    elif "fa4" in any_phase and not inp.model.is_mla and inp.gpu.is_sm100 and (topk or 1) <= 1:
        new = 128
    if new is not None and new != page:
        _declare(res, "page_size", new, f"page rule of the {main} backend ({PAGE_SIZE_HOOK.at(inp.release)})")
