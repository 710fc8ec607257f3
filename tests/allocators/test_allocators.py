"""Slot allocators: hand-written cases from sglang.srt.mem_cache.allocator plus model-based property tests.

Property tests run random operation sequences against a plain-Python model of who holds what
and check, after every step: no location is handed out twice, none is lost (free + held ==
capacity), slot / page 0 is never handed out, and ``None`` comes back exactly when the request
does not fit. The number of examples comes from a hypothesis profile chosen by the env var
``KVSTRATEGIES_HYPOTHESIS_PROFILE``: ``ci`` (default, a few thousand operations per allocator
kind, seconds) or ``thorough`` (>= 10^5 operations per allocator kind).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kvstrategies.allocators import (
    AllocatorMisuseError,
    AllocatorStateError,
    MambaSlotAllocator,
    PagedTokenToKVPoolAllocator,
    PureSWATokenToKVPoolAllocator,
    RequestSlotAllocator,
    SlotLedger,
    SWATokenToKVPoolAllocator,
    TokenToKVPoolAllocator,
    num_new_pages,
)
from kvstrategies.errors import KVCacheConfigError

# Every example runs MIN_OPS..MAX_OPS operations: "ci" 40 examples -> >= 1,600 operations per
# test (several tests per allocator kind); "thorough" 2,500 examples -> >= 100,000 per test.
MIN_OPS, MAX_OPS = 40, 60
PROFILE = settings()  # the profile tests/conftest.py loaded from KVSTRATEGIES_HYPOTHESIS_PROFILE


def t(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def ok(x: torch.Tensor | None) -> torch.Tensor:
    """An allocation that must have succeeded."""
    assert x is not None
    return x


def as_list(x: torch.Tensor | None) -> list[int]:
    assert x is not None
    return [int(v) for v in x.tolist()]


# --------------------------------------------------------------------------------------------
# TokenToKVPoolAllocator (TokenToKVPoolAllocator) ----------------------------------------------------------------------


def test_token_fresh_state_and_head_alloc() -> None:
    a = TokenToKVPoolAllocator(8)
    assert a.page_size == 1 and a.size_full == 8
    assert as_list(a.free_pages) == list(range(1, 9))
    assert a.release_pages.dtype == torch.int64 and a.release_pages.shape == (0,)
    assert a.available_size() == 8
    assert as_list(a.alloc(3)) == [1, 2, 3]
    assert a.available_size() == 5


def test_token_free_appends_so_freed_slots_are_reused_last() -> None:
    a = TokenToKVPoolAllocator(5)
    a.alloc(3)
    a.free(t(2))
    assert as_list(a.free_pages) == [4, 5, 2]
    assert as_list(a.alloc(3)) == [4, 5, 2]


def test_token_none_exactly_when_short() -> None:
    a = TokenToKVPoolAllocator(4)
    assert a.alloc(5) is None
    assert a.available_size() == 4  # a failed alloc takes nothing
    assert as_list(a.alloc(4)) == [1, 2, 3, 4]
    assert a.alloc(1) is None
    assert as_list(a.alloc(0)) == []


def test_token_free_of_slot_zero_or_twice_is_misuse() -> None:
    a = TokenToKVPoolAllocator(2)
    a.alloc(1)
    with pytest.raises(AllocatorMisuseError, match=r"out of range \[1, 2\]: \[0\]"):
        a.free(t(0))
    a.free(t(1))
    with pytest.raises(AllocatorMisuseError, match="not handed out"):
        a.free(t(1))
    assert as_list(a.free_pages) == [2, 1]  # the refused calls changed nothing


@pytest.mark.parametrize("locs", [None, 5, "12", ["a"], [1.5]], ids=["none", "int", "str", "str-list", "float-list"])
def test_free_of_non_integer_locations_is_config_error(locs: object) -> None:
    a = TokenToKVPoolAllocator(4)
    a.alloc(2)
    with pytest.raises(KVCacheConfigError, match="sequence of ints"):
        a.free(locs)  # type: ignore[arg-type]
    assert a.available_size() == 2  # nothing was freed


def test_token_unchecked_free_does_not_filter_slot_zero_and_double_free_is_caught_when_overfull() -> None:
    a = TokenToKVPoolAllocator(2, check_misuse=False)  # SGLang's behaviour
    a.alloc(1)
    a.free(t(0))  # no filtering of slot 0 (SGLang behaviour); the pool is now "full" again
    assert as_list(a.free_pages) == [2, 0]
    with pytest.raises(AllocatorStateError):
        a.free(t(1))  # 3 free slots > size 2


def test_token_need_sort_stages_frees_and_merges_sorted_only_when_short() -> None:
    a = TokenToKVPoolAllocator(6, need_sort=True)
    a.alloc(4)
    a.free(t(3, 1))
    assert as_list(a.free_pages) == [5, 6] and as_list(a.release_pages) == [3, 1]
    assert a.available_size() == 4
    assert as_list(a.alloc(2)) == [5, 6]  # enough without merging
    assert as_list(a.release_pages) == [3, 1]
    assert as_list(a.alloc(1)) == [1]  # short: merge + sort first
    assert as_list(a.free_pages) == [3] and len(a.release_pages) == 0


def test_token_free_group_defers_and_releases_once() -> None:
    a = TokenToKVPoolAllocator(6)
    x = ok(a.alloc(4))
    a.free_group_begin()
    a.free(x[:1])
    a.free(x[2:])
    assert a.available_size() == 2
    with pytest.raises(AllocatorStateError):
        a.free_group_begin()
    a.free_group_end()
    assert as_list(a.free_pages) == [5, 6, 1, 3, 4]


def test_token_clear_resize_and_no_extend() -> None:
    a = TokenToKVPoolAllocator(4)
    a.alloc(3)
    a.clear()
    assert as_list(a.free_pages) == [1, 2, 3, 4]

    @dataclass
    class Sizes:
        max_total_num_tokens: int

    a.resize(Sizes(6))
    assert a.size == 6 and a.available_size() == 6
    a.resize(2)
    assert a.available_size() == 2
    with pytest.raises(NotImplementedError):
        a.alloc_extend()
    with pytest.raises(NotImplementedError):
        a.alloc_decode()
    with pytest.raises(KVCacheConfigError):
        a.alloc(-1)


# --------------------------------------------------------------------------------------------
# PagedTokenToKVPoolAllocator (PagedTokenToKVPoolAllocator) ------------------------------------------------------------


def test_paged_spec_example_size_1000_page_16() -> None:
    a = PagedTokenToKVPoolAllocator(1000, 16)
    assert a.num_pages == 62 and a.available_size() == 992
    locs = ok(a.alloc(992))
    assert int(locs.max()) == 1007 and int(locs.min()) == 16
    assert a.alloc(16) is None


def test_paged_alloc_returns_whole_pages_in_free_list_order() -> None:
    a = PagedTokenToKVPoolAllocator(16, 4)
    assert as_list(a.alloc(8)) == [4, 5, 6, 7, 8, 9, 10, 11]
    with pytest.raises(KVCacheConfigError):
        a.alloc(3)  # not a page multiple (SGLang floors outside debug mode)


def test_paged_free_prepends_unique_pages() -> None:
    a = PagedTokenToKVPoolAllocator(20, 4)  # pages 1..5
    a.alloc(12)  # pages 1, 2, 3
    a.free(t(13, 9, 14))  # pages 3, 2, 3 -> unique sorted [2, 3], prepended
    assert as_list(a.free_pages) == [2, 3, 4, 5]
    assert as_list(a.alloc(4)) == [8, 9, 10, 11]  # freed pages are reused first


def test_paged_need_sort_stages_pages() -> None:
    a = PagedTokenToKVPoolAllocator(20, 4, need_sort=True)
    a.alloc(16)  # pages 1..4
    a.free(t(12))  # page 3
    a.free(t(4))  # page 1
    assert as_list(a.free_pages) == [5] and a.num_staged_pages == 2
    assert a.available_size() == 12
    assert as_list(a.alloc(8)) == [4, 5, 6, 7, 12, 13, 14, 15]  # merged+sorted [1, 3, 5]
    assert as_list(a.free_pages) == [5]


def test_paged_free_page_ids_segment_and_group() -> None:
    a = PagedTokenToKVPoolAllocator(20, 4)
    a.alloc(20 // 4 * 4)
    a.free_page_ids(t(4))
    assert as_list(a.free_pages) == [4]
    a.free_segment(t(8, 9, 10, 11, 12, 13), 4)  # pages of locs[::4] = 8, 12 -> 2, 3
    assert as_list(a.free_pages) == [2, 3, 4]
    with pytest.raises(KVCacheConfigError):
        a.free_segment(t(4), 2)
    a.free_group_begin()
    a.free(t(4))
    a.free_page_ids(t(5))
    assert a.available_size() == 12
    a.free_group_end()  # location frees first, then page ids
    assert as_list(a.free_pages) == [5, 1, 2, 3, 4]


def test_paged_alloc_extend_hand_example() -> None:
    # P = 4, pages 1..10. Request 0 holds 2 tokens on page 1 (last_loc 5), request 1 is new,
    # request 2 holds a full page 2 (last_loc 11).
    a = PagedTokenToKVPoolAllocator(40, 4)
    a.alloc(8)  # pages 1, 2
    prefix, seq, last = t(2, 0, 4), t(9, 3, 5), t(5, -1, 11)
    assert num_new_pages(prefix, seq, 4) == 2 + 1 + 1
    out = a.alloc_extend(prefix, prefix, seq, seq, last, 11)
    # r0: part 1 [6, 7]; pages 3 (12..15) and 4 (tail 16). r1: page 5. r2: page 6.
    assert as_list(out) == [6, 7, 12, 13, 14, 15, 16, 20, 21, 22, 24]
    assert as_list(a.free_pages) == [7, 8, 9, 10]


def test_paged_alloc_extend_part1_only_and_none_when_short() -> None:
    a = PagedTokenToKVPoolAllocator(12, 4)  # pages 1..3
    a.alloc(4)
    out = a.alloc_extend(t(1), t(1), t(3), t(3), t(4), 2)  # stays inside page 1
    assert as_list(out) == [5, 6] and len(a.free_pages) == 2
    before = as_list(a.free_pages)
    assert a.alloc_extend(t(0), t(0), t(12), t(12), t(-1), 12) is None  # needs 3 pages, 2 free
    assert as_list(a.free_pages) == before
    with pytest.raises(KVCacheConfigError):
        a.alloc_extend(t(0), t(0), t(4), t(4), t(-1), 4, num_new_pages=2)


def test_paged_alloc_decode() -> None:
    a = PagedTokenToKVPoolAllocator(40, 4)
    a.alloc(8)
    # seq 5 -> 5 % 4 == 1: new page; seq 7 -> last_loc + 1; seq 9: new page.
    out = a.alloc_decode(t(5, 7, 9), t(5, 7, 9), t(7, 25, 11))
    assert as_list(out) == [12, 26, 16]
    assert as_list(a.free_pages) == list(range(5, 11))
    b = PagedTokenToKVPoolAllocator(8, 4)
    b.alloc(8)
    assert b.alloc_decode(t(5), t(5), t(7)) is None
    assert as_list(b.alloc_decode(t(6), t(6), t(8))) == [9]  # no new page needed


# --------------------------------------------------------------------------------------------
# SWATokenToKVPoolAllocator (SWATokenToKVPoolAllocator) ----------------------------------------------------------------


class FakeSWAPool:
    def __init__(self) -> None:
        self.full_kv_pool, self.swa_kv_pool = object(), object()
        self.registered: list[torch.Tensor] = []

    def register_mapping(self, mapping: torch.Tensor) -> None:
        self.registered.append(mapping)


def test_swa_mapping_shape_sentinel_and_registration() -> None:
    pool = FakeSWAPool()
    a = SWATokenToKVPoolAllocator(10, 6, page_size=2, kvcache=pool)
    m = a.full_to_swa_index_mapping
    assert m.shape == (10 + 2 + 1,) and int(m[-1]) == -1 and int(m[:-1].abs().sum()) == 0
    assert pool.registered[0] is m
    assert a.full_attn_allocator.get_kvcache() is pool.full_kv_pool
    assert a.swa_attn_allocator.get_kvcache() is pool.swa_kv_pool
    assert a.size == 6 and a.size_full == 10 and a.size_swa == 6
    assert as_list(a.translate_loc_from_full_to_swa(t(-1))) == [-1]


def test_swa_page1_alloc_free_and_guards() -> None:
    a = SWATokenToKVPoolAllocator(6, 3)
    full = ok(a.alloc(2))
    assert as_list(full) == [1, 2]
    assert as_list(a.translate_loc_from_full_to_swa(full)) == [1, 2]
    assert a.alloc(2) is None  # SWA side has 1 left
    assert a.available_size() == 1 and a.full_available_size() == 4
    with pytest.raises(AllocatorStateError):
        a.free_full(full[:1])  # SWA peer still held
    a.free_swa(full[:1])  # window eviction
    assert a.swa_available_size() == 2 and int(a.full_to_swa_index_mapping[1]) == 0
    with pytest.raises(AllocatorStateError):
        a.free(full)  # location 1 has no SWA peer any more
    a.free_full(full[:1])
    a.free(full[1:])
    assert a.full_available_size() == 6 and a.swa_available_size() == 3
    with pytest.raises(KVCacheConfigError):
        a.alloc_decode(t(1), t(1), t(0))


def test_swa_paged_extend_decode_and_page_expanding_free_swa() -> None:
    a = SWATokenToKVPoolAllocator(32, 16, page_size=4)
    a.swa_attn_allocator.alloc(4)  # SWA page 1 is busy, so the two sides diverge
    full = ok(a.alloc_extend(t(0), t(0), t(6), t(6), t(-1), 6))
    assert as_list(full) == [4, 5, 6, 7, 8, 9]
    assert as_list(a.translate_loc_from_full_to_swa(full)) == [8, 9, 10, 11, 12, 13]
    nxt = a.alloc_decode(t(7), t(7), t(9))  # continues last_loc 9 <-> SWA 13
    assert as_list(nxt) == [10] and int(a.full_to_swa_index_mapping[10]) == 14
    more = ok(a.alloc_extend(t(7), t(7), t(10), t(10), t(10), 3))
    assert as_list(more) == [11, 12, 13]
    assert as_list(a.translate_loc_from_full_to_swa(more)) == [15, 16, 17]  # SWA page 4
    a.free_swa(t(5))  # expands to the whole full page 1 -> frees SWA page 2
    assert as_list(a.full_to_swa_index_mapping[4:8]) == [0, 0, 0, 0]
    assert as_list(a.swa_attn_allocator.free_pages) == [2]
    assert a.swa_available_size() == 4 and a.full_available_size() == 32 - 12


def test_swa_alloc_decode_rolls_back_the_side_that_succeeded() -> None:
    """SGLang 0.5.23 leaks the full side's new page here (SWATokenToKVPoolAllocator.alloc_decode); this library does
    not."""
    a = SWATokenToKVPoolAllocator(32, 8, page_size=4)  # full 8 pages, SWA 2 pages
    full = a.alloc_extend(t(0, 0), t(0, 0), t(4, 4), t(4, 4), t(-1, -1), 8)
    assert full is not None and a.swa_available_size() == 0
    before_full = as_list(a.full_attn_allocator.free_pages)
    before_map = a.full_to_swa_index_mapping.clone()
    out = a.alloc_decode(t(5, 5), t(5, 5), t(7, 11))  # both requests need a new page
    assert out is None
    assert as_list(a.full_attn_allocator.free_pages) == before_full
    assert a.full_available_size() == 24
    assert torch.equal(a.full_to_swa_index_mapping, before_map)


def test_swa_extend_swa_tail() -> None:
    a = SWATokenToKVPoolAllocator(40, 16, page_size=4)
    full = ok(a.alloc_extend_swa_tail(t(0), t(0), t(10), t(10), t(-1), 10, 3))
    assert as_list(full) == list(range(4, 14))
    swa = as_list(a.translate_loc_from_full_to_swa(full))
    assert swa[:7] == [0] * 7 and swa[7:] == [4, 5, 6]
    assert a.swa_available_size() == 12
    assert a.alloc_extend_swa_tail(t(0), t(0), t(12), t(12), t(-1), 12, 12) is not None
    assert a.alloc_extend_swa_tail(t(0), t(0), t(4), t(4), t(-1), 4, 4) is None  # SWA side full
    with pytest.raises(KVCacheConfigError):
        a.alloc_extend_swa_tail(t(0), t(0), t(4), t(4), t(-1), 4, 5)


def test_swa_free_group_clear_and_resize() -> None:
    a = SWATokenToKVPoolAllocator(6, 4)
    x = ok(a.alloc(3))
    a.free_group_begin()
    a.free(x)
    assert a.full_available_size() == 3 and a.swa_available_size() == 1
    a.free_group_end()
    assert a.full_available_size() == 6 and a.swa_available_size() == 4
    a.alloc(2)
    a.clear()
    assert int(a.full_to_swa_index_mapping[-1]) == -1 and a.available_size() == 4

    @dataclass
    class Sizes:
        full_max_total_num_tokens: int
        swa_max_total_num_tokens: int

    a.resize(Sizes(8, 5))
    assert a.size_full == 8 and a.size_swa == 5 and a.full_to_swa_index_mapping.shape == (10,)


# --------------------------------------------------------------------------------------------
# PureSWA, Mamba, request slots (sections 5-7) -------------------------------------------------------------------------


def test_pure_swa() -> None:
    pool = FakeSWAPool()
    a = PureSWATokenToKVPoolAllocator(5, kvcache=pool)
    assert as_list(a.full_to_swa_index_mapping) == [0, 1, 2, 3, 4, 5, -1]
    assert pool.registered[0] is a.full_to_swa_index_mapping
    x = ok(a.alloc(3))
    assert as_list(x) == [1, 2, 3] and a.full_attn_allocator is a.swa_attn_allocator
    a.free(t(0, 2))  # 0 is filtered out
    assert as_list(a.swa_attn_allocator.free_pages) == [4, 5, 2]
    a.free_full(t(1))  # no-op
    assert a.available_size() == 3
    with pytest.raises(NotImplementedError):
        a.alloc_extend()
    with pytest.raises(NotImplementedError):
        a.alloc_decode()
    with pytest.raises(KVCacheConfigError):
        PureSWATokenToKVPoolAllocator(5, page_size=2)


def test_mamba_slots() -> None:
    m = MambaSlotAllocator(4)
    assert as_list(m.free_slots) == [1, 2, 3, 4]
    assert as_list(m.alloc(2)) == [1, 2]
    m.free(t(1))
    m.free(t())
    assert as_list(m.free_slots) == [3, 4, 1]
    assert m.alloc(4) is None  # SGLang's hybrid request pool asserts; the allocator returns None
    m.alloc_group_begin(2)
    assert m.available_size() == 1
    assert as_list(m.alloc(1)) == [3]
    m.alloc_group_end()  # slot 4 was unused: freed (appended)
    assert as_list(m.free_slots) == [1, 4]
    m.alloc_group_begin(5)  # too many: nothing pre-taken
    assert m.available_size() == 2 and as_list(m.alloc(1)) == [1]
    m.alloc_group_end()
    m.clear()
    assert m.available_size() == 4


def test_request_slots() -> None:
    r = RequestSlotAllocator(4)
    assert r.alloc(2) == [3, 4]
    assert r.alloc(0) == []
    assert r.alloc(3) is None
    r.free(4)
    r.free([3])
    assert r.free_slots == [1, 2, 4, 3]
    assert r.alloc(1) == [3]
    r.clear()
    assert r.free_slots == [1, 2, 3, 4] and r.available_size() == 4


# --------------------------------------------------------------------------------------------
# Property tests -------------------------------------------------------------------------------------------------------

ops_strategy = st.lists(
    st.tuples(st.sampled_from(["alloc", "free", "free", "group"]), st.integers(0, 10**6)),
    min_size=MIN_OPS,
    max_size=MAX_OPS,
)


def _pick(held: list[int], seed: int) -> list[int]:
    """A deterministic pseudo-random subset of ``held`` (never empty when ``held`` is not)."""
    if not held:
        return []
    k = 1 + seed % len(held)
    start = (seed // 7) % len(held)
    return sorted({held[(start + i * (1 + seed % 3)) % len(held)] for i in range(k)})


@dataclass
class SlotModel:
    capacity: int
    held: set[int] = field(default_factory=set)

    def check_alloc(self, got: list[int] | None, n: int, available: int, lo: int, hi: int) -> None:
        assert (got is None) == (n > available), (n, available)
        if got is None:
            return
        assert len(got) == n and len(set(got)) == n, got
        assert not (set(got) & self.held), "a held slot was handed out twice"
        assert all(lo <= g <= hi for g in got), (got, lo, hi)
        self.held |= set(got)


@PROFILE
@given(size=st.integers(0, 40), need_sort=st.booleans(), ops=ops_strategy)
def test_property_token_allocator(size: int, need_sort: bool, ops: list[tuple[str, int]]) -> None:
    a = TokenToKVPoolAllocator(size, need_sort=need_sort)
    model = SlotModel(size)
    in_group = False
    for op, seed in ops:
        if op == "alloc":
            n = seed % (size + 3)
            avail = a.available_size()
            got = a.alloc(n)
            model.check_alloc(None if got is None else as_list(got), n, avail, 1, size)
        elif op == "free":
            victims = _pick(sorted(model.held), seed)
            a.free(t(*victims))
            model.held -= set(victims)
        elif op == "group":
            a.free_group_end() if in_group else a.free_group_begin()
            in_group = not in_group
        if not in_group:
            assert a.available_size() + len(model.held) == size
    a.free_group_end()
    assert a.available_size() + len(model.held) == size
    a.free(t(*sorted(model.held)))
    a.merge_and_sort_free()
    assert sorted(as_list(a.free_pages)) == list(range(1, size + 1))


@PROFILE
@given(
    size=st.integers(0, 60), page_size=st.sampled_from([2, 4, 16]), need_sort=st.booleans(), ops=ops_strategy
)
def test_property_paged_alloc_free(size: int, page_size: int, need_sort: bool, ops: list[tuple[str, int]]) -> None:
    a = PagedTokenToKVPoolAllocator(size, page_size, need_sort=need_sort)
    pages = size // page_size
    held: set[int] = set()
    in_group = False
    for op, seed in ops:
        if op == "alloc":
            k = seed % (pages + 2)
            avail = a.available_size()
            got = a.alloc(k * page_size)
            assert (got is None) == (k * page_size > avail)
            if got is not None:
                locs = as_list(got)
                got_pages = {x // page_size for x in locs}
                assert len(got_pages) == k and not (got_pages & held)
                assert all(1 <= p <= pages for p in got_pages)
                assert sorted(locs) == sorted(p * page_size + o for p in got_pages for o in range(page_size))
                held |= got_pages
        elif op == "free":
            victims = _pick(sorted(held), seed)
            # free one or two arbitrary locations per page: the page goes back once
            locs = [v * page_size + (seed + i) % page_size for i, v in enumerate(victims)]
            locs += locs[: seed % 2]
            a.free(t(*locs))
            held -= set(victims)
        elif op == "group":
            a.free_group_end() if in_group else a.free_group_begin()
            in_group = not in_group
        if not in_group:
            assert a.available_size() == (pages - len(held)) * page_size
    a.free_group_end()
    a.free_page_ids(t(*sorted(held)))
    a.merge_and_sort_free()
    assert sorted(as_list(a.free_pages)) == list(range(1, pages + 1))


@dataclass
class Req:
    locs: list[int]
    swa_start: int = 0  # tokens before this index have had their SWA peers evicted


req_ops_strategy = st.lists(
    st.tuples(st.sampled_from(["new", "extend", "decode", "decode", "finish", "evict"]), st.integers(0, 10**6)),
    min_size=MIN_OPS,
    max_size=MAX_OPS,
)


def _pages_of(locs: list[int], p: int) -> set[int]:
    return {x // p for x in locs}


def _run_request_model(
    a: PagedTokenToKVPoolAllocator | SWATokenToKVPoolAllocator, ops: list[tuple[str, int]], p: int
) -> None:
    """Drive ``alloc_extend`` / ``alloc_decode`` / ``free`` with a batch of live requests.

    Checks per step: a request's token at position j sits at offset j % P (page continuity),
    pages of different requests are disjoint, page 0 is never used, None iff pages are short,
    and free-token accounting matches the model. For SWA, the same on the SWA side through
    the mapping, plus window eviction with ``free_swa``.
    """
    full_alloc = a.full_attn_allocator if isinstance(a, SWATokenToKVPoolAllocator) else a
    assert isinstance(full_alloc, PagedTokenToKVPoolAllocator)
    reqs: list[Req] = []

    def full_pages_free() -> int:
        return full_alloc.available_size() // p

    def swa_pages_free() -> int:
        return a.swa_available_size() // p if isinstance(a, SWATokenToKVPoolAllocator) else 10**9

    def extend(batch: list[Req], adds: list[int]) -> None:
        prefix = t(*[len(r.locs) for r in batch])
        seq = t(*[len(r.locs) + k for r, k in zip(batch, adds, strict=True)])
        last = t(*[r.locs[-1] if r.locs else -1 for r in batch])
        need = num_new_pages(prefix, seq, p)
        short = need > full_pages_free() or need > swa_pages_free()
        out = a.alloc_extend(prefix, prefix, seq, seq, last, sum(adds))
        assert (out is None) == short
        if out is not None:
            got = as_list(out)
            for r, k in zip(batch, adds, strict=True):
                r.locs += got[:k]
                got = got[k:]

    def decode(batch: list[Req]) -> None:
        seq = t(*[len(r.locs) + 1 for r in batch])
        last = t(*[r.locs[-1] for r in batch])
        need = sum(1 for r in batch if (len(r.locs) + 1) % p == 1)
        short = need > full_pages_free() or need > swa_pages_free()
        out = a.alloc_decode(seq, seq, last)
        assert (out is None) == short
        if out is not None:
            for r, x in zip(batch, as_list(out), strict=True):
                r.locs.append(x)

    for op, seed in ops:
        if op in ("extend", "decode") and not reqs:
            op = "new"
        if op == "new":
            new = Req([])
            extend([new], [1 + seed % (3 * p)])
            if new.locs:
                reqs.append(new)
        elif op == "extend" and reqs:
            batch = _pick(list(range(len(reqs))), seed)
            batch = sorted(set(batch))
            extend([reqs[i] for i in batch], [1 + (seed >> i) % (2 * p) for i in range(len(batch))])
        elif op == "decode" and reqs:
            batch = sorted(set(_pick(list(range(len(reqs))), seed)))
            decode([reqs[i] for i in batch])
        elif op == "finish" and reqs:
            r = reqs.pop(seed % len(reqs))
            a.free(t(*r.locs))
        elif op == "evict" and reqs and isinstance(a, SWATokenToKVPoolAllocator):
            r = reqs[seed % len(reqs)]
            # evict whole pages before the page of the last token (the window keeps the tail)
            keep_from = (len(r.locs) - 1) // p * p
            if keep_from > r.swa_start:
                a.free_swa(t(*r.locs[r.swa_start : keep_from]))
                r.swa_start = keep_from
        _check_requests(a, reqs, p)
    for r in reqs:
        a.free(t(*r.locs))
    assert full_alloc.available_size() == full_alloc.num_pages * p
    if isinstance(a, SWATokenToKVPoolAllocator):
        swa_alloc = a.swa_attn_allocator
        assert isinstance(swa_alloc, PagedTokenToKVPoolAllocator)
        assert swa_alloc.available_size() == swa_alloc.num_pages * p
        assert int(a.full_to_swa_index_mapping[:-1].abs().sum()) == 0


def _check_requests(a: PagedTokenToKVPoolAllocator | SWATokenToKVPoolAllocator, reqs: list[Req], p: int) -> None:
    full_alloc = a.full_attn_allocator if isinstance(a, SWATokenToKVPoolAllocator) else a
    assert isinstance(full_alloc, PagedTokenToKVPoolAllocator)
    used: set[int] = set()
    for r in reqs:
        assert all(x % p == j % p for j, x in enumerate(r.locs)), "token offset != position % P"
        pages = _pages_of(r.locs, p)
        assert 0 not in pages and not (pages & used), "page 0 used or page shared between requests"
        used |= pages
    assert full_alloc.available_size() == (full_alloc.num_pages - len(used)) * p
    if isinstance(a, SWATokenToKVPoolAllocator):
        swa_used: set[int] = set()
        for r in reqs:
            peers = as_list(a.translate_loc_from_full_to_swa(t(*r.locs)))
            assert all(x == 0 for x in peers[: r.swa_start])
            live = peers[r.swa_start :]
            assert all(x > 0 and x % p == (r.swa_start + j) % p for j, x in enumerate(live))
            pages = _pages_of(live, p)
            assert not (pages & swa_used)
            swa_used |= pages
        swa_alloc = a.swa_attn_allocator
        assert isinstance(swa_alloc, PagedTokenToKVPoolAllocator)
        assert swa_alloc.available_size() == (swa_alloc.num_pages - len(swa_used)) * p


@PROFILE
@given(size=st.integers(0, 120), page_size=st.sampled_from([2, 4, 8]), need_sort=st.booleans(), ops=req_ops_strategy)
def test_property_paged_extend_decode(size: int, page_size: int, need_sort: bool, ops: list[tuple[str, int]]) -> None:
    _run_request_model(PagedTokenToKVPoolAllocator(size, page_size, need_sort=need_sort), ops, page_size)


@PROFILE
@given(
    size=st.integers(0, 120),
    swa_size=st.integers(0, 60),
    page_size=st.sampled_from([2, 4]),
    need_sort=st.booleans(),
    ops=req_ops_strategy,
)
def test_property_swa_paged(
    size: int, swa_size: int, page_size: int, need_sort: bool, ops: list[tuple[str, int]]
) -> None:
    a = SWATokenToKVPoolAllocator(size, swa_size, page_size=page_size, need_sort=need_sort)
    _run_request_model(a, ops, page_size)


@PROFILE
@given(size=st.integers(0, 40), swa_size=st.integers(0, 30), need_sort=st.booleans(), ops=ops_strategy)
def test_property_swa_page1(size: int, swa_size: int, need_sort: bool, ops: list[tuple[str, int]]) -> None:
    a = SWATokenToKVPoolAllocator(size, swa_size, need_sort=need_sort)
    held: dict[int, int] = {}  # full loc -> SWA peer (0: evicted)
    for op, seed in ops:
        if op == "alloc":
            n = seed % 8
            short = n > a.full_available_size() or n > a.swa_available_size()
            got = a.alloc(n)
            assert (got is None) == short
            if got is not None:
                full = as_list(got)
                peers = as_list(a.translate_loc_from_full_to_swa(got))
                assert not (set(full) & set(held)) and all(1 <= x <= size for x in full)
                live = {v for v in held.values() if v}
                assert not (set(peers) & live) and all(1 <= x <= swa_size for x in peers)
                held.update(zip(full, peers, strict=True))
        elif op == "free":
            victims = _pick(sorted(held), seed)
            evicted = [v for v in victims if held[v] == 0]
            with_peer = [v for v in victims if held[v] != 0]
            a.free_full(t(*evicted))
            a.free(t(*with_peer))
            for v in victims:
                del held[v]
        else:  # evict SWA peers (sliding window)
            victims = [v for v in _pick(sorted(held), seed) if held[v] != 0]
            a.free_swa(t(*victims))
            for v in victims:
                held[v] = 0
        assert a.full_available_size() == size - len(held)
        assert a.swa_available_size() == swa_size - sum(1 for v in held.values() if v)


@PROFILE
@given(size=st.integers(0, 40), ops=ops_strategy)
def test_property_pure_swa(size: int, ops: list[tuple[str, int]]) -> None:
    a = PureSWATokenToKVPoolAllocator(size)
    model = SlotModel(size)
    for op, seed in ops:
        if op == "alloc":
            n = seed % (size + 3)
            avail = a.available_size()
            got = a.alloc(n)
            model.check_alloc(None if got is None else as_list(got), n, avail, 1, size)
        else:
            victims = _pick(sorted(model.held), seed)
            a.free(t(0, *victims))  # location 0 (padding) is filtered out
            model.held -= set(victims)
        assert a.available_size() + len(model.held) == size


@PROFILE
@given(size=st.integers(0, 40), ops=ops_strategy)
def test_property_mamba(size: int, ops: list[tuple[str, int]]) -> None:
    m = MambaSlotAllocator(size)
    model = SlotModel(size)
    group_open, reserved = False, 0
    for op, seed in ops:
        if op == "alloc":
            n = 1 if group_open else seed % (size + 3)
            avail = m.available_size() + reserved
            got = m.alloc(n)
            model.check_alloc(None if got is None else as_list(got), n, avail, 1, size)
            if got is not None and reserved:
                reserved -= 1
        elif op == "free":
            victims = _pick(sorted(model.held), seed)
            m.free(t(*victims))
            model.held -= set(victims)
        else:
            if group_open:
                m.alloc_group_end()
                reserved = 0
            else:
                k = seed % 4
                reserved = k if k <= m.available_size() else 0
                m.alloc_group_begin(k)
            group_open = not group_open
        assert m.available_size() + reserved + len(model.held) == size
    m.alloc_group_end()
    assert m.available_size() + len(model.held) == size


@PROFILE
@given(size=st.integers(0, 40), ops=ops_strategy)
def test_property_request_slots(size: int, ops: list[tuple[str, int]]) -> None:
    r = RequestSlotAllocator(size)
    model = SlotModel(size)
    for op, seed in ops:
        if op == "alloc":
            n = seed % (size + 3)
            avail = r.available_size()
            model.check_alloc(r.alloc(n), n, avail, 1, size)
        else:
            victims = _pick(sorted(model.held), seed)
            r.free(victims)
            model.held -= set(victims)
        assert r.available_size() + len(model.held) == size


# --------------------------------------------------------------------------------------------
# Misuse: refused at the faulty call by default, SGLang's silent behaviour with check_misuse=False ---------------------


def test_paged_decode_at_page_1_takes_a_fresh_location_per_request() -> None:
    """An NPU plan at page 1 builds the paged allocator; its decode used to return last_loc + 1,
    a location never taken from the free list (handed out twice once it was)."""
    a = PagedTokenToKVPoolAllocator(8, 1)
    first = as_list(a.alloc_extend(t(0), t(0), t(2), t(2), t(-1), 2))
    assert first == [1, 2]
    out = as_list(a.alloc_decode(t(3), t(3), t(2)))
    assert out == [3] and a.available_size() == 5 and a.held_count() == 3
    other = as_list(a.alloc(1))
    assert other == [4]  # not 3: the decode location was taken from the free list


def test_npu_plan_at_page_1_builds_an_allocator_that_hands_nothing_out_twice() -> None:
    from kvstrategies.api import build, plan
    from kvstrategies.case import parse_case

    case = parse_case({"preset": "llama-3.1-8b", "available_bytes": 2**30, "device": "npu", "page_size": 1,
                       "pool_max_tokens": 16})  # fmt: skip
    pools = build(plan(case.settings, case.available_bytes, pool_max_tokens=16), "cpu")
    a = pools.allocator
    got = [*as_list(a.alloc_extend(t(0), t(0), t(2), t(2), t(-1), 2))] if hasattr(a, "alloc_extend") else []
    got += as_list(a.alloc_decode(t(3), t(3), t(got[-1]))) if got else as_list(a.alloc(1))
    got += as_list(a.alloc(1))
    assert len(got) == len(set(got)), got


@pytest.mark.parametrize("page", [1, 4])
def test_paged_double_free_and_never_allocated_are_misuse(page: int) -> None:
    a = PagedTokenToKVPoolAllocator(8 * page, page)
    locs = ok(a.alloc(2 * page))
    a.free(locs)
    before = as_list(a.free_pages)
    with pytest.raises(AllocatorMisuseError, match="not handed out"):
        a.free(locs)
    with pytest.raises(AllocatorMisuseError, match="out of range"):
        a.free(t(100 * page))
    with pytest.raises(AllocatorMisuseError, match="out of range"):
        a.free_page_ids(t(0))
    pages = ok(a.alloc(page)) // page
    with pytest.raises(AllocatorMisuseError, match="twice in one call"):
        a.free_page_ids(torch.cat((pages, pages)))
    assert sorted(as_list(a.free_pages)) == sorted(set(before) - set(as_list(pages)))


def test_mamba_and_request_slot_misuse() -> None:
    m = MambaSlotAllocator(4)
    s = ok(m.alloc(2))
    m.free(s)
    with pytest.raises(AllocatorMisuseError, match="not handed out"):
        m.free(s)
    with pytest.raises(AllocatorMisuseError, match="out of range"):
        m.free(t(0))
    m.alloc_group_begin(2)
    with pytest.raises(AllocatorMisuseError, match="inside an open group"):
        m.alloc_group_begin(1)  # used to drop the 2 pre-taken slots (a leak)
    m.alloc_group_end()
    assert m.available_size() == 4 and m.held_count() == 0
    freed = ok(m.alloc(1))
    m.free(freed)
    m.alloc_group_begin(4)  # pre-takes the freed slot again
    with pytest.raises(AllocatorMisuseError, match="not handed out"):
        m.free(freed)  # a double free must not be hidden by the group holding the slot
    assert m.reserved_count() == 4
    m.alloc_group_end()
    r = RequestSlotAllocator(4)
    rows = ok_rows(r.alloc(2))
    r.free(rows)
    with pytest.raises(AllocatorMisuseError, match="not handed out"):
        r.free(rows)
    with pytest.raises(AllocatorMisuseError, match="out of range"):
        r.free([5])
    assert r.free_slots == [1, 2, 3, 4] and r.available_size() == 4


def ok_rows(rows: list[int] | None) -> list[int]:
    assert rows is not None
    return rows


def test_swa_double_free_and_out_of_range_are_misuse() -> None:
    a = SWATokenToKVPoolAllocator(8, 6)
    full = ok(a.alloc(2))
    a.free(full)
    mapping = a.full_to_swa_index_mapping.clone()
    with pytest.raises(AllocatorMisuseError):
        a.free(full)
    with pytest.raises(AllocatorMisuseError, match="out of range"):
        a.free(t(10_000))
    assert torch.equal(a.full_to_swa_index_mapping, mapping)
    assert a.full_available_size() == 8 and a.swa_available_size() == 6


def test_unchecked_allocators_keep_sglang_behaviour_and_track_nothing() -> None:
    m = MambaSlotAllocator(2, check_misuse=False)
    s = ok(m.alloc(1))
    m.free(s)
    m.free(s)  # SGLang: silently duplicated in the free list
    assert m.available_size() == 3 and m.held_count() == -1
    r = RequestSlotAllocator(2, check_misuse=False)
    r.free([1])
    assert r.free_slots == [1, 2, 1]


def test_request_rows_are_a_lazy_range() -> None:
    r = RequestSlotAllocator(2**40)  # a meta what-if of any size costs no host memory
    assert r.available_size() == 2**40
    assert r.alloc(2) == [2**40 - 1, 2**40]
    r.free([2**40])
    assert r.alloc(3) == [2**40 - 3, 2**40 - 2, 2**40]


def test_token_merge_with_nothing_staged_keeps_the_free_order() -> None:
    a = TokenToKVPoolAllocator(6)
    a.alloc(4)
    a.free(t(3, 1))
    a.merge_and_sort_free()  # nothing staged (need_sort off): SGLang leaves the list as it is
    assert as_list(a.free_pages) == [5, 6, 3, 1]


def test_swa_segment_frees_need_a_page_aligned_start() -> None:
    p = 4
    a = SWATokenToKVPoolAllocator(32, 32, page_size=p)
    full = ok(a.alloc_extend(t(0), t(0), t(2 * p), t(2 * p), t(-1), 2 * p))
    a.free_segment(full[p:], p)  # the second page, both sides
    assert a.full_available_size() == (32 // p - 1) * p and a.swa_available_size() == (32 // p - 1) * p
    with pytest.raises(KVCacheConfigError, match="not a page multiple"):
        a.free_full_segment(full[:p], 1)
    with pytest.raises(KVCacheConfigError, match="not a page multiple"):
        a.free_swa_segment(full[:p], 2)
    a.free_segment(full[:p], 0)
    assert a.full_available_size() == 32 and a.swa_available_size() == 32


# ---- allocator edges, by hand: resize, the slot ledger, paged sort, SWA page pairs -------------------------
# sglang.srt.mem_cache.allocator (paged.PagedTokenToKVPoolAllocator, swa.SWATokenToKVPoolAllocator,
# base.BaseTokenToKVPoolAllocator) at SGLang 0.5.23, and the misuse rules of kvstrategies/allocators/common.py


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
