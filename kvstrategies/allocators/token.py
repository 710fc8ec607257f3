"""Token allocators of page size 1 and the contract every token allocator shares (BaseTokenToKVPoolAllocator,
TokenToKVPoolAllocator).

:class:`TokenToKVPoolAllocator` takes from the head of its free list and appends frees to the
tail, so a freed slot is reused last (``alloc(3) -> [1, 2, 3]``; ``free([2])`` puts 2 last), as
SGLang 0.5.23 does. Misuse (double free, freeing what was never handed out) is caught by the
ledger of :mod:`.common` unless ``check_misuse=False``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..errors import require
from .common import (
    I64,
    AllocatorStateError,
    Device,
    HasMaxTotalTokens,
    SlotLedger,
    as_locs,
    check_count,
    check_state,
    size_of,
    take_head,
)


class BaseTokenToKVPoolAllocator:
    """The common token-allocator contract (BaseTokenToKVPoolAllocator).

    ``size`` usable token slots, ``page_size`` tokens per page; ``dtype`` is only recorded.
    ``available_size()`` counts free *tokens*. A double free, or freeing a location never handed
    out, raises :class:`~.common.AllocatorMisuseError` (SGLang corrupts its free list and notices
    only when the pool overfills); ``check_misuse=False`` skips that check for speed.
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
        check_misuse: bool = True,
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
        self.check_misuse = bool(check_misuse)
        self._ledger = SlotLedger(0, self.device, type(self).__name__, enabled=self.check_misuse)

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
        locs = as_locs(ids, self.device)
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

    def held_count(self) -> int:
        """Ids (locations, or pages when paged) handed out and not freed; -1 when not tracked."""
        return self._ledger.held_count()

    def resize(self, config: int | HasMaxTotalTokens) -> None:
        """``size = config.max_total_num_tokens`` (or an int), then :meth:`clear`."""
        self.size = size_of(config, "max_total_num_tokens")
        self.clear()

    def _check_not_overfull(self) -> None:
        if self.available_size() > self.size:
            raise AllocatorStateError(
                f"{type(self).__name__}: {self.available_size()} tokens free > size {self.size} "
                "(a location was freed twice)"
            )


class TokenToKVPoolAllocator(BaseTokenToKVPoolAllocator):
    """Page size 1 (TokenToKVPoolAllocator): slots ``1..size``, slot 0 reserved.

    ``alloc(n)`` takes the head of ``free_pages``; ``free`` appends to the tail (freed slots are
    reused last) or, with ``need_sort``, to ``release_pages``, which is merged and sorted in only
    when an allocation would otherwise fall short. Freeing slot 0 or a slot not held is misuse (see the base class).
    """

    def __init__(
        self,
        size: int,
        dtype: torch.dtype | None = None,
        device: Device = "cpu",
        kvcache: Any = None,
        need_sort: bool = False,
        check_misuse: bool = True,
    ) -> None:
        super().__init__(size, 1, dtype, device, kvcache, need_sort, check_misuse)
        self.free_pages = torch.empty(0, dtype=I64)
        self.release_pages = torch.empty(0, dtype=I64)
        self.clear()

    def clear(self) -> None:
        self.free_pages = torch.arange(1, self.size + 1, dtype=I64, device=self.device)
        self.release_pages = torch.empty(0, dtype=I64, device=self.device)
        self._free_group = None
        self._ledger.reset(self.size)

    def available_size(self) -> int:
        return len(self.free_pages) + len(self.release_pages)

    def merge_and_sort_free(self) -> None:
        if len(self.release_pages) > 0:
            merged = torch.cat((self.free_pages, self.release_pages))
            self.free_pages = torch.sort(merged).values
            self.release_pages = torch.empty(0, dtype=I64, device=self.device)

    def alloc(self, need_size: int) -> torch.Tensor | None:
        n = check_count(need_size)
        if self.need_sort and n > len(self.free_pages):
            self.merge_and_sort_free()
        if n > len(self.free_pages):
            return None
        out, self.free_pages = take_head(self.free_pages, n)
        self._ledger.take(out)
        return out

    def _release(self, locs: torch.Tensor) -> None:
        self._ledger.give_back(locs, what="location")
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
        check_state(self, state)
        self.free_pages, self.release_pages = state
        self._ledger.rebuild((self.free_pages, self.release_pages))


