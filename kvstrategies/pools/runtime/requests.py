"""``ReqToTokenPool`` and ``HybridReqToTokenPool``: request rows and their token locations (ReqToTokenPool).

``req_to_token[row, j]`` is the KV location of token ``j`` of the request holding ``row``; the
scheduler writes it with the locations the token allocator returned. Row 0 is padding. Free
rows come from a :class:`~kvstrategies.allocators.RequestSlotAllocator` (the **last** free rows
first: a fresh pool of 4 gives ``[3, 4]``); ``req_generation[row]`` counts reuses (CPU, never
reset).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import torch

from ...allocators import MambaSlotAllocator, RequestSlotAllocator
from ...errors import KVCacheConfigError, UnsupportedConfigurationError
from ..build import BuiltPool
from .base import TypedPool
from .mamba import MambaPool


class RequestHandle(Protocol):
    """What :meth:`ReqToTokenPool.alloc` reads and sets on a request (an engine's ``Req``)."""

    req_pool_idx: int | None


class ReqToTokenPool(TypedPool):
    """The request table ``req_to_token (R + 1 [+ pre_alloc], max_context_len)`` int32 (ReqToTokenPool).

    * ``alloc_rows(n)``: ``None`` if fewer than ``n`` rows are free, ``[]`` for 0, else the last
      ``n`` free rows; their ``req_generation`` is incremented and ``on_alloc`` called.
    * ``alloc(reqs)``: requests already holding a row keep it; the others get rows; returns each
      request's row in order and binds ``req.req_pool_idx``, or ``None`` binding nothing.
    * ``free_rows(rows)`` appends to the free list; ``free(req)`` frees and unbinds its row.
    * ``write(indices, values)``: ``req_to_token[indices] = values``.
    * ``clear()``: every row free again; ``req_generation`` and the table contents are kept.
    """

    def __init__(self, built: BuiltPool, *, on_alloc: Callable[[list[int]], None] | None = None, **kwargs: Any) -> None:
        super().__init__(built, **kwargs)
        self.req_to_token: torch.Tensor = self.tensors["req_to_token"]
        #: None for releases whose pool keeps no reuse counter
        self.req_generation: torch.Tensor | None = self.tensors.get("req_generation")
        self.max_context_len = int(self.req_to_token.shape[1])
        rows = int(self.req_to_token.shape[0])
        requests = self.attribute("size", None, required=False)
        pre_alloc = self.attribute("pre_alloc_size", None, required=False)
        # a table without the padding row 0 (SGLang up to 0.5.10) hands out rows from 0
        first = 0 if isinstance(requests, int) and isinstance(pre_alloc, int) and rows == requests + pre_alloc else 1
        self.allocator = RequestSlotAllocator(rows - first, first=first)
        self.on_alloc = on_alloc

    @property
    def free_slots(self) -> list[int]:
        return self.allocator.free_slots

    def available_size(self) -> int:
        return self.allocator.available_size()

    def alloc_rows(self, need_size: int) -> list[int] | None:
        rows = self.allocator.alloc(need_size)
        if rows:
            if self.req_generation is not None:
                self.req_generation[rows] += 1
            if self.on_alloc is not None:
                self.on_alloc(rows)
        return rows

    def alloc(self, reqs: Sequence[RequestHandle]) -> list[int] | None:
        """Rows for ``reqs`` (chunked-prefill continuations keep theirs); ``None`` binds nothing."""
        fresh = [r for r in reqs if r.req_pool_idx is None]
        rows = self.alloc_rows(len(fresh))
        if rows is None:
            return None
        for req, row in zip(fresh, rows, strict=True):
            req.req_pool_idx = row
        return [int(r.req_pool_idx) for r in reqs if r.req_pool_idx is not None]

    def free_rows(self, rows: int | Iterable[int] | torch.Tensor) -> None:
        self.allocator.free(rows)

    def free(self, req: RequestHandle) -> None:
        if req.req_pool_idx is None:
            raise KVCacheConfigError("free(req): the request holds no row of this ReqToTokenPool")
        self.free_rows(req.req_pool_idx)
        req.req_pool_idx = None

    def write(self, indices: Any, values: Any) -> None:
        """``req_to_token[indices] = values`` (e.g. ``(row, slice(start, end))`` and a location tensor)."""
        self.req_to_token[indices] = values

    def clear(self) -> None:
        self.allocator.clear()


class MambaRequestHandle(RequestHandle, Protocol):
    mamba_pool_idx: int | None


class HybridReqToTokenPool(ReqToTokenPool):
    """Request rows plus one Mamba state slot per request (HybridReqToTokenPool).

    ``alloc(reqs)`` gives every request without a slot ``mamba_allocator.alloc(1)`` and records
    ``req_index_to_mamba_index_mapping[row] = slot``. Decision (README): Mamba slot exhaustion
    returns ``None`` (SGLang asserts), after giving back the rows and slots this call took. The
    Mamba extra buffer (ping-pong track slots) is not implemented: ``alloc`` refuses pools that
    have it. The forward pass zeroes a new slot (:meth:`MambaPool.clear_slots`).
    """

    def __init__(self, built: BuiltPool, *, mamba_pool: MambaPool | None, **kwargs: Any) -> None:
        super().__init__(built, **kwargs)
        self.mamba_pool = mamba_pool
        self.req_index_to_mamba_index_mapping: torch.Tensor = self.tensors["req_index_to_mamba_index_mapping"]
        self.has_ping_pong = "req_index_to_mamba_ping_pong_track_buffer_mapping" in self.tensors
        size = mamba_pool.size if mamba_pool is not None else 0
        self.mamba_allocator = MambaSlotAllocator(size, device=self.req_index_to_mamba_index_mapping.device)

    def alloc(self, reqs: Sequence[RequestHandle]) -> list[int] | None:
        if self.has_ping_pong:
            raise UnsupportedConfigurationError(
                "the Mamba extra buffer (ping-pong track slots) is not implemented"
            )
        if self.mamba_pool is None:
            raise UnsupportedConfigurationError("this request pool has no Mamba pool (a draft worker's)")
        fresh = [r for r in reqs if r.req_pool_idx is None]
        rows = super().alloc(reqs)
        if rows is None:
            return None
        handles: list[Any] = list(reqs)
        need = [r for r in handles if getattr(r, "mamba_pool_idx", None) is None]
        slots = self.mamba_allocator.alloc(len(need))
        if slots is None:
            self.free_rows([int(r.req_pool_idx) for r in fresh if r.req_pool_idx is not None])
            for req in fresh:
                req.req_pool_idx = None
            return None
        for req, slot in zip(need, slots.tolist(), strict=True):
            req.mamba_pool_idx = int(slot)
        device = self.req_index_to_mamba_index_mapping.device
        index = torch.tensor(rows, dtype=torch.int64, device=device)
        values = torch.tensor([int(r.mamba_pool_idx) for r in handles], dtype=torch.int32, device=device)
        self.req_index_to_mamba_index_mapping[index] = values
        return rows

    def get_mamba_indices(self, rows: torch.Tensor) -> torch.Tensor:
        return self.req_index_to_mamba_index_mapping[rows]

    def free_mamba_cache(self, req: MambaRequestHandle) -> None:
        """Free the request's Mamba slot and clear its field."""
        if req.mamba_pool_idx is not None:
            self.mamba_allocator.free([req.mamba_pool_idx])
            req.mamba_pool_idx = None

    def copy_mamba_state(self, src: torch.Tensor | list[int], dst: torch.Tensor | list[int]) -> None:
        if self.mamba_pool is None:
            raise UnsupportedConfigurationError("this request pool has no Mamba pool")
        self.mamba_pool.copy_from(src, dst)

    def clear(self) -> None:
        super().clear()
        self.mamba_allocator.clear()
        self.req_index_to_mamba_index_mapping.zero_()
