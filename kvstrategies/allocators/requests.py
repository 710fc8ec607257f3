"""Rows of the request-to-token table (ReqToTokenPool): rows ``1..size``, row 0 padding (up to SGLang 0.5.10:
rows ``0..size - 1``, no padding row)."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from ..errors import require
from .common import AllocatorMisuseError, as_id_list, check_count


class RequestSlotAllocator:
    """Rows of the request-to-token table (ReqToTokenPool): rows ``1..size``, 0 padding.

    The free list is SGLang's Python list ``[1..size]``: ``alloc(n)`` takes the **last** ``n``
    entries (a fresh allocator of size 4: ``alloc(2) -> [3, 4]``), ``[]`` for ``n == 0``, ``None``
    when fewer than ``n`` are free; ``free`` appends to the end; ``clear`` restores ``[1..size]``.
    It is stored as a lazy range ``[1..fresh]`` followed by an explicit ``tail`` list, so a pool
    of 2**31 rows (a meta build) costs no host memory until rows are used; :attr:`free_slots`
    materialises the list for inspection. Freeing row 0, a row out of range, a row not handed
    out, or one row twice raises :class:`~.common.AllocatorMisuseError` unless
    ``check_misuse=False`` (the held rows are a set: memory grows with rows in use only).
    ``first`` is the first row handed out: 1, or 0 for a table without the padding row (SGLang up to
    0.5.10, :data:`kvstrategies.pools.basic.REQ_PADDING_ROW`: free list ``[0..size - 1]``).
    ``ReqToTokenPool`` delegates its ``alloc_rows`` / ``free_rows`` here and keeps the generation
    counters, the aux cache and the on-alloc hook itself.
    """

    def __init__(self, size: int, *, check_misuse: bool = True, first: int = 1) -> None:
        require(isinstance(size, int) and size >= 0, f"size must be a non-negative int, got {size!r}")
        require(first in (0, 1), f"first must be 0 or 1 (the padding row), got {first!r}")
        self.size = size
        self.first = first
        self.check_misuse = bool(check_misuse)
        self._fresh = 0  # rows 1..fresh are free, in order, before the tail
        self._tail: list[int] = []
        self._held: set[int] = set()
        self.clear()

    @property
    def free_slots(self) -> list[int]:
        """The free list as SGLang holds it (a copy)."""
        return [*range(self.first, self.first + self._fresh), *self._tail]

    def available_size(self) -> int:
        return self._fresh + len(self._tail)

    def held_count(self) -> int:
        """Rows handed out and not freed; -1 when not tracked."""
        return len(self._held) if self.check_misuse else -1

    def alloc(self, need_size: int) -> list[int] | None:
        n = check_count(need_size)
        if n > self.available_size():
            return None
        if n == 0:
            return []
        from_range = max(0, n - len(self._tail))
        out = list(range(self.first + self._fresh - from_range, self.first + self._fresh))
        self._fresh -= from_range
        take = n - from_range
        if take:
            out += self._tail[-take:]
            del self._tail[-take:]
        if self.check_misuse:
            self._held.update(out)
        return out

    def free(self, free_index: int | Iterable[int] | torch.Tensor) -> None:
        rows = as_id_list(free_index)  # ints only: 1.5, None, "3", a meta tensor are refused
        if self.check_misuse:
            self._check_free(rows)
        self._tail.extend(rows)

    def _check_free(self, rows: list[int]) -> None:
        last = self.first + self.size - 1
        bad = [r for r in rows if not self.first <= r <= last]
        if bad:
            raise AllocatorMisuseError(
                f"RequestSlotAllocator: freeing rows out of range [{self.first}, {last}]: {bad[:8]}"
            )
        free = [r for r in rows if r not in self._held]
        if free:
            raise AllocatorMisuseError(
                f"RequestSlotAllocator: freeing rows that are not handed out (double free or never allocated): "
                f"{free[:8]}"
            )
        if len(set(rows)) != len(rows):
            raise AllocatorMisuseError("RequestSlotAllocator: the same row is freed twice in one call")
        self._held.difference_update(rows)

    def clear(self) -> None:
        self._fresh = self.size
        self._tail = []
        self._held = set()
