"""Public KV write-path functions: Triton on CUDA tensors, the torch reference elsewhere.

Every function takes ``use_triton``:

* ``None`` (default): Triton when every tensor is on a CUDA device and Triton imports; the
  reference (:mod:`.reference`) otherwise, and also for input/output dtype combinations the
  kernels do not cover (e.g. fp8 *inputs* into a bf16 pool, ``float8_e4m3fnuz``).
* ``True``: Triton or an error. On CPU tensors this needs ``TRITON_INTERPRET=1`` in the
  environment (read at call time), which runs the kernels in Triton's interpreter: that is how
  the tests check the kernels without a GPU.
* ``False``: the reference.

Semantics, units and rounding rules are documented on the reference functions; the Triton path
is bit-identical to them (tests prove it under the interpreter).
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from types import ModuleType

import torch

from ..errors import KVCacheConfigError, MissingDependencyError, require
from . import reference as ref
from .reference import Scale

__all__ = [
    "interpret_enabled",
    "move_kv_cache",
    "quantize_store_fp4_block16",
    "quantize_store_index_k",
    "quantize_store_mxfp8",
    "quantize_store_nvfp4",
    "store_index_k_scale",
    "store_kv",
    "store_mla_kv",
    "store_rows",
    "triton_available",
]

# Element format codes shared with triton_kernels (kept here so planning never imports triton).
_F32, _F16, _BF16, _E4M3, _E5M2, _NONE = 0, 1, 2, 3, 4, -1
_FMT = {
    torch.float32: _F32,
    torch.float16: _F16,
    torch.bfloat16: _BF16,
    torch.float8_e4m3fn: _E4M3,
    torch.float8_e5m2: _E5M2,
}
_STORE_VIEW = {_F32: torch.float32, _F16: torch.float16, _BF16: torch.int16, _E4M3: torch.uint8, _E5M2: torch.uint8}
_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_INPUT_FMTS = (_F32, _F16, _BF16)

_MODULES: dict[bool, ModuleType] = {}


class _Unsupported(Exception):
    """The Triton path does not cover this call (dtype, layout); the reference does."""


# -- mode selection ------------------------------------------------------------------------------
def interpret_enabled() -> bool:
    """Whether ``TRITON_INTERPRET`` is set to a true value right now."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def triton_available() -> bool:
    """Whether ``import triton`` works in this environment."""
    return importlib.util.find_spec("triton") is not None


def _kernels() -> ModuleType:
    """``triton_kernels`` loaded for the current mode (``triton.jit`` decides at decoration time)."""
    mode = interpret_enabled()
    mod = _MODULES.get(mode)
    if mod is None:
        name = f"{__package__}._triton_kernels_{'interpreted' if mode else 'compiled'}"
        path = os.path.join(os.path.dirname(__file__), "triton_kernels.py")
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        _MODULES[mode] = mod
    return mod


def _want_triton(use_triton: bool | None, tensors: Sequence[torch.Tensor]) -> bool:
    if use_triton is False:
        return False
    on_cuda = all(t.is_cuda for t in tensors)
    if use_triton is None:
        return on_cuda and triton_available()
    if not triton_available():
        raise MissingDependencyError("use_triton=True needs triton: pip install 'kvstrategies[torch]'")
    if not on_cuda and not interpret_enabled():
        raise KVCacheConfigError("use_triton=True on non-CUDA tensors needs TRITON_INTERPRET=1")
    return True


def _dispatch(
    use_triton: bool | None,
    tensors: Sequence[torch.Tensor],
    triton_call: Callable[[ModuleType], None],
    reference_call: Callable[[], None],
) -> None:
    """Run ``triton_call`` when selected and supported, else ``reference_call``."""
    if _want_triton(use_triton, tensors):
        try:
            triton_call(_kernels())
            return
        except _Unsupported as exc:
            if use_triton:
                raise KVCacheConfigError(f"no Triton kernel for this call: {exc}") from exc
    reference_call()


# -- tensor preparation -------------------------------------------------------------------------------
def _loc(loc: torch.Tensor, device: torch.device) -> torch.Tensor:
    return loc.reshape(-1).to(device=device, dtype=torch.int64).contiguous()


def _rows(x: torch.Tensor, n: int) -> torch.Tensor:
    require(x.shape[0] == n, f"expected {n} rows (one per location), got shape {tuple(x.shape)}")
    r = x.reshape(n, math.prod(x.shape[1:]))  # not (n, -1): an empty batch (n = 0) has no -1 to infer
    return r if r.stride(1) == 1 else r.contiguous()


def _buffer_rows(buf: torch.Tensor) -> torch.Tensor:
    try:
        return buf.view(buf.shape[0], -1)
    except RuntimeError as exc:
        raise _Unsupported(f"buffer rows of shape {tuple(buf.shape)} are not contiguous") from exc


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    return t if t.dtype == torch.uint8 else t.view(torch.uint8)


def _input_fmt(dtype: torch.dtype) -> int:
    fmt = _FMT.get(dtype, _NONE)
    if fmt not in _INPUT_FMTS:
        raise _Unsupported(f"input dtype {dtype} (kernels read fp32, fp16, bf16)")
    return fmt


def _input_view(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    fmt = _input_fmt(x.dtype)
    return (x.view(torch.int16) if fmt == _BF16 else x), fmt


def _check_index_rows(buf: torch.Tensor, page_size: int, d: int) -> None:
    want = page_size * (d + 4)
    require(buf.shape[1] == want, f"index rows hold {buf.shape[1]} bytes, expected {page_size}*({d}+4)")


def _scale_tensor(scale: Scale, device: torch.device) -> torch.Tensor:
    return torch.as_tensor(scale, dtype=torch.float32, device=device).reshape(1).contiguous()


# -- row stores -------------------------------------------------------------------------------------------
def store_rows(
    buffer: torch.Tensor,
    loc: torch.Tensor,
    rows: torch.Tensor,
    *,
    kv_dtype: torch.dtype | None = None,
    scale: Scale | None = None,
    col_offset: int = 0,
    skip_zero_loc: bool = False,
    use_triton: bool | None = None,
) -> None:
    """Scatter rows into a token-major buffer, casting to the pool dtype (:func:`.reference.store_rows`)."""

    def run(k: ModuleType) -> None:
        dtype = ref.resolve_kv_dtype(buffer, rows.dtype, kv_dtype)
        lo = _loc(loc, buffer.device)
        src, dst = _rows(rows, lo.numel()), _buffer_rows(buffer)
        require(col_offset + src.shape[1] <= dst.shape[1], f"rows of {src.shape[1]} do not fit at column {col_offset}")
        if rows.dtype == dtype:
            word = _INT_OF_SIZE[dtype.itemsize]
            k.launch_store_rows(src.view(word), dst.view(word), lo, None, dst_col=col_offset, in_fmt=_NONE,
                                out_fmt=_NONE, round_fmt=_NONE, copy=True, skip_zero=skip_zero_loc)
            return
        src_v, in_fmt = _input_view(src)
        out_fmt = _FMT.get(dtype, _NONE)
        if out_fmt == _NONE:
            raise _Unsupported(f"pool dtype {dtype}")
        s = _scale_tensor(scale, buffer.device) if scale is not None else None
        k.launch_store_rows(src_v, dst.view(_STORE_VIEW[out_fmt]), lo, s, dst_col=col_offset, in_fmt=in_fmt,
                            out_fmt=out_fmt, round_fmt=in_fmt, copy=False, skip_zero=skip_zero_loc)

    _dispatch(use_triton, (buffer, loc, rows), run, lambda: ref.store_rows(
        buffer, loc, rows, kv_dtype=kv_dtype, scale=scale, col_offset=col_offset, skip_zero_loc=skip_zero_loc))


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
    use_triton: bool | None = None,
) -> None:
    """MHA ``set_kv_buffer`` (:func:`.reference.store_kv`): K and V rows scattered to ``loc``."""
    ref._store_kv_with(partial(store_rows, use_triton=use_triton), k_buffer, v_buffer, loc, cache_k, cache_v,
                      k_scale, v_scale, kv_dtype, skip_zero_loc)


def store_mla_kv(
    kv_buffer: torch.Tensor,
    loc: torch.Tensor,
    cache_k_nope: torch.Tensor,
    cache_k_rope: torch.Tensor | None = None,
    *,
    kv_dtype: torch.dtype | None = None,
    skip_zero_loc: bool | None = None,
    use_triton: bool | None = None,
) -> None:
    """MLA ``set_mla_kv_buffer`` (:func:`.reference.store_mla_kv`): row ``[nope | rope]``."""
    ref._store_mla_kv_with(partial(store_rows, use_triton=use_triton), kv_buffer, loc, cache_k_nope, cache_k_rope,
                          kv_dtype, skip_zero_loc)


# -- all-layer copy ------------------------------------------------------------------------------------------
def move_kv_cache(
    buffers: Sequence[torch.Tensor], dst_loc: torch.Tensor, src_loc: torch.Tensor, *, use_triton: bool | None = None
) -> None:
    """Copy rows ``src_loc[i] -> dst_loc[i]`` in every buffer with one launch (:func:`.reference.move_kv_cache`)."""
    tensors = [*buffers, dst_loc, src_loc]

    def run(k: ModuleType) -> None:
        if interpret_enabled() and any(t.is_cuda for t in tensors):
            raise _Unsupported("the interpreter cannot follow a device pointer table")
        require(dst_loc.numel() == src_loc.numel(), f"{dst_loc.numel()} destinations for {src_loc.numel()} sources")
        dev = buffers[0].device if buffers else dst_loc.device
        views = [_buffer_rows(b) for b in buffers]
        k.launch_move_rows(views, _loc(dst_loc, dev), _loc(src_loc, dev))

    _dispatch(use_triton, tensors, run, lambda: ref.move_kv_cache(buffers, dst_loc, src_loc))


# -- DSA indexer keys -------------------------------------------------------------------------------------------
def store_index_k_scale(
    buffer: torch.Tensor,
    loc: torch.Tensor,
    index_k: torch.Tensor,
    index_k_scale: torch.Tensor,
    *,
    page_size: int = 64,
    use_triton: bool | None = None,
) -> None:
    """Pack fp8 keys and fp32 scales page-major (:func:`.reference.store_index_k_scale`)."""

    def run(k: ModuleType) -> None:
        lo = _loc(loc, buffer.device)
        n = lo.numel()
        keys = _as_bytes(_rows(index_k, n))
        scales = index_k_scale.reshape(n).to(torch.float32).contiguous().view(torch.uint8).reshape(n, 4)
        buf = _as_bytes(_buffer_rows(buffer))
        d = keys.shape[1]
        _check_index_rows(buf, page_size, d)
        k.launch_index_k_store(buf, lo, keys, scales, page_size)

    _dispatch(use_triton, (buffer, loc, index_k, index_k_scale), run, lambda: ref.store_index_k_scale(
        buffer, loc, index_k, index_k_scale, page_size=page_size))


def quantize_store_index_k(
    buffer: torch.Tensor,
    loc: torch.Tensor,
    k: torch.Tensor,
    *,
    page_size: int = 64,
    scale_pow2: bool = False,
    use_triton: bool | None = None,
) -> None:
    """Fused per-token fp8 quantization and page-major store (:func:`.reference.quantize_store_index_k`)."""

    def run(km: ModuleType) -> None:
        lo = _loc(loc, buffer.device)
        x, in_fmt = _input_view(_rows(k, lo.numel()))
        buf = _as_bytes(_buffer_rows(buffer))
        d = x.shape[1]
        _check_index_rows(buf, page_size, d)
        km.launch_index_k_quant_store(buf, lo, x, in_fmt=in_fmt, page_size=page_size, scale_pow2=scale_pow2, eps=1e-4)

    _dispatch(use_triton, (buffer, loc, k), run, lambda: ref.quantize_store_index_k(
        buffer, loc, k, page_size=page_size, scale_pow2=scale_pow2))


# -- MXFP8 ---------------------------------------------------------------------------------------------------------
def quantize_store_mxfp8(
    data_buffer: torch.Tensor,
    scale_buffer: torch.Tensor,
    loc: torch.Tensor,
    x: torch.Tensor,
    *,
    interleaved: bool = True,
    skip_zero_loc: bool = True,
    use_triton: bool | None = None,
) -> None:
    """MXFP8 quantize-on-store (:func:`.reference.quantize_store_mxfp8`)."""

    def run(k: ModuleType) -> None:
        lo = _loc(loc, data_buffer.device)
        require(x.dim() == 3 and x.shape[0] == lo.numel(), f"x must be (N, H, D), got {tuple(x.shape)}")
        n, h, d = x.shape
        require(d % 32 == 0, f"MXFP8 needs a head dim divisible by 32, got {d}")
        xs = x if x.stride(2) == 1 else x.contiguous()
        xv, in_fmt = _input_view(xs)
        data = _as_bytes(data_buffer)
        sb = _as_bytes(scale_buffer)
        s = d // 32
        if data.dim() != 3 or data.shape[1:] != (h, d) or data.stride(2) != 1:
            raise _Unsupported(f"data buffer must be (rows, {h}, {d}) with contiguous rows")
        if interleaved:
            ok = sb.dim() == 5 and tuple(sb.shape[1:]) == (h, 32, 4, s) and sb.stride()[2:] == (4 * s, s, 1)
        else:
            ok = sb.dim() == 3 and tuple(sb.shape[1:]) == (h, s) and sb.stride(2) == 1
        if not ok:
            raise _Unsupported(f"scale buffer shape {tuple(sb.shape)} / strides {sb.stride()}")
        k.launch_mxfp8_store(xv, data, sb, lo, in_fmt=in_fmt, interleaved=interleaved, skip_zero=skip_zero_loc)

    _dispatch(use_triton, (data_buffer, scale_buffer, loc, x), run, lambda: ref.quantize_store_mxfp8(
        data_buffer, scale_buffer, loc, x, interleaved=interleaved, skip_zero_loc=skip_zero_loc))


# -- FP4 --------------------------------------------------------------------------------------------------------------
def quantize_store_fp4_block16(
    data_buffer: torch.Tensor,
    scale_buffer: torch.Tensor,
    loc: torch.Tensor,
    x: torch.Tensor,
    *,
    data_col_offset: int = 0,
    scale_col_offset: int = 0,
    skip_zero_loc: bool = False,
    use_triton: bool | None = None,
) -> None:
    """fp4_mx_block16 quantize-on-store (:func:`.reference.quantize_store_fp4_block16`)."""

    def run(k: ModuleType) -> None:
        lo = _loc(loc, data_buffer.device)
        xv, in_fmt = _input_view(_rows(x, lo.numel()))
        w = xv.shape[1]
        require(w % 16 == 0, f"fp4 needs a multiple of 16 values per token, got {w}")
        data = _as_bytes(_buffer_rows(data_buffer))
        sb = _as_bytes(_buffer_rows(scale_buffer))
        require(data_col_offset + w // 2 <= data.shape[1], "packed values do not fit the data rows")
        require(scale_col_offset + w // 16 <= sb.shape[1], "scales do not fit the scale rows")
        k.launch_fp4_block16_store(xv, data, sb, lo, in_fmt=in_fmt, data_col=data_col_offset,
                                   scale_col=scale_col_offset, skip_zero=skip_zero_loc)

    _dispatch(use_triton, (data_buffer, scale_buffer, loc, x), run, lambda: ref.quantize_store_fp4_block16(
        data_buffer, scale_buffer, loc, x, data_col_offset=data_col_offset, scale_col_offset=scale_col_offset,
        skip_zero_loc=skip_zero_loc))


def quantize_store_nvfp4(
    data_buffer: torch.Tensor,
    loc: torch.Tensor,
    x: torch.Tensor,
    global_scale: Scale,
    *,
    scale_buffer: torch.Tensor | None = None,
    native_scale_buffer: torch.Tensor | None = None,
    native_layout: str = "k",
    use_triton: bool | None = None,
) -> None:
    """NVFP4 quantize-on-store (:func:`.reference.quantize_store_nvfp4`; rounding rule documented there)."""
    tensors = [t for t in (data_buffer, loc, x, scale_buffer, native_scale_buffer) if t is not None]

    def run(k: ModuleType) -> None:
        require(native_layout in ("k", "v"), f"native_layout must be 'k' or 'v', got {native_layout!r}")
        lo = _loc(loc, data_buffer.device)
        require(x.dim() == 3 and x.shape[0] == lo.numel(), f"x must be (N, H, D), got {tuple(x.shape)}")
        n, h, d = x.shape
        require(d % 16 == 0, f"nvfp4 needs D % 16 == 0, got {d}")
        xv, in_fmt = _input_view(x if x.stride(2) == 1 else x.contiguous())
        s = d // 16
        data = _as_bytes(data_buffer)
        if data.dim() != 3 or tuple(data.shape[1:]) != (h, d // 2) or data.stride(2) != 1:
            raise _Unsupported(f"data buffer must be (rows, {h}, {d // 2})")
        lin = _as_bytes(scale_buffer) if scale_buffer is not None else None
        if lin is not None and (lin.dim() != 3 or tuple(lin.shape[1:]) != (h, s) or lin.stride(2) != 1):
            raise _Unsupported(f"scale buffer must be (rows, {h}, {s})")
        nat = _as_bytes(native_scale_buffer) if native_scale_buffer is not None else None
        if nat is not None and (nat.dim() != 4 or nat.shape[1] != h or nat.shape[3] != s
                                or nat.stride()[2:] != (s, 1)):
            raise _Unsupported(f"native scale buffer must be (pages, {h}, P, {s}) with contiguous pages")
        require(native_layout == "k" or s % 4 == 0, "the V swizzle needs D/16 divisible by 4")
        g = _scale_tensor(global_scale, data_buffer.device)
        k.launch_nvfp4_store(xv, data, lo, g, lin, nat, in_fmt=in_fmt, v_layout=native_layout == "v")

    _dispatch(use_triton, tensors, run, lambda: ref.quantize_store_nvfp4(
        data_buffer, loc, x, global_scale, scale_buffer=scale_buffer, native_scale_buffer=native_scale_buffer,
        native_layout=native_layout))
