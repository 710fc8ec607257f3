"""Combination checks several strategies share (not a strategy; any strategy may import it)."""

from __future__ import annotations

from ..context import DeviceKind, KVCacheContext
from ..errors import UnsupportedConfigurationError

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
