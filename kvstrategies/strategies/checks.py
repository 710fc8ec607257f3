"""Combination checks several strategies share (not a strategy; any strategy may import it)."""

from __future__ import annotations

from ..context import DeviceKind, KVCacheContext, is_hybrid_swa
from ..core.releases import VLLM, ReleaseRule, span
from ..errors import UnsupportedConfigurationError
from ..models.architectures import LinearAttention

#: a draft model without Mamba layers (Nemotron-H's MTP head) is plain attention to SGLang; before, its config still
#: made it Mamba-ish, so its attention KV sat in a HybridLinearKVPool
DRAFT_WITHOUT_STATE_PLAIN = ReleaseRule(
    "draft-without-state-plain",
    span("0.5.10"),
    "a Nemotron-H MTP draft without Mamba layers gets a plain MHA pool (before: a HybridLinearKVPool over the same "
    "buffers)",
    "sglang.srt.model_executor.model_runner.ModelRunner.mamba2_config (mtp_hybrid_override_pattern)",
)

#: Falcon-H1 is served with its Mamba state (0.5.3: ``FalconH1Config``, ``ModelRunner.is_hybrid_gdn``); before, SGLang
#: has no Falcon-H1 class and serves it through the Transformers backend: every layer attention KV, no state
FALCON_H1_MAMBA_POOLS = ReleaseRule(
    "falcon-h1-mamba-pools",
    span("0.5.3"),
    "Falcon-H1 keeps its Mamba state beside the attention KV (before: no Falcon-H1 class; the Transformers backend "
    "prices and builds every layer as attention KV, no state)",
    "sglang.srt.model_executor.model_runner.ModelRunner.is_hybrid_gdn (FalconH1ForCausalLM)",
)


def is_vllm(ctx: KVCacheContext) -> bool:
    """A vLLM context (only the vLLM strategies size it)."""
    return ctx.release.engine == VLLM


def uses_dsv4_pools(ctx: KVCacheContext) -> bool:
    """SGLang's first selection rule: a DeepSeek-V4 model with hybrid SWA memory on."""
    return ctx.geometry.dsv4 is not None and not ctx.scheduling.disable_hybrid_swa_memory


def uses_mamba_pools(ctx: KVCacheContext) -> bool:
    """A Mamba-ish model sized by HybridLinearPoolConfigurator (create_memory_pool_configurator)."""
    # a Mamba-ish model that is also hybrid SWA (Inkling) goes to HybridSWA (create_memory_pool_configurator)
    # a draft without Mamba layers (Nemotron-H's MTP head) is a plain attention model to SGLang
    # a model SGLang serves only through its generic fallback (Jamba) is not Mamba-ish to SGLang: every
    # layer gets attention KV, no state (DefaultPoolConfigurator, ModelConfig.mambaish_config None)
    mamba = ctx.geometry.mamba
    plain_draft = ctx.is_draft_worker and mamba is not None and mamba.draft_without_state
    if mamba is None or mamba.sglang_generic_fallback or (plain_draft and DRAFT_WITHOUT_STATE_PLAIN.holds(ctx.release)):
        return False
    if mamba.family == LinearAttention.FALCON_H1.value and not FALCON_H1_MAMBA_POOLS.holds(ctx.release):
        return False  # 0.5.2: the Transformers backend, as Jamba
    return not is_hybrid_swa(ctx)


def is_ascend_device(ctx: KVCacheContext) -> bool:
    """The Ascend NPU pools apply (KVCacheConfigurator._build_token_to_kv_pool: ``ascend`` rows; allocators rows
    1-2)."""
    return ctx.device is DeviceKind.NPU


#: devices where SGLang's FP4 KV branches run (``is_float4_e2m1fn_x2`` is CUDA-only,
#: DefaultPoolConfigurator._compute_cell_size, is_float4_e2m1fn_x2)
FP4_DEVICES = (DeviceKind.CUDA, DeviceKind.META)


def reject_fp4(ctx: KVCacheContext, family: str) -> None:
    """Raise for an FP4 KV cache (``nvfp4`` / ``fp4_mx_block16``) on ``family``: its SGLang builder passes no
    quant method, so the pool would hold float4 buffers without scales.

    SGLang's hybrid-SWA and MiniMax-sparse builders pass no FP4 quant method, so such a pool would
    hold float4 buffers without scales while sizing priced one byte per value: rejected.
    """
    kv = ctx.kv_cache_dtype
    if kv.is_fp4:
        raise UnsupportedConfigurationError(
            f"kv_cache_dtype {kv.name!r} (FP4) is not supported with {family}: SGLang builds these pools "
            "without FP4 scales; use 'fp8_e4m3' or 'bf16'"
        )


def require_fp4_device(ctx: KVCacheContext) -> None:
    """FP4 KV only on CUDA: elsewhere SGLang skips every FP4 branch and its pools are undefined.

    Decision (SGLang has no FP4 pool off CUDA): rather than size float4 as one byte per value with no scales
    (what SGLang's sizing does off CUDA), reject the combination.
    """
    kv = ctx.kv_cache_dtype
    if kv.is_fp4 and ctx.device not in FP4_DEVICES:
        raise UnsupportedConfigurationError(
            f"kv_cache_dtype {kv.name!r} (FP4) is only supported on CUDA, not on {ctx.device.value}; "
            "use 'fp8_e4m3' or 'bf16'"
        )
