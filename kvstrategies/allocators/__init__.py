"""Slot allocators: which KV locations, state slots and request rows are free (sglang.srt.mem_cache.allocator).

Vocabulary: a *location* is a row index into a token-major KV buffer (int64). With page size
``P`` location ``x`` lives in page ``x // P`` at offset ``x % P``. Page 0 (locations ``[0, P)``)
is the padding page that CUDA-graph padding tokens write to; no allocator ever hands it out, so
every free list starts at page (or slot) 1. Free lists are int64 tensors on the pool device,
except :class:`RequestSlotAllocator`'s, which is a Python list as in SGLang.

Exhaustion is never an exception: ``alloc*`` returns ``None`` and the caller (the scheduler)
evicts prefix-cache entries and retries. Misuse by the caller (freeing an id twice, one never
handed out or out of range, nesting groups) raises :class:`AllocatorMisuseError` at the faulty
call, leaving the allocator unchanged; ``check_misuse=False`` turns the per-call checks off for
speed (``tools/bench_allocators.py`` measures the cost). Broken internal invariants (an SWA
peer missing where one must exist) raise :class:`AllocatorStateError`, its base class.

One module per allocator kind: :mod:`.token` (page size 1 and the shared contract),
:mod:`.paged`, :mod:`.swa` (hybrid and pure sliding window), :mod:`.mamba` (state slots),
:mod:`.requests` (request rows); :mod:`.common` holds the misuse ledger, the error classes and
the free-list helpers they all use.

Free-list order is observable and reproduced from SGLang 0.5.23:

* :class:`TokenToKVPoolAllocator` (page size 1) takes from the head and appends frees to the
  tail, so a freed slot is reused last (``alloc(3) -> [1, 2, 3]``; ``free([2])`` puts 2 last).
* :class:`PagedTokenToKVPoolAllocator` takes pages from the head and *prepends* freed pages,
  so a freed page is reused first.
* :class:`MambaSlotAllocator` takes from the head, appends frees.
* :class:`RequestSlotAllocator` takes from the *tail* (a fresh pool of 4 gives ``[3, 4]``).

Deliberate differences from SGLang (each repeated where it applies):

* SGLang's ``SWATokenToKVPoolAllocator.alloc_decode`` returns ``None`` without giving back the
  side that succeeded when only one side is short (a leak; SGLang's scheduler checks capacity first). Here the
  successful side is rolled back to its exact previous state.
* ``PagedTokenToKVPoolAllocator.alloc(n)`` with ``n`` not a page multiple silently floors in
  SGLang (checked only in debug mode); here it raises :class:`KVCacheConfigError`.
* ``PagedTokenToKVPoolAllocator.alloc_decode`` opens a page when ``(seq_len - 1) % P == 0``;
  SGLang's ``seq_len % P == 1`` never holds at ``P = 1`` (an NPU plan at page 1 builds that
  allocator), which handed one location out twice.
* The SWA ring mode (DSV4 ring variants, ``swa_req_ring_size``) is not implemented.
"""

from __future__ import annotations

from .common import AllocatorMisuseError, AllocatorStateError, SlotLedger, num_new_pages
from .mamba import MambaSlotAllocator
from .paged import PagedTokenToKVPoolAllocator
from .requests import RequestSlotAllocator
from .swa import PureSWATokenToKVPoolAllocator, SWATokenToKVPoolAllocator
from .token import BaseTokenToKVPoolAllocator, TokenToKVPoolAllocator

__all__ = [
    "AllocatorMisuseError",
    "AllocatorStateError",
    "BaseTokenToKVPoolAllocator",
    "MambaSlotAllocator",
    "PagedTokenToKVPoolAllocator",
    "PureSWATokenToKVPoolAllocator",
    "RequestSlotAllocator",
    "SWATokenToKVPoolAllocator",
    "SlotLedger",
    "TokenToKVPoolAllocator",
    "num_new_pages",
]
