"""``MambaPool``: per-slot recurrent state of a hybrid linear model (MambaPool, HybridLinearKVPool.set_kv_buffer).

The linear-attention kernels read and write ``conv[i][layer, slot]`` and ``temporal[layer, slot]``
directly (``layer`` = the dense index of the global Mamba layer id, ``slot`` from the request
pool's ``req_index_to_mamba_index_mapping``); the pool itself only clears and copies slots.
"""

from __future__ import annotations

from typing import Any

import torch

from ...errors import KVCacheConfigError
from ..build import BuiltPool
from .base import TypedPool

PREFIX = "mamba."


class MambaPool(TypedPool):
    """``mamba.conv[i]`` ``(Lm, size + 1, ...)`` and ``mamba.temporal`` ``(Lm, size + 1, ...)``; slot 0 is the dummy."""

    def __init__(self, built: BuiltPool, **kwargs: Any) -> None:
        super().__init__(built, **kwargs)
        self.conv: list[torch.Tensor] = self.layer_buffers(f"{PREFIX}conv")
        self.temporal: torch.Tensor = self.tensors[f"{PREFIX}temporal"]
        ids = str(self.attribute("mamba_layer_ids", "", required=False) or "")
        self.mamba_layer_ids: tuple[int, ...] = tuple(int(i) for i in ids.split(",") if i.strip())
        self.mamba_map = {layer: index for index, layer in enumerate(self.mamba_layer_ids)}

    def layer_index(self, layer_id: int) -> int:
        """Dense index of a global Mamba layer id."""
        if layer_id not in self.mamba_map:
            raise KVCacheConfigError(
                f"layer_id {layer_id} is not a Mamba layer of this pool ({list(self.mamba_layer_ids)})"
            )
        return self.mamba_map[layer_id]

    def mamba2_layer_cache(self, layer_id: int) -> tuple[list[torch.Tensor], torch.Tensor]:
        """``([conv[i][layer] (size + 1, ...)], temporal[layer] (size + 1, ...))`` for a global id."""
        index = self.layer_index(layer_id)
        return [c[index] for c in self.conv], self.temporal[index]

    def _slots(self, slots: torch.Tensor | list[int], what: str) -> torch.Tensor:
        s = torch.as_tensor(slots, dtype=torch.int64, device=self.temporal.device).reshape(-1)
        if self.check_bounds and s.numel() and self.temporal.device.type != "meta":
            low, high = int(s.min().item()), int(s.max().item())
            if low < 0 or high > self.size:
                raise KVCacheConfigError(f"{what} holds slots in [{low}, {high}]; the pool has slots [0, {self.size}]")
        return s

    def clear_slots(self, slots: torch.Tensor | list[int]) -> None:
        """Zero conv and temporal state of ``slots`` in every layer."""
        s = self._slots(slots, "slots")
        for state in (*self.conv, self.temporal):
            state[:, s] = 0

    def copy_from(self, src: torch.Tensor | list[int], dst: torch.Tensor | list[int]) -> None:
        """Copy conv and temporal state from slot ``src[i]`` to ``dst[i]`` in every layer."""
        s, d = self._slots(src, "src"), self._slots(dst, "dst")
        if s.numel() != d.numel():
            raise KVCacheConfigError(f"copy_from: {d.numel()} destinations for {s.numel()} sources")
        for state in (*self.conv, self.temporal):
            state[:, d] = state[:, s]
