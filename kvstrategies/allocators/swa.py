"""The sliding-window allocators (SWATokenToKVPoolAllocator, PureSWATokenToKVPoolAllocator): a full side, an SWA side
and the mapping.

:class:`SWATokenToKVPoolAllocator` pairs two token allocators (page 1 or paged) and records
each full location's SWA peer in ``full_to_swa_index_mapping``; :class:`PureSWATokenToKVPoolAllocator`
serves models whose every layer is sliding-window with one allocator and the identity mapping.
Misuse is caught by the sub-allocators' ledgers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..errors import KVCacheConfigError, require
from .common import (
    I64,
    AllocatorMisuseError,
    AllocatorStateError,
    Device,
    as_locs,
    check_batch,
    check_count,
    check_state,
    num_new_pages,
    size_of,
)
from .paged import PagedTokenToKVPoolAllocator
from .token import TokenToKVPoolAllocator


def _make_sub_allocator(
    size: int,
    page_size: int,
    dtype: torch.dtype | None,
    device: Device,
    kvcache: Any,
    need_sort: bool,
    check_misuse: bool,
) -> TokenToKVPoolAllocator | PagedTokenToKVPoolAllocator:
    if page_size == 1:
        return TokenToKVPoolAllocator(size, dtype, device, kvcache, need_sort, check_misuse)
    return PagedTokenToKVPoolAllocator(size, page_size, dtype, device, kvcache, need_sort, check_misuse)


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

    check_misuse: bool = True
    device: torch.device

    def _set_options(
        self, page_size: int, dtype: torch.dtype | None, device: Device, kvcache: Any, need_sort: bool,
        check_misuse: bool,
    ) -> None:  # fmt: skip
        """The constructor arguments both SWA allocators keep as they are given."""
        self.page_size = page_size
        self.dtype = dtype
        self.device = torch.device(device)
        self.need_sort = bool(need_sort)
        self._kvcache = kvcache
        self.check_misuse = bool(check_misuse)

    def _checked_locs(self, free_index: torch.Tensor | Sequence[int]) -> torch.Tensor:
        """``free_index`` as locations; out of the mapping's range is misuse (it would index past it)."""
        locs = as_locs(free_index, self.device)
        if self.check_misuse and locs.numel() and self.device.type != "meta":
            limit = int(self.full_to_swa_index_mapping.numel()) - 1  # the last entry is the -1 sentinel
            bad = (locs < 0) | (locs >= limit)
            if bool(bad.any()):
                raise AllocatorMisuseError(
                    f"{type(self).__name__}: freeing locations out of range [0, {limit}): {locs[bad][:8].tolist()}"
                )
        return locs

    def translate_loc_from_full_to_swa(self, locs: torch.Tensor) -> torch.Tensor:
        """``mapping[locs]``: the SWA location of each full location (0: none, -1 for -1)."""
        return self.full_to_swa_index_mapping[locs.to(I64)]


class SWATokenToKVPoolAllocator(_FullToSWAMapped):
    """Hybrid sliding-window allocator (SWATokenToKVPoolAllocator): a full side and an SWA side.

    Every full location handed out has an SWA peer recorded in ``full_to_swa_index_mapping``
    (int64, length ``size + P + 1``: 0 = "no SWA peer", last entry -1 so that translating a
    ``last_loc`` of -1 gives -1). The SWA side usually holds far fewer tokens: SWA locations of
    tokens that fell out of the window are freed early with :meth:`free_swa`.

    Difference from SGLang 0.5.23 (``SWATokenToKVPoolAllocator.alloc_decode``): when one side of ``alloc_decode`` (or
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
        check_misuse: bool = True,
    ) -> None:
        self._set_options(page_size, dtype, device, kvcache, need_sort, check_misuse)
        full_pool = getattr(kvcache, "full_kv_pool", None)
        swa_pool = getattr(kvcache, "swa_kv_pool", None)
        self.full_attn_allocator = _make_sub_allocator(size, page_size, dtype, device, full_pool, need_sort,
                                                       check_misuse)  # fmt: skip
        self.swa_attn_allocator = _make_sub_allocator(size_swa, page_size, dtype, device, swa_pool, need_sort,
                                                      check_misuse)  # fmt: skip
        self.full_to_swa_index_mapping = self._new_mapping(size)
        _register_mapping(kvcache, self.full_to_swa_index_mapping)

    def _new_mapping(self, size: int) -> torch.Tensor:
        mapping = torch.zeros(size + self.page_size + 1, dtype=I64, device=self.device)
        mapping[-1] = -1
        return mapping

    # -- capacity ------------------------------------------------------------------------------------
    def held_count(self) -> int:
        """Full-side ids handed out and not freed (pages when paged); -1 when not tracked."""
        return self.full_attn_allocator.held_count()

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
        n = check_count(need_size)
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
        check_batch("alloc_extend", self.device, extend_num_tokens, prefix_lens=prefix_lens,
                    prefix_lens_cpu=prefix_lens_cpu, seq_lens=seq_lens, seq_lens_cpu=seq_lens_cpu, last_loc=last_loc)
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

        SGLang 0.5.23 keeps the side that succeeded allocated (a leak); this is rolled back.
        """
        self._require_paged("alloc_decode")
        check_batch("alloc_decode", self.device, seq_lens=seq_lens, seq_lens_cpu=seq_lens_cpu, last_loc=last_loc)
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
        check_batch("alloc_extend_swa_tail", self.device, extend_num_tokens, prefix_lens=prefix_lens,
                    prefix_lens_cpu=prefix_lens_cpu, seq_lens=seq_lens, seq_lens_cpu=seq_lens_cpu, last_loc=last_loc)
        check_count(swa_tail_len, "swa_tail_len")
        require(int(seq_lens_cpu.numel()) == 1, "alloc_extend_swa_tail supports a batch of one request")
        require(0 <= swa_tail_len <= extend_num_tokens, f"swa_tail_len={swa_tail_len} out of range")
        p = self.page_size
        full_pages = num_new_pages(prefix_lens_cpu, seq_lens_cpu, p)
        if not self.new_pages_available(full_pages, (swa_tail_len + p - 1) // p):
            return None
        dev = self.device

        def tail(a: Any) -> torch.Tensor | None:
            zero, tail_t = torch.zeros(1, dtype=I64), torch.tensor([swa_tail_len], dtype=I64)
            return a.alloc_extend(  # type: ignore[no-any-return]
                zero.to(dev), zero, tail_t.to(dev), tail_t, torch.full((1,), -1, dtype=I64, device=dev),
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
        locs = self._checked_locs(free_index)
        if locs.numel() == 0:
            return
        self.free_swa(locs)
        self.free_full(locs)

    def _expand_to_full_pages(self, locs: torch.Tensor) -> torch.Tensor:
        p = self.page_size
        pages: torch.Tensor = torch.unique(locs // p)
        return (pages[:, None] * p + torch.arange(p, dtype=I64, device=self.device)[None, :]).reshape(-1)

    def free_swa(self, free_index: torch.Tensor | Sequence[int]) -> None:
        """Release the SWA peers of these full locations and clear their mapping entries.

        Page size 1: every location must have a peer (> 0), else :class:`AllocatorMisuseError`
        (freed twice, or never handed out). Page size > 1: the whole full pages are considered and
        peers that exist are freed. The SWA side is freed before the mapping is cleared, so a
        refused free leaves both unchanged.
        """
        locs = self._checked_locs(free_index)
        if locs.numel() == 0:
            return
        mapping = self.full_to_swa_index_mapping
        if self.page_size == 1:
            swa = mapping[locs]
            if not bool((swa > 0).all()):
                raise AllocatorMisuseError("free_swa: a full location has no SWA peer (freed twice or never allocated)")
            self.swa_attn_allocator.free(swa)
            mapping[locs] = 0
        else:
            expanded = self._expand_to_full_pages(locs)
            swa = mapping[expanded]
            self.swa_attn_allocator.free(swa[swa > 0])
            mapping[expanded] = 0

    def free_full(self, free_index: torch.Tensor | Sequence[int]) -> None:
        """Free on the full side; the SWA peers must already be released (mapping 0)."""
        locs = self._checked_locs(free_index)
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
        locs = as_locs(free_index, self.device)
        if bool((self.full_to_swa_index_mapping[locs] != 0).any()):
            raise AllocatorStateError("free_full_segment: SWA peers still allocated")
        assert isinstance(self.full_attn_allocator, PagedTokenToKVPoolAllocator)
        self.full_attn_allocator.free_segment(locs, start_pos)

    def free_swa_segment(self, free_index: torch.Tensor, start_pos: int) -> None:
        """SWA peers of the pages of ``free_index[::P]`` (one representative per full page)."""
        require(start_pos % self.page_size == 0, f"start_pos={start_pos} is not a page multiple")
        locs = as_locs(free_index, self.device)
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
        check_state(self, state)
        full, swa, mapping = state
        self.full_attn_allocator.restore_state(full)
        self.swa_attn_allocator.restore_state(swa)
        self.full_to_swa_index_mapping.copy_(mapping)

    def merge_and_sort_free(self) -> None:
        self.full_attn_allocator.merge_and_sort_free()
        self.swa_attn_allocator.merge_and_sort_free()

    def resize(self, config: Any) -> None:
        """Sizes from ``config.full_max_total_num_tokens`` / ``swa_max_total_num_tokens``."""
        self.full_attn_allocator.size = size_of(config, "full_max_total_num_tokens")
        self.swa_attn_allocator.size = size_of(config, "swa_max_total_num_tokens")
        self.full_to_swa_index_mapping = self._new_mapping(self.full_attn_allocator.size)
        _register_mapping(self._kvcache, self.full_to_swa_index_mapping)
        self.clear()


class PureSWATokenToKVPoolAllocator(_FullToSWAMapped):
    """Every layer is sliding-window (PureSWATokenToKVPoolAllocator); page size must be 1.

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
        check_misuse: bool = True,
    ) -> None:
        require(page_size == 1, f"PureSWATokenToKVPoolAllocator needs page_size 1, got {page_size}")
        self._set_options(1, dtype, device, kvcache, need_sort, check_misuse)
        self.swa_attn_allocator = TokenToKVPoolAllocator(size_swa, dtype, device, kvcache, need_sort, check_misuse)
        self.full_attn_allocator = self.swa_attn_allocator
        # identity then the -1 sentinel; arange + setitem, not cat: cat on "meta" imports torch._dynamo (and triton)
        self.full_to_swa_index_mapping = torch.arange(size_swa + self.page_size + 1, dtype=I64, device=self.device)
        self.full_to_swa_index_mapping[-1] = -1
        _register_mapping(kvcache, self.full_to_swa_index_mapping)

    @property
    def size(self) -> int:
        return self.swa_attn_allocator.size

    size_full = size_swa = size

    def available_size(self) -> int:
        return self.swa_attn_allocator.available_size()

    def held_count(self) -> int:
        """Locations handed out and not freed; -1 when not tracked."""
        return self.swa_attn_allocator.held_count()

    full_available_size = swa_available_size = available_size

    def alloc(self, need_size: int) -> torch.Tensor | None:
        return self.swa_attn_allocator.alloc(need_size)

    def free(self, free_index: torch.Tensor | Sequence[int]) -> None:
        locs = as_locs(free_index, self.device)
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


