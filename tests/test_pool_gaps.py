"""Pool formulas the golden cases of one release alone do not reach, by hand."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kvstrategies.pools.fp4 import fixed_fp4_cell_bytes
from kvstrategies.pools.runtime.dsa import packed_row_bytes, quantize_packed_latent


def test_the_fixed_fp4_cell_before_the_recipes() -> None:
    """SGLang 0.5.15-0.5.20 ``DefaultPoolConfigurator._compute_cell_size`` (sglang.srt.model_executor.
    pool_configurator), float4_e2m1fn_x2 KV (1 byte): ``cell = H (D + Dv) L // 2 + (H D L 2) // 16 + H D 2``."""
    # Llama-3.1-8B at TP 1: H 8, D = Dv 128, 32 layers: 8*256*32//2 + 8*128*32*2//16 + 8*128*2
    assert fixed_fp4_cell_bytes(8, 128, 128, 32) == 32_768 + 4_096 + 2_048 == 38_912
    # K wider than V (D 192, Dv 128), 2 heads, 3 layers: 2*320*3//2 + 2*192*3*2//16 + 2*192*2
    assert fixed_fp4_cell_bytes(2, 192, 128, 3) == 960 + 144 + 768 == 1_872
    # the scale term floors as a whole: 1*16*1*2 // 16 = 2, the packed term 1*(16+16)*1 // 2 = 16
    assert fixed_fp4_cell_bytes(1, 16, 16, 1) == 16 + 2 + 32 == 50


def test_a_packed_dsa_row_with_an_empty_batch_or_a_one_value_rope() -> None:
    """``DSATokenToKVPool.set_kv_buffer``'s packed FP8 row: ``r`` codes, ``r / 128`` fp32 scales,
    then the rope as bf16 bytes; an empty batch packs to ``(0, r + r/32)``, and a rope of one
    value adds its two bytes."""
    empty = quantize_packed_latent(torch.zeros(0, 1, 128), None)
    assert empty.shape == (0, 132) and empty.dtype == torch.uint8
    one = quantize_packed_latent(torch.zeros(1, 128), torch.ones(1, 1))
    assert one.shape == (1, packed_row_bytes(128, 1)) == (1, 134)
    assert one[0, 132:].tolist() == [0x80, 0x3F]  # bf16 1.0
    no_rope = quantize_packed_latent(torch.zeros(1, 128), torch.empty(0))  # an empty rope is no rope
    assert no_rope.shape == (1, 132)


def _typed(layout: object, kv: object) -> object:
    from kvstrategies.pools.binding import PoolBinding
    from kvstrategies.pools.build import build_pool
    from kvstrategies.pools.runtime import typed_pool

    return typed_pool(build_pool(layout, "cpu"), PoolBinding(start_layer=0, kv_dtype=kv))  # type: ignore[arg-type]


def test_fp4_mx_block16_dequantizes_every_head() -> None:
    """``MHATokenToKVPool`` FP4 (mx block 16) with two heads: each head's 16-value blocks keep
    their own exponent, and reading back reshapes ``(N, H x D/2)`` codes into ``(N, H, D)``."""
    from kvstrategies.dtypes import DType, KVRecipe
    from kvstrategies.pools.fp4 import FP4KVRecipe

    layout = FP4KVRecipe(KVRecipe.FP4_MX_BLOCK16).layout(size=16, page_size=16, head_num=2, head_dim=32, layer_num=1,
                                                         quant_page_size=16)  # fmt: skip
    pool: Any = _typed(layout, DType.FLOAT4_E2M1FN_X2)
    k = torch.zeros(1, 2, 32, dtype=torch.bfloat16)
    k[0, 0, 0], k[0, 1, 0], k[0, 1, 16] = 6.0, 3.0, 12.0  # head 1: exponents 0 (3 <= 6) and 1 (12 = 6 * 2)
    pool.set_kv_buffer(0, torch.tensor([5]), k, k)
    dk, dv = pool.dequantize_kv(0, torch.tensor([5]))
    assert dk.shape == dv.shape == (1, 2, 32)
    assert (dk[0, 0, 0].item(), dk[0, 1, 0].item(), dk[0, 1, 16].item()) == (6.0, 3.0, 12.0)


def test_mxfp8_prequantized_scales_are_one_per_32_values_of_every_head() -> None:
    """``MHATokenToKVPoolMXFP8.set_kv_buffer`` with float8 K/V takes e8m0 scales ``(N, H, D / 32)``:
    for one token of two heads and D = 64 that is 1 x 2 x 2 = 4 scales; fewer are refused."""
    from kvstrategies.dtypes import DType
    from kvstrategies.errors import KVCacheConfigError
    from kvstrategies.pools.mxfp8 import mxfp8_layout

    layout = mxfp8_layout(size=16, page_size=16, head_num=2, head_dim=64, v_head_dim=64, layer_num=1)
    pool: Any = _typed(layout, DType.FLOAT8_E4M3FN)
    q = torch.full((1, 2, 64), 1.5).to(torch.float8_e4m3fn)
    e = torch.tensor([[[127, 128], [129, 130]]], dtype=torch.uint8)
    pool.set_kv_buffer(0, torch.tensor([3]), q, q, e, e)
    dk, _ = pool.dequantize_kv(0, torch.tensor([3]))
    assert dk[0, :, ::32].tolist() == [[1.5, 3.0], [6.0, 12.0]]  # 1.5 * 2^(e - 127)
    with pytest.raises(KVCacheConfigError, match=r"must be a \(1, 2, 2\) tensor"):
        pool.set_kv_buffer(0, torch.tensor([3]), q, q, e[:, :1], e[:, :1])


def test_dsv4_physical_pages_before_and_from_0_5_21() -> None:
    """A paged DeepSeek-V4 buffer's rows (sglang.srt.mem_cache.deepseek_v4_memory_pool): up to 0.5.20
    ``DeepSeekV4SingleKVPool.__init__`` takes ``(size + p + 1) // p``; from 0.5.21
    ``_num_dsv4_physical_kv_pages`` takes ``ceil((size + P) / p)``, P the model-wide page."""
    from kvstrategies.pools.dsv4 import physical_pages

    assert physical_pages(1023, 256, 64, at_global_page=False) == (1023 + 64 + 1) // 64 == 17
    assert physical_pages(1022, 256, 64, at_global_page=False) == (1022 + 64 + 1) // 64 == 16
    assert physical_pages(1023, 256, 64, at_global_page=True) == -(-(1023 + 256) // 64) == 20
    assert physical_pages(1024, 256, 64, at_global_page=True) == (1024 + 256) // 64 == 20
