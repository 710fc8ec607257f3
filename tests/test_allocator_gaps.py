"""Allocator rules the mutation check (``tools/mutation_check.py``, group ``allocators``) found
unpinned: each case is computed by hand from the SGLang 0.5.23 function it mirrors
(``sglang.srt.mem_cache.allocator``: ``paged.PagedTokenToKVPoolAllocator``,
``swa.SWATokenToKVPoolAllocator``, ``base.BaseTokenToKVPoolAllocator``) or from this
library's documented misuse rules (:mod:`kvstrategies.allocators.common`)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from kvstrategies.allocators import (
    AllocatorMisuseError,
    PagedTokenToKVPoolAllocator,
    RequestSlotAllocator,
    SlotLedger,
    SWATokenToKVPoolAllocator,
    TokenToKVPoolAllocator,
)
from kvstrategies.errors import KVCacheConfigError


def t(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def as_list(x: torch.Tensor | None) -> list[int]:
    assert x is not None
    return [int(v) for v in x.tolist()]


def test_resize_to_zero_tokens_is_allowed_and_negative_is_refused() -> None:
    """BaseTokenToKVPoolAllocator.resize takes ``config.max_total_num_tokens`` as it is: 0 is a size
    (nothing fits), only a negative count is refused (``size_of``)."""

    @dataclass
    class Sizes:
        max_total_num_tokens: int

    a = TokenToKVPoolAllocator(4)
    a.resize(0)
    assert a.size == 0 and a.available_size() == 0 and a.alloc(1) is None
    a.resize(Sizes(0))
    assert a.size == 0 and as_list(a.alloc(0)) == []
    with pytest.raises(KVCacheConfigError, match="non-negative"):
        a.resize(-1)


def test_slot_ledger_holds_one_flag_per_id_zero_to_capacity() -> None:
    """A fresh ledger (``reset``) and one rebuilt from a full free list (what ``restore_state`` of a
    fresh backup does) are the same mask: ``capacity + 1`` flags, ids 0 (padding) to ``capacity``."""
    ledger = SlotLedger(5, torch.device("cpu"), "test")
    fresh = ledger.held.clone()
    assert fresh.shape == (5 + 1,) and not bool(fresh.any())
    ledger.rebuild([t(1, 2, 3, 4, 5)])
    assert torch.equal(ledger.held, fresh)
    ledger.take(t(5))  # the highest id is the last flag
    assert ledger.held_count() == 1 and bool(ledger.held[-1])


def test_paged_need_sort_merges_only_when_the_extend_bound_exceeds_the_free_list() -> None:
    """PagedTokenToKVPoolAllocator.alloc_extend merges the staged pages in (sorted) only when
    ``extend_num_tokens // P + bs + 1 > len(free_pages)``; at equality it takes the head as it is."""
    a = PagedTokenToKVPoolAllocator(32, 4, need_sort=True)  # pages 1..8
    a.alloc(16)  # pages 1..4
    a.free_page_ids(t(3, 1))  # staged; free list stays [5, 6, 7, 8]
    assert as_list(a.free_pages) == [5, 6, 7, 8] and a.num_staged_pages == 2
    # bound = 8 // 4 + 1 + 1 = 4 == 4 free pages: no merge, pages 5 and 6 -> locations 20..27
    out = a.alloc_extend(t(0), t(0), t(8), t(8), t(-1), 8)
    assert as_list(out) == list(range(20, 28))
    assert as_list(a.free_pages) == [7, 8] and a.num_staged_pages == 2
    # bound = 4 // 4 + 1 + 1 = 3 > 2 free pages: merge and sort to [1, 3, 7, 8], page 1 -> 4..7
    out = a.alloc_extend(t(0), t(0), t(4), t(4), t(-1), 4)
    assert as_list(out) == [4, 5, 6, 7]
    assert as_list(a.free_pages) == [3, 7, 8] and a.num_staged_pages == 0


def test_request_slot_held_count_is_minus_one_when_untracked() -> None:
    r = RequestSlotAllocator(3, check_misuse=False)
    r.alloc(2)
    assert r.held_count() == -1
    tracked = RequestSlotAllocator(3)
    tracked.alloc(2)
    assert tracked.held_count() == 2


def test_swa_new_pages_available_counts_whole_pages_per_side() -> None:
    """SWATokenToKVPoolAllocator.new_pages_available: ``full_pages <= full available // P`` and
    ``swa_pages <= swa available // P``."""
    a = SWATokenToKVPoolAllocator(32, 16, page_size=4)  # 32 // 4 = 8 full pages, 16 // 4 = 4 SWA pages
    assert a.new_pages_available(8, 4)
    assert not a.new_pages_available(9, 0)
    assert not a.new_pages_available(0, 5)
    a.alloc_extend(t(0), t(0), t(4), t(4), t(-1), 4)  # one page on each side: 7 and 3 left
    assert a.new_pages_available(7, 3)
    assert not a.new_pages_available(8, 3) and not a.new_pages_available(7, 4)


def test_swa_tail_of_one_token_gets_a_fresh_swa_page() -> None:
    """SWATokenToKVPoolAllocator.alloc_extend_swa_tail with a tail of 1: ``ceil(1 / P) = 1`` SWA page;
    the tail's full location maps to that page's first slot, the rest to 0."""
    a = SWATokenToKVPoolAllocator(40, 16, page_size=4)
    full = a.alloc_extend_swa_tail(t(0), t(0), t(5), t(5), t(-1), 5, 1)
    assert as_list(full) == [4, 5, 6, 7, 8]  # full pages 1 and 2
    assert as_list(a.translate_loc_from_full_to_swa(t(4, 5, 6, 7, 8))) == [0, 0, 0, 0, 4]  # SWA page 1
    assert a.swa_available_size() == 16 - 4 and a.full_available_size() == 40 - 8


@pytest.mark.parametrize("check_misuse", (True, False))
def test_swa_page1_free_swa_of_a_location_without_peer_is_misuse(check_misuse: bool) -> None:
    """Page size 1: every location given to ``free_swa`` must have an SWA peer (mapping > 0), as
    SWATokenToKVPoolAllocator._free_swa_pages_none_cuda expects (``swa_tokens > 0``); checked with or
    without the ledger, and a refused free changes nothing."""
    a = SWATokenToKVPoolAllocator(6, 4, check_misuse=check_misuse)
    full = a.alloc(2)
    assert full is not None
    a.free_swa(full)
    swa_free = as_list(a.swa_attn_allocator.free_pages)
    with pytest.raises(AllocatorMisuseError, match="no SWA peer"):
        a.free_swa(full)  # freed twice
    assert as_list(a.swa_attn_allocator.free_pages) == swa_free and a.swa_available_size() == 4


def test_swa_tail_refused_by_the_page_count_changes_neither_side() -> None:
    """SWATokenToKVPoolAllocator.alloc_extend_swa_tail returns None before allocating when the tail
    needs ``ceil(T / P)`` SWA pages and fewer are available (staged pages included): the staged pages
    of a ``need_sort`` SWA side stay staged (no merge) and the full side is untouched."""
    p = 4
    a = SWATokenToKVPoolAllocator(40, 2 * p, page_size=p, need_sort=True)  # SWA: 2 pages
    full = a.alloc_extend(t(0), t(0), t(2 * p), t(2 * p), t(-1), 2 * p)  # both SWA pages
    assert full is not None and a.swa_available_size() == 0
    a.free_swa(full[:1])  # window eviction of the first page: staged on the SWA side
    swa = a.swa_attn_allocator
    assert isinstance(swa, PagedTokenToKVPoolAllocator)
    assert swa.num_staged_pages == 1 and len(swa.free_pages) == 0 and a.swa_available_size() == p
    full_free = as_list(a.full_attn_allocator.free_pages)
    # T = 5: ceil(5 / 4) = 2 SWA pages > 1 available -> None
    assert a.alloc_extend_swa_tail(t(0), t(0), t(5), t(5), t(-1), 5, 5) is None
    assert swa.num_staged_pages == 1 and len(swa.free_pages) == 0
    assert as_list(a.full_attn_allocator.free_pages) == full_free and a.full_available_size() == 40 - 2 * p
