"""The paged token allocator (PagedTokenToKVPoolAllocator): whole pages of ``P`` tokens, page 0 reserved.

Pages come from the head of the free list; freed pages are *prepended* (reused first), as in
SGLang 0.5.23. ``alloc_extend`` / ``alloc_decode`` place a batch's new tokens (one vectorised
formula, :func:`extend_locations`). Misuse is caught per page by the ledger of :mod:`.common`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..errors import require
from .common import I64, Device, as_locs, check_batch, check_count, check_state, num_new_pages, take_head
from .token import BaseTokenToKVPoolAllocator

_count_new_pages = num_new_pages

class PagedTokenToKVPoolAllocator(BaseTokenToKVPoolAllocator):
    """Page size ``P`` (PagedTokenToKVPoolAllocator): pages ``1..floor(size / P)``, page 0 reserved.

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
        check_misuse: bool = True,
    ) -> None:
        super().__init__(size, page_size, dtype, device, kvcache, need_sort, check_misuse)
        self.num_pages = 0
        self.free_pages = torch.empty(0, dtype=I64)
        self.staged_pages: list[torch.Tensor] = []
        self.num_staged_pages = 0
        self._page_ids_group: list[torch.Tensor] = []
        self.clear()

    # -- state -----------------------------------------------------------------------------------
    def clear(self) -> None:
        self.num_pages = self.size // self.page_size
        self.free_pages = torch.arange(1, self.num_pages + 1, dtype=I64, device=self.device)
        self.staged_pages = []
        self.num_staged_pages = 0
        self._free_group = None
        self._page_ids_group = []
        self._ledger.reset(self.num_pages)

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
        check_state(self, state)
        free_pages, staged, num_staged = state
        self.free_pages, self.staged_pages, self.num_staged_pages = free_pages, list(staged), num_staged
        self._ledger.rebuild((self.free_pages, *self.staged_pages))

    def _take_pages(self, k: int) -> torch.Tensor:
        pages, self.free_pages = take_head(self.free_pages, k)
        self._ledger.take(pages)
        return pages

    def _page_offsets(self) -> torch.Tensor:
        return torch.arange(self.page_size, dtype=I64, device=self.device)

    # -- alloc -------------------------------------------------------------------------------------
    def alloc(self, need_size: int) -> torch.Tensor | None:
        """Whole pages: ``[p*P, ..., p*P + P - 1]`` for each of the first ``need_size / P`` pages."""
        n = check_count(need_size)
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
        check_batch("alloc_extend", self.device, extend_num_tokens, prefix_lens=prefix_lens,
                    prefix_lens_cpu=prefix_lens_cpu, seq_lens=seq_lens, seq_lens_cpu=seq_lens_cpu, last_loc=last_loc)
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
        out = extend_locations(
            self.free_pages, prefix_lens, seq_lens, last_loc, extend_num_tokens, p, self.device
        )
        self._take_pages(exact)
        return out

    def alloc_decode(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor
    ) -> torch.Tensor | None:
        """One new token per request; ``seq_lens`` include it.

        A request opens a new page iff its new token is the first of a page,
        ``(seq_len - 1) % P == 0`` (every request at ``P = 1``; SGLang's ``seq_len % P == 1`` never
        holds at ``P = 1``, which handed one location out twice); it gets ``free_pages[r] * P`` with
        ``r`` its rank among those requests (batch order), every other request ``last_loc + 1``.
        Precondition ``(last_loc + 2) % P == seq_len % P``.
        """
        check_batch("alloc_decode", self.device, seq_lens=seq_lens, seq_lens_cpu=seq_lens_cpu, last_loc=last_loc)
        p = self.page_size
        batch = int(seq_lens_cpu.numel())
        needs_cpu = (seq_lens_cpu.to(I64) - 1) % p == 0
        n = int(needs_cpu.sum().item())
        if self.need_sort and batch > len(self.free_pages):
            self.merge_and_sort_free()
        if n > len(self.free_pages):
            return None
        needs = (seq_lens.to(device=self.device, dtype=I64) - 1) % p == 0
        rank = torch.cumsum(needs.to(I64), 0) - 1
        pages = self.free_pages[:n]
        new_loc = pages[rank.clamp(min=0, max=max(n - 1, 0))] * p if n > 0 else rank
        out = torch.where(needs, new_loc, last_loc.to(device=self.device, dtype=I64) + 1)
        self._take_pages(n)
        return out

    # -- free --------------------------------------------------------------------------------------
    def _release(self, locs: torch.Tensor) -> None:
        self._release_pages(torch.unique(locs // self.page_size), unique=False)

    def _release_pages(self, page_ids: torch.Tensor, unique: bool = True) -> None:
        """Pages back to the free list (``unique``: a page repeated in the call is misuse)."""
        self._ledger.give_back(page_ids, what="page", unique=unique)
        if self.need_sort:
            self.staged_pages.append(page_ids)
            self.num_staged_pages += len(page_ids)
        else:
            self.free_pages = torch.cat((page_ids, self.free_pages))

    def free_page_ids(self, page_ids: torch.Tensor | Sequence[int]) -> None:
        """Release exactly these pages (a repeat is misuse); queued while a free group is open."""
        self._release_or_queue(page_ids, self._release_pages, self._page_ids_group)

    def free_segment(self, free_index: torch.Tensor, start_pos: int) -> None:
        """Free the pages of ``free_index[::P]``; ``start_pos`` (its first position) is page-aligned."""
        require(start_pos % self.page_size == 0, f"start_pos={start_pos} is not a page multiple")
        locs = as_locs(free_index, self.device)
        self.free_page_ids(locs[:: self.page_size] // self.page_size)

    def free_group_end(self) -> None:
        """Release queued location frees, then queued page ids."""
        page_ids, self._page_ids_group = self._page_ids_group, []
        super().free_group_end()
        if page_ids:
            self.free_page_ids(torch.cat(page_ids))


def extend_locations(
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
    at offset ``j % P``. This one formula covers the three parts of SGLang's ``alloc_extend_kernel``
    (the open page, the new full pages, the new last page).
    """
    prefix = prefix_lens.to(device=device, dtype=I64)
    seq = seq_lens.to(device=device, dtype=I64)
    last = last_loc.to(device=device, dtype=I64)
    counts = seq - prefix
    if extend_num_tokens == 0 or counts.numel() == 0:
        return torch.empty(0, dtype=I64, device=device)
    pages_needed = (seq + p - 1) // p - (prefix + p - 1) // p
    first_page = torch.cumsum(pages_needed, 0) - pages_needed
    req = torch.repeat_interleave(torch.arange(len(counts), device=device), counts, output_size=extend_num_tokens)
    token_start = torch.cumsum(counts, 0) - counts
    j = prefix[req] + torch.arange(extend_num_tokens, dtype=I64, device=device) - token_start[req]
    open_end = (prefix[req] + p - 1) // p * p
    in_open_page = j < open_end
    page_rank = first_page[req] + (j - open_end).clamp(min=0) // p
    safe_rank = page_rank.clamp(max=max(len(free_pages) - 1, 0))
    fresh = free_pages[safe_rank] * p + j % p if len(free_pages) > 0 else j
    return torch.where(in_open_page, last[req] + 1 + (j - prefix[req]), fresh)

