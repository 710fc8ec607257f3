"""Pure-torch reference implementations of the KV write path (write_path.md).

Every function here defines the semantics its Triton twin in :mod:`.triton_kernels` must match
bit for bit (tests compare the two under ``TRITON_INTERPRET=1``). Arithmetic is done in fp32;
casts use torch's own ``.to()`` (round to nearest even). Units: ``loc`` are token locations
(rows of a token-major buffer, or ``page * P + offset`` for page-major ones), widths are in
elements of the named tensor unless a name ends in ``_bytes``.

Conventions shared by all stores:

* ``loc`` is a 1-D int64 or int32 tensor, one entry per input row; callers never pass
  duplicate locations (parallel kernels race on them).
* ``skip_zero_loc=True`` drops writes to location 0, the padding sink, as SGLang's fast CUDA
  kernels do (row 0 is the padding slot of every pool); row 0's contents are unspecified either way.
* Buffers are written through byte views, so fp8 / e8m0 / uint8 storage is all the same here.
* NaN inputs give unspecified bytes (torch's own NaN encodings differ between code paths).

fp8 overflow (pinned by ``tests/kernels/test_kernels.py`` for the installed
torch): torch 2.13 casts fp32 to ``float8_e4m3fn`` **saturating** to +-448 (inf included) and to
``float8_e5m2`` rounding to nearest even with overflow to inf.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from ..errors import KVCacheConfigError, require

__all__ = [
    "E2M1_VALUES",
    "FP4_MX_BLOCK16_THRESHOLDS",
    "ceil_log2",
    "cast_rows",
    "dequantize_fp4_block16",
    "dequantize_nvfp4",
    "move_kv_cache",
    "pow2_from_biased_exponent",
    "quantize_fp4_block16",
    "quantize_index_k",
    "quantize_mxfp8",
    "quantize_nvfp4",
    "quantize_store_fp4_block16",
    "quantize_store_index_k",
    "quantize_store_mxfp8",
    "quantize_store_nvfp4",
    "resolve_kv_dtype",
    "store_index_k_scale",
    "store_kv",
    "store_mla_kv",
    "store_rows",
]

FP8_E4M3_MAX = 448.0
#: magnitudes of the 8 FP4 (e2m1) codes 0..7; bit 3 of a nibble is the sign.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
#: fp4_mx_block16 magnitude code = number of these thresholds that are <= |q| (fp4_mx_block16 quant_method).
FP4_MX_BLOCK16_THRESHOLDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
MXFP8_BLOCK = 32
FP4_BLOCK = 16
MXFP8_INTERLEAVE_PAGE = 128

Scale = float | torch.Tensor


# -- small helpers ---------------------------------------------------------------------------------
def _locs(loc: torch.Tensor) -> torch.Tensor:
    return loc.reshape(-1).to(torch.int64)


def _rows(x: torch.Tensor, n: int) -> torch.Tensor:
    """``x`` as ``(n, width)``; ``x`` is ``(n, ...)`` with each row contiguous."""
    require(x.shape[0] == n, f"expected {n} rows (one per location), got shape {tuple(x.shape)}")
    return x.reshape(n, math.prod(x.shape[1:]))  # not (n, -1): an empty batch (n = 0) has no -1 to infer


def _byte_rows(t: torch.Tensor) -> torch.Tensor:
    """A buffer (or rows) as ``(rows, row_bytes)`` uint8, sharing memory."""
    flat = t.reshape(t.shape[0], -1) if t.dim() != 2 else t
    return flat.view(torch.uint8) if flat.dtype != torch.uint8 else flat


def _require_fit(buf_bytes: torch.Tensor, col: int, vals: torch.Tensor) -> None:
    """Rows of ``vals.shape[1]`` bytes written at byte column ``col`` end within ``buf_bytes``' rows."""
    require(
        col + vals.shape[1] <= buf_bytes.shape[1],
        f"row write [{col}, {col + vals.shape[1]}) does not fit a {buf_bytes.shape[1]}-byte row",
    )


def _scatter_bytes(buf_bytes: torch.Tensor, loc: torch.Tensor, col: int, vals: torch.Tensor, skip0: bool) -> None:
    """``buf_bytes[loc[i], col : col + vals.shape[1]] = vals[i]`` (optionally not for loc 0)."""
    if skip0:
        keep = loc != 0
        loc, vals = loc[keep], vals[keep]
    _require_fit(buf_bytes, col, vals)
    buf_bytes[loc, col : col + vals.shape[1]] = vals


def ceil_log2(y: torch.Tensor) -> torch.Tensor:
    """Exact ``ceil(log2(y))`` (int32) of positive normal fp32 ``y`` from its exponent and mantissa.

    ``torch.log2`` (and Triton's ``log2``) can round ``log2(2^k * (1 + 2^-23))`` to exactly ``k``;
    this never does. Rule used for every "ceil(log2(...))" in write_path.md.
    """
    mant, exp = torch.frexp(y.float())
    return torch.where(mant == 0.5, exp - 1, exp).to(torch.int32)


def pow2_from_biased_exponent(e_biased: torch.Tensor) -> torch.Tensor:
    """``2^(e_biased - 127)`` as fp32, exactly (``e_biased`` in ``[1, 254]``; 0 gives 0.0)."""
    return (e_biased.to(torch.int32) << 23).view(torch.float32)


def _as_scale(scale: Scale, device: torch.device) -> torch.Tensor:
    return torch.as_tensor(scale, dtype=torch.float32, device=device).reshape(())


def resolve_kv_dtype(buffer: torch.Tensor, src_dtype: torch.dtype, kv_dtype: torch.dtype | None) -> torch.dtype:
    """The logical dtype of ``buffer``: ``kv_dtype`` if given, else the buffer's own dtype.

    A uint8 buffer holds fp8 bytes (KVCache.__init__ store dtype); without ``kv_dtype`` it takes one-byte
    inputs as they are and refuses wider ones (which fp8 format would be ambiguous).
    """
    if kv_dtype is not None:
        require(
            kv_dtype.itemsize == buffer.dtype.itemsize,
            f"kv_dtype {kv_dtype} does not fit a {buffer.dtype} buffer (element sizes differ)",
        )
        return kv_dtype
    if buffer.dtype != torch.uint8:
        return buffer.dtype
    if src_dtype.itemsize == 1:
        return src_dtype
    raise KVCacheConfigError(
        f"a uint8 buffer stores fp8 bytes: pass kv_dtype (e.g. torch.float8_e4m3fn) for {src_dtype} input"
    )


# -- MHA / MLA stores (MHATokenToKVPool.set_kv_buffer, MLATokenToKVPool.set_kv_buffer) ---------------------------------
def cast_rows(rows: torch.Tensor, kv_dtype: torch.dtype, scale: Scale | None = None) -> torch.Tensor:
    """SGLang's conversion before the store (the first thing MHATokenToKVPool.set_kv_buffer does), out of place.

    Same dtype: unchanged (the scale is ignored, as in SGLang). Otherwise, with a scale:
    ``x = round_to(rows.dtype, fp32(x) / fp32(scale))`` (SGLang divides the input in place, in
    its own dtype), then ``x.to(kv_dtype)`` (no clamping beyond what torch's cast does).
    """
    if rows.dtype == kv_dtype:
        return rows
    x = rows
    if scale is not None:
        x = (x.float() / _as_scale(scale, x.device)).to(rows.dtype)
    return x.to(kv_dtype)


def store_rows(
    buffer: torch.Tensor,
    loc: torch.Tensor,
    rows: torch.Tensor,
    *,
    kv_dtype: torch.dtype | None = None,
    scale: Scale | None = None,
    col_offset: int = 0,
    skip_zero_loc: bool = False,
) -> None:
    """Scatter ``cast_rows(rows)`` into ``buffer[loc[i], col_offset : col_offset + width]``.

    ``buffer`` is ``(rows, ...)``, token-major; ``rows`` is ``(N, ...)`` with ``width`` elements per
    token; ``col_offset`` counts elements of ``kv_dtype``.
    """
    loc = _locs(loc)
    dtype = resolve_kv_dtype(buffer, rows.dtype, kv_dtype)
    vals = cast_rows(_rows(rows, loc.numel()), dtype, scale)
    _scatter_bytes(_byte_rows(buffer), loc, col_offset * dtype.itemsize, _byte_rows(vals.contiguous()), skip_zero_loc)


def store_kv(
    k_buffer: torch.Tensor,
    v_buffer: torch.Tensor,
    loc: torch.Tensor,
    cache_k: torch.Tensor,
    cache_v: torch.Tensor,
    *,
    k_scale: Scale | None = None,
    v_scale: Scale | None = None,
    kv_dtype: torch.dtype | None = None,
    skip_zero_loc: bool = True,
) -> None:
    """MHA ``set_kv_buffer`` (NHD): ``k_buffer[loc[i]] = cast(cache_k[i])``, same for V.

    ``cache_k`` ``(N, H, D)`` or ``(N, H*D)``; V may have another head dim. ``skip_zero_loc``
    defaults to the CUDA ``store_cache`` behaviour (location 0 not written). The caller's
    tensors are not modified (SGLang divides them in place; the values stored are the same).
    """
    _store_kv_with(store_rows, k_buffer, v_buffer, loc, cache_k, cache_v, k_scale, v_scale, kv_dtype, skip_zero_loc)


def _store_kv_with(
    store: Callable[..., None],
    k_buffer: torch.Tensor,
    v_buffer: torch.Tensor,
    loc: torch.Tensor,
    cache_k: torch.Tensor,
    cache_v: torch.Tensor,
    k_scale: Scale | None,
    v_scale: Scale | None,
    kv_dtype: torch.dtype | None,
    skip_zero_loc: bool,
) -> None:
    """:func:`store_kv` over a given row store (this module's :func:`store_rows` or the dispatching one)."""
    store(k_buffer, loc, cache_k, kv_dtype=kv_dtype, scale=k_scale, skip_zero_loc=skip_zero_loc)
    store(v_buffer, loc, cache_v, kv_dtype=kv_dtype, scale=v_scale, skip_zero_loc=skip_zero_loc)


def store_mla_kv(
    kv_buffer: torch.Tensor,
    loc: torch.Tensor,
    cache_k_nope: torch.Tensor,
    cache_k_rope: torch.Tensor | None = None,
    *,
    kv_dtype: torch.dtype | None = None,
    skip_zero_loc: bool | None = None,
) -> None:
    """MLA ``set_mla_kv_buffer``: row ``loc[i]`` becomes ``[nope_i | rope_i]`` cast to the pool dtype.

    ``kv_buffer`` ``(rows, 1, kv_lora_rank + rope)``; ``cache_k_nope`` ``(N, [1,] kv_lora_rank)``,
    ``cache_k_rope`` ``(N, [1,] rope)`` or None / empty (then only the nope columns are written).
    ``skip_zero_loc`` defaults to SGLang's scatter kernel: skip location 0 iff rope is present.
    """
    _store_mla_kv_with(store_rows, kv_buffer, loc, cache_k_nope, cache_k_rope, kv_dtype, skip_zero_loc)


def _store_mla_kv_with(
    store: Callable[..., None],
    kv_buffer: torch.Tensor,
    loc: torch.Tensor,
    cache_k_nope: torch.Tensor,
    cache_k_rope: torch.Tensor | None,
    kv_dtype: torch.dtype | None,
    skip_zero_loc: bool | None,
) -> None:
    """:func:`store_mla_kv` over a given row store: nope at column 0, rope right after it."""
    has_rope = cache_k_rope is not None and cache_k_rope.numel() > 0
    skip = has_rope if skip_zero_loc is None else skip_zero_loc
    store(kv_buffer, loc, cache_k_nope, kv_dtype=kv_dtype, skip_zero_loc=skip)
    if has_rope:
        assert cache_k_rope is not None
        width = _rows(cache_k_nope, _locs(loc).numel()).shape[1]
        store(kv_buffer, loc, cache_k_rope, kv_dtype=kv_dtype, col_offset=width, skip_zero_loc=skip)


# -- all-layer copy ------------------------------------------------------------------------------
def move_kv_cache(buffers: Sequence[torch.Tensor], dst_loc: torch.Tensor, src_loc: torch.Tensor) -> None:
    """For every token-major buffer: ``buf[dst_loc[i]] = buf[src_loc[i]]`` (whole rows, as bytes).

    All sources are read before any destination is written; the Triton kernel copies in
    parallel, so callers must not let ``dst_loc`` and ``src_loc`` overlap (SGLang's contract).
    """
    dst, src = _locs(dst_loc), _locs(src_loc)
    require(dst.numel() == src.numel(), f"{dst.numel()} destinations for {src.numel()} sources")
    for buf in buffers:
        rows = _byte_rows(buf)
        rows[dst] = rows[src]


# -- DSA indexer keys (DSATokenToKVPool.set_index_k_scale_buffer) ------------------------------------------------------
def store_index_k_scale(
    buffer: torch.Tensor,
    loc: torch.Tensor,
    index_k: torch.Tensor,
    index_k_scale: torch.Tensor,
    *,
    page_size: int = 64,
) -> None:
    """Pack keys and fp32 scales into the page-major ``index_k_with_scale_buffer``.

    ``buffer`` ``(pages, P * (D + 4))`` uint8; ``index_k`` ``(N, D)`` one-byte (fp8) keys;
    ``index_k_scale`` ``(N,)`` or ``(N, 1)`` fp32. With ``page = loc // P``, ``off = loc % P``:
    key bytes at ``[page, off*D : off*D + D]``, scale bytes at ``[page, P*D + off*4 : +4]``
    (little-endian fp32). Location 0 is written (no skip).
    """
    loc = _locs(loc)
    n, p = loc.numel(), page_size
    keys = _byte_rows(_rows(index_k, n).contiguous())
    d = keys.shape[1]
    scales = index_k_scale.reshape(n).to(torch.float32).contiguous().view(torch.uint8).reshape(n, 4)
    buf = _byte_rows(buffer)
    require(buf.shape[1] == p * (d + 4), f"index buffer rows hold {buf.shape[1]} bytes, expected {p}*({d}+4)")
    page, off = (loc // p)[:, None], (loc % p)[:, None]
    buf[page, off * d + torch.arange(d, device=loc.device)] = keys
    buf[page, p * d + off * 4 + torch.arange(4, device=loc.device)] = scales


def quantize_index_k(
    k: torch.Tensor, *, scale_pow2: bool = False, eps: float = 1e-4
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token fp8 quantization of indexer keys: ``(keys float8_e4m3fn (N, D), scales fp32 (N,))``.

    ``scale = max(amax(|x|), eps) / 448`` in fp32 (``scale_pow2``: rounded up to ``2^ceil(log2)``,
    exact), ``key = clamp(x / scale, -448, 448)`` cast to fp8 (round to nearest even).
    """
    x = k.reshape(k.shape[0], -1).float()
    scale = x.abs().amax(dim=1).clamp_min(eps) / FP8_E4M3_MAX
    if scale_pow2:
        scale = pow2_from_biased_exponent(ceil_log2(scale) + 127)
    q = (x / scale[:, None]).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale


def quantize_store_index_k(
    buffer: torch.Tensor, loc: torch.Tensor, k: torch.Tensor, *, page_size: int = 64, scale_pow2: bool = False
) -> None:
    """:func:`quantize_index_k` then :func:`store_index_k_scale` (the fused CUDA path's semantics)."""
    q, scale = quantize_index_k(k, scale_pow2=scale_pow2)
    store_index_k_scale(buffer, loc, q, scale, page_size=page_size)


# -- MXFP8 (MHATokenToKVPoolMXFP8.set_kv_buffer) -----------------------------------------------------------------------
def quantize_mxfp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q float8_e4m3fn, E uint8)`` per 32-element block of the last dim of ``x`` ``(..., D)``.

    ``amax = max(max|x|, 1e-30)``; ``E = clamp(ceil(log2(amax / 448)) + 127, 0, 254)`` (exact
    ceil-log2, :func:`ceil_log2`); ``q = clamp(x / 2^(E - 127), -448, 448)`` cast to fp8. All fp32.
    """
    d = x.shape[-1]
    require(d % MXFP8_BLOCK == 0, f"MXFP8 needs a head dim divisible by 32, got {d}")
    xf = x.float().reshape(*x.shape[:-1], d // MXFP8_BLOCK, MXFP8_BLOCK)
    amax = xf.abs().amax(dim=-1).clamp_min(1e-30)
    e = (ceil_log2(amax / FP8_E4M3_MAX) + 127).clamp(0, 254)
    q = (xf / pow2_from_biased_exponent(e)[..., None]).clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX)
    return q.to(torch.float8_e4m3fn).reshape(x.shape), e.to(torch.uint8)


def quantize_store_mxfp8(
    data_buffer: torch.Tensor,
    scale_buffer: torch.Tensor,
    loc: torch.Tensor,
    x: torch.Tensor,
    *,
    interleaved: bool = True,
    skip_zero_loc: bool = True,
) -> None:
    """Fused MXFP8 ``set_kv_buffer``: quantize ``x`` ``(N, H, D)`` and scatter data and scales.

    Data: ``data_buffer[loc] = q`` (``(rows, H, D)`` fp8 or uint8). Scales (uint8 or e8m0):
    interleaved (page size 128) ``scale_buffer[loc // 128, h, t % 32, t // 32, s]`` with
    ``t = loc % 128``, buffer ``(pages, H, 32, 4, D/32)``; flat ``scale_buffer[loc, h, s]``.
    Location 0 is skipped by default, as in SGLang's kernel.
    """
    loc = _locs(loc)
    n = loc.numel()
    require(x.dim() == 3 and x.shape[0] == n, f"x must be (N, H, D) with N = {n}, got {tuple(x.shape)}")
    q, e = quantize_mxfp8(x)
    if skip_zero_loc:
        keep = loc != 0
        loc, q, e = loc[keep], q[keep], e[keep]
    _byte_rows(data_buffer)[loc] = _byte_rows(q)
    sb = scale_buffer.view(torch.uint8) if scale_buffer.dtype != torch.uint8 else scale_buffer
    if interleaved:
        t = loc % MXFP8_INTERLEAVE_PAGE
        sb[loc // MXFP8_INTERLEAVE_PAGE, :, t % 32, t // 32, :] = e
    else:
        sb[loc] = e


# -- FP4 (fp4_mx_block16 quant_method, nvfp4 quant_method, MLATokenToKVPoolFP4.set_kv_buffer) --------------------------
def _pack_nibbles(nib: torch.Tensor) -> torch.Tensor:
    """Element ``2k`` in the low nibble, ``2k + 1`` in the high nibble of byte ``k``."""
    nib = nib.to(torch.uint8)
    return nib[..., 0::2] | (nib[..., 1::2] << 4)


def _unpack_values(packed: torch.Tensor) -> torch.Tensor:
    nib = torch.stack((packed & 0xF, packed >> 4), dim=-1).reshape(*packed.shape[:-1], -1).long()
    mag = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=packed.device)[nib & 7]
    return torch.where((nib & 8) != 0, -mag, mag)


def quantize_fp4_block16(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """fp4_mx_block16 (fp4_mx_block16 quant_method): ``(packed uint8 (N, W/2), scales uint8 (N, W/16))``.

    ``x`` ``(N, ...)`` is flattened per token to ``W`` values (``W % 16 == 0``) and cut into blocks
    of 16. Per block: ``e = ceil(log2(max(amax / 6, 1e-10)))`` (fp32 division, exact ceil-log2);
    scale byte ``e + 127``; ``q = x / 2^e``; magnitude code = number of thresholds in
    ``FP4_MX_BLOCK16_THRESHOLDS`` that are ``<= |q|`` (ties round away from zero, as specified);
    sign bit 8 iff ``q < 0``.
    """
    n = x.shape[0]
    xf = x.reshape(n, -1).float()
    w = xf.shape[1]
    require(w % FP4_BLOCK == 0, f"fp4 needs a multiple of 16 values per token, got {w}")
    blocks = xf.reshape(n, w // FP4_BLOCK, FP4_BLOCK)
    amax = blocks.abs().amax(dim=-1)
    e = ceil_log2((amax / 6.0).clamp_min(1e-10))
    q = blocks / pow2_from_biased_exponent(e + 127)[..., None]
    thresholds = torch.tensor(FP4_MX_BLOCK16_THRESHOLDS, dtype=torch.float32, device=x.device)
    code = (q.abs()[..., None] >= thresholds).sum(dim=-1)
    nib = code | ((q < 0).to(code.dtype) << 3)
    return _pack_nibbles(nib.reshape(n, w)), (e + 127).to(torch.uint8)


def dequantize_fp4_block16(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """``value(code) * 2^(byte - 127)``, fp32 ``(N, W)``."""
    vals = _unpack_values(packed.reshape(packed.shape[0], -1))
    factor = torch.exp2(scales.reshape(scales.shape[0], -1).float() - 127.0)
    return (vals.reshape(vals.shape[0], -1, FP4_BLOCK) * factor[..., None]).reshape(vals.shape)


def quantize_store_fp4_block16(
    data_buffer: torch.Tensor,
    scale_buffer: torch.Tensor,
    loc: torch.Tensor,
    x: torch.Tensor,
    *,
    data_col_offset: int = 0,
    scale_col_offset: int = 0,
    skip_zero_loc: bool = False,
) -> None:
    """Quantize (:func:`quantize_fp4_block16`) and scatter packed bytes and scale bytes.

    ``data_buffer[loc, data_col_offset : + W/2]`` and ``scale_buffer[loc, scale_col_offset : + W/16]``
    (byte columns of the flattened rows). MHA uses offsets 0; MLA-FP4 (MLATokenToKVPoolFP4.set_kv_buffer) stores
    nope at 0 and rope after it, skipping location 0.
    """
    loc = _locs(loc)
    packed, scales = quantize_fp4_block16(_rows(x, loc.numel()))
    _require_fit(_byte_rows(scale_buffer), scale_col_offset, scales)  # before any write: a refusal changes nothing
    _scatter_bytes(_byte_rows(data_buffer), loc, data_col_offset, packed, skip_zero_loc)
    _scatter_bytes(_byte_rows(scale_buffer), loc, scale_col_offset, scales, skip_zero_loc)


def _e2m1_rtne_code(mag: torch.Tensor) -> torch.Tensor:
    """Nearest e2m1 magnitude code, ties to even code, saturating at 6 (``cvt.rn.satfinite``)."""
    strict = torch.tensor((0.25, 1.25, 2.5, 5.0), dtype=torch.float32, device=mag.device)
    loose = torch.tensor((0.75, 1.75, 3.5), dtype=torch.float32, device=mag.device)
    return (mag[..., None] > strict).sum(dim=-1) + (mag[..., None] >= loose).sum(dim=-1)


def quantize_nvfp4(x: torch.Tensor, global_scale: Scale) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4 two-level quantization: ``(packed uint8 (N, H, D/2), block scales fp8 bytes (N, H, D/16))``.

    ``x ~= e2m1 * block_scale * g`` with ``g = global_scale``. Rule chosen (FlashInfer's exact
    rounding in ``nvfp4_kv_quantize`` is not reproduced bit for bit): per 16-block
    ``s = fp8_e4m3(min(amax / (6 * g), 448))`` (round to nearest
    even); ``q = x / (fp32(s) * g)`` (IEEE division; ``q = 0`` where ``s == 0``); e2m1 code by
    round-to-nearest-even on the e2m1 grid, saturating at 6; sign bit iff ``q < 0``. All fp32.
    """
    require(
        x.dim() == 3 and x.shape[-1] % FP4_BLOCK == 0, f"x must be (N, H, D) with D % 16 == 0, got {tuple(x.shape)}"
    )
    g = _as_scale(global_scale, x.device)
    xf = x.float().reshape(*x.shape[:-1], x.shape[-1] // FP4_BLOCK, FP4_BLOCK)
    amax = xf.abs().amax(dim=-1)
    s = (amax / (6.0 * g)).clamp(max=FP8_E4M3_MAX).to(torch.float8_e4m3fn)
    denom = (s.float() * g)[..., None]
    q = torch.where(denom == 0, torch.zeros_like(xf), xf / denom)
    nib = _e2m1_rtne_code(q.abs()) | ((q < 0).to(torch.int64) << 3)
    return _pack_nibbles(nib.reshape(x.shape)), s.view(torch.uint8)


def dequantize_nvfp4(packed: torch.Tensor, block_scales: torch.Tensor, global_scale: Scale) -> torch.Tensor:
    """``e2m1 * fp32(block_scale) * g``, fp32 ``(N, H, D)``."""
    vals = _unpack_values(packed)
    s = block_scales.view(torch.float8_e4m3fn).float() if block_scales.dtype == torch.uint8 else block_scales.float()
    g = _as_scale(global_scale, packed.device)
    out = vals.reshape(*vals.shape[:-1], -1, FP4_BLOCK) * (s * g)[..., None]
    return out.reshape(vals.shape)


def nvfp4_native_scale_index(
    off: torch.Tensor, s: torch.Tensor, n_scales: int, layout: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """(row, col) inside a native scale page ``(P, S)`` for page offset ``off`` and scale index ``s``.

    K: ``(off, s)``. V (4-token swizzle): ``((off // 4) * 4 + s // (S/4), (s % (S/4)) * 4 + off % 4)``.
    """
    if layout == "k":
        return off, s
    q = n_scales // 4
    return (off // 4) * 4 + s // q, (s % q) * 4 + off % 4


def quantize_store_nvfp4(
    data_buffer: torch.Tensor,
    loc: torch.Tensor,
    x: torch.Tensor,
    global_scale: Scale,
    *,
    scale_buffer: torch.Tensor | None = None,
    native_scale_buffer: torch.Tensor | None = None,
    native_layout: str = "k",
) -> None:
    """NVFP4 ``quantize_and_store`` (nvfp4 quant_method): no location-0 skip.

    ``data_buffer[loc, h] = packed`` (``(rows, H, D/2)`` uint8); linear scales (if given)
    ``scale_buffer[loc, h, :]`` (``(rows, H, D/16)``); native scales (if given) at page
    ``loc // P``, head ``h``, position :func:`nvfp4_native_scale_index` of ``off = loc % P``
    (``native_scale_buffer`` ``(pages, H, P, D/16)``, ``native_layout`` ``"k"`` or ``"v"``).
    """
    require(native_layout in ("k", "v"), f"native_layout must be 'k' or 'v', got {native_layout!r}")
    loc = _locs(loc)
    packed, s = quantize_nvfp4(x, global_scale)
    _byte_rows(data_buffer)[loc] = _byte_rows(packed)
    if scale_buffer is not None:
        _byte_rows(scale_buffer)[loc] = _byte_rows(s)
    if native_scale_buffer is not None:
        nb = native_scale_buffer.view(torch.uint8) if native_scale_buffer.dtype != torch.uint8 else native_scale_buffer
        p, n_scales = nb.shape[2], nb.shape[3]
        require(native_layout == "k" or n_scales % 4 == 0, "the V swizzle needs D/16 divisible by 4")
        h = torch.arange(nb.shape[1], device=loc.device)[None, :, None]
        sidx = torch.arange(n_scales, device=loc.device)[None, None, :]
        off = (loc % p)[:, None, None]
        row, col = nvfp4_native_scale_index(off, sidx, n_scales, native_layout)
        nb[(loc // p)[:, None, None], h, row, col] = s
