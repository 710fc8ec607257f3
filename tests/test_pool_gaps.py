"""Pool formulas the golden cases of one release alone do not reach, by hand."""

from __future__ import annotations

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
