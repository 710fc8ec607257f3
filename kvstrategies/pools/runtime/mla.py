"""``MLATokenToKVPool`` and ``MLATokenToKVPoolFP4``: one latent row per token (MLATokenToKVPool.set_kv_buffer,
MLATokenToKVPoolFP4.set_kv_buffer).

The row is ``[nope (kv_lora_rank) | rope (qk_rope_head_dim)]``; "V" is a view of the first
``kv_lora_rank`` columns of the same buffer, never written on its own.
"""

from __future__ import annotations

from typing import Any

import torch

from ... import kernels
from ...errors import KVCacheConfigError
from ...kernels import reference as ref
from ..build import BuiltPool
from .base import Loc, TokenRowPool
from .mha import check_rows


def _width(x: torch.Tensor | None) -> int:
    """Values per token of ``x`` ``(N, [1,] w)`` (0 for None or empty)."""
    if x is None or x.numel() == 0:
        return 0
    return int(x[0].numel())


class MLATokenToKVPool(TokenRowPool):
    """Latent rows ``kv_buffer[l]`` ``(T + P, 1, kv_cache_dim)`` (MLATokenToKVPool, MLATokenToKVPool.set_kv_buffer).

    * ``set_kv_buffer(layer, loc, cache_k, cache_v)``: ``cache_k`` is the concatenated row
      ``(N, [1,] kv_cache_dim)``, cast to the pool dtype, stored by plain indexing (location 0
      written); ``cache_v`` and the scales are ignored.
    * ``set_mla_kv_buffer(layer, loc, nope, rope)``: row ``[nope | rope]`` (rope may be None or
      empty: then only the nope columns are written). Location 0 is skipped iff rope is present,
      as SGLang's scatter kernel does.
    * DCP "widened" locations (MLATokenToKVPool.set_kv_buffer) are not modelled: the pool takes local rows.
    """

    def __init__(
        self, built: BuiltPool, *, kv_dtype: torch.dtype, kv_lora_rank: int, qk_rope_head_dim: int, **kwargs: Any
    ) -> None:
        super().__init__(built, **kwargs)
        self.kv_buffer: list[torch.Tensor] = self.checked_layer_buffers("kv_buffer", "buffers")
        self.kv_cache_dim = self.int_attribute("kv_cache_dim")
        self.kv_lora_rank = kv_lora_rank
        self.qk_rope_head_dim = qk_rope_head_dim
        self.init_dtypes(self.kv_buffer, kv_dtype)
        self._check_dims()

    def _check_dims(self) -> None:
        if self.kv_cache_dim != self.kv_lora_rank + self.qk_rope_head_dim:
            raise KVCacheConfigError(
                f"{self.layout.pool_class} row of {self.kv_cache_dim} values does not split into kv_lora_rank "
                f"{self.kv_lora_rank} + qk_rope_head_dim {self.qk_rope_head_dim}"
            )

    def get_key_buffer(self, layer_id: int) -> torch.Tensor:
        """The latent rows of ``layer_id`` ``(T + P, 1, kv_cache_dim)`` in the logical dtype."""
        return self._view(self.kv_buffer[self.local_layer(layer_id)])

    def get_value_buffer(self, layer_id: int) -> torch.Tensor:
        """A view of the first ``kv_lora_rank`` columns of the latent rows."""
        return self.get_key_buffer(layer_id)[..., : self.kv_lora_rank]

    def get_kv_buffer(self, layer_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.get_key_buffer(layer_id), self.get_value_buffer(layer_id)

    def set_kv_buffer(
        self,
        layer_id: int,
        loc: Loc,
        cache_k: torch.Tensor,
        cache_v: torch.Tensor | None = None,
        k_scale: Any = None,
        v_scale: Any = None,
    ) -> None:
        """``kv_buffer[l][loc] = cast(cache_k)`` (the whole row; ``cache_v`` ignored)."""
        index, where = self.layer_target(layer_id, loc)
        check_rows(cache_k, where.shape[0], self.kv_cache_dim, "cache_k (the concatenated latent row)")
        self.check_loc(where, self.rows)
        kernels.store_rows(self.kv_buffer[index], where, cache_k, kv_dtype=self.dtype, skip_zero_loc=False,
                           use_triton=self.use_triton)

    def _check_parts(self, n: int, nope: torch.Tensor, rope: torch.Tensor | None) -> bool:
        check_rows(nope, n, self.kv_lora_rank, "cache_k_nope")
        has_rope = _width(rope) > 0
        if has_rope:
            assert rope is not None
            check_rows(rope, n, self.qk_rope_head_dim, "cache_k_rope")
        return has_rope

    def set_mla_kv_buffer(
        self, layer_id: int, loc: Loc, cache_k_nope: torch.Tensor, cache_k_rope: torch.Tensor | None = None
    ) -> None:
        """Row ``loc[i]`` becomes ``[nope_i | rope_i]`` cast to the pool dtype."""
        index, where = self.layer_target(layer_id, loc)
        self._check_parts(where.shape[0], cache_k_nope, cache_k_rope)
        self.check_loc(where, self.rows)
        kernels.store_mla_kv(self.kv_buffer[index], where, cache_k_nope, cache_k_rope, kv_dtype=self.dtype,
                             use_triton=self.use_triton)

    def get_mla_kv_buffer(
        self, layer_id: int, loc: torch.Tensor, dst_dtype: torch.dtype | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(nope (N, 1, kv_lora_rank), rope (N, 1, rope) or None)`` gathered, in ``dst_dtype``."""
        rows = self.get_key_buffer(layer_id)[loc.reshape(-1).to(torch.int64)]
        out = dst_dtype or self.dtype
        nope = rows[..., : self.kv_lora_rank].to(out)
        rope = rows[..., self.kv_lora_rank : self.kv_lora_rank + self.qk_rope_head_dim].to(out)
        return nope, (rope if self.qk_rope_head_dim else None)

    def move_buffers(self) -> list[torch.Tensor]:
        return list(self.kv_buffer)


class MLATokenToKVPoolFP4(MLATokenToKVPool):
    """Latent rows quantized with fp4_mx_block16 (MLATokenToKVPoolFP4, MLATokenToKVPoolFP4.set_kv_buffer).

    ``kv_buffer[l]`` ``(T + P, 1, dim / 2)`` packed and ``kv_scale_buffer[l]`` ``(T + P, dim / 16)``.
    ``set_mla_kv_buffer`` quantizes nope and rope separately (blocks of 16 never straddle the
    boundary) into ``[packed nope | packed rope]`` and ``[nope scales | rope scales]``, skipping
    location 0 when rope is present; ``set_kv_buffer`` quantizes the whole row by plain
    indexing. Getters return the packed bytes (:meth:`dequantize_rows` decodes them).
    """

    def __init__(self, built: BuiltPool, *, kv_dtype: torch.dtype, **kwargs: Any) -> None:
        super().__init__(built, kv_dtype=torch.uint8, **kwargs)
        self.kv_scale_buffer: list[torch.Tensor] = self.layer_buffers("kv_scale_buffer")

    def get_value_buffer(self, layer_id: int) -> torch.Tensor:
        """The packed bytes of the first ``kv_lora_rank`` values."""
        return self.get_key_buffer(layer_id)[..., : self.kv_lora_rank // 2]

    def get_key_scale_buffer(self, layer_id: int) -> torch.Tensor:
        return self.kv_scale_buffer[self.local_layer(layer_id)]

    def set_kv_buffer(
        self,
        layer_id: int,
        loc: Loc,
        cache_k: torch.Tensor,
        cache_v: torch.Tensor | None = None,
        k_scale: Any = None,
        v_scale: Any = None,
    ) -> None:
        """Quantize the concatenated row ``(N, [1,] dim)``; plain indexing (location 0 written)."""
        index, where = self.layer_target(layer_id, loc)
        check_rows(cache_k, where.shape[0], self.kv_cache_dim, "cache_k (the concatenated latent row)")
        self.check_loc(where, self.rows)
        kernels.quantize_store_fp4_block16(self.kv_buffer[index], self.kv_scale_buffer[index], where, cache_k,
                                           skip_zero_loc=False, use_triton=self.use_triton)

    def set_mla_kv_buffer(
        self, layer_id: int, loc: Loc, cache_k_nope: torch.Tensor, cache_k_rope: torch.Tensor | None = None
    ) -> None:
        index, where = self.layer_target(layer_id, loc)
        has_rope = self._check_parts(where.shape[0], cache_k_nope, cache_k_rope)
        self.check_loc(where, self.rows)
        data, scales = self.kv_buffer[index], self.kv_scale_buffer[index]
        kernels.quantize_store_fp4_block16(data, scales, where, cache_k_nope, skip_zero_loc=has_rope,
                                           use_triton=self.use_triton)
        if has_rope:
            assert cache_k_rope is not None
            rank = self.kv_lora_rank
            kernels.quantize_store_fp4_block16(data, scales, where, cache_k_rope, data_col_offset=rank // 2,
                                               scale_col_offset=rank // ref.FP4_BLOCK, skip_zero_loc=True,
                                               use_triton=self.use_triton)

    def dequantize_rows(self, layer_id: int, loc: torch.Tensor) -> torch.Tensor:
        """fp32 latent rows ``(N, 1, kv_cache_dim)`` at ``loc``."""
        index = self.local_layer(layer_id)
        where = loc.reshape(-1).to(torch.int64)
        packed = self.kv_buffer[index][where].reshape(where.numel(), -1)
        values = ref.dequantize_fp4_block16(packed, self.kv_scale_buffer[index][where])
        return values.reshape(where.numel(), 1, -1)

    def get_mla_kv_buffer(
        self, layer_id: int, loc: torch.Tensor, dst_dtype: torch.dtype | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Dequantized ``(nope, rope)`` in ``dst_dtype`` (default bfloat16)."""
        rows = self.dequantize_rows(layer_id, loc).to(dst_dtype or torch.bfloat16)
        rope = rows[..., self.kv_lora_rank :]
        return rows[..., : self.kv_lora_rank], (rope if self.qk_rope_head_dim else None)

    def move_buffers(self) -> list[torch.Tensor]:
        return [*self.kv_buffer, *self.kv_scale_buffer]

    def _view(self, buf: torch.Tensor) -> torch.Tensor:
        return buf
