"""Typed pools: storing K/V and reading it back (write_path.md), the request pool contract
(ReqToTokenPool) and the allocator choice (KVCacheConfigurator._build_token_to_kv_pool_allocator), on CPU with tiny
shapes.

Expectations are either literals worked out by hand (fp8 / fp4 / packed bytes) or the input
itself (bit-exact round trips). ``TestForcedTriton`` repeats the stores with ``use_triton=True``
under ``TRITON_INTERPRET=1`` and checks the bytes equal the torch reference path.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from kvstrategies import build, plan
from kvstrategies.allocators.common import AllocatorMisuseError
from kvstrategies.context import DeviceKind, DisaggregationMode
from kvstrategies.core.dtypes import DType, KVRecipe
from kvstrategies.core.sizing import PoolSizes
from kvstrategies.errors import (
    KVCacheConfigError,
    UnsupportedConfigurationError,
)
from kvstrategies.kernels import reference as R
from kvstrategies.kernels import triton_available
from kvstrategies.models.minimax import MiniMaxLocalLayers
from kvstrategies.pools.ascend import npu_mha_layout
from kvstrategies.pools.basic import mha_layout, mla_layout, req_to_token_layout
from kvstrategies.pools.binding import AllocatorKind, AllocatorSpec, PoolBinding, select_allocator_spec
from kvstrategies.pools.build import BuiltPool, build_pool
from kvstrategies.pools.dsa import DSAIndexGeometry, dsa_layout
from kvstrategies.pools.fp4 import FP4KVRecipe, mla_fp4_layout
from kvstrategies.pools.mamba import hybrid_linear_kv_layout, hybrid_req_to_token_layout, mamba_pool_layout
from kvstrategies.pools.minimax import minimax_sparse_layout
from kvstrategies.pools.mxfp8 import mxfp8_layout
from kvstrategies.pools.runtime import (
    DSATokenToKVPool,
    HybridReqToTokenPool,
    KVWriteLoc,
    MambaPool,
    MHATokenToKVPool,
    ReadOnlyKVPool,
    ReqToTokenPool,
    SWAKVPool,
    make_allocator,
    typed_pool,
)
from kvstrategies.pools.runtime.dsa import packed_row_bytes, quantize_packed_latent
from kvstrategies.pools.swa import swa_kv_pool_layout
from tests.helpers import buffer_shapes

from ..helpers import GIB, case_settings

BF16 = DType.BFLOAT16


def binding(kv: DType = BF16, start: int = 0, **fields: Any) -> PoolBinding:
    return PoolBinding(start_layer=start, kv_dtype=kv, **fields)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape: int, dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=gen(seed)).to(dtype)


def mha_pool(kv: DType = BF16, *, start: int = 0, v_head_dim: int = 8, **options: Any) -> MHATokenToKVPool:
    """T = 30, P = 2, H = 2, D = 8, L = 3 (rows 32)."""
    store = kv.kv_store_dtype
    layout = mha_layout(size=30, page_size=2, head_num=2, head_dim=8, v_head_dim=v_head_dim, layer_num=3,
                        store_dtype=store)  # fmt: skip
    pool = typed_pool(build_pool(layout, "cpu"), binding(kv, start), **options)
    assert isinstance(pool, MHATokenToKVPool)
    return pool


LOC = torch.tensor([7, 0, 31, 3, 12], dtype=torch.int64)  # includes the padding slot 0 and the last row


# ---- MHA (MHATokenToKVPool.set_kv_buffer) ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("v_head_dim", [8, 4])
def test_mha_round_trip_is_bit_exact_and_skips_slot_0(dtype: torch.dtype, v_head_dim: int) -> None:
    kv = DType.BFLOAT16 if dtype == torch.bfloat16 else DType.FLOAT16
    pool = mha_pool(kv, start=4, v_head_dim=v_head_dim)
    k, v = randn(5, 2, 8, dtype=dtype), randn(5, 2, v_head_dim, dtype=dtype, seed=1)
    pool.set_kv_buffer(5, LOC, k, v)
    keys, values = pool.get_kv_buffer(5)
    written = LOC != 0
    assert torch.equal(keys[LOC[written]], k[written]) and torch.equal(values[LOC[written]], v[written])
    assert not keys[0].any() and not values[0].any()  # location 0 is the padding sink: not written
    for other in (4, 6):
        assert not pool.get_key_buffer(other).any() and not pool.get_value_buffer(other).any()
    assert pool.get_key_buffer(5).shape == (32, 2, 8) and pool.get_value_buffer(5).shape == (32, 2, v_head_dim)


def test_mha_getters_share_the_fused_storage() -> None:
    pool = mha_pool()
    assert pool.get_key_buffer(0).data_ptr() == pool["kv_storage[0]"].data_ptr()
    assert pool["k_buffer[1]"] is pool.k_buffer[1]  # still a BuiltPool: tensors by name


def test_mha_fp8_e4m3_stores_the_scaled_cast_as_bytes() -> None:
    pool = mha_pool(DType.FLOAT8_E4M3FN)
    assert pool["k_buffer[0]"].dtype == torch.uint8 and pool.get_key_buffer(0).dtype == torch.float8_e4m3fn
    k = torch.zeros(2, 2, 8, dtype=torch.bfloat16)
    k[0, 0, :3] = torch.tensor([3.0, -1000.0, 0.25])
    v = torch.full((2, 2, 8), 2.0, dtype=torch.bfloat16)
    pool.set_kv_buffer(0, torch.tensor([5, 6]), k, v, k_scale=2.0, v_scale=0.5)
    stored = pool["k_buffer[0]"][5, 0, :3].tolist()
    # 3/2 = 1.5 -> 0x3C; -1000/2 = -500 saturates to -448 -> 0xFE (pinned); 0.125 -> 0x20
    assert stored == [0x3C, 0xFE, 0x20]
    assert pool["v_buffer[0]"][6, 1, 0].item() == 0x48  # 2 / 0.5 = 4.0 = 0 1001 000
    assert pool.get_value_buffer(0)[6].float().unique().tolist() == [4.0]


def test_mha_fp8_e5m2_without_scale_is_a_plain_cast() -> None:
    pool = mha_pool(DType.FLOAT8_E5M2)
    k = randn(3, 2, 8)
    pool.set_kv_buffer(1, torch.tensor([1, 2, 3]), k, k)
    assert torch.equal(pool.get_key_buffer(1)[1:4].view(torch.uint8), k.to(torch.float8_e5m2).view(torch.uint8))


def test_mha_move_kv_cache_copies_every_layer() -> None:
    pool = mha_pool()
    src, dst = torch.tensor([3, 4, 5]), torch.tensor([20, 21, 22])
    for layer in range(3):
        pool.set_kv_buffer(layer, src, randn(3, 2, 8, seed=layer), randn(3, 2, 8, seed=10 + layer))
    pool.move_kv_cache(dst, src)
    for layer in range(3):
        assert torch.equal(pool.get_key_buffer(layer)[dst], pool.get_key_buffer(layer)[src])
        assert torch.equal(pool.get_value_buffer(layer)[dst], pool.get_value_buffer(layer)[src])
        assert pool.get_key_buffer(layer)[dst].any()


def test_mha_dcp_kv_mask_writes_only_masked_rows() -> None:
    pool = mha_pool()
    k = randn(3, 2, 8)
    pool.set_kv_buffer(0, torch.tensor([1, 2, 3]), k, k, dcp_kv_mask=torch.tensor([1, 0, 1]))
    assert pool.get_key_buffer(0)[1].any() and not pool.get_key_buffer(0)[2].any() and pool.get_key_buffer(0)[3].any()


def test_mha_bad_inputs_raise_config_errors() -> None:
    pool = mha_pool(start=4)
    k = randn(2, 2, 8)
    with pytest.raises(KVCacheConfigError, match="layer_id 3 is not held"):
        pool.set_kv_buffer(3, torch.tensor([1, 2]), k, k)
    with pytest.raises(KVCacheConfigError, match=r"rows \[0, 32\)"):
        pool.set_kv_buffer(4, torch.tensor([1, 32]), k, k)
    with pytest.raises(KVCacheConfigError, match="cache_v has shape"):
        pool.set_kv_buffer(4, torch.tensor([1, 2]), k, randn(2, 2, 4))
    with pytest.raises(KVCacheConfigError, match="int64"):
        pool.set_kv_buffer(4, torch.tensor([1.0, 2.0]), k, k)


# ---- MXFP8 (MHATokenToKVPoolMXFP8.set_kv_buffer) and FP4 recipes (MHATokenToKVPool quant_method) ---------------------


def test_mxfp8_interleaved_store_positions_and_dequantization() -> None:
    layout = mxfp8_layout(size=128, page_size=128, head_num=2, head_dim=64, v_head_dim=32, layer_num=2)
    pool = typed_pool(build_pool(layout, "cpu"), binding(DType.FLOAT8_E4M3FN))
    loc = torch.tensor([0, 130, 37])
    k, v = randn(3, 2, 64), randn(3, 2, 32, seed=1)
    k[1, 1, 32:] = 0.0  # a zero block: amax floor 1e-30 -> E = ceil(log2(1e-30 / 448)) + 127 = -108 + 127 = 19
    pool.set_kv_buffer(1, loc, k, v)
    q, e = R.quantize_mxfp8(k)
    scales = pool["k_scale_buffer[1]"].view(torch.uint8)
    # loc 130 is page 1, offset t = 2: scales at [1, h, t % 32 = 2, t // 32 = 0, s]
    assert torch.equal(scales[1, :, 2, 0, :], e[1]) and scales[1, 1, 2, 0, 1].item() == 19
    assert torch.equal(pool.get_key_buffer(1)[130].view(torch.uint8), q[1].view(torch.uint8))
    assert not pool.get_key_buffer(1)[0].view(torch.uint8).any()  # location 0 skipped
    dk, dv = pool.dequantize_kv(1, loc[1:])
    assert torch.allclose(dk, k[1:].float(), rtol=0.07, atol=1e-6) and torch.allclose(dv, v[1:].float(), rtol=0.07)
    pool.move_kv_cache(torch.tensor([200, 201]), torch.tensor([130, 37]))
    assert torch.equal(scales[1, :, 200 % 128 % 32, 200 % 128 // 32, :], e[1])
    moved_k, _ = pool.dequantize_kv(1, torch.tensor([200, 201]))
    assert torch.equal(moved_k, dk)


def test_mxfp8_prequantized_path_copies_data_and_scales() -> None:
    layout = mxfp8_layout(size=16, page_size=16, head_num=1, head_dim=32, v_head_dim=32, layer_num=1)
    pool = typed_pool(build_pool(layout, "cpu"), binding(DType.FLOAT8_E4M3FN))
    q = torch.tensor([[[1.5] * 32]], dtype=torch.float8_e4m3fn).repeat(2, 1, 1)
    e = torch.tensor([[[130]], [[120]]], dtype=torch.uint8)
    pool.set_kv_buffer(0, torch.tensor([3, 4]), q, q, e, e)
    assert pool["k_scale_buffer[0]"].view(torch.uint8)[3:5, 0, 0].tolist() == [130, 120]  # flat [loc, h, s]
    dk, _ = pool.dequantize_kv(0, torch.tensor([3]))
    assert dk.unique().tolist() == [12.0]  # 1.5 * 2^(130 - 127)
    with pytest.raises(KVCacheConfigError, match="either unquantized"):
        pool.set_kv_buffer(0, torch.tensor([3]), randn(1, 1, 32), randn(1, 1, 32), e[:1], e[:1])


def test_fp4_mx_block16_packs_codes_and_exponents() -> None:
    recipe = FP4KVRecipe(KVRecipe.FP4_MX_BLOCK16)
    layout = recipe.layout(size=16, page_size=16, head_num=1, head_dim=32, layer_num=2, quant_page_size=16)
    pool = typed_pool(build_pool(layout, "cpu"), binding(DType.FLOAT4_E2M1FN_X2))
    k = torch.zeros(1, 1, 32, dtype=torch.bfloat16)
    k[0, 0, :4] = torch.tensor([6.0, -3.0, 0.5, 1.0])  # block 0: amax 6 -> e = ceil(log2(1)) = 0 -> byte 127
    k[0, 0, 16] = 12.0  # block 1: amax 12 -> e = 1 -> byte 128; 12 / 2 = 6 -> code 7
    pool.set_kv_buffer(0, torch.tensor([0]), k, k)  # plain indexing: location 0 *is* written
    packed = pool.get_key_buffer(0)[0, 0]
    # 6 -> 7; -3 -> 8|5 = 0xD; 0.5 -> 1; 1 -> 2: bytes (0xD << 4 | 7), (2 << 4 | 1)
    assert packed[:2].tolist() == [0xD7, 0x21] and packed[8].item() == 0x07
    assert pool.get_key_scale_buffer(0)[0].tolist() == [127, 128]
    dk, _ = pool.dequantize_kv(0, torch.tensor([0]))
    assert dk[0, 0, :4].tolist() == [6.0, -3.0, 0.5, 1.0] and dk[0, 0, 16].item() == 12.0


@pytest.mark.parametrize(("prefill", "sm100"), [("flashinfer", False), ("trtllm_mha", True)])
def test_nvfp4_stores_linear_or_native_scales(prefill: str, sm100: bool) -> None:
    recipe = FP4KVRecipe.configure(KVRecipe.NVFP4, prefill_backend=prefill, decode_backend=None, is_sm100=sm100)
    layout = recipe.layout(size=16, page_size=16, head_num=2, head_dim=64, layer_num=2, quant_page_size=16)
    pool = typed_pool(build_pool(layout, "cpu"), binding(DType.FLOAT4_E2M1FN_X2))
    loc = torch.tensor([0, 5, 18])
    k, v = randn(3, 2, 64), randn(3, 2, 64, seed=1)
    pool.set_kv_buffer(1, loc, k, v)  # global scale: quant_method.k_scales_gpu[1], ones at build time
    packed, scales = R.quantize_nvfp4(k, 1.0)
    assert torch.equal(pool.get_key_buffer(1)[loc], packed)  # no location-0 skip
    dk, dv = pool.dequantize_kv(1, loc)
    assert torch.equal(dk, R.dequantize_nvfp4(packed, scales, 1.0))
    pool.move_kv_cache(torch.tensor([30, 31]), torch.tensor([5, 18]))
    assert torch.equal(pool.dequantize_kv(1, torch.tensor([30, 31]))[1], dv[1:])


def test_nvfp4_global_scale_comes_from_the_layer_or_the_caller() -> None:
    recipe = FP4KVRecipe.configure(KVRecipe.NVFP4, prefill_backend="flashinfer", decode_backend=None, is_sm100=False)
    layout = recipe.layout(size=16, page_size=16, head_num=1, head_dim=16, layer_num=2, quant_page_size=16)
    pool = typed_pool(build_pool(layout, "cpu"), binding(DType.FLOAT4_E2M1FN_X2, start=2))
    k = torch.full((1, 1, 16), 12.0)
    with pytest.raises(KVCacheConfigError, match="none for global layer 3"):
        pool.set_kv_buffer(3, torch.tensor([1]), k, k)  # (L,) = 2 scales, indexed by global id
    pool.load_kv_scales(torch.tensor([1.0, 1.0, 1.0, 2.0]), torch.ones(4))
    pool.set_kv_buffer(3, torch.tensor([1]), k, k)
    # g = 2: block scale fp8(12 / (6 * 2)) = 1.0 (0x38), e2m1 code of 12 / (1 * 2) = 6 -> 7
    assert pool.get_key_scale_buffer(3)[1, 0, 0].item() == 0x38 and pool.get_key_buffer(3)[1, 0, 0].item() == 0x77


# ---- MLA (MLATokenToKVPool.set_kv_buffer, MLATokenToKVPoolFP4.set_kv_buffer) -----------------------------------------


def mla_pool(kv: DType = BF16, **options: Any) -> Any:
    layout = mla_layout(size=30, page_size=2, kv_cache_dim=24, layer_num=2, store_dtype=kv.kv_store_dtype)
    return typed_pool(build_pool(layout, "cpu"), binding(kv, start=10, kv_lora_rank=16, qk_rope_head_dim=8), **options)


def test_mla_row_packing_and_value_view() -> None:
    pool = mla_pool()
    nope, rope = randn(5, 1, 16), randn(5, 1, 8, seed=1)
    pool.set_mla_kv_buffer(11, LOC, nope, rope)
    rows = pool.get_key_buffer(11)
    keep = LOC != 0
    assert torch.equal(rows[LOC[keep]], torch.cat([nope, rope], dim=-1)[keep])
    assert not rows[0].any()  # with rope present the scatter skips location 0
    value = pool.get_value_buffer(11)
    assert value.shape == (32, 1, 16) and value.data_ptr() == rows.data_ptr()
    got_nope, got_rope = pool.get_mla_kv_buffer(11, LOC[keep])
    assert torch.equal(got_nope, nope[keep]) and got_rope is not None and torch.equal(got_rope, rope[keep])


def test_mla_without_rope_and_set_kv_buffer_write_slot_0() -> None:
    pool = mla_pool()
    pool.set_mla_kv_buffer(10, torch.tensor([0, 4]), randn(2, 16), None)
    assert pool.get_key_buffer(10)[0, 0, :16].any() and not pool.get_key_buffer(10)[4, 0, 16:].any()
    row = randn(2, 1, 24, seed=3)
    pool.set_kv_buffer(11, torch.tensor([0, 9]), row, None)
    assert torch.equal(pool.get_key_buffer(11)[torch.tensor([0, 9])], row)


def test_mla_fp8_stores_cast_bytes() -> None:
    pool = mla_pool(DType.FLOAT8_E4M3FN)
    nope = torch.full((1, 1, 16), 0.5, dtype=torch.bfloat16)
    pool.set_mla_kv_buffer(10, torch.tensor([3]), nope, torch.full((1, 1, 8), -2.0, dtype=torch.bfloat16))
    row = pool["kv_buffer[0]"][3, 0]
    assert row.dtype == torch.uint8 and row[:16].unique().tolist() == [0x30] and row[16:].unique().tolist() == [0xC0]


def test_mla_fp4_quantizes_nope_and_rope_separately() -> None:
    layout = mla_fp4_layout(size=8, page_size=8, kv_cache_dim=48, layer_num=1)
    pool = typed_pool(build_pool(layout, "cpu"), binding(DType.FLOAT4_E2M1FN_X2, kv_lora_rank=32, qk_rope_head_dim=16))
    nope, rope = randn(2, 1, 32), randn(2, 1, 16, seed=1)
    pool.set_mla_kv_buffer(0, torch.tensor([0, 5]), nope, rope)
    pn, sn = R.quantize_fp4_block16(nope[1:])
    pr, sr = R.quantize_fp4_block16(rope[1:])
    assert torch.equal(pool.get_key_buffer(0)[5, 0], torch.cat([pn, pr], dim=1)[0])
    assert torch.equal(pool.get_key_scale_buffer(0)[5], torch.cat([sn, sr], dim=1)[0])
    assert not pool.get_key_buffer(0)[0].any()  # location 0 skipped by the scatter
    # the value buffer is the packed nope part: kv_lora_rank / 2 = 16 bytes of the 24-byte row
    assert pool.get_value_buffer(0).shape == (8 + 8, 1, 16) and torch.equal(pool.get_value_buffer(0)[5, 0], pn[0])
    pool.set_kv_buffer(0, torch.tensor([0]), torch.cat([nope, rope], dim=-1)[:1])  # whole row, slot 0 written
    assert torch.equal(pool.get_key_buffer(0)[0, 0], R.quantize_fp4_block16(torch.cat([nope, rope], -1)[:1])[0][0])


# ---- DSA (DSATokenToKVPool.set_kv_buffer) --------------------------------------------------------------------


def dsa_pool(kv: DType = DType.FLOAT8_E4M3FN, packed: bool = True, **options: Any) -> DSATokenToKVPool:
    """r = 128, rope = 16: packed row 128 + 4 + 32 = 164 bytes; P = 64, T = 64 (two index pages)."""
    dim = 164 if packed else 144
    layout = dsa_layout(size=64, page_size=64, kv_cache_dim=dim, layer_num=2, store_dtype=kv.kv_store_dtype,
                        index=DSAIndexGeometry(size=64, page_size=64, index_head_dim=128),
                        skip_topk_layers=(False, True))  # fmt: skip
    pool = typed_pool(build_pool(layout, "cpu"), binding(kv, start=3, kv_lora_rank=128, qk_rope_head_dim=16), **options)
    assert isinstance(pool, DSATokenToKVPool)
    return pool


def test_dsa_packed_latent_bytes() -> None:
    pool = dsa_pool()
    assert pool.packed_fp8
    nope = torch.zeros(1, 1, 128, dtype=torch.bfloat16)
    nope[0, 0, :4] = torch.tensor([224.0, -112.0, 0.0, 1.0])  # amax 224 -> s = 0.5
    rope = torch.full((1, 1, 16), 1.0, dtype=torch.bfloat16)
    pool.set_mla_kv_buffer(3, torch.tensor([9]), nope, rope)
    row = pool["kv_buffer[0]"][9, 0]
    # q = x / 0.5: 448 -> 0x7E, -224 -> 0xF6, 0, 2 -> 0x40; scale 0.5f = 00 00 00 3F; rope bf16 1.0 = 80 3F
    assert row[:4].tolist() == [0x7E, 0xF6, 0x00, 0x40]
    assert row[128:132].tolist() == [0x00, 0x00, 0x00, 0x3F]
    assert row[132:136].tolist() == [0x80, 0x3F, 0x80, 0x3F] and len(row) == 164
    got_nope, got_rope = pool.get_mla_kv_buffer(3, torch.tensor([9]))
    assert got_nope[0, 0, :4].tolist() == [224.0, -112.0, 0.0, 1.0] and torch.equal(got_rope, rope)
    with pytest.raises(UnsupportedConfigurationError, match="packed FP8"):
        pool.set_kv_buffer(3, torch.tensor([9]), randn(1, 1, 164), None)


def test_dsa_all_zero_tile_decodes_to_zero() -> None:
    pool = dsa_pool()
    pool.set_mla_kv_buffer(3, torch.tensor([2]), torch.zeros(1, 128), torch.zeros(1, 16))
    assert not pool["kv_buffer[0]"][2].any()  # decision: scale 0, codes 0 (no NaN bytes)


def test_dsa_index_k_packing_order() -> None:
    pool = dsa_pool()
    loc = torch.tensor([0, 5, 70])  # page 0 offsets 0 and 5, page 1 offset 6
    keys = torch.arange(3 * 128, dtype=torch.float32).reshape(3, 128).remainder(200).sub(100).to(torch.float8_e4m3fn)
    scales = torch.tensor([0.5, 2.0, -1.0])
    pool.set_index_k_scale_buffer(3, loc, keys, scales)
    buf = pool.get_index_k_with_scale_buffer(3)
    assert buf.shape == (2, 64 * 132)
    k8 = keys.view(torch.uint8)
    assert torch.equal(buf[0, 0:128], k8[0])  # location 0 is written (no skip)
    assert torch.equal(buf[0, 5 * 128 : 6 * 128], k8[1]) and torch.equal(buf[1, 6 * 128 : 7 * 128], k8[2])
    assert buf[0, 64 * 128 + 5 * 4 : 64 * 128 + 6 * 4].tolist() == [0x00, 0x00, 0x00, 0x40]  # 2.0f
    assert buf[1, 64 * 128 + 6 * 4 : 64 * 128 + 7 * 4].tolist() == [0x00, 0x00, 0x80, 0xBF]  # -1.0f
    got_k, got_s = pool.get_index_k_scale(3, loc)
    assert torch.equal(got_k.view(torch.uint8), k8) and got_s.tolist() == [0.5, 2.0, -1.0]
    with pytest.raises(KVCacheConfigError, match="reuses the previous layer's top-k"):
        pool.set_index_k_scale_buffer(4, loc, keys, scales)


def test_dsa_dcp_replicated_rows_hold_two_kernel_pages() -> None:
    """A DCP-2 draft's stored rows hold P = 128 keys, written as two 64-key kernel pages
    (SGLang's IndexKeyCache._kernel_view): location 70 is kernel page 1, the second half of row 0."""
    index = DSAIndexGeometry(size=128, page_size=128, index_head_dim=128, dcp_size=2, dcp_replicated=True)
    layout = dsa_layout(size=128, page_size=128, kv_cache_dim=164, layer_num=1, store_dtype=DType.UINT8,
                        index=index, skip_topk_layers=(False,))  # fmt: skip
    pool = typed_pool(build_pool(layout, "cpu"), binding(DType.FLOAT8_E4M3FN, start=3, kv_lora_rank=128,
                                                        qk_rope_head_dim=16))  # fmt: skip
    assert isinstance(pool, DSATokenToKVPool)
    stored = pool.get_index_k_with_scale_buffer(3)
    assert stored.shape == (2, 128 * 132)
    keys = torch.full((1, 128), 2.0).to(torch.float8_e4m3fn)
    pool.set_index_k_scale_buffer(3, torch.tensor([70]), keys, torch.tensor([2.0]))
    page = 64 * 132  # kernel page 1 starts half-way through stored row 0
    assert torch.equal(stored[0, page + 6 * 128 : page + 7 * 128], keys.view(torch.uint8)[0])
    assert stored[0, page + 64 * 128 + 6 * 4 : page + 64 * 128 + 7 * 4].tolist() == [0x00, 0x00, 0x00, 0x40]
    got_k, got_s = pool.get_index_k_scale(3, torch.tensor([70]))
    assert torch.equal(got_k.view(torch.uint8), keys.view(torch.uint8)) and got_s.tolist() == [2.0]


def test_dsa_fused_index_k_and_move() -> None:
    pool = dsa_pool(BF16, packed=False)
    assert not pool.packed_fp8
    k = randn(2, 128)
    pool.set_index_k(3, torch.tensor([1, 2]), k)
    q, s = R.quantize_index_k(k)
    got_k, got_s = pool.get_index_k_scale(3, torch.tensor([1, 2]))
    assert torch.equal(got_k.view(torch.uint8), q.view(torch.uint8)) and torch.equal(got_s, s)
    pool.set_mla_kv_buffer(3, torch.tensor([1, 2]), randn(2, 128), randn(2, 16))
    pool.move_kv_cache(torch.tensor([100, 101]), torch.tensor([1, 2]))
    assert torch.equal(pool.get_index_k_scale(3, torch.tensor([100, 101]))[1], s)
    assert torch.equal(pool.get_key_buffer(3)[100:102], pool.get_key_buffer(3)[1:3])


# ---- SWA (SWAKVPool.set_kv_buffer) ---------------------------------------------------------------------


def swa_pool() -> SWAKVPool:
    """Full layers [1] of 16 tokens, SWA layers [0, 2] of 8 tokens, page 1, H = 1, D = 4."""
    full = mha_layout(size=16, page_size=1, head_num=1, head_dim=4, v_head_dim=4, layer_num=1, store_dtype=BF16)
    swa = mha_layout(size=8, page_size=1, head_num=1, head_dim=4, v_head_dim=4, layer_num=2, store_dtype=BF16)
    layout = swa_kv_pool_layout(full=full, swa=swa, size=16, size_swa=8, page_size=1,
                                full_attention_layer_ids=(1,), swa_attention_layer_ids=(0, 2))  # fmt: skip
    pool = typed_pool(build_pool(layout, "cpu"), binding())
    assert isinstance(pool, SWAKVPool)
    return pool


def test_swa_routing_and_translation() -> None:
    pool = swa_pool()
    alloc: Any = make_allocator(AllocatorSpec(AllocatorKind.SWA, 16, 8, 1), pool, "cpu")
    assert alloc.full_to_swa_index_mapping is pool["full_to_swa_index_mapping"]  # the planned tensor, shared
    first = alloc.alloc(6)
    alloc.free_swa(first[:4])  # SWA slots 1..4 go to the end of the SWA free list [7, 8, 1, 2, 3, 4]
    loc = alloc.alloc(3)
    swa_loc = torch.tensor([7, 8, 1])
    assert loc.tolist() == [7, 8, 9] and torch.equal(pool.translate_loc_from_full_to_swa(loc), swa_loc)
    k = randn(3, 1, 4)
    pool.set_kv_buffer(2, pool.write_loc(loc), k, k)  # SWA layer 2 = swa sub-pool layer 1, rows 7, 8, 1
    assert torch.equal(pool.swa_kv_pool.get_key_buffer(1)[swa_loc], k)
    assert torch.equal(pool.get_key_buffer(2)[swa_loc], k)
    assert not pool.swa_kv_pool.get_key_buffer(1)[2].any() and not pool.swa_kv_pool.get_key_buffer(0).any()
    pool.set_kv_buffer(1, pool.write_loc(loc), k, k)  # full layer 1 = full sub-pool layer 0, rows 7, 8, 9
    assert torch.equal(pool.full_kv_pool.get_key_buffer(0)[7:10], k)
    with pytest.raises(KVCacheConfigError, match="sliding-window layer"):
        pool.set_kv_buffer(0, loc, k, k)
    with pytest.raises(KVCacheConfigError, match="neither a full nor an SWA layer"):
        pool.get_key_buffer(3)
    dst = alloc.alloc(3)
    pool.move_kv_cache(dst, loc)
    assert torch.equal(pool.get_key_buffer(2)[pool.translate_loc_from_full_to_swa(dst)], k)
    assert torch.equal(pool.get_key_buffer(1)[dst], k)


def test_pure_swa_allocator_uses_the_identity_mapping() -> None:
    full = mha_layout(size=0, page_size=1, head_num=1, head_dim=4, v_head_dim=4, layer_num=0, store_dtype=BF16)
    swa = mha_layout(size=8, page_size=1, head_num=1, head_dim=4, v_head_dim=4, layer_num=2, store_dtype=BF16)
    layout = swa_kv_pool_layout(full=full, swa=swa, size=0, size_swa=8, page_size=1,
                                full_attention_layer_ids=(), swa_attention_layer_ids=(0, 1))  # fmt: skip
    pool: Any = typed_pool(build_pool(layout, "cpu"), binding())
    make_allocator(AllocatorSpec(AllocatorKind.PURE_SWA, 8, 8, 1), pool, "cpu")
    assert pool.full_to_swa_index_mapping.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, -1]


# ---- hybrid linear, Mamba state (HybridLinearKVPool.set_kv_buffer), request pools (ReqToTokenPool) ---------------


def test_hybrid_linear_routes_global_ids_and_full_loc() -> None:
    full = mha_layout(size=8, page_size=1, head_num=1, head_dim=4, v_head_dim=4, layer_num=2, store_dtype=BF16)
    pool: Any = typed_pool(build_pool(hybrid_linear_kv_layout(full, (3, 7)), "cpu"), binding(start=0))
    k = randn(1, 1, 4)
    pool.set_kv_buffer(7, KVWriteLoc(torch.tensor([2]), full_loc=torch.tensor([5, 6])), k, k)
    assert torch.equal(pool.full_kv_pool.get_key_buffer(1)[5], k[0]) and torch.equal(pool.get_key_buffer(7)[5], k[0])
    with pytest.raises(KVCacheConfigError, match="not a full-attention layer"):
        pool.set_kv_buffer(4, torch.tensor([1]), k, k)


def mamba_parts() -> tuple[MambaPool, BuiltPool]:
    mamba = mamba_pool_layout(size=4, spec_state_size=2, conv_shapes=((3, 2),), temporal_shape=(2, 2, 2),
                              mamba_layer_ids=(0, 2), conv_dtype=BF16, ssm_dtype=DType.FLOAT32)  # fmt: skip
    req = hybrid_req_to_token_layout(max_running_requests=2, max_context_len=8, mamba_size=4)
    return MambaPool(build_pool(mamba, "cpu")), build_pool(req, "cpu")


def test_mamba_state_clear_and_copy() -> None:
    mamba, _ = mamba_parts()
    conv, temporal = mamba.mamba2_layer_cache(2)
    conv[0][1].fill_(3.0)
    temporal[1].fill_(5.0)
    mamba.copy_from([1], [3])
    assert mamba.mamba2_layer_cache(2)[1][3].unique().tolist() == [5.0] and conv[0][3].unique().tolist() == [3.0]
    mamba.clear_slots([1])
    assert not temporal[1].any() and not conv[0][1].any() and temporal[3].any()
    with pytest.raises(KVCacheConfigError, match="not a Mamba layer"):
        mamba.mamba2_layer_cache(1)


@dataclasses.dataclass
class Req:
    req_pool_idx: int | None = None
    mamba_pool_idx: int | None = None


def test_req_to_token_pool_contract() -> None:
    pool = ReqToTokenPool(build_pool(req_to_token_layout(max_running_requests=4, max_context_len=6), "cpu"))
    assert pool.available_size() == 4 and pool.free_slots == [1, 2, 3, 4]
    assert pool.alloc_rows(2) == [3, 4] and pool.alloc_rows(0) == [] and pool.alloc_rows(3) is None
    assert pool.req_generation.tolist() == [0, 0, 0, 1, 1]
    a, b, c = Req(), Req(req_pool_idx=3), Req()
    assert pool.alloc([a, b, c]) == [1, 3, 2] and (a.req_pool_idx, c.req_pool_idx) == (1, 2)
    d = Req()
    assert pool.alloc([d]) is None and d.req_pool_idx is None  # nothing bound
    pool.write((2, slice(0, 3)), torch.tensor([16, 17, 18], dtype=torch.int32))
    assert pool.req_to_token[2].tolist() == [16, 17, 18, 0, 0, 0]
    pool.free(a)
    assert a.req_pool_idx is None and pool.free_slots == [1]
    pool.free_rows([4])
    assert pool.free_slots == [1, 4]
    pool.clear()
    assert pool.free_slots == [1, 2, 3, 4] and pool.req_generation.tolist() == [0, 1, 1, 1, 1]
    with pytest.raises(KVCacheConfigError, match="holds no row"):
        pool.free(Req())


def test_req_to_token_pool_without_the_padding_row_hands_out_row_zero() -> None:
    """SGLang up to 0.5.10 (``ReqToTokenPool.__init__``): ``R`` rows and the free list ``list(range(size))``,
    so row 0 is a request's; freeing a row past ``R - 1`` is misuse."""
    layout = req_to_token_layout(max_running_requests=4, max_context_len=6, padding_row=False)
    pool = ReqToTokenPool(build_pool(layout, "cpu"))
    assert tuple(pool.req_to_token.shape) == (4, 6)
    assert pool.available_size() == 4 and pool.free_slots == [0, 1, 2, 3]
    assert pool.alloc_rows(4) == [0, 1, 2, 3] and pool.alloc_rows(1) is None
    pool.free_rows([0])
    assert pool.free_slots == [0]
    with pytest.raises(AllocatorMisuseError, match=r"out of range \[0, 3\]"):
        pool.free_rows([4])
    # the PD decode role's table (DecodeReqToTokenPool): R + pre_alloc rows, all handed out from 0
    decode = req_to_token_layout(max_running_requests=4, max_context_len=6, pre_alloc_size=2, padding_row=False)
    decode_pool = ReqToTokenPool(build_pool(decode, "cpu"))
    assert tuple(decode_pool.req_to_token.shape) == (6, 6) and decode_pool.free_slots == [0, 1, 2, 3, 4, 5]
    padded = ReqToTokenPool(build_pool(req_to_token_layout(max_running_requests=4, max_context_len=6,
                                                           pre_alloc_size=2), "cpu"))  # fmt: skip
    assert padded.free_slots == [1, 2, 3, 4, 5, 6]


def test_hybrid_req_pool_binds_mamba_slots_and_rolls_back() -> None:
    mamba, req = mamba_parts()
    pool = HybridReqToTokenPool(req, mamba_pool=mamba)
    reqs = [Req(), Req()]
    assert pool.alloc(reqs) == [1, 2] and [r.mamba_pool_idx for r in reqs] == [1, 2]
    reqs[1].mamba_pool_idx = None  # frees nothing: the mapping keeps its slot until alloc sets a new one
    assert pool.get_mamba_indices(torch.tensor([1, 2])).tolist() == [1, 2]
    reqs[1].mamba_pool_idx = 2
    pool.free(reqs[0])
    pool.free_mamba_cache(reqs[0])
    pool.mamba_allocator.alloc(3)  # leave no Mamba slot free
    late = Req()
    assert pool.alloc([late]) is None and late.req_pool_idx is None and pool.available_size() == 1


# ---- MiniMax sparse (MiniMaxSparseKVPool.set_kv_buffer), read-only pools -------------------------------------------


def test_minimax_routes_main_and_index_stores() -> None:
    layers = MiniMaxLocalLayers(dense=(0,), sparse=(1, 2), k_only=(2,))
    layout = minimax_sparse_layout(size=8, page_size=1, head_num=1, head_dim=4, index_dim=4, layers=layers,
                                   store_dtype=BF16, index_dtype=BF16)  # fmt: skip
    pool: Any = typed_pool(build_pool(layout, "cpu"), binding(minimax_layers=layers))
    x = randn(1, 1, 4)
    pool.set_kv_buffer(2, torch.tensor([3]), x, x)
    pool.set_index_kv_buffer(1, torch.tensor([3]), x, x)
    pool.set_index_k_buffer(2, torch.tensor([0]), x)  # K-only: plain indexing, slot 0 written
    assert torch.equal(pool.get_key_buffer(2)[3], x[0]) and torch.equal(pool.get_index_v_buffer(1)[3], x[0])
    assert torch.equal(pool.get_index_k_buffer(2)[0], x[0])
    with pytest.raises(KVCacheConfigError, match="no index K/V cache"):
        pool.set_index_kv_buffer(0, torch.tensor([3]), x, x)
    with pytest.raises(UnsupportedConfigurationError, match="MiniMaxSparseKVPool.move_kv_cache is not supported"):
        pool.move_kv_cache(torch.tensor([1]), torch.tensor([2]))


def test_npu_pool_is_read_only() -> None:
    layout = npu_mha_layout(size=8, page_size=4, head_num=1, head_dim=4, v_head_dim=4, layer_num=2, store_dtype=BF16)
    pool = typed_pool(build_pool(layout, "cpu"), binding(start=2))
    assert isinstance(pool, ReadOnlyKVPool) and pool.get_key_buffer(3).shape == (3, 4, 1, 4)
    with pytest.raises(UnsupportedConfigurationError, match=r"docs/write_path.md \(Ascend NPU pools\)"):
        pool.set_kv_buffer(3, torch.tensor([1]), randn(1, 1, 4), randn(1, 1, 4))


def test_deepseek_v4_pool_is_read_only_with_an_swa_allocator() -> None:
    planned = plan(case_settings("deepseek-v4-flash", page_size=256), 60 * GIB, pool_max_tokens=65536)
    spec = planned.allocator_spec
    assert spec is not None and spec.kind is AllocatorKind.SWA and spec.page_size == 256
    pools = build(planned, "meta")
    assert isinstance(pools.token_to_kv_pool, ReadOnlyKVPool)
    assert pools.allocator.full_to_swa_index_mapping is pools.token_to_kv_pool.full_to_swa_index_mapping
    with pytest.raises(UnsupportedConfigurationError, match=r"docs/write_path.md \(DeepSeek-V4 pools\)"):
        pools.token_to_kv_pool.set_kv_buffer(0, torch.tensor([1]), None, None)


# ---- allocator choice (KVCacheConfigurator._build_token_to_kv_pool_allocator) ----------------------------------------


SIZES = PoolSizes(max_total_num_tokens=4096, max_running_requests=8)
SWA_SIZES = dataclasses.replace(SIZES, full_max_total_num_tokens=4096, swa_max_total_num_tokens=1024)


@pytest.mark.parametrize(
    ("preset", "fields", "sizes", "expected"),
    [
        # each row: the branch of select_allocator_spec that picks it (its ``rule``)
        ("llama-3.1-8b", {}, SIZES, (AllocatorKind.TOKEN, 4096, None, 1)),  # page 1, no DCP
        ("llama-3.1-8b", {"page_size": 16}, SIZES, (AllocatorKind.PAGED, 4096, None, 16)),  # paged
        ("llama-3.1-8b", {"tp_size": 2, "dcp_size": 2}, SIZES, (AllocatorKind.PAGED, 8192, None, 2)),  # paged, T*dcp
        ("llama-3.1-8b", {"device": "npu", "page_size": 128}, SIZES, (AllocatorKind.PAGED, 4096, None, 128)),  # NPU
        ("gpt-oss-20b", {"page_size": 64}, SWA_SIZES, (AllocatorKind.SWA, 4096, 1024, 64)),  # hybrid SWA
        ("gpt-oss-20b", {"device": "npu", "page_size": 128}, SWA_SIZES, (AllocatorKind.SWA, 4096, 1024, 128)),  # NPU
        ("gpt-oss-20b", {}, dataclasses.replace(SWA_SIZES, full_max_total_num_tokens=0),
         (AllocatorKind.PURE_SWA, 1024, 1024, 1)),  # hybrid SWA, no full layers
        ("deepseek-v4-flash", {"page_size": 256}, SWA_SIZES, (AllocatorKind.SWA, 4096, 1024, 256)),  # hybrid SWA (DSV4)
    ],
)
def test_allocator_selection(preset: str, fields: dict[str, Any], sizes: PoolSizes, expected: tuple[Any, ...]) -> None:
    spec = select_allocator_spec(case_settings(preset, **fields), sizes)
    assert spec is not None and (spec.kind, spec.size, spec.size_swa, spec.page_size) == expected


def test_allocator_selection_need_sort_and_draft() -> None:
    ctx = case_settings("llama-3.1-8b", disaggregation_mode="decode")
    assert ctx.scheduling.disaggregation_mode is DisaggregationMode.DECODE
    spec = select_allocator_spec(ctx, SIZES)
    assert spec is not None and spec.need_sort
    draft = dataclasses.replace(case_settings("llama-3.1-8b"), is_draft_worker=True)
    assert select_allocator_spec(draft, SIZES) is None
    assert case_settings("llama-3.1-8b", device="npu").device is DeviceKind.NPU


# ---- end to end: plan a what-if, build on cpu, allocate, store, read back --------------------------


def test_end_to_end_llama_page_16() -> None:
    planned = plan(case_settings("llama-3.1-8b", page_size=16), 40 * GIB, pool_max_tokens=64)
    assert planned.allocator_spec == AllocatorSpec(AllocatorKind.PAGED, 64, None, 16, False, "paged (page > 1 or DCP)")
    pools = build(planned, "cpu")
    assert pools.allocated_bytes == planned.layout.planned_bytes
    kv, req = pools.token_to_kv_pool, pools.req_to_token_pool
    assert isinstance(kv, MHATokenToKVPool) and isinstance(req, ReqToTokenPool)
    loc = pools.allocator.alloc(32)
    assert loc.tolist() == list(range(16, 48)) and pools.allocator.available_size() == 32  # 4 pages, page 0 reserved
    row = req.alloc_rows(1)
    assert row == [8]
    req.write((row[0], slice(0, 32)), loc.to(torch.int32))
    k, v = randn(32, 8, 128), randn(32, 8, 128, seed=1)
    kv.set_kv_buffer(31, req.req_to_token[8, :32], k, v)
    assert torch.equal(kv.get_key_buffer(31)[loc], k) and torch.equal(kv.get_value_buffer(31)[loc], v)


def test_end_to_end_gpt_oss_20b_swa() -> None:
    planned = plan(case_settings("gpt-oss-20b", page_size=16), 40 * GIB, pool_max_tokens=256)
    assert (planned.pool_sizes.full_max_total_num_tokens, planned.pool_sizes.swa_max_total_num_tokens) == (256, 192)
    pools = build(planned, "cpu")
    kv, alloc = pools.token_to_kv_pool, pools.allocator
    assert isinstance(kv, SWAKVPool) and type(alloc).__name__ == "SWATokenToKVPoolAllocator"
    zero, twenty = torch.zeros(1, dtype=torch.int64), torch.tensor([20])
    loc = alloc.alloc_extend(zero, zero, twenty, twenty, torch.tensor([-1]), 20)
    assert loc.tolist() == list(range(16, 36))
    swa_loc = kv.translate_loc_from_full_to_swa(loc)
    assert swa_loc.tolist() == list(range(16, 36))
    k, v = randn(20, 8, 64), randn(20, 8, 64, seed=1)
    for layer in (0, 1):  # layer 0 sliding, layer 1 full (layer_types of gpt-oss)
        kv.set_kv_buffer(layer, kv.write_loc(loc), k, v)
    assert torch.equal(kv.swa_kv_pool.get_key_buffer(0)[swa_loc], k)
    assert torch.equal(kv.full_kv_pool.get_value_buffer(0)[loc], v)


def test_end_to_end_deepseek_v32_packed_dsa_and_qwen3_next_hybrid() -> None:
    dsa = plan(case_settings("deepseek-v3.2", page_size=64, kv_cache_dtype="fp8_e4m3", platform={"is_sm90": True}),
               64 * GIB, pool_max_tokens=128)  # fmt: skip
    pools = build(dsa, "cpu")
    kv: Any = pools.token_to_kv_pool
    assert isinstance(kv, DSATokenToKVPool) and kv.packed_fp8 and kv.kv_cache_dim == 656
    loc = pools.allocator.alloc(64)
    nope, rope = randn(64, 1, 512), randn(64, 1, 64, seed=1)
    kv.set_mla_kv_buffer(60, loc, nope, rope)
    got_nope, got_rope = kv.get_mla_kv_buffer(60, loc)
    assert torch.equal(got_rope, rope) and torch.allclose(got_nope.float(), nope.float(), rtol=0.07, atol=0.02)
    hybrid = plan(case_settings("qwen3-next-80b-a3b"), 64 * GIB, pool_max_tokens=128)
    pools = build(hybrid, "cpu")
    kv, req = pools.token_to_kv_pool, pools.req_to_token_pool
    assert isinstance(req, HybridReqToTokenPool) and kv.mamba_pool is pools.extra[0] is req.mamba_pool
    assert type(pools.allocator).__name__ == "TokenToKVPoolAllocator"
    reqs = [Req(), Req()]
    assert req.alloc(reqs) == [7, 8] and [r.mamba_pool_idx for r in reqs] == [1, 2]
    loc = pools.allocator.alloc(3)
    k = randn(3, 2, 256)
    kv.set_kv_buffer(3, loc, k, k)  # layer 3 is the first full-attention layer (dense index 0)
    assert torch.equal(kv.get_key_buffer(3)[loc], k)
    with pytest.raises(KVCacheConfigError, match="not a full-attention layer"):
        kv.set_kv_buffer(2, loc, k, k)


# ---- the Triton kernels behind the pools (interpreter on CPU) --------------------------------------


@pytest.mark.skipif(not triton_available(), reason="triton is not installed")
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
class TestForcedTriton:
    """``use_triton=True`` under ``TRITON_INTERPRET=1`` stores the same bytes as the reference."""

    @pytest.fixture(autouse=True)
    def interpret(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("TRITON_INTERPRET", "1")

    @staticmethod
    def twins(make: Any) -> tuple[Any, Any]:
        return make(use_triton=True), make(use_triton=False)

    @staticmethod
    def same(a: Any, b: Any) -> None:
        for name, tensor in a.tensors.items():
            assert torch.equal(tensor.view(torch.uint8), b.tensors[name].view(torch.uint8)), name

    @pytest.mark.parametrize("kv", [BF16, DType.FLOAT8_E4M3FN])
    def test_mha(self, kv: DType) -> None:
        fast, slow = self.twins(lambda **o: mha_pool(kv, **o))
        for pool in (fast, slow):
            pool.set_kv_buffer(1, LOC, randn(5, 2, 8), randn(5, 2, 8, seed=1), k_scale=0.5, v_scale=2.0)
            pool.move_kv_cache(torch.tensor([20, 21]), torch.tensor([7, 3]))
        self.same(fast, slow)

    def test_mla(self) -> None:
        fast, slow = self.twins(lambda **o: mla_pool(DType.FLOAT8_E4M3FN, **o))
        for pool in (fast, slow):
            pool.set_mla_kv_buffer(10, LOC, randn(5, 1, 16), randn(5, 1, 8))
            pool.set_kv_buffer(11, LOC, randn(5, 1, 24, seed=2))
        self.same(fast, slow)

    def test_dsa_index_keys(self) -> None:
        fast, slow = self.twins(lambda **o: dsa_pool(BF16, packed=False, **o))
        keys = torch.randn(2, 128, generator=gen(4)).to(torch.float8_e4m3fn)
        for pool in (fast, slow):
            pool.set_index_k(3, torch.tensor([1, 9]), randn(2, 128))
            pool.set_index_k_scale_buffer(3, torch.tensor([70, 0]), keys, torch.tensor([0.5, 3.0]))
            pool.set_mla_kv_buffer(3, torch.tensor([1, 9]), randn(2, 128), randn(2, 16))
        self.same(fast, slow)

    def test_quantized_mha(self) -> None:
        mx = mxfp8_layout(size=128, page_size=128, head_num=1, head_dim=32, v_head_dim=32, layer_num=1)
        fp4 = FP4KVRecipe(KVRecipe.FP4_MX_BLOCK16).layout(size=16, page_size=16, head_num=1, head_dim=32,
                                                          layer_num=1, quant_page_size=16)  # fmt: skip
        for layout, kv in ((mx, DType.FLOAT8_E4M3FN), (fp4, DType.FLOAT4_E2M1FN_X2)):
            fast = typed_pool(build_pool(layout, "cpu"), binding(kv), use_triton=True)
            slow = typed_pool(build_pool(layout, "cpu"), binding(kv), use_triton=False)
            for pool in (fast, slow):
                pool.set_kv_buffer(0, torch.tensor([0, 3, 5]), randn(3, 1, 32), randn(3, 1, 32, seed=1))
            self.same(fast, slow)


# ---- typed pools the catalog of one release does not reach, by hand: a packed DSA row, FP4 and MXFP8 heads ----


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
    from kvstrategies.core.dtypes import DType, KVRecipe
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
    from kvstrategies.core.dtypes import DType
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


# ---- the allocator choice and the request table, by hand ---------------------------------------------------
# KVCacheConfigurator._build_token_to_kv_pool_allocator, ReqToTokenPool


T = 4096


HYBRID = PoolSizes(max_total_num_tokens=T, full_max_total_num_tokens=T, swa_max_total_num_tokens=2048)


PLAIN = PoolSizes(max_total_num_tokens=T)


ALL_SWA = PoolSizes(max_total_num_tokens=2048, full_max_total_num_tokens=0, swa_max_total_num_tokens=2048)


@pytest.mark.parametrize(
    ("preset", "fields", "sizes", "expected"),
    [
        # page 1, no DCP -> TokenToKVPoolAllocator(T)
        ("llama-3.1-8b", {}, PLAIN, (AllocatorKind.TOKEN, T, None, 1, False)),
        # paged, page P * dcp over T * dcp slots (page 1 with DCP is paged too)
        ("llama-3.1-8b", {"page_size": 64}, PLAIN, (AllocatorKind.PAGED, T, None, 64, False)),
        ("llama-3.1-8b", {"tp_size": 2, "dcp_size": 2, "page_size": 64}, PLAIN,
         (AllocatorKind.PAGED, 2 * T, None, 128, False)),
        ("llama-3.1-8b", {"tp_size": 2, "dcp_size": 2}, PLAIN, (AllocatorKind.PAGED, 2 * T, None, 2, False)),
        # NPU paged, T * dcp and P * dcp; PD roles sort their frees
        ("llama-3.1-8b", {"device": "npu", "tp_size": 2, "dcp_size": 2, "page_size": 128}, PLAIN,
         (AllocatorKind.PAGED, 2 * T, None, 256, False)),
        ("llama-3.1-8b", {"page_size": 64, "disaggregation_mode": "prefill"}, PLAIN,
         (AllocatorKind.PAGED, T, None, 64, True)),
        # rows 1, 4, 5: hybrid SWA (full, swa); all-SWA (full = 0) -> PureSWA(swa)
        ("gpt-oss-20b", {"device": "npu", "page_size": 128}, HYBRID, (AllocatorKind.SWA, T, 2048, 128, False)),
        ("gpt-oss-20b", {}, ALL_SWA, (AllocatorKind.PURE_SWA, 2048, 2048, 1, False)),
        ("gpt-oss-20b", {"page_size": 64}, HYBRID, (AllocatorKind.SWA, T, 2048, 64, False)),
    ],
)
def test_fresh_allocator_rows(preset: str, fields: dict[str, Any], sizes: PoolSizes, expected: tuple[Any, ...]) -> None:
    spec = select_allocator_spec(case_settings(preset, **fields), sizes)
    assert spec is not None
    assert (spec.kind, spec.size, spec.size_swa, spec.page_size, spec.need_sort) == expected


def test_a_draft_worker_reuses_the_target_allocator() -> None:
    ctx = case_settings("deepseek-v3", page_size=64, tp_size=8, speculative_algorithm="EAGLE", is_draft_worker=True)
    assert select_allocator_spec(ctx, PLAIN) is None
    assert AllocatorSpec(AllocatorKind.TOKEN, T).page_size == 1  # an unpaged allocator's page is one token


def test_request_table_has_one_padding_row_by_default() -> None:
    # KVCacheConfigurator._build_req_to_token_pool: R + 1 rows (no pre-allocation) of context_len + extra int32 columns
    layout = req_to_token_layout(max_running_requests=8, max_context_len=100)
    assert buffer_shapes(layout)["req_to_token"] == (9, 100)
