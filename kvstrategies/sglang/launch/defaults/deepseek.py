"""DSA (DeepSeek-V3-style with ``index_topk``) and DeepSeek-V4: backends, KV dtype, page.

Mirrors ``sglang.srt.arg_groups.model_overrides.deepseek_v2._deepseek_family_overrides`` and
``deepseek_v2._dsa_dcp_overrides`` (the ``dsa`` backend, its split prefill/decode backends, the
DSA KV dtype, the forced page ``64 * index_kpool``, DCP) and
``arg_groups.deepseek_v4_hook.apply_deepseek_v4_defaults`` (``dsv4``, page 256, fp8_e4m3, the
0.1 SWA ratio, 256 requests, the speculative check).
"""

from __future__ import annotations

from ....core.releases import ByRelease, EngineRelease, ReleaseRule, span
from ....errors import KVCacheConfigError
from ....models.architectures import model_type_row
from .core import (
    DSA_BACKENDS_HOOK,
    KV_DTYPE_HOOK,
    MODEL_OVERRIDES_HOOK,
    OVERRIDES_HOOK,
    PAGE_SIZE_HOOK,
    SPECULATIVE_HOOK,
    LaunchInputs,
    ResolutionDraft,
    _declare,
    _no_backend_flags,
    _refuse,
)

#: DSA with --dcp-size > 1: both DSA backends trtllm, and the DCP refusals (PD, topk, index_kpool)
DSA_DCP_OVERRIDES = ReleaseRule(
    "launch-dsa-dcp-overrides",
    span("0.5.22"),
    "DSA with --dcp-size > 1 forces the trtllm DSA backends and refuses PD, topk > 1 and a pooled index key",
    "sglang.srt.arg_groups.model_overrides.deepseek_v2._dsa_dcp_overrides",
    topic="launch",
)
#: the DSA page owns a whole pooled index group: ``64 * index_kpool`` (before: 64, no pooling)
DSA_INDEX_KPOOL_PAGE = ReleaseRule(
    "launch-dsa-index-kpool-page",
    span("0.5.22"),
    "the forced DSA page is 64 * index_kpool (before: 64)",
    "sglang.srt.arg_groups.model_overrides.deepseek_v2._deepseek_family_overrides (get_dsa_index_kpool)",
    topic="launch",
)
#: ``ServerArgs.dsv4_attn_backend`` exists (default ``auto``); before, there is no such setting
DSV4_ATTN_BACKEND_FIELD = ReleaseRule(
    "launch-dsv4-attn-backend-field",
    span("0.5.20"),
    "the --dsv4-attn-backend server argument exists (default auto)",
    "sglang.srt.arg_groups.fields (dsv4_attn_backend)",
    topic="launch",
)
#: the DeepSeek-V4 hook resolves ``dsv4_attn_backend=auto`` to flashmla (flashmla_mega for V4.1);
#: before, ``auto`` stays and the backend picks at model load
DSV4_AUTO_ATTN_BACKEND = ReleaseRule(
    "launch-dsv4-auto-attn-backend",
    span("0.5.23"),
    "DeepSeek-V4 resolves dsv4_attn_backend auto -> flashmla at launch (before: auto stays)",
    "sglang.srt.arg_groups.deepseek_v4_hook._default_dsv4_attention_backend",
    topic="launch",
)


#: a DSA model's ``auto`` KV dtype resolves by SM and only bfloat16 / fp8_e4m3 are accepted; before, SM 10+ forces
#: fp8_e4m3 over any value and below SM 10 the value stays as given, unchecked
DSA_KV_DTYPE_RESOLVED = ReleaseRule(
    "launch-dsa-kv-dtype-resolved",
    span("0.5.5"),
    "a DSA model's kv_cache_dtype auto becomes fp8_e4m3 (SM 10+) or bfloat16, and only those two are accepted "
    "(before: SM 10+ forces fp8_e4m3 over any value; below, the value stays as given, auto included, unchecked; "
    "fp8 takes flashmla_kv for prefill and decode)",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (DeepSeek NSA)",
    topic="launch",
)


def _dsa_kv_dtype(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """arg_groups.overrides kv_cache_dtype defaults: DSA ``auto`` -> fp8_e4m3 on CUDA major >= 10, bfloat16 on older
    CUDA; only bfloat16/fp8_e4m3 accepted. HIP keeps ``auto`` (not specified; library decision). Up to 0.5.4
    (:data:`DSA_KV_DTYPE_RESOLVED`): CUDA SM 10+ forces fp8_e4m3, otherwise nothing changes."""
    if not DSA_KV_DTYPE_RESOLVED.holds(inp.release):
        if inp.gpu.is_cuda and (inp.gpu.sm_major or 0) >= 10:
            _declare(res, "kv_cache_dtype", "fp8_e4m3", "DSA on SM 10+ (sglang.srt.server_args.ServerArgs."
                     "_handle_model_specific_adjustments)")  # fmt: skip
        return
    kv, gpu = res.kv_cache_dtype.lower(), inp.gpu
    if kv == "bf16":
        kv = "bfloat16"
        _declare(res, "kv_cache_dtype", kv, f"DSA normalises bf16 ({KV_DTYPE_HOOK.at(inp.release)})")
    if kv == "auto" and gpu.is_cuda:
        major = gpu.sm_major or 0
        value = "fp8_e4m3" if major >= 10 else "bfloat16"
        _declare(res, "kv_cache_dtype", value, f"DSA on CUDA SM major {major} ({KV_DTYPE_HOOK.at(inp.release)})")
        return
    if kv not in ("auto", "bfloat16", "fp8_e4m3"):
        raise KVCacheConfigError(f"DSA models accept kv_cache_dtype bfloat16 or fp8_e4m3, got {kv!r}")


#: the DSA prefill backend for an fp8 KV cache below SM 10 (0.5.10: ``flashmla_auto``, which dispatches at run time)
DSA_HOPPER_FP8_PREFILL: ByRelease[str] = ByRelease(
    "launch-dsa-hopper-fp8-prefill",
    (("0.5.1", "flashmla_auto"), ("0.5.11", "flashmla_kv")),
    "the DSA prefill backend for an fp8_e4m3 KV cache below SM 10",
    "sglang.srt.server_args.ServerArgs._set_default_nsa_backends",
)


#: an fp8 DSA KV cache on SM 10+ takes trtllm for both; before, the Hopper pair on every SM
DSA_FP8_TRTLLM_ON_SM100 = ReleaseRule(
    "launch-dsa-fp8-trtllm-on-sm100",
    span("0.5.10"),
    "an fp8_e4m3 DSA KV cache on SM 10+ takes trtllm prefill and decode (before: flashmla_auto / flashmla_kv on "
    "every SM)",
    "sglang.srt.server_args.ServerArgs._set_default_nsa_backends",
    topic="launch",
)


#: the DSA backend fields default to unset (filled per model); before, to flashmla_sparse / fa3 for every model
#: (0.5.3: ``nsa_prefill`` / ``nsa_decode``, flashmla_prefill / fa3)
DSA_BACKEND_FIELD_DEFAULTS: ByRelease[tuple[str | None, str | None]] = ByRelease(
    "launch-dsa-backend-field-defaults",
    (("0.5.1", ("flashmla_prefill", "fa3")), ("0.5.4", ("flashmla_sparse", "fa3")), ("0.5.9", (None, None))),
    "the (prefill, decode) DSA backend fields' defaults",
    "sglang.srt.server_args.ServerArgs.nsa_prefill_backend / nsa_decode_backend",
    topic="launch",
)


#: the backend an fp8 DSA KV cache forces on both DSA fields before they are resolved per GPU
DSA_FP8_FORCED_BACKEND: ByRelease[str] = ByRelease(
    "launch-dsa-fp8-forced-backend",
    (("0.5.1", "flashmla_decode"), ("0.5.4", "flashmla_kv")),
    "the (prefill and decode) DSA backend an fp8_e4m3 KV cache forces",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (DeepSeek NSA)",
    topic="launch",
)
#: a DSA model keeps the memory fraction of the memory step; before, it is forced to 0.8 (a given one too)
DSA_KEEPS_MEM_FRACTION = ReleaseRule(
    "launch-dsa-keeps-mem-fraction",
    span("0.5.4"),
    "a DSA model keeps mem_fraction_static (before: forced to 0.8, over a given --mem-fraction-static too)",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (DeepSeek NSA)",
    topic="launch",
)


#: ServerArgs has the DSA (NSA) backend fields (0.5.3: ``nsa_prefill`` / ``nsa_decode``); before, no DSA at all
DSA_BACKEND_FIELDS = ReleaseRule(
    "launch-dsa-backend-fields",
    span("0.5.3"),
    "ServerArgs has the DSA backend fields (0.5.3: --nsa-prefill / --nsa-decode; before: none, no DSA model loads)",
    "sglang.srt.server_args.ServerArgs.nsa_prefill / nsa_decode",
    topic="launch",
)


def dsa_backend_field_defaults(release: EngineRelease) -> tuple[str | None, str | None]:
    """The (prefill, decode) DSA backend fields before any model override: :data:`DSA_BACKEND_FIELD_DEFAULTS` where
    the release has the fields (:data:`DSA_BACKEND_FIELDS`), else unset."""
    return DSA_BACKEND_FIELD_DEFAULTS.at(release) if DSA_BACKEND_FIELDS.holds(release) else (None, None)


def _dsa_backends(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """arg_groups.overrides: DSA split (prefill, decode) backends by KV dtype and SM major; up to 0.5.8 the
    fields keep their defaults (:data:`DSA_BACKEND_FIELD_DEFAULTS`) except that fp8 forces flashmla_auto /
    flashmla_kv and bf16 on SM 10+ flashmla_sparse for both (``_handle_model_specific_adjustments``)."""
    gpu = inp.gpu
    fp8, sm10 = res.kv_cache_dtype == "fp8_e4m3", (gpu.sm_major or 0) >= 10
    if DSA_BACKEND_FIELD_DEFAULTS.at(inp.release) != (None, None) and gpu.is_cuda:
        bf16_sm10 = ("flashmla_sparse", "flashmla_sparse") if DSA_KV_DTYPE_RESOLVED.holds(inp.release) else None
        resolved = DSA_KV_DTYPE_RESOLVED.holds(inp.release)  # 0.5.4: flashmla_kv for both (0.5.3: flashmla_decode)
        forced_fp8 = DSA_FP8_FORCED_BACKEND.at(inp.release)
        fp8_pair = (DSA_HOPPER_FP8_PREFILL.at(inp.release) if resolved else forced_fp8, forced_fp8)
        forced = fp8_pair if fp8 else bf16_sm10 if sm10 else None
        if forced is not None:
            why = f"DSA {res.kv_cache_dtype} (sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments)"
            prefill, decode = forced
            _declare(res, "dsa_prefill_backend", prefill, why)
            _declare(res, "dsa_decode_backend", decode, why)
        return
    if gpu.is_hip:
        pair = ("triton", "triton")
    elif not gpu.is_cuda:
        return
    else:
        hopper_fp8 = (DSA_HOPPER_FP8_PREFILL.at(inp.release), "flashmla_kv")
        sm100_fp8 = ("trtllm", "trtllm") if DSA_FP8_TRTLLM_ON_SM100.holds(inp.release) else hopper_fp8
        pair = {(True, True): sm100_fp8, (True, False): hopper_fp8,
                (False, True): ("flashmla_sparse", "trtllm"),
                (False, False): ("flashmla_sparse", "fa3")}[(fp8, sm10)]  # fmt: skip
    why = f"DSA split backends for {res.kv_cache_dtype} ({DSA_BACKENDS_HOOK.at(inp.release)})"
    if res.dsa_prefill_backend is None:  # one set earlier (DCP) stays
        _declare(res, "dsa_prefill_backend", pair[0], why)
    if res.dsa_decode_backend is None:
        _declare(res, "dsa_decode_backend", pair[1], why)


def _dsa_dcp(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """DSA with ``--dcp-size > 1``: both DSA backends ``trtllm`` on any CUDA GPU (Hopper too);
    refused with PD disaggregation, a user topk other than 1, or a pooled index key
    (``index_kpool > 1``) (SGLang: ``arg_groups.model_overrides.deepseek_v2._dsa_dcp_overrides``
    and ``_deepseek_family_overrides``)."""
    if inp.dcp_size <= 1 or not DSA_DCP_OVERRIDES.holds(inp.release):
        return
    s, check = inp.settings, "sglang.srt.arg_groups.model_overrides.deepseek_v2._dsa_dcp_overrides"
    if s.disaggregation_mode != "null":
        raise _refuse(check, "DSA DCP does not support PD disaggregation")
    if s.speculative_eagle_topk not in (None, 1):
        raise _refuse(check, "DSA DCP requires --speculative-eagle-topk 1")
    if inp.gpu.is_cuda and inp.model.index_kpool > 1:
        raise _refuse("sglang.srt.arg_groups.model_overrides.deepseek_v2._deepseek_family_overrides",
                      f"--dcp-size > 1 is not supported for DSA with index_kpool={inp.model.index_kpool}")  # fmt: skip
    why = f"DSA with dcp_size {inp.dcp_size} forces trtllm"
    _declare(res, "dsa_prefill_backend", "trtllm", why)
    _declare(res, "dsa_decode_backend", "trtllm", why)


#: the attention backend a DSA model gets (SGLang's native sparse attention, ``nsa`` up to 0.5.12)
DSA_BACKEND_NAME: ByRelease[str] = ByRelease(
    "launch-dsa-backend-name",
    (("0.5.1", "nsa"), ("0.5.13", "dsa")),
    "the attention backend SGLang picks for a DSA model",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (DeepSeek family)",
)


#: a DSA model's forced DP attention keeps the given DP size (1: TP attention); before, it sets dp_size = tp_size
DSA_DP_AS_GIVEN = ReleaseRule(
    "launch-dsa-dp-as-given",
    span("0.5.6"),
    "a DSA model's forced DP attention keeps the given dp_size (before: dp_size = tp_size, so chunked_prefill_size, "
    "the request pool and every attention layer are per DP rank)",
    "sglang.srt.server_args.ServerArgs._handle_model_specific_adjustments (DeepSeek NSA)",
    topic="launch",
)


def dsa_override(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """DSA model override (DeepSeek family with ``index_topk``): backend ``dsa``, KV dtype, page
    ``64 * index_kpool`` **forced** on CUDA (1 on ROCm without the preshuffle path)."""
    if not inp.model.is_dsa:
        return
    _dsa_dcp(inp, res)
    if not inp.gpu.is_npu and not DSA_DP_AS_GIVEN.holds(inp.release) and inp.attn_dp_size != inp.tp_size:
        _declare(res, "attn_dp_size", inp.tp_size, "DP attention is enabled for DeepSeek NSA with dp_size = tp_size "
                 f"({MODEL_OVERRIDES_HOOK.at(inp.release)})")  # fmt: skip
    backend = DSA_BACKEND_NAME.at(inp.release)
    if _no_backend_flags(inp.settings) and not inp.gpu.is_npu:
        _declare(res, "attention_backend", backend, f"DSA model override ({MODEL_OVERRIDES_HOOK.at(inp.release)})")
    if not inp.gpu.is_npu:
        _dsa_kv_dtype(inp, res)
    if not inp.gpu.is_npu and not DSA_KEEPS_MEM_FRACTION.holds(inp.release):
        _declare(res, "mem_fraction_static", 0.8, f"DSA forces 0.8 ({MODEL_OVERRIDES_HOOK.at(inp.release)})")
    if res.attention_backend == backend:
        _dsa_backends(inp, res)
    if inp.gpu.is_cuda:
        kpool = inp.model.index_kpool if DSA_INDEX_KPOOL_PAGE.holds(inp.release) else 1
        _declare(res, "page_size", 64 * kpool, f"DSA forces 64 * index_kpool ({PAGE_SIZE_HOOK.at(inp.release)})")
    elif inp.gpu.is_hip:
        _declare(res, "page_size", 1,
                 f"DSA on ROCm without preshuffle paged-MQA ({PAGE_SIZE_HOOK.at(inp.release)})")  # fmt: skip


def dsv4_override(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """DeepSeek-V4 model override: backend ``dsv4`` and page 256 (NPU 128) **forced**, KV fp8_e4m3
    (NPU forced bfloat16), ``swa_full_tokens_ratio`` 0.1 (not V4.1) and 256 requests."""
    if not inp.model.is_dsv4:
        return
    npu = inp.gpu.is_npu
    _declare(res, "attention_backend", "dsv4",
             f"DeepSeek-V4 forces dsv4 ({MODEL_OVERRIDES_HOOK.at(inp.release)})")  # fmt: skip
    if npu:
        _declare(res, "prefill_attention_backend", "dsv4",
                 f"DeepSeek-V4 on NPU ({MODEL_OVERRIDES_HOOK.at(inp.release)})")  # fmt: skip
        _declare(res, "decode_attention_backend", "dsv4",
                 f"DeepSeek-V4 on NPU ({MODEL_OVERRIDES_HOOK.at(inp.release)})")  # fmt: skip
    elif DSV4_AUTO_ATTN_BACKEND.holds(inp.release):
        _declare(res, "dsv4_attn_backend", "flashmla", "DeepSeek-V4 (flashmla_mega only V4.1)")
    _declare(res, "page_size", 128 if npu else 256,
             f"DeepSeek-V4 forces the page ({PAGE_SIZE_HOOK.at(inp.release)})")  # fmt: skip
    kv = res.kv_cache_dtype.lower()
    if npu:
        _declare(res, "kv_cache_dtype", "bfloat16",
                 f"DeepSeek-V4 on NPU forces bfloat16 ({KV_DTYPE_HOOK.at(inp.release)})")  # fmt: skip
    elif kv == "auto":
        _declare(res, "kv_cache_dtype", "fp8_e4m3",
                 f"DeepSeek-V4 auto -> fp8_e4m3 ({KV_DTYPE_HOOK.at(inp.release)})")  # fmt: skip
    elif kv not in ("bfloat16", "bf16", "fp8_e4m3"):
        raise KVCacheConfigError(f"DeepSeek-V4 accepts kv_cache_dtype fp8_e4m3 or bfloat16, got {kv!r}")
    if res.swa_full_tokens_ratio is None and model_type_row(inp.model.model_type).dsv4_swa_ratio_override:
        _declare(res, "swa_full_tokens_ratio", 0.1,
                 f"DeepSeek-V4 model override ({OVERRIDES_HOOK.at(inp.release)})")  # fmt: skip
    if res.max_running_requests is None:
        _declare(res, "max_running_requests", 256,
                 f"DeepSeek-V4 model override ({SPECULATIVE_HOOK.at(inp.release)})")  # fmt: skip
    _dsv4_speculative_check(inp)


def _dsv4_speculative_check(inp: LaunchInputs) -> None:
    """DeepSeek-V4 takes EAGLE with an explicit ``--speculative-eagle-topk 1`` or DSPARK, checked
    on the raw flags before any speculative default (SGLang:
    ``arg_groups.deepseek_v4_hook.apply_deepseek_v4_defaults``)."""
    algo, topk = inp.settings.speculative_algorithm, inp.settings.speculative_eagle_topk
    check = "sglang.srt.arg_groups.deepseek_v4_hook.apply_deepseek_v4_defaults"
    if algo is not None and algo not in ("EAGLE", "DSPARK"):
        raise _refuse(check, f"DeepSeek-V4 supports only the EAGLE and DSPARK speculative algorithms, got {algo}")
    if algo == "EAGLE" and topk != 1:
        raise _refuse(check, f"DeepSeek-V4 with EAGLE needs an explicit --speculative-eagle-topk 1 (got {topk})")
