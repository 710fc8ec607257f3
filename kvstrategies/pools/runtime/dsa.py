"""``DSATokenToKVPool``: MLA latent rows plus the indexer's FP8 keys (DSATokenToKVPool.set_kv_buffer).

Latent: raw rows as MLA, or the packed FP8 row (``kv_cache_dim = r + r/128*4 + 2*rope``, 656 for
DeepSeek) ``[q fp8 (r B) | r/128 fp32 tile scales | rope raw bf16 (2*rope B)]``.
Index keys: per layer one page-major buffer ``(pages, p * (128 + 4))`` uint8: page
``loc // p`` holds ``p`` fp8 keys token-major, then their ``p`` fp32 scales (``p`` = 64 on CUDA).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ... import kernels
from ...errors import KVCacheConfigError, UnsupportedConfigurationError
from ...kernels import reference as ref
from ..build import BuiltPool
from ..dsa import index_k_row_bytes
from .base import Loc, plain_loc
from .mha import check_rows
from .mla import MLATokenToKVPool

#: latent values per fp32 scale of the packed FP8 row
TILE = 128


def packed_row_bytes(kv_lora_rank: int, qk_rope_head_dim: int) -> int:
    """``r + r / 128 * 4 + 2 * rope`` (656 for 512 / 64)."""
    return kv_lora_rank + kv_lora_rank // TILE * 4 + 2 * qk_rope_head_dim


def quantize_packed_latent(nope: torch.Tensor, rope: torch.Tensor | None) -> torch.Tensor:
    """The packed FP8 DSA row bytes ``(N, r + r/32 [+ 2*rope])`` uint8 (DSATokenToKVPool.set_kv_buffer).

    Per 128-value tile ``t``: ``s_t = amax(|x|) / 448`` (fp32, no epsilon), ``q = clamp(x / s_t,
    -448, 448)`` cast to float8_e4m3fn; then the tile scales as fp32 bytes, then rope cast to
    bf16 (raw bytes). Decision: an all-zero tile (``s = 0``, SGLang's 0/0 gives NaN
    bytes) stores scale 0 and zero codes, so it decodes to zeros.
    """
    n = nope.shape[0]
    x = nope.reshape(n, math.prod(nope.shape[1:])).float()  # explicit width: an empty batch has n = 0
    r = x.shape[1]
    if r % TILE:
        raise KVCacheConfigError(f"the packed FP8 DSA row needs kv_lora_rank % 128 == 0, got {r}")
    tiles = x.reshape(n, r // TILE, TILE)
    s = tiles.abs().amax(dim=-1) / ref.FP8_E4M3_MAX
    q = torch.where(s[..., None] > 0, tiles / s[..., None], torch.zeros_like(tiles))
    q = q.clamp(-ref.FP8_E4M3_MAX, ref.FP8_E4M3_MAX).to(torch.float8_e4m3fn).view(torch.uint8).reshape(n, r)
    scales = s.contiguous().view(torch.uint8) if n else torch.empty(0, dtype=torch.uint8, device=x.device)
    parts = [q, scales.reshape(n, (r // TILE) * 4)]
    if rope is not None and rope.numel() > 0:
        parts.append(rope.reshape(n, math.prod(rope.shape[1:])).to(torch.bfloat16).contiguous().view(torch.uint8))
    return torch.cat(parts, dim=1)


def dequantize_packed_latent(rows: torch.Tensor, kv_lora_rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(nope fp32 (N, r), rope bf16 (N, rope))`` from packed rows ``(N, [1,] bytes)``."""
    b = rows.reshape(rows.shape[0], -1)
    b = b if b.dtype == torch.uint8 else b.view(torch.uint8)
    n, r = b.shape[0], kv_lora_rank
    q = b[:, :r].contiguous().view(torch.float8_e4m3fn).float().reshape(n, r // TILE, TILE)
    s = b[:, r : r + r // TILE * 4].contiguous().view(torch.float32)
    rope = b[:, r + r // TILE * 4 :].contiguous().view(torch.bfloat16)
    return (q * s[..., None]).reshape(n, r), rope


class DSATokenToKVPool(MLATokenToKVPool):
    """MLA latent (raw or packed FP8) plus per-layer index keys (DSATokenToKVPool.set_kv_buffer).

    * Packed latent: ``set_mla_kv_buffer`` quantizes (:func:`quantize_packed_latent`) and
      scatters the bytes (location 0 skipped with rope present); ``set_kv_buffer`` raises (SGLang
      asserts it away for this layout).
    * ``set_index_k_scale_buffer(layer, loc, index_k (N, 128) fp8, index_k_scale (N,) fp32)``
      packs pre-quantized keys; :meth:`set_index_k` quantizes bf16 keys first (the fused CUDA
      path, ``scale = max(amax, 1e-4) / 448``). No location-0 skip. Layers that reuse the
      previous top-k have 0-row buffers and refuse writes.
    * ``move_kv_cache`` also moves index keys and scales token by token (``index_kpool == 1``).
    * ``index_kpool > 1`` (kpool compression, ``kpool_decode_update_index_cache``) has no index write path here.
    """

    def __init__(self, built: BuiltPool, *, kv_dtype: torch.dtype, **kwargs: Any) -> None:
        super().__init__(built, kv_dtype=kv_dtype, **kwargs)
        self.index_k_with_scale_buffer: list[torch.Tensor] = self.layer_buffers("index_k_with_scale_buffer")
        self.index_head_dim = self.int_attribute("index_head_dim")
        self.index_page_size = self.int_attribute("index_page_size")
        self.index_kpool = self.int_attribute("index_kpool")

    def _check_dims(self) -> None:
        raw = self.kv_lora_rank + self.qk_rope_head_dim
        packed = packed_row_bytes(self.kv_lora_rank, self.qk_rope_head_dim)
        self.packed_fp8 = self.kv_cache_dim == packed and packed != raw
        if self.kv_cache_dim not in (raw, packed):
            raise KVCacheConfigError(
                f"DSA latent row of {self.kv_cache_dim} values is neither raw ({raw}) nor packed FP8 ({packed})"
            )

    # ---- latent ----------------------------------------------------------------------------------
    def set_kv_buffer(
        self,
        layer_id: int,
        loc: Loc,
        cache_k: torch.Tensor,
        cache_v: torch.Tensor | None = None,
        k_scale: Any = None,
        v_scale: Any = None,
    ) -> None:
        if self.packed_fp8:
            raise UnsupportedConfigurationError(
                "set_kv_buffer is not allowed on the packed FP8 DSA latent (SGLang's DSATokenToKVPool); "
                "use set_mla_kv_buffer"
            )
        super().set_kv_buffer(layer_id, loc, cache_k, cache_v, k_scale, v_scale)

    def set_mla_kv_buffer(
        self, layer_id: int, loc: Loc, cache_k_nope: torch.Tensor, cache_k_rope: torch.Tensor | None = None
    ) -> None:
        if not self.packed_fp8:
            super().set_mla_kv_buffer(layer_id, loc, cache_k_nope, cache_k_rope)
            return
        index, where = self.layer_target(layer_id, loc)
        has_rope = self._check_parts(where.shape[0], cache_k_nope, cache_k_rope)
        self.check_loc(where, self.rows)
        row = quantize_packed_latent(cache_k_nope, cache_k_rope if has_rope else None)
        kernels.store_rows(self.kv_buffer[index], where, row, skip_zero_loc=has_rope, use_triton=self.use_triton)

    def get_mla_kv_buffer(
        self, layer_id: int, loc: torch.Tensor, dst_dtype: torch.dtype | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Packed rows are dequantized (nope ``q * s``, rope as stored); raw rows as MLA."""
        if not self.packed_fp8:
            return super().get_mla_kv_buffer(layer_id, loc, dst_dtype)
        rows = self.kv_buffer[self.local_layer(layer_id)][loc.reshape(-1).to(torch.int64)]
        nope, rope = dequantize_packed_latent(rows, self.kv_lora_rank)
        out = dst_dtype or torch.bfloat16
        return nope.to(out)[:, None], rope.to(out)[:, None]

    # ---- index keys ------------------------------------------------------------------------------
    def _index_buffer(self, layer_id: int) -> torch.Tensor:
        buf = self.index_k_with_scale_buffer[self.local_layer(layer_id)]
        if buf.shape[0] == 0:
            raise KVCacheConfigError(
                f"layer {layer_id} reuses the previous layer's top-k and stores no index keys (0-row buffer)"
            )
        if self.index_kpool != 1:
            raise UnsupportedConfigurationError(
                f"index_kpool {self.index_kpool}: kpool-compressed index keys have no write path here"
            )
        # one kernel page a row: a DCP-replicated draft stores dcp pages per row (IndexKeyCache._kernel_view)
        page_width = self.index_page_size * index_k_row_bytes(self.index_head_dim)
        return buf.view(-1, page_width)

    def get_index_k_with_scale_buffer(self, layer_id: int) -> torch.Tensor:
        """The layer's page-major ``(pages, p * 132)`` uint8 buffer (0 rows for a skipping layer)."""
        return self.index_k_with_scale_buffer[self.local_layer(layer_id)]

    def _index_rows(self, buf: torch.Tensor) -> int:
        return int(buf.shape[0]) * self.index_page_size

    def set_index_k_scale_buffer(
        self, layer_id: int, loc: Loc, index_k: torch.Tensor, index_k_scale: torch.Tensor
    ) -> None:
        """Pack fp8 keys ``(N, 128)`` and fp32 scales ``(N,)``/``(N, 1)`` (DSATokenToKVPool.set_index_k_scale_buffer).
        """
        buf = self._index_buffer(layer_id)
        where = plain_loc(loc)
        n = where.shape[0]
        if index_k.element_size() != 1:
            raise KVCacheConfigError(f"index_k must be fp8 (one byte per value), got {index_k.dtype}")
        check_rows(index_k, n, self.index_head_dim, "index_k")
        check_rows(index_k_scale, n, 1, "index_k_scale")
        self.check_loc(where, self._index_rows(buf))
        kernels.store_index_k_scale(buf, where, index_k, index_k_scale, page_size=self.index_page_size,
                                    use_triton=self.use_triton)

    def set_index_k(self, layer_id: int, loc: Loc, index_k: torch.Tensor, *, scale_pow2: bool = False) -> None:
        """Quantize bf16/fp16/fp32 keys ``(N, 128)`` per token and pack them (the fused CUDA path)."""
        buf = self._index_buffer(layer_id)
        where = plain_loc(loc)
        check_rows(index_k, where.shape[0], self.index_head_dim, "index_k")
        self.check_loc(where, self._index_rows(buf))
        kernels.quantize_store_index_k(buf, where, index_k, page_size=self.index_page_size, scale_pow2=scale_pow2,
                                       use_triton=self.use_triton)

    def _index_positions(self, loc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        p, d = self.index_page_size, self.index_head_dim
        loc = loc.reshape(-1).to(torch.int64)
        page, off = (loc // p)[:, None], (loc % p)[:, None]
        keys = off * d + torch.arange(d, device=loc.device)
        scales = p * d + off * 4 + torch.arange(4, device=loc.device)
        return page, keys, scales

    def get_index_k_scale(self, layer_id: int, loc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(keys float8_e4m3fn (N, 128), scales float32 (N,))`` gathered at ``loc``."""
        buf = self._index_buffer(layer_id)
        page, keys, scales = self._index_positions(loc)
        k = buf[page, keys].contiguous().view(torch.float8_e4m3fn)
        s = buf[page, scales].contiguous().view(torch.float32).reshape(-1)
        return k, s

    def move_extra(self, dst_loc: torch.Tensor, src_loc: torch.Tensor) -> None:
        """Index keys and scales move token by token (only with ``index_kpool == 1``)."""
        if self.index_kpool != 1:
            return
        src_page, src_keys, src_scales = self._index_positions(src_loc)
        dst_page, dst_keys, dst_scales = self._index_positions(dst_loc)
        for buf in self.index_k_with_scale_buffer:
            if buf.shape[0] == 0:
                continue
            keys, scales = buf[src_page, src_keys].clone(), buf[src_page, src_scales].clone()
            buf[dst_page, dst_keys] = keys
            buf[dst_page, dst_scales] = scales
