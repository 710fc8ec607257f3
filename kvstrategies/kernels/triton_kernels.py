# mypy: allow-untyped-defs, allow-incomplete-defs, allow-untyped-decorators, allow-untyped-calls
"""Triton kernels for the KV write path and their launchers (semantics: :mod:`.reference`).

Bit-exactness with the torch reference on GPU *and* in Triton's interpreter is by design:

* all arithmetic is fp32; divisions use ``tl.math.div_rn`` (IEEE round-to-nearest; plain ``/``
  may lower to an approximate division on NVIDIA GPUs);
* fp32 -> bf16 and fp32 -> fp8 conversions are done in integer arithmetic on the fp32 bits
  (round to nearest even; e4m3fn saturates to +-448 like torch 2.13's cast, e5m2 overflows to
  inf). The interpreter truncates fp32 -> bf16 and mis-rounds fp8 carries, and the hardware
  e4m3 convert saturates differently from torch, so neither built-in cast is used;
* bf16 inputs are read as int16 bits and widened exactly (``bits << 16``);
* ``ceil(log2(y))`` comes from the exponent and mantissa bits of ``y`` (exact), not ``log2``.

This module is imported by :mod:`.dispatch` through :func:`importlib` once per Triton mode
(compiled / ``TRITON_INTERPRET=1``), because ``triton.jit`` fixes the mode when it decorates.
Launchers take torch tensors already viewed as the dtypes the kernels expect (dispatch does it).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

# Element formats (constexpr codes). BF16 is carried as int16 bits, fp8 as uint8 bits.
F32, F16, BF16, E4M3, E5M2 = 0, 1, 2, 3, 4
NONE = -1


# ---------------------------------------------------------------------------------------------
# Exact conversions
# ---------------------------------------------------------------------------------------------
@triton.jit
def _bf16_bits(x):
    """fp32 -> int32 holding the bf16 bit pattern, round to nearest even (NaN -> 0x7FC0)."""
    u = x.to(tl.int32, bitcast=True)
    a = u & 0x7FFFFFFF
    r = (a + 0x7FFF + ((a >> 16) & 1)) >> 16
    r = r | ((u >> 16) & 0x8000)
    return tl.where(a > 0x7F800000, 0x7FC0, r)


@triton.jit
def _round_bf16(x):
    """fp32 rounded to the nearest bf16 value, returned as fp32."""
    return (_bf16_bits(x) << 16).to(tl.float32, bitcast=True)


@triton.jit
def _round_to(x, FMT: tl.constexpr):
    """Round fp32 ``x`` to format FMT (F32: unchanged) and widen back to fp32."""
    if FMT == 2:
        return _round_bf16(x)
    elif FMT == 1:
        return x.to(tl.float16).to(tl.float32)
    else:
        return x


@triton.jit
def _fp8_bits(x, IS_E4M3: tl.constexpr):
    """fp32 -> int32 fp8 bit pattern (0..255), round to nearest even.

    e4m3fn: |x| > 448 (inf included) saturates to 0x7E; NaN -> 0x7F. Subnormals (|x| < 2^-6)
    round |x| * 2^9 to an integer with the 1.5 * 2^23 trick. e5m2: overflow -> inf (0x7C),
    NaN -> 0x7F, subnormals below 2^-14. Sign bit copied.
    """
    u = x.to(tl.int32, bitcast=True)
    sign = (u >> 24) & 0x80
    a = u & 0x7FFFFFFF
    af = a.to(tl.float32, bitcast=True)
    if IS_E4M3:
        sub = (af * 512.0 + 12582912.0).to(tl.int32, bitcast=True) - 0x4B400000
        nrm = (a - (120 << 23) + 0x7FFFF + ((a >> 20) & 1)) >> 20
        r = tl.where(a < 0x3C800000, sub, nrm)
        r = tl.where(a > 0x43E00000, 0x7E, r)
        r = tl.where(a > 0x7F800000, 0x7F, r)
    else:
        sub = (af * 65536.0 + 12582912.0).to(tl.int32, bitcast=True) - 0x4B400000
        nrm = (a - (112 << 23) + 0xFFFFF + ((a >> 21) & 1)) >> 21
        r = tl.where(a < 0x38800000, sub, nrm)
        r = tl.where(a >= 0x47800000, 0x7C, r)
        r = tl.where(a > 0x7F800000, 0x7F, r)
    return r | sign


@triton.jit
def _pow2(e):
    """``2^e`` as fp32 for int32 ``e`` in [-126, 127] (exact)."""
    return ((e + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def _ceil_log2(y):
    """Exact ``ceil(log2(y))`` (int32) for positive normal fp32 ``y``."""
    b = y.to(tl.int32, bitcast=True)
    return ((b >> 23) & 0xFF) - 127 + ((b & 0x7FFFFF) != 0).to(tl.int32)


@triton.jit
def _e4m3_value(b):
    """Non-negative e4m3fn bits (int32, < 0x7F) -> fp32 value, exactly."""
    e = b >> 3
    m = (b & 7).to(tl.float32)
    return tl.where(e == 0, m * 0.001953125, (m + 8.0) * _pow2(e - 10))


@triton.jit
def _load_f32(ptr, mask, IN_FMT: tl.constexpr):
    """Load and widen to fp32 exactly (masked lanes read 0)."""
    if IN_FMT == 2:
        bits = tl.load(ptr, mask=mask, other=0).to(tl.int32) & 0xFFFF
        return (bits << 16).to(tl.float32, bitcast=True)
    else:
        return tl.load(ptr, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _encode(x, OUT_FMT: tl.constexpr):
    """fp32 -> the stored element: fp32, fp16, bf16 bits (int16) or fp8 bits (uint8)."""
    if OUT_FMT == 0:
        return x
    elif OUT_FMT == 1:
        return x.to(tl.float16)
    elif OUT_FMT == 2:
        return _bf16_bits(x).to(tl.int16)
    elif OUT_FMT == 3:
        return _fp8_bits(x, True).to(tl.uint8)
    else:
        return _fp8_bits(x, False).to(tl.uint8)


@triton.jit
def _e2m1_code_ge(m):
    """fp4_mx_block16 magnitude code: number of thresholds <= m (ties away from zero)."""
    c = (m >= 0.25).to(tl.int32) + (m >= 0.75).to(tl.int32) + (m >= 1.25).to(tl.int32)
    c += (m >= 1.75).to(tl.int32) + (m >= 2.5).to(tl.int32) + (m >= 3.5).to(tl.int32)
    return c + (m >= 5.0).to(tl.int32)


@triton.jit
def _e2m1_code_rtne(m):
    """Nearest e2m1 code, ties to the even code, saturating at 6.0 (code 7)."""
    c = (m > 0.25).to(tl.int32) + (m >= 0.75).to(tl.int32) + (m > 1.25).to(tl.int32)
    c += (m >= 1.75).to(tl.int32) + (m > 2.5).to(tl.int32) + (m >= 3.5).to(tl.int32)
    return c + (m > 5.0).to(tl.int32)


@triton.jit
def _nibble(q, code):
    return code | ((q < 0.0).to(tl.int32) << 3)


# ---------------------------------------------------------------------------------------------
# Row scatter (MHA K/V, MLA nope/rope)
# ---------------------------------------------------------------------------------------------
@triton.jit
def _store_rows_kernel(
    src_ptr, dst_ptr, loc_ptr, scale_ptr, width, src_stride, dst_stride, dst_col,
    IN_FMT: tl.constexpr, OUT_FMT: tl.constexpr, ROUND_FMT: tl.constexpr,
    HAS_SCALE: tl.constexpr, COPY: tl.constexpr, SKIP_ZERO: tl.constexpr, BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    loc = tl.load(loc_ptr + row).to(tl.int64)
    if SKIP_ZERO:
        width = tl.where(loc != 0, width, 0)
    mask = cols < width
    src = src_ptr + row.to(tl.int64) * src_stride + cols
    dst = dst_ptr + loc * dst_stride + dst_col + cols
    if COPY:
        tl.store(dst, tl.load(src, mask=mask), mask=mask)
    else:
        x = _load_f32(src, mask, IN_FMT)
        if HAS_SCALE:
            x = _round_to(tl.math.div_rn(x, tl.load(scale_ptr)), ROUND_FMT)
        tl.store(dst, _encode(x, OUT_FMT), mask=mask)


def _block(width: int, cap: int = 2048) -> int:
    return max(16, min(int(triton.next_power_of_2(max(width, 1))), cap))


def launch_store_rows(
    src: torch.Tensor,
    dst: torch.Tensor,
    loc: torch.Tensor,
    scale: torch.Tensor | None,
    *,
    dst_col: int,
    in_fmt: int,
    out_fmt: int,
    round_fmt: int,
    copy: bool,
    skip_zero: bool,
) -> None:
    """``src`` (N, W) and ``dst`` (rows, Wd) 2-D views (last dim contiguous), ``loc`` (N,)."""
    n, width = src.shape
    if n == 0 or width == 0:
        return
    block = _block(width)
    grid = (n, triton.cdiv(width, block))
    _store_rows_kernel[grid](
        src, dst, loc, scale if scale is not None else loc, width, src.stride(0), dst.stride(0), dst_col,
        IN_FMT=in_fmt, OUT_FMT=out_fmt, ROUND_FMT=round_fmt, HAS_SCALE=scale is not None,
        COPY=copy, SKIP_ZERO=skip_zero, BLOCK=block,
    )


# ---------------------------------------------------------------------------------------------
# All-layer row copy
# ---------------------------------------------------------------------------------------------
@triton.jit
def _move_rows_kernel(
    base_ptr, stride_ptr, width_ptr, dst_loc_ptr, src_loc_ptr, WORD: tl.constexpr, BLOCK: tl.constexpr
):
    i = tl.program_id(0)
    b = tl.program_id(1)
    cols = tl.program_id(2) * BLOCK + tl.arange(0, BLOCK)
    base = tl.load(base_ptr + b)
    if WORD == 8:
        ptr = base.to(tl.pointer_type(tl.int64))
    elif WORD == 4:
        ptr = base.to(tl.pointer_type(tl.int32))
    elif WORD == 2:
        ptr = base.to(tl.pointer_type(tl.int16))
    else:
        ptr = base.to(tl.pointer_type(tl.uint8))
    stride = tl.load(stride_ptr + b)
    mask = cols < tl.load(width_ptr + b)
    d = tl.load(dst_loc_ptr + i).to(tl.int64)
    s = tl.load(src_loc_ptr + i).to(tl.int64)
    v = tl.load(ptr + s * stride + cols, mask=mask)
    tl.store(ptr + d * stride + cols, v, mask=mask)


def _word_size(values: Sequence[int]) -> int:
    for word in (8, 4, 2):
        if all(v % word == 0 for v in values):
            return word
    return 1


def launch_move_rows(buffers: Sequence[torch.Tensor], dst_loc: torch.Tensor, src_loc: torch.Tensor) -> None:
    """One launch copying rows ``src_loc -> dst_loc`` in every buffer (each viewed 2-D, bytes).

    Buffers are addressed through a device table of base pointers, row strides and row widths,
    in units of the widest word (8, 4, 2 or 1 bytes) that divides every address and size.
    """
    n = dst_loc.numel()
    if n == 0 or not buffers:
        return
    rows = [b.reshape(b.shape[0], -1) for b in buffers]
    strides = [r.stride(0) * r.element_size() for r in rows]
    widths = [r.shape[1] * r.element_size() for r in rows]
    bases = [r.data_ptr() for r in rows]
    word = _word_size(strides + widths + bases)
    dev = dst_loc.device
    table = torch.tensor([bases, [s // word for s in strides], [w // word for w in widths]], dtype=torch.int64)
    table = table.to(dev)
    block = _block(max(widths) // word)
    grid = (n, len(rows), triton.cdiv(max(widths) // word, block))
    _move_rows_kernel[grid](table[0], table[1], table[2], dst_loc, src_loc, WORD=word, BLOCK=block)


# ---------------------------------------------------------------------------------------------
# DSA indexer keys
# ---------------------------------------------------------------------------------------------
@triton.jit
def _index_k_store_kernel(
    buf_ptr, loc_ptr, key_ptr, scale_ptr, key_stride, buf_stride, D, P, BLOCK_D: tl.constexpr
):
    i = tl.program_id(0)
    loc = tl.load(loc_ptr + i).to(tl.int64)
    row = buf_ptr + (loc // P) * buf_stride
    off = loc % P
    cols = tl.arange(0, BLOCK_D)
    m = cols < D
    tl.store(row + off * D + cols, tl.load(key_ptr + i.to(tl.int64) * key_stride + cols, mask=m), mask=m)
    c4 = tl.arange(0, 4)
    tl.store(row + P * D + off * 4 + c4, tl.load(scale_ptr + i.to(tl.int64) * 4 + c4))


def launch_index_k_store(buf: torch.Tensor, loc: torch.Tensor, keys: torch.Tensor, scale_bytes: torch.Tensor,
                         page_size: int) -> None:
    """``buf`` (pages, P*(D+4)) uint8, ``keys`` (N, D) uint8, ``scale_bytes`` (N, 4) uint8 contiguous."""
    n, d = keys.shape
    if n == 0:
        return
    _index_k_store_kernel[(n,)](
        buf, loc, keys, scale_bytes, keys.stride(0), buf.stride(0), d, page_size,
        BLOCK_D=triton.next_power_of_2(d),
    )


@triton.jit
def _index_k_quant_store_kernel(
    buf_ptr, loc_ptr, x_ptr, x_stride, buf_stride, D, P, eps,
    IN_FMT: tl.constexpr, SCALE_POW2: tl.constexpr, BLOCK_D: tl.constexpr,
):
    i = tl.program_id(0)
    loc = tl.load(loc_ptr + i).to(tl.int64)
    row = buf_ptr + (loc // P) * buf_stride
    off = loc % P
    cols = tl.arange(0, BLOCK_D)
    m = cols < D
    x = _load_f32(x_ptr + i.to(tl.int64) * x_stride + cols, m, IN_FMT)
    s = tl.math.div_rn(tl.maximum(tl.max(tl.abs(x), axis=0), eps), 448.0)
    if SCALE_POW2:
        s = _pow2(_ceil_log2(s))
    q = tl.clamp(tl.math.div_rn(x, s), -448.0, 448.0)
    tl.store(row + off * D + cols, _fp8_bits(q, True).to(tl.uint8), mask=m)
    c4 = tl.arange(0, 4)
    sbytes = (s.to(tl.int32, bitcast=True) >> (c4 * 8)) & 0xFF
    tl.store(row + P * D + off * 4 + c4, sbytes.to(tl.uint8))


def launch_index_k_quant_store(buf: torch.Tensor, loc: torch.Tensor, x: torch.Tensor, *, in_fmt: int,
                               page_size: int, scale_pow2: bool, eps: float) -> None:
    n, d = x.shape
    if n == 0:
        return
    _index_k_quant_store_kernel[(n,)](
        buf, loc, x, x.stride(0), buf.stride(0), d, page_size, eps,
        IN_FMT=in_fmt, SCALE_POW2=scale_pow2, BLOCK_D=triton.next_power_of_2(d),
    )


# ---------------------------------------------------------------------------------------------
# MXFP8 quantize-and-store
# ---------------------------------------------------------------------------------------------
@triton.jit
def _mxfp8_store_kernel(
    x_ptr, data_ptr, scale_ptr, loc_ptr, D,
    x_stride_t, x_stride_h, data_stride_t, data_stride_h, scale_stride_0, scale_stride_h,
    IN_FMT: tl.constexpr, INTERLEAVED: tl.constexpr, SKIP_ZERO: tl.constexpr, NB: tl.constexpr,
):
    i = tl.program_id(0)
    h = tl.program_id(1)
    loc = tl.load(loc_ptr + i).to(tl.int64)
    nblocks = D // 32
    b = tl.arange(0, NB)
    c = tl.arange(0, 32)
    live = nblocks
    if SKIP_ZERO:
        live = tl.where(loc != 0, nblocks, 0)
    bmask = b < live
    mask = bmask[:, None] & (c[None, :] < 32)
    offs = b[:, None] * 32 + c[None, :]
    x = _load_f32(x_ptr + i.to(tl.int64) * x_stride_t + h * x_stride_h + offs, mask, IN_FMT)
    amax = tl.maximum(tl.max(tl.abs(x), axis=1), 1e-30)
    e = tl.minimum(tl.maximum(_ceil_log2(tl.math.div_rn(amax, 448.0)) + 127, 0), 254)
    scale = (e << 23).to(tl.float32, bitcast=True)
    q = tl.clamp(tl.math.div_rn(x, scale[:, None]), -448.0, 448.0)
    tl.store(data_ptr + loc * data_stride_t + h * data_stride_h + offs, _fp8_bits(q, True).to(tl.uint8), mask=mask)
    if INTERLEAVED:
        t = loc % 128
        sp = scale_ptr + (loc // 128) * scale_stride_0 + h * scale_stride_h + (t % 32) * (4 * nblocks)
        sp = sp + (t // 32) * nblocks + b
    else:
        sp = scale_ptr + loc * scale_stride_0 + h * scale_stride_h + b
    tl.store(sp, e.to(tl.uint8), mask=bmask)


def launch_mxfp8_store(x: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, loc: torch.Tensor, *,
                       in_fmt: int, interleaved: bool, skip_zero: bool) -> None:
    """``x`` (N, H, D) last dim contiguous; ``data`` (rows, H, D) uint8; ``scales`` uint8
    (pages, H, 32, 4, D/32) when interleaved else (rows, H, D/32), inner dims contiguous."""
    n, h, d = x.shape
    if n == 0:
        return
    _mxfp8_store_kernel[(n, h)](
        x, data, scales, loc, d, x.stride(0), x.stride(1), data.stride(0), data.stride(1),
        scales.stride(0), scales.stride(1),
        IN_FMT=in_fmt, INTERLEAVED=interleaved, SKIP_ZERO=skip_zero, NB=triton.next_power_of_2(d // 32),
    )


# ---------------------------------------------------------------------------------------------
# FP4: fp4_mx_block16 and nvfp4
# ---------------------------------------------------------------------------------------------
@triton.jit
def _fp4_block16_store_kernel(
    x_ptr, data_ptr, scale_ptr, loc_ptr, W, x_stride, data_stride, scale_stride, data_col, scale_col,
    IN_FMT: tl.constexpr, SKIP_ZERO: tl.constexpr, NB: tl.constexpr,
):
    i = tl.program_id(0)
    loc = tl.load(loc_ptr + i).to(tl.int64)
    b = tl.program_id(1) * NB + tl.arange(0, NB)
    j = tl.arange(0, 8)
    live = W // 16
    if SKIP_ZERO:
        live = tl.where(loc != 0, live, 0)
    bmask = b < live
    mask = bmask[:, None] & (j[None, :] < 8)
    src = x_ptr + i.to(tl.int64) * x_stride + b[:, None] * 16 + 2 * j[None, :]
    xe = _load_f32(src, mask, IN_FMT)
    xo = _load_f32(src + 1, mask, IN_FMT)
    amax = tl.maximum(tl.max(tl.abs(xe), axis=1), tl.max(tl.abs(xo), axis=1))
    e = _ceil_log2(tl.maximum(tl.math.div_rn(amax, 6.0), 1e-10))
    p2 = _pow2(e)[:, None]
    qe = tl.math.div_rn(xe, p2)
    qo = tl.math.div_rn(xo, p2)
    byte = _nibble(qe, _e2m1_code_ge(tl.abs(qe))) | (_nibble(qo, _e2m1_code_ge(tl.abs(qo))) << 4)
    tl.store(data_ptr + loc * data_stride + data_col + b[:, None] * 8 + j[None, :], byte.to(tl.uint8), mask=mask)
    tl.store(scale_ptr + loc * scale_stride + scale_col + b, (e + 127).to(tl.uint8), mask=bmask)


def launch_fp4_block16_store(x: torch.Tensor, data: torch.Tensor, scales: torch.Tensor, loc: torch.Tensor, *,
                             in_fmt: int, data_col: int, scale_col: int, skip_zero: bool) -> None:
    """``x`` (N, W) with W % 16 == 0; ``data`` / ``scales`` 2-D uint8 row views."""
    n, w = x.shape
    if n == 0 or w == 0:
        return
    nb = min(triton.next_power_of_2(w // 16), 64)
    _fp4_block16_store_kernel[(n, triton.cdiv(w // 16, nb))](
        x, data, scales, loc, w, x.stride(0), data.stride(0), scales.stride(0), data_col, scale_col,
        IN_FMT=in_fmt, SKIP_ZERO=skip_zero, NB=nb,
    )


@triton.jit
def _nvfp4_store_kernel(
    x_ptr, data_ptr, lin_ptr, nat_ptr, loc_ptr, g_ptr, D, P,
    x_stride_t, x_stride_h, data_stride_t, data_stride_h, lin_stride_t, lin_stride_h, nat_stride_p, nat_stride_h,
    IN_FMT: tl.constexpr, HAS_LIN: tl.constexpr, HAS_NATIVE: tl.constexpr, V_LAYOUT: tl.constexpr,
    NB: tl.constexpr,
):
    i = tl.program_id(0)
    h = tl.program_id(1)
    loc = tl.load(loc_ptr + i).to(tl.int64)
    nblocks = D // 16
    b = tl.arange(0, NB)
    j = tl.arange(0, 8)
    bmask = b < nblocks
    mask = bmask[:, None] & (j[None, :] < 8)
    src = x_ptr + i.to(tl.int64) * x_stride_t + h * x_stride_h + b[:, None] * 16 + 2 * j[None, :]
    xe = _load_f32(src, mask, IN_FMT)
    xo = _load_f32(src + 1, mask, IN_FMT)
    g = tl.load(g_ptr)
    amax = tl.maximum(tl.max(tl.abs(xe), axis=1), tl.max(tl.abs(xo), axis=1))
    sbits = _fp8_bits(tl.minimum(tl.math.div_rn(amax, 6.0 * g), 448.0), True)
    denom = _e4m3_value(sbits) * g
    safe = tl.where(denom == 0.0, 1.0, denom)[:, None]
    qe = tl.where(denom[:, None] == 0.0, 0.0, tl.math.div_rn(xe, safe))
    qo = tl.where(denom[:, None] == 0.0, 0.0, tl.math.div_rn(xo, safe))
    byte = _nibble(qe, _e2m1_code_rtne(tl.abs(qe))) | (_nibble(qo, _e2m1_code_rtne(tl.abs(qo))) << 4)
    dst = data_ptr + loc * data_stride_t + h * data_stride_h + b[:, None] * 8 + j[None, :]
    tl.store(dst, byte.to(tl.uint8), mask=mask)
    if HAS_LIN:
        tl.store(lin_ptr + loc * lin_stride_t + h * lin_stride_h + b, sbits.to(tl.uint8), mask=bmask)
    if HAS_NATIVE:
        off = loc % P
        if V_LAYOUT:
            q4 = nblocks // 4
            r = (off // 4) * 4 + b // q4
            col = (b % q4) * 4 + off % 4
        else:
            r = off + b * 0
            col = b
        dst_s = nat_ptr + (loc // P) * nat_stride_p + h * nat_stride_h + r * nblocks + col
        tl.store(dst_s, sbits.to(tl.uint8), mask=bmask)


def launch_nvfp4_store(x: torch.Tensor, data: torch.Tensor, loc: torch.Tensor, g: torch.Tensor,
                       lin: torch.Tensor | None, native: torch.Tensor | None, *, in_fmt: int,
                       v_layout: bool) -> None:
    """``x`` (N, H, D); ``data`` (rows, H, D/2) uint8; ``lin`` (rows, H, D/16) uint8 or None;
    ``native`` (pages, H, P, D/16) uint8 (inner two dims contiguous) or None; ``g`` (1,) fp32."""
    n, h, d = x.shape
    if n == 0:
        return
    lin_t = lin if lin is not None else data
    nat_t = native if native is not None else data
    page = native.shape[2] if native is not None else 1
    _nvfp4_store_kernel[(n, h)](
        x, data, lin_t, nat_t, loc, g, d, page,
        x.stride(0), x.stride(1), data.stride(0), data.stride(1), lin_t.stride(0), lin_t.stride(1),
        nat_t.stride(0), nat_t.stride(1),
        IN_FMT=in_fmt, HAS_LIN=lin is not None, HAS_NATIVE=native is not None, V_LAYOUT=v_layout,
        NB=triton.next_power_of_2(d // 16),
    )
