"""``calculate_mla_kv_cache_dim`` as a function of the context.

Shared by every strategy that prices or builds an MLA latent row (the hybrid MLA-SWA pool uses
it for its full side).
"""

from __future__ import annotations

from ..context import DeviceKind, DisaggregationMode, KVCacheContext
from ..core.dtypes import DType
from ..errors import KVCacheConfigError


def dsa_uses_raw_layout(ctx: KVCacheContext) -> bool:
    """The local role's DSA backend keeps the raw ``rank + rope`` row (TRT-LLM, HIP, TileLang)."""
    backends = ctx.backends
    pair = (backends.dsa_prefill_backend, backends.dsa_decode_backend)
    mode = ctx.scheduling.disaggregation_mode
    if mode is DisaggregationMode.DECODE:
        trtllm = backends.dsa_decode_backend == "trtllm"
    elif mode is DisaggregationMode.PREFILL:
        trtllm = backends.dsa_prefill_backend == "trtllm"
    else:
        trtllm = "trtllm" in pair
    hip_raw = ctx.device is DeviceKind.HIP and any(b in ("tilelang", "triton", "aiter") for b in pair)
    return trtllm or hip_raw or pair == ("tilelang", "tilelang")


def calculate_mla_kv_cache_dim(ctx: KVCacheContext) -> int:
    """Elements of one latent row: ``rank + rope`` (576 for DeepSeek), or the packed FP8 DSA row.

    DSA with ``float8_e4m3fn`` and a FlashMLA-style backend packs ``rank + rank // 128 * 4 +
    rope * 2`` = 656 bytes (fp8 latent, fp32 scale per 128 values, bf16 rope).
    """
    mla = ctx.geometry.mla
    if mla is None:
        raise KVCacheConfigError("calculate_mla_kv_cache_dim needs an MLA model (kv_lora_rank, qk_rope_head_dim)")
    raw = mla.latent_dim
    if ctx.geometry.dsa is None or dsa_uses_raw_layout(ctx) or ctx.kv_cache_dtype.dtype is not DType.FLOAT8_E4M3FN:
        return raw
    if mla.kv_lora_rank % 128:
        raise KVCacheConfigError(
            f"kv_lora_rank {mla.kv_lora_rank} must be a multiple of 128 for the packed FP8 DSA layout; "
            "use a bf16 KV cache or a trtllm DSA backend"
        )
    return mla.kv_lora_rank + (mla.kv_lora_rank // 128) * 4 + mla.qk_rope_head_dim * 2
