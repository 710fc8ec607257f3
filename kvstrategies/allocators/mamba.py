"""State slots of a Mamba pool (MambaSlotAllocator): slots ``1..size``, slot 0 reserved."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..errors import require
from .common import I64, AllocatorMisuseError, Device, SlotLedger, as_locs, check_count, take_head


class MambaSlotAllocator:
    """State slots of a Mamba pool (MambaSlotAllocator): slots ``1..size``, 0 reserved.

    ``alloc(n)`` takes the head, ``free`` appends. Between ``alloc_group_begin(k)``
    and ``alloc_group_end()`` ``k`` slots are taken up front and ``alloc(1)`` hands them out one
    by one (falling back to the free list once they run out); unused ones are freed at the end.
    If fewer than ``k`` are free, nothing is pre-taken and ``alloc`` works as usual. Groups do not
    nest: a second ``alloc_group_begin`` before the end raises :class:`~.common.AllocatorMisuseError`
    (it used to drop the pre-taken slots: a leak). Freeing slot 0, a slot not held, or one slot twice
    raises it too, unless ``check_misuse=False``.

    Exhaustion returns ``None``. (SGLang's ``HybridReqToTokenPool`` turns that into an
    ``AssertionError``; the request pool built on this class decides what to raise.)
    """

    def __init__(self, size: int, device: Device = "cpu", *, check_misuse: bool = True) -> None:
        require(isinstance(size, int) and size >= 0, f"size must be a non-negative int, got {size!r}")
        self.size = size
        self.device = torch.device(device)
        self.free_slots = torch.empty(0, dtype=I64)
        self._group: list[torch.Tensor] = []  # pre-taken slots not yet handed out (a group is open)
        self._group_open = False
        self.check_misuse = bool(check_misuse)
        self._ledger = SlotLedger(size, self.device, "MambaSlotAllocator", enabled=self.check_misuse)
        self.clear()

    def held_count(self) -> int:
        """Slots handed out to the caller and not freed (pre-taken group slots excluded); -1 when not tracked."""
        return self._ledger.held_count()

    def reserved_count(self) -> int:
        """Slots an open group pre-took and has not handed out yet."""
        return len(self._group)

    def available_size(self) -> int:
        return len(self.free_slots)

    def _take(self, n: int) -> torch.Tensor | None:
        if n > len(self.free_slots):
            return None
        out, self.free_slots = take_head(self.free_slots, n)
        return out

    def alloc(self, need_size: int) -> torch.Tensor | None:
        n = check_count(need_size)
        if self._group and n == 1:
            out: torch.Tensor | None = self._group.pop(0)
        else:
            out = self._take(n)
        if out is not None:
            self._ledger.take(out)
        return out

    def alloc_group_begin(self, num_reqs: int) -> None:
        if self._group_open:
            raise AllocatorMisuseError("MambaSlotAllocator: alloc_group_begin inside an open group; end it first")
        self._group_open = True
        taken = self._take(check_count(num_reqs, "num_reqs")) if num_reqs > 0 else None
        # pre-taken slots are the group's, not the caller's: freeing one before alloc hands it out is misuse
        self._group = [] if taken is None else list(torch.split(taken, 1))

    def alloc_group_end(self) -> None:
        rest, self._group = self._group, []
        self._group_open = False
        if rest:  # back to the free list as they were never handed out (no ledger change)
            self.free_slots = torch.cat((self.free_slots, *rest))

    def free(self, free_index: torch.Tensor | Sequence[int]) -> None:
        slots = as_locs(free_index, self.device)
        if slots.numel() == 0:
            return
        self._ledger.give_back(slots, what="slot")
        self.free_slots = torch.cat((self.free_slots, slots))

    def clear(self) -> None:
        self.free_slots = torch.arange(1, self.size + 1, dtype=I64, device=self.device)
        self._group = []
        self._group_open = False
        self._ledger.reset(self.size)


