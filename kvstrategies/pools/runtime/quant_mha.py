"""Quantize-on-store MHA pools: the FP4 recipes (MHATokenToKVPool quant_method) and MXFP8
(MHATokenToKVPoolMXFP8.set_kv_buffer).

Getters return the stored bytes (packed FP4 as uint8, MXFP8 as float8_e4m3fn) and their scale
buffers; :meth:`dequantize_kv` gathers and dequantizes rows for readers and tests.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ... import kernels
from ...errors import KVCacheConfigError, UnsupportedConfigurationError
from ...kernels import reference as ref
from ...kernels.reference import Scale
from ..build import BuiltPool
from .base import Loc
from .mha import MHATokenToKVPool, check_rows

FP4_MX_BLOCK16 = "fp4_mx_block16"
NVFP4 = "nvfp4"


class MHATokenToKVPoolFP4(MHATokenToKVPool):
    """``MHATokenToKVPool`` with an FP4 ``quant_method`` (SGLang's FP4 ``quant_method`` of MHATokenToKVPool).

    * ``fp4_mx_block16``: per 16 values one exponent byte; ``k_buffer[l][loc] = packed``,
      ``k_scale_buffer[l][loc] = scales`` by plain indexing (location 0 written); the
      ``k_scale``/``v_scale`` arguments are ignored.
    * ``nvfp4``: two-level, with the per-layer fp32 global scale ``g`` = the caller's scale or
      ``quant_method.k_scales_gpu[layer_id]`` (global layer id); packed data, linear scales and
      native (swizzled for V) scales as allocated; no location-0 skip. The global-scale vectors
      are set to ones on construction (``init_global_scales``), as SGLang's recipe starts. Rounding rule of the
      torch reference (not FlashInfer's bit for bit) documented in
      :func:`kvstrategies.kernels.reference.quantize_nvfp4`.

    V is quantized with ``head_dim`` (the recipe ignores ``v_head_dim``). ``dcp_kv_mask`` is rejected.
    """

    def __init__(
        self, built: BuiltPool, *, kv_dtype: torch.dtype, init_global_scales: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(built, kv_dtype=torch.uint8, **kwargs)
        self.dtype = torch.uint8  # packed e2m1 pairs; the logical dtype float4_e2m1fn_x2 is not viewed
        self.quant_method = str(self.attribute("quant_method"))
        if self.quant_method not in (FP4_MX_BLOCK16, NVFP4):
            raise UnsupportedConfigurationError(
                f"quant_method {self.quant_method!r} has no store here (MHATokenToKVPool quant_method)"
            )
        self.v_head_dim = self.head_dim
        self.k_scale_buffer: list[torch.Tensor] = self.layer_buffers("k_scale_buffer")
        self.v_scale_buffer: list[torch.Tensor] = self.layer_buffers("v_scale_buffer")
        self.native_k_scale_buffer: list[torch.Tensor] = self.layer_buffers("native_k_scale_buffer")
        self.native_v_scale_buffer: list[torch.Tensor] = self.layer_buffers("native_v_scale_buffer")
        self.k_scales_gpu: torch.Tensor | None = self.tensors.get("quant_method.k_scales_gpu")
        self.v_scales_gpu: torch.Tensor | None = self.tensors.get("quant_method.v_scales_gpu")
        if init_global_scales:
            for scales in (self.k_scales_gpu, self.v_scales_gpu):
                if scales is not None:
                    scales.fill_(1.0)  # SGLang's FP4 recipe: ones until checkpoint scales load

    def load_kv_scales(self, k_scales: torch.Tensor, v_scales: torch.Tensor) -> None:
        """nvfp4 per-layer global scales indexed by global layer id (re-allocated when longer, 4.5)."""
        if self.k_scales_gpu is None or self.v_scales_gpu is None:
            raise KVCacheConfigError(f"{self.quant_method} keeps no per-layer global scales")
        for name, new in (("k_scales_gpu", k_scales), ("v_scales_gpu", v_scales)):
            current = self.tensors[f"quant_method.{name}"]
            value = new.to(device=current.device, dtype=torch.float32).reshape(-1)
            if value.numel() <= current.numel():
                current[: value.numel()] = value
            else:
                current = value.clone()
                self.tensors[f"quant_method.{name}"] = current
            setattr(self, name, current)

    def _global_scale(self, layer_id: int, given: Scale | None, side: str) -> Scale:
        if given is not None:
            return given
        scales = self.k_scales_gpu if side == "k" else self.v_scales_gpu
        assert scales is not None
        if not 0 <= layer_id < scales.numel():
            raise KVCacheConfigError(
                f"nvfp4 {side}_scales_gpu has {scales.numel()} entries, none for global layer {layer_id}; "
                "load the checkpoint's per-layer scales with load_kv_scales or pass k_scale / v_scale"
            )
        return scales[layer_id]

    def set_kv_buffer(
        self,
        layer_id: int,
        loc: Loc,
        cache_k: torch.Tensor,
        cache_v: torch.Tensor,
        k_scale: Scale | None = None,
        v_scale: Scale | None = None,
        *,
        dcp_kv_mask: torch.Tensor | None = None,
    ) -> None:
        """Quantize ``cache_k`` / ``cache_v`` ``(N, H, D)`` and store data and scales at ``loc``."""
        if dcp_kv_mask is not None:
            raise UnsupportedConfigurationError("FP4 KV recipes reject dcp_kv_mask (MHATokenToKVPool quant_method)")
        index, where = self.layer_target(layer_id, loc)
        n, h, d = where.shape[0], self.head_num, self.head_dim
        for name, x in (("cache_k", cache_k), ("cache_v", cache_v)):
            check_rows(x, n, h * d, name)
        self.check_loc(where, self.rows)
        sides = (
            ("k", cache_k.reshape(n, h, d), self.k_buffer, self.k_scale_buffer, self.native_k_scale_buffer, k_scale),
            ("v", cache_v.reshape(n, h, d), self.v_buffer, self.v_scale_buffer, self.native_v_scale_buffer, v_scale),
        )
        for side, x, data, linear, native, given in sides:
            if self.quant_method == FP4_MX_BLOCK16:
                kernels.quantize_store_fp4_block16(data[index], linear[index], where, x, skip_zero_loc=False,
                                                   use_triton=self.use_triton)
                continue
            kernels.quantize_store_nvfp4(
                data[index], where, x, self._global_scale(layer_id, given, side),
                scale_buffer=linear[index] if linear else None,
                native_scale_buffer=native[index] if native else None,
                native_layout=side, use_triton=self.use_triton,
            )

    def get_key_scale_buffer(self, layer_id: int) -> torch.Tensor:
        """Per-token scales of K (mx16 exponents or nvfp4 linear fp8 bytes)."""
        return self._scales(self.k_scale_buffer, layer_id)

    def get_value_scale_buffer(self, layer_id: int) -> torch.Tensor:
        return self._scales(self.v_scale_buffer, layer_id)

    def _scales(self, buffers: list[torch.Tensor], layer_id: int) -> torch.Tensor:
        if not buffers:
            raise KVCacheConfigError(f"this {self.quant_method} pool has no linear scale buffers")
        return buffers[self.local_layer(layer_id)]

    def dequantize_kv(self, layer_id: int, loc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """fp32 ``(N, H, D)`` K and V at ``loc`` (nvfp4 needs linear or native scales)."""
        index = self.local_layer(layer_id)
        n, h, d = loc.numel(), self.head_num, self.head_dim
        out = []
        for side, data, linear, native in (("k", self.k_buffer, self.k_scale_buffer, self.native_k_scale_buffer),
                                           ("v", self.v_buffer, self.v_scale_buffer, self.native_v_scale_buffer)):
            packed = data[index][loc]
            if self.quant_method == FP4_MX_BLOCK16:
                values = ref.dequantize_fp4_block16(packed.reshape(n, math.prod(packed.shape[1:])), linear[index][loc])
                out.append(values.reshape(n, h, d))
                continue
            if linear:
                scales = linear[index][loc]
            elif native:
                scales = _gather_native(native[index], loc, side)
            else:
                raise UnsupportedConfigurationError("this nvfp4 pool stores no per-token scales to dequantize with")
            g = self._global_scale(layer_id, None, side)
            out.append(ref.dequantize_nvfp4(packed, scales, g))
        return out[0], out[1]

    def move_buffers(self) -> list[torch.Tensor]:
        return [*self.k_buffer, *self.v_buffer, *self.k_scale_buffer, *self.v_scale_buffer]

    def move_extra(self, dst_loc: torch.Tensor, src_loc: torch.Tensor) -> None:
        """Native scales move token by token to their (swizzled) positions."""
        for side, buffers in (("k", self.native_k_scale_buffer), ("v", self.native_v_scale_buffer)):
            for buf in buffers:
                values = _gather_native(buf, src_loc, side)
                _scatter_native(buf, dst_loc, side, values)


def _native_index(buf: torch.Tensor, loc: torch.Tensor, side: str) -> tuple[torch.Tensor, ...]:
    p, s = buf.shape[2], buf.shape[3]
    loc = loc.reshape(-1).to(torch.int64)
    heads = torch.arange(buf.shape[1], device=buf.device)[None, :, None]
    sidx = torch.arange(s, device=buf.device)[None, None, :]
    off = (loc % p)[:, None, None]
    row, col = ref.nvfp4_native_scale_index(off, sidx, s, side)
    return (loc // p)[:, None, None], heads, row, col


def _gather_native(buf: torch.Tensor, loc: torch.Tensor, side: str) -> torch.Tensor:
    """``(N, H, S)`` scale bytes of ``loc`` from a native ``(pages, H, P, S)`` buffer."""
    return buf[_native_index(buf, loc, side)]


def _scatter_native(buf: torch.Tensor, loc: torch.Tensor, side: str, values: torch.Tensor) -> None:
    buf[_native_index(buf, loc, side)] = values


class MHATokenToKVPoolMXFP8(MHATokenToKVPool):
    """fp8-e4m3 K/V with one UE8M0 scale per 32 values (MHATokenToKVPoolMXFP8 and its set_kv_buffer).

    * Fused path (no ``k_scale``/``v_scale``, non-fp8 input): quantize and store; location 0
      skipped. Decision: the flat scale layout (page size != 128), which SGLang's
      ``set_kv_buffer`` never writes, is written at ``[loc, h, s]`` with the same quantizer.
    * Pre-quantized path (fp8 input with e8m0 scales ``(N, H, D/32)``): rows copied and scales
      scattered (location 0 skipped). SGLang requires CUDA and the interleaved layout; the torch
      version here runs anywhere, either layout.
    """

    def __init__(self, built: BuiltPool, *, kv_dtype: torch.dtype, **kwargs: Any) -> None:
        super().__init__(built, kv_dtype=torch.float8_e4m3fn, **kwargs)
        self.k_scale_buffer: list[torch.Tensor] = self.layer_buffers("k_scale_buffer")
        self.v_scale_buffer: list[torch.Tensor] = self.layer_buffers("v_scale_buffer")
        self.interleaved = self.attribute("scale_layout", "flat", required=False) == "interleaved"

    def set_kv_buffer(
        self,
        layer_id: int,
        loc: Loc,
        cache_k: torch.Tensor,
        cache_v: torch.Tensor,
        k_scale: Scale | None = None,
        v_scale: Scale | None = None,
        *,
        dcp_kv_mask: torch.Tensor | None = None,
    ) -> None:
        """Fused quantize-and-store, or a pre-quantized store when fp8 data and scales are given."""
        if dcp_kv_mask is not None:
            raise UnsupportedConfigurationError("the MXFP8 pool has no dcp_kv_mask path (as SGLang's MXFP8 pool)")
        index, where = self.layer_target(layer_id, loc)
        n, h = where.shape[0], self.head_num
        check_rows(cache_k, n, h * self.head_dim, "cache_k")
        check_rows(cache_v, n, h * self.v_head_dim, "cache_v")
        self.check_loc(where, self.rows)
        prequantized = cache_k.dtype == torch.float8_e4m3fn
        if prequantized != (k_scale is not None) or (k_scale is None) != (v_scale is None):
            raise KVCacheConfigError(
                "MXFP8 set_kv_buffer takes either unquantized K/V without scales (fused path) or float8_e4m3fn "
                "K/V with e8m0 scales (N, H, D/32) for both (MHATokenToKVPoolMXFP8.set_kv_buffer)"
            )
        for x, dim, data, scales, given in ((cache_k, self.head_dim, self.k_buffer, self.k_scale_buffer, k_scale),
                                            (cache_v, self.v_head_dim, self.v_buffer, self.v_scale_buffer, v_scale)):
            x3 = x.reshape(n, h, dim)
            if given is None:
                kernels.quantize_store_mxfp8(data[index], scales[index], where, x3, interleaved=self.interleaved,
                                             skip_zero_loc=True, use_triton=self.use_triton)
                continue
            if not isinstance(given, torch.Tensor) or given.numel() != n * h * (dim // 32):
                raise KVCacheConfigError(f"pre-quantized MXFP8 scales must be a ({n}, {h}, {dim // 32}) tensor")
            keep = where != 0
            rows, e = where[keep], given.reshape(n, h, dim // 32)[keep]
            data[index][rows] = x3.to(torch.float8_e4m3fn)[keep]
            self._scale_rows(scales[index], rows, e)

    def _scale_rows(self, buf: torch.Tensor, loc: torch.Tensor, values: torch.Tensor | None = None) -> torch.Tensor:
        """Read (``values`` None) or write the ``(N, H, D/32)`` scale bytes of ``loc``."""
        sb = buf.view(torch.uint8)
        loc = loc.reshape(-1).to(torch.int64)
        if self.interleaved:
            t = loc % ref.MXFP8_INTERLEAVE_PAGE
            index: tuple[Any, ...] = (loc // ref.MXFP8_INTERLEAVE_PAGE, slice(None), t % 32, t // 32, slice(None))
        else:
            index = (loc,)
        if values is not None:
            sb[index] = values if values.dtype == torch.uint8 else values.view(torch.uint8)
            return values
        return sb[index]

    def get_key_scale_buffer(self, layer_id: int) -> torch.Tensor:
        return self.k_scale_buffer[self.local_layer(layer_id)]

    def get_value_scale_buffer(self, layer_id: int) -> torch.Tensor:
        return self.v_scale_buffer[self.local_layer(layer_id)]

    def dequantize_kv(self, layer_id: int, loc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """fp32 K ``(N, H, D)`` and V ``(N, H, Dv)``: ``q * 2^(E - 127)`` per 32-value block."""
        index = self.local_layer(layer_id)
        out = []
        for data, scales in ((self.k_buffer, self.k_scale_buffer), (self.v_buffer, self.v_scale_buffer)):
            q = data[index][loc].float()
            e = self._scale_rows(scales[index], loc)
            factor = ref.pow2_from_biased_exponent(e.to(torch.int32))
            out.append((q.reshape(*q.shape[:-1], -1, 32) * factor[..., None]).reshape(q.shape))
        return out[0], out[1]

    def move_buffers(self) -> list[torch.Tensor]:
        if self.interleaved:
            return [*self.k_buffer, *self.v_buffer]
        return [*self.k_buffer, *self.v_buffer, *self.k_scale_buffer, *self.v_scale_buffer]

    def move_extra(self, dst_loc: torch.Tensor, src_loc: torch.Tensor) -> None:
        """Interleaved scales are re-scattered token by token (MHATokenToKVPoolMXFP8.set_kv_buffer)."""
        if not self.interleaved:
            return
        for buf in (*self.k_scale_buffer, *self.v_scale_buffer):
            self._scale_rows(buf, dst_loc, self._scale_rows(buf, src_loc).clone())
