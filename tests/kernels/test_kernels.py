"""Write-path kernels: every Triton kernel (run by Triton's interpreter on CPU) against its torch
reference, bit for bit, plus hand-checked layouts and the quantizers' formulas (write_path.md).

``TRITON_INTERPRET=1`` is set per test with monkeypatch; the dispatch layer reads it at call
time. Tests that need triton are skipped with a reason when it does not import.
"""

from __future__ import annotations

import pytest
import torch

from kvstrategies import kernels as K
from kvstrategies.errors import KVCacheConfigError
from kvstrategies.kernels import reference as R
from kvstrategies.pools.dsa import CUDA_INDEX_PAGE_SIZE

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # interpreter lanes
needs_triton = pytest.mark.skipif(not K.triton_available(), reason="triton is not installed")

FLOATS = (torch.bfloat16, torch.float16, torch.float32)
FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


@pytest.fixture
def interp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def storage(kv_dtype: torch.dtype) -> torch.dtype:
    """Pool storage dtype (KVCache.__init__ store dtype): fp8 lives in uint8."""
    return torch.uint8 if kv_dtype in FP8 else kv_dtype


def filled(shape: tuple[int, ...], dtype: torch.dtype, byte: int) -> torch.Tensor:
    """A buffer of ``dtype`` whose every byte is ``byte`` (to see which rows were written)."""
    t = torch.empty(shape, dtype=dtype)
    t.view(torch.uint8).fill_(byte)
    return t


def random_locs(n: int, rows: int, g: torch.Generator, with_zero: bool = True) -> torch.Tensor:
    loc = torch.randperm(rows, generator=g)[:n]
    if with_zero:
        loc[n // 2] = 0
    return loc


def both(fn_name: str, buffers: list[torch.Tensor], *args: object, **kwargs: object) -> list[torch.Tensor]:
    """Run dispatch ``fn_name`` with ``use_triton=True`` on ``buffers`` and the reference on clones.

    Returns the reference clones (the Triton results are in ``buffers``).
    """
    clones = [b.clone() for b in buffers]
    getattr(K, fn_name)(*buffers, *args, use_triton=True, **kwargs)
    getattr(R, fn_name)(*clones, *args, **kwargs)
    return clones


# ---------------------------------------------------------------------------------------------
# torch cast semantics the kernels reproduce (fp8 overflow, pinned for this torch) -------------------------------------


def test_torch_fp8_overflow_semantics_are_pinned() -> None:
    x = torch.tensor([448.0, 463.9, 464.0, 470.0, 1000.0, float("inf"), -1000.0])
    e4m3 = x.to(torch.float8_e4m3fn).view(torch.uint8).tolist()
    assert e4m3 == [0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE]  # saturates to +-448, inf too
    y = torch.tensor([57344.0, 61439.0, 61440.0, 1e6, float("inf")])
    assert y.to(torch.float8_e5m2).view(torch.uint8).tolist() == [0x7B, 0x7B, 0x7C, 0x7C, 0x7C]  # RTNE, inf


def test_ceil_log2_is_exact_where_log2_is_not() -> None:
    y = torch.tensor([1.0, 2.0, 3.0, 0.75, 2.0 ** -30, 1.0 + 2.0 ** -23, 2.0 ** 20 * (1 + 2.0 ** -23)])
    assert R.ceil_log2(y).tolist() == [0, 1, 2, 0, -30, 1, 21]
    e = torch.tensor([127, 1, 200, 254], dtype=torch.int32)
    assert R.pow2_from_biased_exponent(e).tolist() == [1.0, 2.0 ** -126, 2.0 ** 73, 2.0 ** 127]


# ---------------------------------------------------------------------------------------------
# Conversions: exhaustive bf16 and random fp32 bit patterns through the row-store kernel -------------------------------


def _all_finite_bf16() -> torch.Tensor:
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    x = bits.view(torch.bfloat16)
    return x[~torch.isnan(x)]


def _random_fp32(n: int, g: torch.Generator) -> torch.Tensor:
    bits = torch.randint(-(2**31), 2**31 - 1, (n,), generator=g, dtype=torch.int64).to(torch.int32)
    x = bits.view(torch.float32)
    # add values concentrated where fp8/bf16 rounding is delicate: ties, carries, subnormals
    scales = torch.tensor([2.0 ** -16, 2.0 ** -9, 2.0 ** -6, 1.0, 240.0, 448.0, 2.0 ** 15, 61440.0])
    near = (torch.rand(n, generator=g) * 2 - 1) * scales[torch.randint(0, len(scales), (n,), generator=g)]
    ties = (torch.randint(-64, 64, (n,), generator=g).float() + 0.5) * 2.0 ** -9
    x = torch.cat((x, near, ties, torch.tensor([0.0, -0.0, float("inf"), -float("inf")])))
    return x[~torch.isnan(x)]


@needs_triton
@pytest.mark.parametrize("out", (*FP8, torch.float16, torch.float32, torch.bfloat16))
def test_exhaustive_bf16_conversion_matches_torch(interp: None, out: torch.dtype) -> None:
    x = _all_finite_bf16()
    x = torch.cat((x, x.new_zeros(2**16 - x.numel()))).reshape(32, -1)  # every non-NaN bf16
    if out == torch.bfloat16:  # same dtype: a plain copy; make it a real conversion from fp32
        x = x.float()
    n = x.shape[0]
    buf = torch.zeros(n, x.shape[1], dtype=storage(out))
    (ref,) = both("store_rows", [buf], torch.arange(n), x, kv_dtype=out)
    assert same_bytes(buf, ref)


@needs_triton
@pytest.mark.parametrize("out", (*FP8, torch.float16, torch.bfloat16))
def test_random_fp32_conversion_matches_torch(interp: None, out: torch.dtype) -> None:
    x = _random_fp32(6000, gen(1))
    x = x[: x.numel() // 1000 * 1000].reshape(-1, 1000)
    buf = torch.zeros(x.shape[0], 1000, dtype=storage(out))
    (ref,) = both("store_rows", [buf], torch.arange(x.shape[0]), x, kv_dtype=out)
    assert same_bytes(buf, ref)


# ---------------------------------------------------------------------------------------------
# MHA store ------------------------------------------------------------------------------------------------------------


@needs_triton
@pytest.mark.parametrize("kv_dtype", (torch.bfloat16, torch.float16, *FP8))
@pytest.mark.parametrize("in_dtype", FLOATS)
@pytest.mark.parametrize("scale", (None, 0.37, "tensor"))
def test_store_kv_matches_reference(interp: None, kv_dtype: torch.dtype, in_dtype: torch.dtype, scale: object) -> None:
    g = gen(hash((str(kv_dtype), str(in_dtype), str(scale))) % 1000)
    n, rows, h, d, dv = 5, 23, 3, 20, 12
    loc = random_locs(n, rows, g)
    big = torch.randn(n, 2, h, d, generator=g).to(in_dtype) * 300  # overflows e4m3 after / 0.37
    cache_k = big[:, 0]  # token stride 2*h*d, each row contiguous
    cache_v = torch.randn(n, h * dv, generator=g).to(in_dtype)  # 2-D input
    k_scale = torch.tensor(0.37) if scale == "tensor" else scale
    v_scale = 2.5 if scale is not None else None
    kb = filled((rows, h, d), storage(kv_dtype), 7)
    vb = filled((rows, h, dv), storage(kv_dtype), 7)
    rk, rv = both("store_kv", [kb, vb], loc.to(torch.int32), cache_k, cache_v, k_scale=k_scale, v_scale=v_scale,
                  kv_dtype=kv_dtype)
    assert same_bytes(kb, rk) and same_bytes(vb, rv)
    assert (kb.view(torch.uint8)[0] == 7).all(), "location 0 is skipped by default (store_cache)"
    kept = loc[loc != 0]
    assert not (kb.view(torch.uint8)[kept] == 7).all()


@needs_triton
def test_store_kv_same_dtype_is_a_copy_that_ignores_scale_and_can_write_row0(interp: None) -> None:
    g = gen(3)
    k = torch.randn(4, 2, 16, generator=g, dtype=torch.bfloat16)
    loc = torch.tensor([0, 5, 2, 7])
    kb, vb = torch.zeros(9, 2, 16, dtype=torch.bfloat16), torch.zeros(9, 2, 16, dtype=torch.bfloat16)
    K.store_kv(kb, vb, loc, k, k, k_scale=4.0, v_scale=4.0, skip_zero_loc=False, use_triton=True)
    assert torch.equal(kb[loc], k) and torch.equal(vb[loc], k)


def test_store_kv_fp8_pool_needs_a_kv_dtype_for_uint8_buffers() -> None:
    buf = torch.zeros(4, 8, dtype=torch.uint8)
    with pytest.raises(KVCacheConfigError):
        R.store_rows(buf, torch.tensor([1]), torch.ones(1, 8, dtype=torch.bfloat16))


def test_reference_fp8_store_divides_then_casts_without_mutating_input() -> None:
    x = torch.tensor([[1.0, -2.0, 1000.0, 0.1]], dtype=torch.bfloat16)
    before = x.clone()
    buf = torch.zeros(3, 4, dtype=torch.uint8)
    R.store_rows(buf, torch.tensor([2]), x, kv_dtype=torch.float8_e4m3fn, scale=0.5)
    got = buf[2].view(torch.float8_e4m3fn).float().tolist()
    assert got == [2.0, -4.0, 448.0, 0.203125]  # 0.2 (bf16 0.19995) -> nearest e4m3 0.203125
    assert torch.equal(x, before)


# ---------------------------------------------------------------------------------------------
# MLA store ------------------------------------------------------------------------------------------------------------


@needs_triton
@pytest.mark.parametrize("kv_dtype", (torch.bfloat16, torch.float8_e4m3fn))
@pytest.mark.parametrize("with_rope", (True, False))
def test_store_mla_kv_matches_reference(interp: None, kv_dtype: torch.dtype, with_rope: bool) -> None:
    g = gen(4)
    n, rows, lora, rope = 6, 17, 48, 8
    loc = random_locs(n, rows, g)
    nope = torch.randn(n, 1, lora, generator=g, dtype=torch.bfloat16)
    pe = torch.randn(n, 1, rope, generator=g, dtype=torch.bfloat16) if with_rope else None
    buf = filled((rows, 1, lora + rope), storage(kv_dtype), 3)
    (ref,) = both("store_mla_kv", [buf], loc, nope, pe, kv_dtype=kv_dtype)
    assert same_bytes(buf, ref)
    row0_written = not bool((buf.view(torch.uint8)[0] == 3).all())
    assert row0_written == (not with_rope)  # SGLang: loc 0 skipped only with rope present
    if kv_dtype == torch.bfloat16:
        i = int((loc != 0).nonzero()[0])
        assert torch.equal(buf[loc[i], 0, :lora], nope[i, 0])
        if pe is not None:
            assert torch.equal(buf[loc[i], 0, lora:], pe[i, 0])


# ---------------------------------------------------------------------------------------------
# move_kv_cache --------------------------------------------------------------------------------------------------------


@needs_triton
@pytest.mark.parametrize("widths", ((16, 8), (3, 5), (20, 7)))
def test_move_kv_cache_matches_reference(interp: None, widths: tuple[int, int]) -> None:
    g = gen(5)
    rows = 19
    a, b = widths
    buffers = [
        torch.randn(rows, 3, a, generator=g).to(torch.bfloat16),
        torch.randint(0, 255, (rows, b), generator=g, dtype=torch.uint8),
        torch.randn(rows, a, generator=g),
        torch.randn(rows, 2, b, generator=g).to(torch.float8_e4m3fn),
    ]
    perm = torch.randperm(rows, generator=g)
    src, dst = perm[:6], perm[6:12]
    refs = [b.clone() for b in buffers]
    K.move_kv_cache(buffers, dst, src, use_triton=True)
    R.move_kv_cache(refs, dst, src)
    for got, want in zip(buffers, refs, strict=True):
        assert same_bytes(got, want)
    assert same_bytes(buffers[0][dst], buffers[0][src])


# ---------------------------------------------------------------------------------------------
# DSA indexer keys (DSATokenToKVPool.set_index_k_scale_buffer) ---------------------------------------------------------


def test_index_k_layout_by_hand() -> None:
    p, d = 4, 8
    buf = torch.zeros(3, p * (d + 4), dtype=torch.uint8)
    keys = torch.arange(2 * d, dtype=torch.uint8).reshape(2, d)
    scales = torch.tensor([1.5, -2.0])
    R.store_index_k_scale(buf, torch.tensor([5, 0]), keys, scales, page_size=p)
    # loc 5 -> page 1, offset 1: keys at bytes [8, 16), scale at 4*8 + 1*4 = 36
    assert buf[1, 8:16].tolist() == list(range(8))
    assert buf[1, 36:40].view(torch.float32).item() == 1.5
    assert buf[0, 0:8].tolist() == list(range(8, 16))  # location 0 is written (no skip)
    assert buf[0, 32:36].view(torch.float32).item() == -2.0


@needs_triton
def test_store_index_k_scale_matches_reference(interp: None) -> None:
    g = gen(6)
    n, pages, p, d = 7, 4, 16, 128
    loc = random_locs(n, pages * p, g)
    k, s = R.quantize_index_k(torch.randn(n, d, generator=g))
    buf = torch.zeros(pages, p * (d + 4), dtype=torch.uint8)
    (ref,) = both("store_index_k_scale", [buf], loc, k, s[:, None], page_size=p)
    assert same_bytes(buf, ref)


@needs_triton
@pytest.mark.parametrize("in_dtype", FLOATS)
@pytest.mark.parametrize("pow2", (False, True))
def test_quantize_store_index_k_matches_reference(interp: None, in_dtype: torch.dtype, pow2: bool) -> None:
    g = gen(7)
    n, pages, p, d = 9, 3, 64, 128
    loc = random_locs(n, pages * p, g)
    x = (torch.randn(n, d, generator=g) * torch.logspace(-6, 3, n)[:, None]).to(in_dtype)
    x[1] = 0  # amax clamps at 1e-4
    buf = torch.zeros(pages, p * (d + 4), dtype=torch.uint8)
    (ref,) = both("quantize_store_index_k", [buf], loc, x, page_size=p, scale_pow2=pow2)
    assert same_bytes(buf, ref)


def test_quantize_index_k_formula() -> None:
    x = torch.tensor([[896.0, -448.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    q, s = R.quantize_index_k(x)
    assert s.tolist() == [2.0, (torch.tensor(1e-4) / 448.0).item()]  # fp32 arithmetic
    assert q[0].float().tolist() == [448.0, -224.0, 0.5, 0.0]
    _, s2 = R.quantize_index_k(torch.tensor([[3.0 * 448.0]]), scale_pow2=True)
    assert s2.tolist() == [4.0]


# ---------------------------------------------------------------------------------------------
# MXFP8 (MHATokenToKVPoolMXFP8.set_kv_buffer) --------------------------------------------------------------------------


def test_mxfp8_formula_by_hand() -> None:
    x = torch.zeros(1, 1, 32)
    x[0, 0, 0], x[0, 0, 1] = 900.0, -1.0
    q, e = R.quantize_mxfp8(x)
    # amax/448 = 2.0089 -> ceil(log2) = 2 -> E = 129, scale 4: 900/4 = 225, -1/4 = -0.25
    assert e.tolist() == [[[129]]]
    assert q[0, 0, :2].float().tolist() == [224.0, -0.25]  # 225 rounds to e4m3 224
    _, e0 = R.quantize_mxfp8(torch.zeros(1, 1, 32))
    assert e0.item() == int(R.ceil_log2(torch.tensor(1e-30 / 448)).item()) + 127


@needs_triton
@pytest.mark.parametrize("in_dtype", FLOATS)
@pytest.mark.parametrize("interleaved", (True, False))
def test_quantize_store_mxfp8_matches_reference(interp: None, in_dtype: torch.dtype, interleaved: bool) -> None:
    g = gen(8)
    n, h, d, pages = 6, 3, 96, 2
    rows = pages * 128
    loc = random_locs(n, rows, g)
    x = (torch.randn(n, h, d, generator=g) * torch.logspace(-8, 4, d)).to(in_dtype)
    data = filled((rows, h, d), torch.float8_e4m3fn, 0x11)
    shape = (pages, h, 32, 4, d // 32) if interleaved else (rows, h, d // 32)
    scales = torch.full(shape, 0x22, dtype=torch.uint8)
    rd, rs = both("quantize_store_mxfp8", [data, scales], loc, x, interleaved=interleaved)
    assert same_bytes(data, rd) and same_bytes(scales, rs)
    assert (data.view(torch.uint8)[0] == 0x11).all()  # location 0 skipped
    i = int((loc != 0).nonzero()[0])
    t = int(loc[i]) % 128
    _, e = R.quantize_mxfp8(x[i : i + 1])
    got = scales[int(loc[i]) // 128, :, t % 32, t // 32] if interleaved else scales[int(loc[i])]
    assert torch.equal(got, e[0])


# ---------------------------------------------------------------------------------------------
# FP4: fp4_mx_block16 and nvfp4 -------------------------------------------------------------------------------------


def test_fp4_block16_formula_by_hand() -> None:
    vals = [6.0, -6.0, 0.24, 0.25, 0.74, 0.75, 1.3, -1.75, 2.4, 2.5, 3.4, 3.5, 4.9, 5.0, 0.0, -0.1]
    packed, scales = R.quantize_fp4_block16(torch.tensor([vals]))
    assert scales.tolist() == [[127]]  # amax 6 -> e = ceil(log2(1)) = 0
    nib = [int(b) & 0xF for b in packed[0]] , [int(b) >> 4 for b in packed[0]]
    codes = [c for pair in zip(*nib, strict=True) for c in pair]
    assert codes == [7, 15, 0, 1, 1, 2, 3, 12, 4, 5, 5, 6, 6, 7, 0, 8]
    deq = R.dequantize_fp4_block16(packed, scales)[0].tolist()
    assert deq[:4] == [6.0, -6.0, 0.0, 0.5]
    _, s2 = R.quantize_fp4_block16(torch.full((1, 16), 13.0))  # 13/6 = 2.17 -> e = 2
    assert s2.tolist() == [[129]]


@needs_triton
@pytest.mark.parametrize("in_dtype", FLOATS)
def test_quantize_store_fp4_block16_matches_reference(interp: None, in_dtype: torch.dtype) -> None:
    g = gen(9)
    n, rows, h, d = 5, 21, 3, 48
    loc = random_locs(n, rows, g)
    x = (torch.randn(n, h, d, generator=g) * torch.logspace(-12, 4, h * d).reshape(h, d)).to(in_dtype)
    x[0, 0, :16] = 0  # all-zero block -> e = ceil(log2(1e-10))
    data = torch.zeros(rows, h, d // 2, dtype=torch.uint8)
    scales = torch.zeros(rows, h * d // 16, dtype=torch.uint8)
    rd, rs = both("quantize_store_fp4_block16", [data, scales], loc, x)
    assert same_bytes(data, rd) and same_bytes(scales, rs)
    err = (R.dequantize_fp4_block16(data[loc], scales[loc]) - x.float().reshape(n, -1)).abs()
    step = R.dequantize_fp4_block16(torch.full((n, h * d // 2), 0x22, dtype=torch.uint8), scales[loc])
    assert (err <= step).all()  # |q| <= 6 by construction; the widest gap (4..6) gives error <= 1 * 2^e


@needs_triton
def test_mla_fp4_layout_with_offsets(interp: None) -> None:
    """MLATokenToKVPoolFP4.set_kv_buffer: nope (512) and rope (64) quantized separately, [288 | 36] bytes, loc 0
    skipped."""
    g = gen(10)
    n, rows = 4, 9
    loc = torch.tensor([3, 0, 8, 5])
    nope = torch.randn(n, 1, 512, generator=g, dtype=torch.bfloat16)
    rope = torch.randn(n, 1, 64, generator=g, dtype=torch.bfloat16)
    data = torch.full((rows, 1, 288), 9, dtype=torch.uint8)
    scales = torch.full((rows, 36), 9, dtype=torch.uint8)
    for impl in (K, R):
        d2, s2 = data.clone(), scales.clone()
        extra = {"use_triton": True} if impl is K else {}
        impl.quantize_store_fp4_block16(d2, s2, loc, nope, skip_zero_loc=True, **extra)
        impl.quantize_store_fp4_block16(d2, s2, loc, rope, data_col_offset=256, scale_col_offset=32,
                                        skip_zero_loc=True, **extra)
        pn, sn = R.quantize_fp4_block16(nope)
        pr, sr = R.quantize_fp4_block16(rope)
        assert torch.equal(d2[3, 0], torch.cat((pn[0], pr[0]))) and torch.equal(s2[3], torch.cat((sn[0], sr[0])))
        assert (d2[0] == 9).all() and (s2[0] == 9).all()


def test_nvfp4_formula_by_hand() -> None:
    g = 0.5
    x = torch.zeros(1, 1, 32)
    x[0, 0, :8] = torch.tensor([6.0, 3.0, 0.75, 0.25, -1.25, 5.0, 2.5, 1.75]) * 2.0 * g  # block scale 2
    packed, s = R.quantize_nvfp4(x, g)
    assert s.view(torch.float8_e4m3fn).float().tolist() == [[[2.0, 0.0]]]
    nib = [int(b) & 0xF for b in packed[0, 0, :4]], [int(b) >> 4 for b in packed[0, 0, :4]]
    codes = [c for pair in zip(*nib, strict=True) for c in pair]
    assert codes == [7, 5, 2, 0, 8 | 2, 6, 4, 4]  # RTNE: 0.75->1, 0.25->0, 1.25->1, 5->4, 2.5->2, 1.75->2
    assert (packed[0, 0, 8:] == 0).all()  # all-zero block: scale 0, q = 0
    assert torch.equal(R.dequantize_nvfp4(packed, s, g)[0, 0, :2], torch.tensor([6.0, 3.0]))


@needs_triton
@pytest.mark.parametrize("in_dtype", FLOATS)
@pytest.mark.parametrize("layout", ("k", "v"))
def test_quantize_store_nvfp4_matches_reference(interp: None, in_dtype: torch.dtype, layout: str) -> None:
    gen_ = gen(11)
    n, h, d, p, pages = 7, 2, 64, 8, 3
    rows = pages * p
    loc = random_locs(n, rows, gen_)
    x = (torch.randn(n, h, d, generator=gen_) * torch.logspace(-3, 3, d)).to(in_dtype)
    x[2, 1, 16:32] = 0
    data = torch.zeros(rows, h, d // 2, dtype=torch.uint8)
    lin = torch.zeros(rows, h, d // 16, dtype=torch.uint8).view(torch.float8_e4m3fn)
    native = torch.zeros(pages, h, p, d // 16, dtype=torch.uint8)
    refs = [data.clone(), lin.clone(), native.clone()]
    K.quantize_store_nvfp4(data, loc, x, 0.7, scale_buffer=lin, native_scale_buffer=native, native_layout=layout,
                           use_triton=True)
    R.quantize_store_nvfp4(refs[0], loc, x, 0.7, scale_buffer=refs[1], native_scale_buffer=refs[2],
                           native_layout=layout)
    for got, want in zip((data, lin, native), refs, strict=True):
        assert same_bytes(got, want)
    assert (data[0] != 0).any()  # location 0 is written (no skip)
    for i in range(n):  # native scales = linear scales at the K / V-swizzled page positions
        page, off = int(loc[i]) // p, torch.tensor([int(loc[i]) % p])
        row, col = R.nvfp4_native_scale_index(off, torch.arange(d // 16), d // 16, layout)
        assert torch.equal(native[page][:, row, col], lin.view(torch.uint8)[loc[i]])


def test_nvfp4_v_swizzle_positions() -> None:
    off = torch.tensor([5])
    s = torch.arange(8)
    row, col = R.nvfp4_native_scale_index(off, s, 8, "v")
    # S = 8, S/4 = 2: row = 4 + s // 2, col = (s % 2) * 4 + 1
    assert row.tolist() == [4, 4, 5, 5, 6, 6, 7, 7] and col.tolist() == [1, 5, 1, 5, 1, 5, 1, 5]


# ---------------------------------------------------------------------------------------------
# Dispatch rules -------------------------------------------------------------------------------------------------------


def test_dispatch_defaults_to_reference_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    buf = torch.zeros(4, 8, dtype=torch.bfloat16)
    K.store_rows(buf, torch.tensor([1]), torch.ones(1, 8, dtype=torch.bfloat16))
    assert (buf[1] == 1).all()


@needs_triton
def test_dispatch_use_triton_on_cpu_needs_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    buf = torch.zeros(4, 8, dtype=torch.bfloat16)
    with pytest.raises(KVCacheConfigError, match="TRITON_INTERPRET"):
        K.store_rows(buf, torch.tensor([1]), torch.ones(1, 8), use_triton=True)


@needs_triton
def test_dispatch_unsupported_combination(interp: None) -> None:
    buf = torch.zeros(4, 8, dtype=torch.bfloat16)
    fp8_in = torch.ones(1, 8).to(torch.float8_e4m3fn)
    with pytest.raises(KVCacheConfigError, match="no Triton kernel"):
        K.store_rows(buf, torch.tensor([1]), fp8_in, use_triton=True)
    K.store_rows(buf, torch.tensor([1]), fp8_in)  # auto on CPU: the reference handles it
    assert (buf[1] == 1).all()


# ---- write-path edges, by hand: same-dtype copies, fit checks, the DSA index page default, an empty rope ----
# Triton cases run in Triton's interpreter (TRITON_INTERPRET=1) on tiny tensors; skipped without triton


def _bytes(t: torch.Tensor) -> list[int]:
    return [int(b) for b in t.contiguous().view(torch.uint8).reshape(-1).tolist()]


@needs_triton
@pytest.mark.parametrize("dtype", (torch.float8_e4m3fn, torch.bfloat16, torch.float32, torch.float64))
def test_triton_same_dtype_store_is_a_byte_copy_for_every_element_size(interp: None, dtype: torch.dtype) -> None:
    """MHATokenToKVPool.set_kv_buffer stores rows already in the pool dtype unconverted: the bytes of
    row ``i`` land in row ``loc[i]`` whatever the element size (1, 2, 4 or 8 bytes)."""
    rows = torch.tensor([[1.5, -2.0, 0.25, 3.0], [-0.5, 8.0, 6.0, -1.0]]).to(dtype)
    loc = torch.tensor([3, 1])
    buf = torch.zeros(5, 4, dtype=torch.uint8 if dtype.itemsize == 1 else dtype)
    K.store_rows(buf, loc, rows, use_triton=True)
    assert _bytes(buf[3]) == _bytes(rows[0]) and _bytes(buf[1]) == _bytes(rows[1])
    assert _bytes(buf[0]) == _bytes(buf[2]) == _bytes(buf[4]) == [0] * 4 * dtype.itemsize


@needs_triton
@pytest.mark.parametrize("triton", (True, False))
def test_rows_that_overrun_the_buffer_row_are_refused(interp: None, triton: bool) -> None:
    """A row of 6 elements at column 4 of an 8-element row would end at 10 > 8: refused before any
    write, on the Triton path and the reference alike (the rope part after the nope part of
    MLATokenToKVPool.set_mla_kv_buffer must fit the row)."""
    buf = torch.zeros(3, 8, dtype=torch.bfloat16)
    rows = torch.ones(1, 6, dtype=torch.bfloat16)
    with pytest.raises(KVCacheConfigError, match="fit"):
        K.store_rows(buf, torch.tensor([1]), rows, col_offset=4, use_triton=triton)
    assert not bool(buf.any())
    K.store_rows(buf, torch.tensor([1]), rows, col_offset=2, use_triton=triton)  # ends at 8: fits
    assert buf[1].tolist() == [0.0, 0.0] + [1.0] * 6


@needs_triton
@pytest.mark.parametrize("triton", (True, False))
@pytest.mark.parametrize("overrun", ("data", "scales"))
def test_fp4_values_or_scales_that_overrun_their_row_are_refused(interp: None, triton: bool, overrun: str) -> None:
    """MLATokenToKVPoolFP4.set_kv_buffer: 64 values need 64 / 2 = 32 data bytes and 64 / 16 = 4 scale
    bytes. At data column 10 of a 40-byte row they would end at 42 > 40; at scale column 2 of a
    5-byte scale row at 6 > 5: either is refused before anything is written."""
    data = torch.zeros(3, 40, dtype=torch.uint8)
    scales = torch.zeros(3, 5, dtype=torch.uint8)
    x = torch.ones(1, 64)
    bad = {"data_col_offset": 10} if overrun == "data" else {"scale_col_offset": 2}
    with pytest.raises(KVCacheConfigError, match="fit"):
        K.quantize_store_fp4_block16(data, scales, torch.tensor([1]), x, **bad, use_triton=triton)
    assert not bool(data.any()) and not bool(scales.any())
    K.quantize_store_fp4_block16(data, scales, torch.tensor([1]), x, data_col_offset=8, scale_col_offset=1,
                                 use_triton=triton)  # ends at 40 and 5: fits
    # amax 1 -> e = ceil(log2(1 / 6)) = -2, scale byte 125; q = 1 / 2^-2 = 4 -> code 6 (4 <= 4 < 5)
    assert scales[1].tolist() == [0, 125, 125, 125, 125] and data[1].tolist() == [0] * 8 + [0x66] * 32


@needs_triton
@pytest.mark.parametrize("fn", ("store_index_k_scale", "quantize_store_index_k"))
@pytest.mark.parametrize("triton", (True, False, None))
def test_index_k_page_size_defaults_to_sglang_s_64(interp: None, fn: str, triton: bool | None) -> None:
    """DSATokenToKVPool.__init__ requires 64-token physical pages on CUDA (CUDA_INDEX_PAGE_SIZE): the
    index stores default to P = 64. Location 65 -> page 1, offset 1: key bytes [1 * D, 2 * D), scale
    bytes at 64 * D + 1 * 4 (D = 16; one page is 64 * (16 + 4) = 1280 bytes)."""
    assert CUDA_INDEX_PAGE_SIZE == 64
    d = 16
    buf = torch.zeros(2, 64 * (d + 4), dtype=torch.uint8)
    loc = torch.tensor([65])
    key = torch.tensor([[448.0 * (i + 1) / d for i in range(d)]])  # amax 448 -> scale 1, keys as they are
    module = R if triton is None else K
    extra = {} if triton is None else {"use_triton": triton}
    if fn == "store_index_k_scale":
        getattr(module, fn)(buf, loc, key.to(torch.float8_e4m3fn), torch.tensor([1.0]), **extra)
    else:
        getattr(module, fn)(buf, loc, key, **extra)
    want = key.to(torch.float8_e4m3fn).view(torch.uint8)[0].tolist()
    assert buf[1, d : 2 * d].tolist() == want
    assert buf[1, 64 * d + 4 : 64 * d + 8].view(torch.float32).tolist() == [1.0]
    assert int(buf[0].sum()) == 0 and int(buf[1].sum()) == sum(want) + sum(_bytes(torch.tensor([1.0])))


@pytest.mark.parametrize("impl", (K, R))
def test_mla_store_with_an_empty_rope_part_writes_location_0(impl: object) -> None:
    """An empty rope tensor is no rope (MLATokenToKVPool.set_mla_kv_buffer without ``cache_k_rope``):
    only the nope columns are written and, by default, location 0 is not skipped (SGLang skips it only
    with rope present)."""
    buf = torch.zeros(3, 1, 6, dtype=torch.bfloat16)
    nope = torch.tensor([[[1.0, 2.0, 3.0, 4.0]], [[5.0, 6.0, 7.0, 8.0]]], dtype=torch.bfloat16)
    empty = torch.zeros(2, 1, 0, dtype=torch.bfloat16)
    impl.store_mla_kv(buf, torch.tensor([0, 2]), nope, empty)  # type: ignore[attr-defined]
    assert buf[0, 0].tolist() == [1.0, 2.0, 3.0, 4.0, 0.0, 0.0]
    assert buf[2, 0].tolist() == [5.0, 6.0, 7.0, 8.0, 0.0, 0.0]
