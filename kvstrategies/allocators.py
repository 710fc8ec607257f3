"""Slot allocators: which KV locations, state slots and request rows are free (allocators.md).

Vocabulary: a *location* is a row index into a token-major KV buffer (int64). With page size
``P`` location ``x`` lives in page ``x // P`` at offset ``x % P``. Page 0 (locations ``[0, P)``)
is the padding page that CUDA-graph padding tokens write to; no allocator ever hands it out, so
every free list starts at page (or slot) 1. Free lists are int64 tensors on the pool device,
except :class:`RequestSlotAllocator`'s, which is a Python list as in SGLang.

Exhaustion is never an exception: ``alloc*`` returns ``None`` and the caller (the scheduler)
evicts prefix-cache entries and retries. Broken internal invariants (a double free that
overfills a pool, an SWA peer missing where one must exist) raise :class:`AllocatorStateError`.

Free-list order is observable and reproduced from SGLang 0.5.23:

* :class:`TokenToKVPoolAllocator` (page size 1) takes from the head and appends frees to the
  tail, so a freed slot is reused last (``alloc(3) -> [1, 2, 3]``; ``free([2])`` puts 2 last).
* :class:`PagedTokenToKVPoolAllocator` takes pages from the head and *prepends* freed pages,
  so a freed page is reused first.
* :class:`MambaSlotAllocator` takes from the head, appends frees.
* :class:`RequestSlotAllocator` takes from the *tail* (a fresh pool of 4 gives ``[3, 4]``).

Deliberate differences from SGLang (each repeated where it applies):

* SGLang's ``SWATokenToKVPoolAllocator.alloc_decode`` returns ``None`` without giving back the
  side that succeeded when only one side is short (a leak, allocators.md OPEN-A2). Here the
  successful side is rolled back to its exact previous state.
* ``PagedTokenToKVPoolAllocator.alloc(n)`` with ``n`` not a page multiple silently floors in
  SGLang (checked only in debug mode); here it raises :class:`KVCacheConfigError`.
* The SWA ring mode (DSV4 ring variants, ``swa_req_ring_size``) is not implemented.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from .errors import KVCacheConfigError, require

__all__ = [
    "AllocatorStateError",
    "BaseTokenToKVPoolAllocator",
    "MambaSlotAllocator",
    "PagedTokenToKVPoolAllocator",
    "PureSWATokenToKVPoolAllocator",
    "RequestSlotAllocator",
    "SWATokenToKVPoolAllocator",
    "TokenToKVPoolAllocator",
    "num_new_pages",
]

Device = str | torch.device
_I64 = torch.int64


class AllocatorStateError(RuntimeError):
    """An allocator invariant broke (SGLang asserts here): e.g. a double free or a missing peer."""


@runtime_checkable
class _HasMaxTotalTokens(Protocol):
    max_total_num_tokens: int


def _size_of(config: int | Any, attr: str) -> int:
    """``config`` itself when it is an int, else ``getattr(config, attr)`` (a sizes object)."""
    value = config if isinstance(config, int) else getattr(config, attr, None)
    if not isinstance(value, int) or value < 0:
        raise KVCacheConfigError(f"resize needs a non-negative int or an object with .{attr}; got {config!r}")
    return value


def _check_count(n: int, what: str = "need_size") -> int:
    require(isinstance(n, int) and n >= 0, f"{what} must be a non-negative int, got {n!r}")
    return int(n)


def _as_locs(locs: torch.Tensor | Sequence[int], device: Device) -> torch.Tensor:
    """A 1-D int64 tensor on ``device`` (int32 input, lists and tuples accepted)."""
    if isinstance(locs, torch.Tensor):
        return locs.reshape(-1).to(device=device, dtype=_I64)
    return torch.tensor(list(locs), dtype=_I64, device=device)


def num_new_pages(prefix_lens_cpu: torch.Tensor, seq_lens_cpu: torch.Tensor, page_size: int) -> int:
    """Pages a batch extension needs: ``sum_i ceil(seq_i / P) - ceil(prefix_i / P)``."""
    p = page_size
    seq_pages = (seq_lens_cpu.to(_I64) + p - 1) // p
    prefix_pages = (prefix_lens_cpu.to(_I64) + p - 1) // p
    return int((seq_pages - prefix_pages).sum().item())


_count_new_pages = num_new_pages


class BaseTokenToKVPoolAllocator:
    """The common token-allocator contract (allocators.md section 1).

    ``size`` usable token slots, ``page_size`` tokens per page; ``dtype`` is only recorded.
    ``available_size()`` counts free *tokens*. ``free`` is not idempotent (no dedup): a double
    free corrupts the free list exactly as in SGLang, caught only when the pool overfills.
    Between ``free_group_begin()`` and ``free_group_end()`` frees are queued (a clone of each
    input) and released with one ``free`` at the end; groups do not nest.
    """

    def __init__(
        self,
        size: int,
        page_size: int,
        dtype: torch.dtype | None,
        device: Device,
        kvcache: Any,
        need_sort: bool,
    ) -> None:
        require(isinstance(size, int) and size >= 0, f"size must be a non-negative int, got {size!r}")
        require(
            isinstance(page_size, int) and page_size >= 1,
            f"page_size must be a positive int, got {page_size!r}",
        )
        self.size = size
        self.page_size = page_size
        self.dtype = dtype
        self.device = torch.device(device)
        self.need_sort = bool(need_sort)
        self._kvcache = kvcache
        self._free_group: list[torch.Tensor] | None = None

    # -- contract ------------------------------------------------------------------------------
    def get_kvcache(self) -> Any:
        """The token-to-KV pool this allocator serves (may be ``None`` in tests)."""
        return self._kvcache

    @property
    def size_full(self) -> int:
        return self.size

    def available_size(self) -> int:
        raise NotImplementedError

    def alloc(self, need_size: int) -> torch.Tensor | None:
        raise NotImplementedError

    def clear(self) -> None:
        raise NotImplementedError

    def merge_and_sort_free(self) -> None:
        raise NotImplementedError

    def backup_state(self) -> tuple[Any, ...]:
        """An opaque snapshot; :meth:`restore_state` returns to it exactly."""
        raise NotImplementedError

    def restore_state(self, state: tuple[Any, ...]) -> None:
        raise NotImplementedError

    def _release(self, locs: torch.Tensor) -> None:
        raise NotImplementedError

    def alloc_extend(self, *args: Any, **kwargs: Any) -> torch.Tensor | None:
        raise NotImplementedError(f"{type(self).__name__} has no alloc_extend (page size 1)")

    def alloc_decode(self, *args: Any, **kwargs: Any) -> torch.Tensor | None:
        raise NotImplementedError(f"{type(self).__name__} has no alloc_decode (page size 1)")

    def free(self, free_index: torch.Tensor | Sequence[int]) -> None:
        """Give locations back (deferred inside a free group). Empty input is a no-op."""
        self._release_or_queue(free_index, self._release)

    def _release_or_queue(
        self,
        ids: torch.Tensor | Sequence[int],
        release: Callable[[torch.Tensor], None],
        queue: list[torch.Tensor] | None = None,
    ) -> None:
        """``release(ids)`` then the overfull check; inside a free group a clone is queued instead
        (on ``queue``, default the group's location queue). Empty input is a no-op."""
        locs = _as_locs(ids, self.device)
        if locs.numel() == 0:
            return
        if self._free_group is not None:
            (self._free_group if queue is None else queue).append(locs.clone())
            return
        release(locs)
        self._check_not_overfull()

    def free_group_begin(self) -> None:
        if self._free_group is not None:
            raise AllocatorStateError("free groups cannot nest")
        self._free_group = []

    def free_group_end(self) -> None:
        """Release everything queued since ``free_group_begin`` (a no-op when none is open)."""
        group, self._free_group = self._free_group, None
        if group:
            self.free(torch.cat(group))

    def resize(self, config: int | _HasMaxTotalTokens) -> None:
        """``size = config.max_total_num_tokens`` (or an int), then :meth:`clear`."""
        self.size = _size_of(config, "max_total_num_tokens")
        self.clear()

    def _check_not_overfull(self) -> None:
        if self.available_size() > self.size:
            raise AllocatorStateError(
                f"{type(self).__name__}: {self.available_size()} tokens free > size {self.size} "
                "(a location was freed twice)"
            )


class TokenToKVPoolAllocator(BaseTokenToKVPoolAllocator):
    """Page size 1 (allocators.md section 2): slots ``1..size``, slot 0 reserved.

    ``alloc(n)`` takes the head of ``free_pages``; ``free`` appends to the tail (freed slots are
    reused last) or, with ``need_sort``, to ``release_pages``, which is merged and sorted in only
    when an allocation would otherwise fall short. No filtering of slot 0, no dedup.
    """

    def __init__(
        self,
        size: int,
        dtype: torch.dtype | None = None,
        device: Device = "cpu",
        kvcache: Any = None,
        need_sort: bool = False,
    ) -> None:
        super().__init__(size, 1, dtype, device, kvcache, need_sort)
        self.free_pages = torch.empty(0, dtype=_I64)
        self.release_pages = torch.empty(0, dtype=_I64)
        self.clear()

    def clear(self) -> None:
        self.free_pages = torch.arange(1, self.size + 1, dtype=_I64, device=self.device)
        self.release_pages = torch.empty(0, dtype=_I64, device=self.device)
        self._free_group = None

    def available_size(self) -> int:
        return len(self.free_pages) + len(self.release_pages)

    def merge_and_sort_free(self) -> None:
        if len(self.release_pages) > 0:
            merged = torch.cat((self.free_pages, self.release_pages))
            self.free_pages = torch.sort(merged).values
            self.release_pages = torch.empty(0, dtype=_I64, device=self.device)

    def alloc(self, need_size: int) -> torch.Tensor | None:
        n = _check_count(need_size)
        if self.need_sort and n > len(self.free_pages):
            self.merge_and_sort_free()
        if n > len(self.free_pages):
            return None
        out = self.free_pages[:n]
        self.free_pages = self.free_pages[n:]
        return out

    def _release(self, locs: torch.Tensor) -> None:
        if self.need_sort:
            self.release_pages = torch.cat((self.release_pages, locs))
        else:
            self.free_pages = torch.cat((self.free_pages, locs))

    def free_page_ids(self, page_ids: torch.Tensor | Sequence[int]) -> None:
        """With page size 1 a page id is a location."""
        self.free(page_ids)

    def backup_state(self) -> tuple[Any, ...]:
        # free_pages / release_pages are only ever replaced, never written in place.
        return (self.free_pages, self.release_pages)

    def restore_state(self, state: tuple[Any, ...]) -> None:
        self.free_pages, self.release_pages = state


class PagedTokenToKVPoolAllocator(BaseTokenToKVPoolAllocator):
    """Page size ``P`` (allocators.md section 3): pages ``1..floor(size / P)``, page 0 reserved.

    ``available_size() = (free pages + staged pages) * P`` tokens; e.g. ``size=1000, P=16``: 62
    pages, 992 tokens, highest location ``62*16 + 15 = 1007``. Freed pages are **prepended**
    (reused first); with ``need_sort`` they are staged and merged-and-sorted in only when an
    allocation would fall short. Freeing any location of a page frees the whole page.
    """

    def __init__(
        self,
        size: int,
        page_size: int,
        dtype: torch.dtype | None = None,
        device: Device = "cpu",
        kvcache: Any = None,
        need_sort: bool = False,
    ) -> None:
        super().__init__(size, page_size, dtype, device, kvcache, need_sort)
        self.num_pages = 0
        self.free_pages = torch.empty(0, dtype=_I64)
        self.staged_pages: list[torch.Tensor] = []
        self.num_staged_pages = 0
        self._page_ids_group: list[torch.Tensor] = []
        self.clear()

    # -- state -----------------------------------------------------------------------------------
    def clear(self) -> None:
        self.num_pages = self.size // self.page_size
        self.free_pages = torch.arange(1, self.num_pages + 1, dtype=_I64, device=self.device)
        self.staged_pages = []
        self.num_staged_pages = 0
        self._free_group = None
        self._page_ids_group = []

    def available_size(self) -> int:
        return (len(self.free_pages) + self.num_staged_pages) * self.page_size

    def merge_and_sort_free(self) -> None:
        if self.staged_pages:
            merged = torch.cat((self.free_pages, *self.staged_pages))
            self.free_pages = torch.sort(merged).values
            self.staged_pages = []
            self.num_staged_pages = 0

    def backup_state(self) -> tuple[Any, ...]:
        return (self.free_pages, list(self.staged_pages), self.num_staged_pages)

    def restore_state(self, state: tuple[Any, ...]) -> None:
        free_pages, staged, num_staged = state
        self.free_pages, self.staged_pages, self.num_staged_pages = free_pages, list(staged), num_staged

    def _take_pages(self, k: int) -> torch.Tensor:
        pages = self.free_pages[:k]
        self.free_pages = self.free_pages[k:]
        return pages

    def _page_offsets(self) -> torch.Tensor:
        return torch.arange(self.page_size, dtype=_I64, device=self.device)

    # -- alloc -------------------------------------------------------------------------------------
    def alloc(self, need_size: int) -> torch.Tensor | None:
        """Whole pages: ``[p*P, ..., p*P + P - 1]`` for each of the first ``need_size / P`` pages."""
        n = _check_count(need_size)
        require(
            n % self.page_size == 0,
            f"paged alloc needs a multiple of page_size={self.page_size} tokens, got {n} "
            "(SGLang floors it outside debug mode; this library refuses)",
        )
        k = n // self.page_size
        if self.need_sort and k > len(self.free_pages):
            self.merge_and_sort_free()
        if k > len(self.free_pages):
            return None
        pages = self._take_pages(k)
        return (pages[:, None] * self.page_size + self._page_offsets()[None, :]).reshape(-1)

    def alloc_extend(
        self,
        prefix_lens: torch.Tensor,
        prefix_lens_cpu: torch.Tensor,
        seq_lens: torch.Tensor,
        seq_lens_cpu: torch.Tensor,
        last_loc: torch.Tensor,
        extend_num_tokens: int,
        num_new_pages: int | None = None,
    ) -> torch.Tensor | None:
        """Locations of tokens ``[prefix_i, seq_i)`` of every request, back to back in batch order.

        Request ``i`` first fills its open page (``last_loc_i + 1, ...`` up to the next page
        boundary), then takes ``n_i = ceil(seq_i/P) - ceil(prefix_i/P)`` fresh pages from the
        free list in order (its first one at ``s_i = sum_{j<i} n_j``), offsets ``0..P-1``.
        Precondition ``(last_loc + 1) % P == prefix_len % P`` (``last_loc = -1``: no tokens).
        Returns ``None`` (taking nothing) when the batch needs more pages than are free.
        """
        p = self.page_size
        batch = int(seq_lens_cpu.numel())
        estimate = extend_num_tokens // p + batch + 1
        if self.need_sort and estimate > len(self.free_pages):
            self.merge_and_sort_free()
        exact = _count_new_pages(prefix_lens_cpu, seq_lens_cpu, p)  # the argument shadows num_new_pages
        if num_new_pages is not None:
            require(num_new_pages == exact, f"num_new_pages={num_new_pages} but the lengths need {exact}")
        if estimate > len(self.free_pages) and exact > len(self.free_pages):
            return None
        out = _extend_locations(
            self.free_pages, prefix_lens, seq_lens, last_loc, extend_num_tokens, p, self.device
        )
        self._take_pages(exact)
        return out

    def alloc_decode(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor
    ) -> torch.Tensor | None:
        """One new token per request; ``seq_lens`` include it.

        A request opens a new page iff ``seq_len % P == 1``; it gets ``free_pages[r] * P`` with
        ``r`` its rank among those requests (batch order), every other request ``last_loc + 1``.
        Precondition ``(last_loc + 2) % P == seq_len % P``.
        """
        p = self.page_size
        batch = int(seq_lens_cpu.numel())
        needs_cpu = (seq_lens_cpu.to(_I64) % p) == 1
        n = int(needs_cpu.sum().item())
        if self.need_sort and batch > len(self.free_pages):
            self.merge_and_sort_free()
        if n > len(self.free_pages):
            return None
        needs = (seq_lens.to(device=self.device, dtype=_I64) % p) == 1
        rank = torch.cumsum(needs.to(_I64), 0) - 1
        pages = self.free_pages[:n]
        new_loc = pages[rank.clamp(min=0, max=max(n - 1, 0))] * p if n > 0 else rank
        out = torch.where(needs, new_loc, last_loc.to(device=self.device, dtype=_I64) + 1)
        self._take_pages(n)
        return out

    # -- free --------------------------------------------------------------------------------------
    def _release(self, locs: torch.Tensor) -> None:
        self._release_pages(torch.unique(locs // self.page_size))

    def _release_pages(self, page_ids: torch.Tensor) -> None:
        if self.need_sort:
            self.staged_pages.append(page_ids)
            self.num_staged_pages += len(page_ids)
        else:
            self.free_pages = torch.cat((page_ids, self.free_pages))

    def free_page_ids(self, page_ids: torch.Tensor | Sequence[int]) -> None:
        """Release exactly these pages (no dedup); queued while a free group is open."""
        self._release_or_queue(page_ids, self._release_pages, self._page_ids_group)

    def free_segment(self, free_index: torch.Tensor, start_pos: int) -> None:
        """Free the pages of ``free_index[::P]``; ``start_pos`` (its first position) is page-aligned."""
        require(start_pos % self.page_size == 0, f"start_pos={start_pos} is not a page multiple")
        locs = _as_locs(free_index, self.device)
        self.free_page_ids(locs[:: self.page_size] // self.page_size)

    def free_group_end(self) -> None:
        """Release queued location frees, then queued page ids."""
        page_ids, self._page_ids_group = self._page_ids_group, []
        super().free_group_end()
        if page_ids:
            self.free_page_ids(torch.cat(page_ids))


def _extend_locations(
    free_pages: torch.Tensor,
    prefix_lens: torch.Tensor,
    seq_lens: torch.Tensor,
    last_loc: torch.Tensor,
    extend_num_tokens: int,
    p: int,
    device: torch.device,
) -> torch.Tensor:
    """Per-token output of ``alloc_extend`` (vectorised; see its docstring).

    Token at sequence position ``j`` of request ``i``: ``last_loc_i + 1 + (j - prefix_i)`` while
    ``j < ceil_page(prefix_i)``, else page ``free_pages[s_i + (j - ceil_page(prefix_i)) // P]``
    at offset ``j % P``. This one formula covers the spec's parts 1 to 3.
    """
    prefix = prefix_lens.to(device=device, dtype=_I64)
    seq = seq_lens.to(device=device, dtype=_I64)
    last = last_loc.to(device=device, dtype=_I64)
    counts = seq - prefix
    if extend_num_tokens == 0 or counts.numel() == 0:
        return torch.empty(0, dtype=_I64, device=device)
    pages_needed = (seq + p - 1) // p - (prefix + p - 1) // p
    first_page = torch.cumsum(pages_needed, 0) - pages_needed
    req = torch.repeat_interleave(torch.arange(len(counts), device=device), counts, output_size=extend_num_tokens)
    token_start = torch.cumsum(counts, 0) - counts
    j = prefix[req] + torch.arange(extend_num_tokens, dtype=_I64, device=device) - token_start[req]
    open_end = (prefix[req] + p - 1) // p * p
    in_open_page = j < open_end
    page_rank = first_page[req] + (j - open_end).clamp(min=0) // p
    safe_rank = page_rank.clamp(max=max(len(free_pages) - 1, 0))
    fresh = free_pages[safe_rank] * p + j % p if len(free_pages) > 0 else j
    return torch.where(in_open_page, last[req] + 1 + (j - prefix[req]), fresh)


def _make_sub_allocator(
    size: int, page_size: int, dtype: torch.dtype | None, device: Device, kvcache: Any, need_sort: bool
) -> TokenToKVPoolAllocator | PagedTokenToKVPoolAllocator:
    if page_size == 1:
        return TokenToKVPoolAllocator(size, dtype, device, kvcache, need_sort)
    return PagedTokenToKVPoolAllocator(size, page_size, dtype, device, kvcache, need_sort)


def _register_mapping(kvcache: Any, mapping: torch.Tensor) -> None:
    """Hand ``full_to_swa_index_mapping`` to the KV pool when it keeps one (``register_mapping``)."""
    if kvcache is not None and hasattr(kvcache, "register_mapping"):
        kvcache.register_mapping(mapping)


class _FullToSWAMapped:
    """What both SWA allocators share: the KV pool they serve and the full-to-SWA translation."""

    _kvcache: Any
    full_to_swa_index_mapping: torch.Tensor

    def get_kvcache(self) -> Any:
        return self._kvcache

    def translate_loc_from_full_to_swa(self, locs: torch.Tensor) -> torch.Tensor:
        """``mapping[locs]``: the SWA location of each full location (0: none, -1 for -1)."""
        return self.full_to_swa_index_mapping[locs.to(_I64)]


class SWATokenToKVPoolAllocator(_FullToSWAMapped):
    """Hybrid sliding-window allocator (allocators.md section 4): a full side and an SWA side.

    Every full location handed out has an SWA peer recorded in ``full_to_swa_index_mapping``
    (int64, length ``size + P + 1``: 0 = "no SWA peer", last entry -1 so that translating a
    ``last_loc`` of -1 gives -1). The SWA side usually holds far fewer tokens: SWA locations of
    tokens that fell out of the window are freed early with :meth:`free_swa`.

    Difference from SGLang 0.5.23 (OPEN-A2): when one side of ``alloc_decode`` (or
    ``alloc_extend``) runs out, SGLang returns ``None`` but keeps the other side's new pages
    allocated (a leak); this class restores the side that succeeded to its exact previous state.
    Ring mode (DSV4 ring variants) is not implemented.
    """

    def __init__(
        self,
        size: int,
        size_swa: int,
        page_size: int = 1,
        dtype: torch.dtype | None = None,
        device: Device = "cpu",
        kvcache: Any = None,
        need_sort: bool = False,
    ) -> None:
        self.page_size = page_size
        self.dtype = dtype
        self.device = torch.device(device)
        self.need_sort = bool(need_sort)
        self._kvcache = kvcache
        full_pool = getattr(kvcache, "full_kv_pool", None)
        swa_pool = getattr(kvcache, "swa_kv_pool", None)
        self.full_attn_allocator = _make_sub_allocator(size, page_size, dtype, device, full_pool, need_sort)
        self.swa_attn_allocator = _make_sub_allocator(size_swa, page_size, dtype, device, swa_pool, need_sort)
        self.full_to_swa_index_mapping = self._new_mapping(size)
        _register_mapping(kvcache, self.full_to_swa_index_mapping)

    def _new_mapping(self, size: int) -> torch.Tensor:
        mapping = torch.zeros(size + self.page_size + 1, dtype=_I64, device=self.device)
        mapping[-1] = -1
        return mapping

    # -- capacity ------------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return min(self.size_full, self.size_swa)

    @property
    def size_full(self) -> int:
        return self.full_attn_allocator.size

    @property
    def size_swa(self) -> int:
        return self.swa_attn_allocator.size

    def available_size(self) -> int:
        return min(self.full_available_size(), self.swa_available_size())

    def full_available_size(self) -> int:
        return self.full_attn_allocator.available_size()

    def swa_available_size(self) -> int:
        return self.swa_attn_allocator.available_size()

    def new_pages_available(self, full_pages: int, swa_pages: int) -> bool:
        p = self.page_size
        return full_pages <= self.full_available_size() // p and swa_pages <= self.swa_available_size() // p

    # -- alloc ---------------------------------------------------------------------------------------
    def alloc(self, need_size: int) -> torch.Tensor | None:
        """Page size 1 only: ``need_size`` slots on each side; returns the full locations."""
        if self.page_size != 1:
            raise KVCacheConfigError("SWATokenToKVPoolAllocator.alloc needs page_size 1; use alloc_extend")
        n = _check_count(need_size)
        if n > self.full_available_size() or n > self.swa_available_size():
            return None
        full_state = self.full_attn_allocator.backup_state()
        full = self.full_attn_allocator.alloc(n)
        swa = self.swa_attn_allocator.alloc(n) if full is not None else None
        if full is None or swa is None:  # cannot happen after the checks; stay leak-free anyway
            self.full_attn_allocator.restore_state(full_state)
            return None
        self.full_to_swa_index_mapping[full] = swa
        return full

    def _require_paged(self, what: str) -> None:
        if self.page_size == 1:
            raise KVCacheConfigError(f"SWATokenToKVPoolAllocator.{what} needs page_size > 1; use alloc")

    def alloc_extend(
        self,
        prefix_lens: torch.Tensor,
        prefix_lens_cpu: torch.Tensor,
        seq_lens: torch.Tensor,
        seq_lens_cpu: torch.Tensor,
        last_loc: torch.Tensor,
        extend_num_tokens: int,
    ) -> torch.Tensor | None:
        """Paged ``alloc_extend`` on both sides (SWA side continues ``mapping[last_loc]``)."""
        self._require_paged("alloc_extend")
        n = num_new_pages(prefix_lens_cpu, seq_lens_cpu, self.page_size)
        if not self.new_pages_available(n, n):
            return None
        swa_last_loc = self.translate_loc_from_full_to_swa(last_loc)
        args = (prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu)
        return self._alloc_both(
            lambda a: a.alloc_extend(*args, last_loc, extend_num_tokens),
            lambda a: a.alloc_extend(*args, swa_last_loc, extend_num_tokens),
        )

    def alloc_decode(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor
    ) -> torch.Tensor | None:
        """Paged ``alloc_decode`` on both sides. If either side is short, nothing is taken.

        SGLang 0.5.23 keeps the side that succeeded allocated (OPEN-A2); this is rolled back.
        """
        self._require_paged("alloc_decode")
        swa_last_loc = self.translate_loc_from_full_to_swa(last_loc)
        return self._alloc_both(
            lambda a: a.alloc_decode(seq_lens, seq_lens_cpu, last_loc),
            lambda a: a.alloc_decode(seq_lens, seq_lens_cpu, swa_last_loc),
        )

    def _alloc_both(self, full_fn: Any, swa_fn: Any) -> torch.Tensor | None:
        full_state = self.full_attn_allocator.backup_state()
        full = full_fn(self.full_attn_allocator)
        if full is None:
            return None
        swa = swa_fn(self.swa_attn_allocator)
        if swa is None:
            self.full_attn_allocator.restore_state(full_state)
            return None
        self.full_to_swa_index_mapping[full] = swa
        return full  # type: ignore[no-any-return]

    def alloc_extend_swa_tail(
        self,
        prefix_lens: torch.Tensor,
        prefix_lens_cpu: torch.Tensor,
        seq_lens: torch.Tensor,
        seq_lens_cpu: torch.Tensor,
        last_loc: torch.Tensor,
        extend_num_tokens: int,
        swa_tail_len: int,
    ) -> torch.Tensor | None:
        """Batch of one: full locations for the whole extension, SWA ones for the last tokens.

        The tail's SWA locations are fresh pages (prefix 0, ``last_loc`` -1); the mapping is set
        for the tail and cleared (0) for the rest.
        """
        self._require_paged("alloc_extend_swa_tail")
        require(int(seq_lens_cpu.numel()) == 1, "alloc_extend_swa_tail supports a batch of one request")
        require(0 <= swa_tail_len <= extend_num_tokens, f"swa_tail_len={swa_tail_len} out of range")
        p = self.page_size
        full_pages = num_new_pages(prefix_lens_cpu, seq_lens_cpu, p)
        if not self.new_pages_available(full_pages, (swa_tail_len + p - 1) // p):
            return None
        dev = self.device

        def tail(a: Any) -> torch.Tensor | None:
            zero, tail_t = torch.zeros(1, dtype=_I64), torch.tensor([swa_tail_len], dtype=_I64)
            return a.alloc_extend(  # type: ignore[no-any-return]
                zero.to(dev), zero, tail_t.to(dev), tail_t, torch.full((1,), -1, dtype=_I64, device=dev),
                swa_tail_len,
            )

        full_state = self.full_attn_allocator.backup_state()
        full = self.full_attn_allocator.alloc_extend(
            prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc, extend_num_tokens
        )
        if full is None:
            return None
        swa = tail(self.swa_attn_allocator) if swa_tail_len > 0 else full[:0]
        if swa is None:
            self.full_attn_allocator.restore_state(full_state)
            return None
        split = extend_num_tokens - swa_tail_len
        self.full_to_swa_index_mapping[full[:split]] = 0
        self.full_to_swa_index_mapping[full[split:]] = swa
        return full

    # -- free ----------------------------------------------------------------------------------------
    def free(self, free_index: torch.Tensor | Sequence[int]) -> None:
        """``free_swa`` then ``free_full``."""
        locs = _as_locs(free_index, self.device)
        if locs.numel() == 0:
            return
        self.free_swa(locs)
        self.free_full(locs)

    def _expand_to_full_pages(self, locs: torch.Tensor) -> torch.Tensor:
        p = self.page_size
        pages: torch.Tensor = torch.unique(locs // p)
        return (pages[:, None] * p + torch.arange(p, dtype=_I64, device=self.device)[None, :]).reshape(-1)

    def free_swa(self, free_index: torch.Tensor | Sequence[int]) -> None:
        """Release the SWA peers of these full locations and clear their mapping entries.

        Page size 1: every location must have a peer (> 0), else :class:`AllocatorStateError`.
        Page size > 1: the whole full pages are considered and peers that exist are freed.
        """
        locs = _as_locs(free_index, self.device)
        if locs.numel() == 0:
            return
        mapping = self.full_to_swa_index_mapping
        if self.page_size == 1:
            swa = mapping[locs]
            if not bool((swa > 0).all()):
                raise AllocatorStateError("free_swa: a full location has no SWA peer (freed twice?)")
            mapping[locs] = 0
        else:
            expanded = self._expand_to_full_pages(locs)
            swa = mapping[expanded]
            swa = swa[swa > 0]
            mapping[expanded] = 0
        self.swa_attn_allocator.free(swa)

    def free_full(self, free_index: torch.Tensor | Sequence[int]) -> None:
        """Free on the full side; the SWA peers must already be released (mapping 0)."""
        locs = _as_locs(free_index, self.device)
        if locs.numel() == 0:
            return
        if bool((self.full_to_swa_index_mapping[locs] != 0).any()):
            raise AllocatorStateError("free_full: SWA peers still allocated; call free_swa first")
        self.full_attn_allocator.free(locs)

    def free_full_segment(self, free_index: torch.Tensor, start_pos: int) -> None:
        require(start_pos % self.page_size == 0, f"start_pos={start_pos} is not a page multiple")
        if self.page_size == 1:
            self.free_full(free_index)
            return
        locs = _as_locs(free_index, self.device)
        if bool((self.full_to_swa_index_mapping[locs] != 0).any()):
            raise AllocatorStateError("free_full_segment: SWA peers still allocated")
        assert isinstance(self.full_attn_allocator, PagedTokenToKVPoolAllocator)
        self.full_attn_allocator.free_segment(locs, start_pos)

    def free_swa_segment(self, free_index: torch.Tensor, start_pos: int) -> None:
        """SWA peers of the pages of ``free_index[::P]`` (one representative per full page)."""
        require(start_pos % self.page_size == 0, f"start_pos={start_pos} is not a page multiple")
        locs = _as_locs(free_index, self.device)
        self.free_swa(locs[:: self.page_size])

    def free_segment(self, free_index: torch.Tensor, start_pos: int) -> None:
        self.free_swa_segment(free_index, start_pos)
        self.free_full_segment(free_index, start_pos)

    def free_group_begin(self) -> None:
        self.full_attn_allocator.free_group_begin()
        self.swa_attn_allocator.free_group_begin()

    def free_group_end(self) -> None:
        self.swa_attn_allocator.free_group_end()
        self.full_attn_allocator.free_group_end()

    # -- state ---------------------------------------------------------------------------------------
    def clear(self) -> None:
        self.swa_attn_allocator.clear()
        self.full_attn_allocator.clear()
        self.full_to_swa_index_mapping[:-1] = 0

    def backup_state(self) -> tuple[Any, ...]:
        return (
            self.full_attn_allocator.backup_state(),
            self.swa_attn_allocator.backup_state(),
            self.full_to_swa_index_mapping.clone(),
        )

    def restore_state(self, state: tuple[Any, ...]) -> None:
        full, swa, mapping = state
        self.full_attn_allocator.restore_state(full)
        self.swa_attn_allocator.restore_state(swa)
        self.full_to_swa_index_mapping.copy_(mapping)

    def merge_and_sort_free(self) -> None:
        self.full_attn_allocator.merge_and_sort_free()
        self.swa_attn_allocator.merge_and_sort_free()

    def resize(self, config: Any) -> None:
        """Sizes from ``config.full_max_total_num_tokens`` / ``swa_max_total_num_tokens``."""
        self.full_attn_allocator.size = _size_of(config, "full_max_total_num_tokens")
        self.swa_attn_allocator.size = _size_of(config, "swa_max_total_num_tokens")
        self.full_to_swa_index_mapping = self._new_mapping(self.full_attn_allocator.size)
        _register_mapping(self._kvcache, self.full_to_swa_index_mapping)
        self.clear()


class PureSWATokenToKVPoolAllocator(_FullToSWAMapped):
    """Every layer is sliding-window (allocators.md section 5); page size must be 1.

    One :class:`TokenToKVPoolAllocator` of ``size_swa`` serves as both sides; the mapping is the
    identity ``[0, 1, ..., size_swa + P - 1]`` plus the -1 sentinel and is never rewritten.
    ``free`` frees only locations ``> 0``; ``free_full`` is a no-op.
    """

    def __init__(
        self,
        size_swa: int,
        page_size: int = 1,
        dtype: torch.dtype | None = None,
        device: Device = "cpu",
        kvcache: Any = None,
        need_sort: bool = False,
    ) -> None:
        require(page_size == 1, f"PureSWATokenToKVPoolAllocator needs page_size 1, got {page_size}")
        self.page_size = 1
        self.dtype = dtype
        self.device = torch.device(device)
        self.need_sort = bool(need_sort)
        self._kvcache = kvcache
        self.swa_attn_allocator = TokenToKVPoolAllocator(size_swa, dtype, device, kvcache, need_sort)
        self.full_attn_allocator = self.swa_attn_allocator
        # identity then the -1 sentinel; arange + setitem, not cat: cat on "meta" imports torch._dynamo (and triton)
        self.full_to_swa_index_mapping = torch.arange(size_swa + self.page_size + 1, dtype=_I64, device=self.device)
        self.full_to_swa_index_mapping[-1] = -1
        _register_mapping(kvcache, self.full_to_swa_index_mapping)

    @property
    def size(self) -> int:
        return self.swa_attn_allocator.size

    size_full = size_swa = size

    def available_size(self) -> int:
        return self.swa_attn_allocator.available_size()

    full_available_size = swa_available_size = available_size

    def alloc(self, need_size: int) -> torch.Tensor | None:
        return self.swa_attn_allocator.alloc(need_size)

    def free(self, free_index: torch.Tensor | Sequence[int]) -> None:
        locs = _as_locs(free_index, self.device)
        self.swa_attn_allocator.free(locs[locs > 0])

    free_swa = free

    def free_full(self, free_index: torch.Tensor | Sequence[int]) -> None:
        """No-op: the full side is the SWA side, released by :meth:`free`."""

    def free_group_begin(self) -> None:
        self.swa_attn_allocator.free_group_begin()

    def free_group_end(self) -> None:
        self.swa_attn_allocator.free_group_end()

    def clear(self) -> None:
        self.swa_attn_allocator.clear()

    def merge_and_sort_free(self) -> None:
        self.swa_attn_allocator.merge_and_sort_free()

    def backup_state(self) -> tuple[Any, ...]:
        return self.swa_attn_allocator.backup_state()

    def restore_state(self, state: tuple[Any, ...]) -> None:
        self.swa_attn_allocator.restore_state(state)

    def alloc_extend(self, *args: Any, **kwargs: Any) -> torch.Tensor | None:
        raise NotImplementedError("PureSWATokenToKVPoolAllocator has page size 1: use alloc")

    alloc_decode = alloc_extend_swa_tail = alloc_extend


class MambaSlotAllocator:
    """State slots of a Mamba pool (allocators.md section 6): slots ``1..size``, 0 reserved.

    ``alloc(n)`` takes the head, ``free`` appends (no dedup). Between ``alloc_group_begin(k)``
    and ``alloc_group_end()`` ``k`` slots are taken up front and ``alloc(1)`` hands them out one
    by one (falling back to the free list once they run out); unused ones are freed at the end.
    If fewer than ``k`` are free, nothing is pre-taken and ``alloc`` works as usual.

    Exhaustion returns ``None``. (SGLang's ``HybridReqToTokenPool`` turns that into an
    ``AssertionError``; the request pool built on this class decides what to raise.)
    """

    def __init__(self, size: int, device: Device = "cpu") -> None:
        require(isinstance(size, int) and size >= 0, f"size must be a non-negative int, got {size!r}")
        self.size = size
        self.device = torch.device(device)
        self.free_slots = torch.empty(0, dtype=_I64)
        self._group: Iterator[torch.Tensor] | None = None
        self.clear()

    def available_size(self) -> int:
        return len(self.free_slots)

    def _take(self, n: int) -> torch.Tensor | None:
        if n > len(self.free_slots):
            return None
        out = self.free_slots[:n]
        self.free_slots = self.free_slots[n:]
        return out

    def alloc(self, need_size: int) -> torch.Tensor | None:
        n = _check_count(need_size)
        if self._group is not None and n == 1:
            slot = next(self._group, None)
            if slot is not None:
                return slot
        return self._take(n)

    def alloc_group_begin(self, num_reqs: int) -> None:
        self._group = None
        taken = self._take(_check_count(num_reqs, "num_reqs")) if num_reqs > 0 else None
        if taken is not None:
            self._group = iter(list(torch.split(taken, 1)))

    def alloc_group_end(self) -> None:
        group, self._group = self._group, None
        rest = list(group) if group is not None else []
        if rest:
            self.free(torch.cat(rest))

    def free(self, free_index: torch.Tensor | Sequence[int]) -> None:
        slots = _as_locs(free_index, self.device)
        if slots.numel() == 0:
            return
        self.free_slots = torch.cat((self.free_slots, slots))

    def clear(self) -> None:
        self.free_slots = torch.arange(1, self.size + 1, dtype=_I64, device=self.device)
        self._group = None


class RequestSlotAllocator:
    """Rows of the request-to-token table (allocators.md section 7): rows ``1..size``, 0 padding.

    The free list is a Python list. ``alloc(n)`` takes the **last** ``n`` entries (a fresh
    allocator of size 4: ``alloc(2) -> [3, 4]``), ``[]`` for ``n == 0``, ``None`` when fewer
    than ``n`` are free; ``free`` appends to the end (no dedup); ``clear`` restores ``[1..size]``.
    ``ReqToTokenPool`` delegates its ``alloc_rows`` / ``free_rows`` here and keeps the generation
    counters, the aux cache and the on-alloc hook itself.
    """

    def __init__(self, size: int) -> None:
        require(isinstance(size, int) and size >= 0, f"size must be a non-negative int, got {size!r}")
        self.size = size
        self.free_slots: list[int] = []
        self.clear()

    def available_size(self) -> int:
        return len(self.free_slots)

    def alloc(self, need_size: int) -> list[int] | None:
        n = _check_count(need_size)
        if n > len(self.free_slots):
            return None
        if n == 0:
            return []
        out = self.free_slots[-n:]
        del self.free_slots[-n:]
        return out

    def free(self, free_index: int | Iterable[int] | torch.Tensor) -> None:
        if isinstance(free_index, torch.Tensor):
            self.free_slots.extend(int(i) for i in free_index.reshape(-1).tolist())
        elif isinstance(free_index, int):
            self.free_slots.append(free_index)
        else:
            self.free_slots.extend(int(i) for i in free_index)

    def clear(self) -> None:
        self.free_slots = list(range(1, self.size + 1))
