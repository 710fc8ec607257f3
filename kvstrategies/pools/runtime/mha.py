"""``MHATokenToKVPool`` and ``MHATokenToKOnlyPool``: unquantized K/V rows (MHATokenToKVPool.set_kv_buffer,
MiniMaxSparseKVPool.set_kv_buffer).

Storage is NHD, one K and one V buffer per layer (views of a fused allocation when D == Dv).
fp8 pools store uint8 bytes (KVCache.__init__ store dtype); the getters view them back as the logical dtype.
"""

from __future__ import annotations

from typing import Any

import torch

from ... import kernels
from ...errors import KVCacheConfigError
from ...kernels.reference import Scale
from ..build import BuiltPool
from .base import Loc, TokenRowPool, logical_dtype

__all__ = ["MHATokenToKOnlyPool", "MHATokenToKVPool", "check_rows", "logical_dtype"]


def check_rows(x: torch.Tensor, n: int, width: int, what: str) -> None:
    """``x`` is ``(n, ...)`` with ``width`` elements per row."""
    if x.dim() == 0 or x.shape[0] != n or (n and x[0].numel() != width):
        raise KVCacheConfigError(
            f"{what} has shape {tuple(x.shape)}; expected {n} rows (one per location) of {width} values"
        )


class MHATokenToKOnlyPool(TokenRowPool):
    """K rows only (MHATokenToKOnlyPool, MiniMaxSparseKVPool.set_kv_buffer): ``k_buffer[l]`` ``(T + P, H, D)``.

    ``set_k_buffer`` is plain indexing (location 0 written): with a scale and a dtype change the
    input is divided (out of place), cast, then stored.
    """

    def __init__(self, built: BuiltPool, *, kv_dtype: torch.dtype, **kwargs: Any) -> None:
        super().__init__(built, **kwargs)
        self.k_buffer: list[torch.Tensor] = self.checked_layer_buffers("k_buffer", "K buffers")
        self.init_dtypes(self.k_buffer, kv_dtype)
        self.head_num = self.int_attribute("head_num")
        self.head_dim = self.int_attribute("head_dim")

    def get_key_buffer(self, layer_id: int) -> torch.Tensor:
        """``k_buffer[layer_id - start_layer]`` in the logical dtype ``(T + P, H, D)``."""
        return self._view(self.k_buffer[self.local_layer(layer_id)])

    def set_k_buffer(self, layer_id: int, loc: Loc, cache_k: torch.Tensor, k_scale: Scale | None = None) -> None:
        """``k_buffer[l][loc] = cast(cache_k / k_scale)`` (row 0 written, plain indexing)."""
        index, where = self.layer_target(layer_id, loc)
        check_rows(cache_k, where.shape[0], self.head_num * self.head_dim, "cache_k")
        self.check_loc(where, self.rows)
        kernels.store_rows(self.k_buffer[index], where, cache_k, kv_dtype=self.dtype, scale=k_scale,
                           skip_zero_loc=False, use_triton=self.use_triton)

    def move_buffers(self) -> list[torch.Tensor]:
        return list(self.k_buffer)


class MHATokenToKVPool(MHATokenToKOnlyPool):
    """Standard K/V (MHATokenToKVPool.set_kv_buffer): bf16 / fp16 / fp8 (uint8 storage) / CPU fp8.

    ``set_kv_buffer``: when the input dtype differs from the pool dtype, each input is divided by
    its scale (if given), cast with torch's ``.to()`` (no clamping: e4m3fn saturates at +-448,
    e5m2 overflows to inf, pinned in the kernel tests), and stored as bytes. Location 0 is
    skipped, as SGLang's CUDA ``store_cache`` does on every device here (row 0 is the padding
    sink; its contents are unspecified either way, KVCache.set_kv_buffer). Decision: the caller's
    tensors are not divided in place (SGLang does; the stored values are identical).
    """

    def __init__(self, built: BuiltPool, *, kv_dtype: torch.dtype, **kwargs: Any) -> None:
        super().__init__(built, kv_dtype=kv_dtype, **kwargs)
        self.v_buffer: list[torch.Tensor] = self.checked_layer_buffers("v_buffer", "V buffers")
        self.v_head_dim = int(self.attribute("v_head_dim", self.head_dim, required=False) or self.head_dim)

    def get_value_buffer(self, layer_id: int) -> torch.Tensor:
        """``v_buffer[layer_id - start_layer]`` in the logical dtype ``(T + P, H, Dv)``."""
        return self._view(self.v_buffer[self.local_layer(layer_id)])

    def get_kv_buffer(self, layer_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.get_key_buffer(layer_id), self.get_value_buffer(layer_id)

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
        """Store ``cache_k`` ``(N, H, D)`` and ``cache_v`` ``(N, H, Dv)`` at ``loc`` of ``layer_id``.

        ``dcp_kv_mask``: only rows with a non-zero mask entry are written.
        """
        index, where = self.layer_target(layer_id, loc)
        n = where.shape[0]
        check_rows(cache_k, n, self.head_num * self.head_dim, "cache_k")
        check_rows(cache_v, n, self.head_num * self.v_head_dim, "cache_v")
        if dcp_kv_mask is not None:
            keep = dcp_kv_mask.reshape(-1) != 0
            where, cache_k, cache_v = where[keep], cache_k[keep], cache_v[keep]
        self.check_loc(where, self.rows)
        kernels.store_kv(self.k_buffer[index], self.v_buffer[index], where, cache_k, cache_v, k_scale=k_scale,
                         v_scale=v_scale, kv_dtype=self.dtype, skip_zero_loc=True, use_triton=self.use_triton)

    def move_buffers(self) -> list[torch.Tensor]:
        return [*self.k_buffer, *self.v_buffer]
