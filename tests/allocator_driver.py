"""A random-operation driver over every allocator kind, misuse included.

Each kind runs ``ops`` random operations (seeded ``random.Random``) against a model of what
the caller holds. Misuse operations (double free, freeing ids never handed out, out of range,
0, a repeat within one call, a nested Mamba group) must raise ``AllocatorMisuseError`` and
leave the allocator unchanged. After **every** operation the driver checks:

* free + held == capacity (``available_size()`` + what the model holds, in ids of the kind:
  locations, pages or slots), and the allocator's own ``held_count()`` agrees;
* no id is held twice (every allocation is disjoint from what is held, and in range).

``python -m tests.allocator_driver --ops 100000`` prints the operation counts per kind; the
tests in ``test_fuzz_allocators.py`` run it at the profile's size (CI 1,000 per kind, ``tox -e
property`` >= 10^5 per kind).
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from kvstrategies.allocators import (
    AllocatorMisuseError,
    MambaSlotAllocator,
    PagedTokenToKVPoolAllocator,
    PureSWATokenToKVPoolAllocator,
    RequestSlotAllocator,
    SWATokenToKVPoolAllocator,
    TokenToKVPoolAllocator,
)


def _t(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


class InvariantError(AssertionError):
    """The driver found a broken invariant (a bug in an allocator)."""


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise InvariantError(message)


@dataclass
class DriverStats:
    kind: str
    ops: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.ops.values())

    @property
    def misuse(self) -> int:
        return sum(n for op, n in self.ops.items() if op.startswith("misuse"))


def _misuse(stats: DriverStats, name: str, call: Callable[[Any], Any], arg: Any, snapshot: Callable[[], Any]) -> None:
    """``call(arg)`` must raise AllocatorMisuseError and change nothing ``snapshot`` sees."""
    before = snapshot()
    try:
        call(arg)
    except AllocatorMisuseError:
        pass
    else:
        raise InvariantError(f"{stats.kind}: {name} was not refused")
    _expect(snapshot() == before, f"{stats.kind}: refused {name} changed the allocator")
    stats.ops[f"misuse:{name}"] += 1


# ---- slot-style kinds: ids are locations or slots, alloc(n) / free(ids) -----------------------------


def _slot_kind(kind: str, make: Callable[[int], Any], ops: int, rng: random.Random) -> DriverStats:
    stats = DriverStats(kind)
    size = rng.randint(8, 64)
    a = make(size)
    held: set[int] = set()
    freed: list[int] = []  # ids handed out once and freed since (double-free candidates)
    group_open = False

    def snap() -> tuple[int, int]:
        return (a.available_size(), a.held_count())

    def as_ids(got: Any) -> list[int]:
        return [int(x) for x in (got.tolist() if isinstance(got, torch.Tensor) else got)]

    def free_ids(ids: list[int]) -> Any:
        return ids if isinstance(a, RequestSlotAllocator) else _t(ids)

    while stats.total < ops:
        op = rng.choices(["alloc", "free", "misuse", "group", "clear"], [40, 35, 20, 4, 1])[0]
        if op == "alloc":
            n = 1 if group_open else rng.randint(0, 6)
            got = a.alloc(n)
            if got is not None:
                ids = as_ids(got)
                _expect(len(ids) == n and len(set(ids)) == n, f"{kind}: alloc({n}) gave {ids}")
                _expect(not set(ids) & held, f"{kind}: ids {sorted(set(ids) & held)} handed out twice")
                _expect(all(1 <= i <= size for i in ids), f"{kind}: ids out of range: {ids}")
                held.update(ids)
            stats.ops["alloc"] += 1
        elif op == "free" and held:
            victims = rng.sample(sorted(held), rng.randint(1, min(4, len(held))))
            a.free(free_ids(victims))
            held.difference_update(victims)
            freed.extend(victims)
            stats.ops["free"] += 1
        elif op == "misuse":
            candidates = [i for i in freed[-16:] if i not in held]
            choice = rng.randint(0, 3)
            if choice == 0 and candidates:
                _misuse(stats, "double free", a.free, free_ids([rng.choice(candidates)]), snap)
            elif choice == 1:
                low = [] if isinstance(a, PureSWATokenToKVPoolAllocator) else [0, -1]  # PureSWA filters <= 0
                bad = rng.choice([*low, size + 1, size + rng.randint(2, 1000)])
                _misuse(stats, "out of range", a.free, free_ids([bad]), snap)
            elif choice == 2 and held:
                one = rng.choice(sorted(held))
                _misuse(stats, "repeat in one call", a.free, free_ids([one, one]), snap)
            elif choice == 3 and isinstance(a, MambaSlotAllocator) and group_open:
                _misuse(stats, "nested group", a.alloc_group_begin, 1, snap)
            else:
                never = [i for i in range(1, size + 1) if i not in held and i not in freed]  # group's too
                if never:
                    _misuse(stats, "never handed out", a.free, free_ids([never[0]]), snap)
        elif op == "group" and isinstance(a, MambaSlotAllocator):
            if group_open:
                a.alloc_group_end()
            else:
                a.alloc_group_begin(rng.randint(0, 3))
            group_open = not group_open
            stats.ops["group"] += 1
        elif op == "clear" and not group_open:
            a.clear()
            held.clear()
            freed.clear()
            stats.ops["clear"] += 1
        else:
            continue
        # free + held == capacity (plus a Mamba group's pre-taken slots not handed out yet); the
        # allocator's ledger holds exactly what the caller holds
        reserved = a.reserved_count() if isinstance(a, MambaSlotAllocator) else 0
        _expect(a.available_size() + reserved + len(held) == size,
                f"{kind}: free {a.available_size()} + reserved {reserved} + held {len(held)} != {size}")  # fmt: skip
        _expect(a.held_count() == len(held), f"{kind}: ledger holds {a.held_count()} != {len(held)}")
    return stats


# ---- paged kinds: requests extend and decode; ids are pages ------------------------------------------


@dataclass
class _Req:
    locs: list[int]


def _paged_kind(kind: str, make: Callable[[int, int], Any], page: int, ops: int, rng: random.Random) -> DriverStats:
    stats = DriverStats(kind)
    size = rng.randint(4, 40) * page
    a = make(size, page)
    full = a.full_attn_allocator if isinstance(a, SWATokenToKVPoolAllocator) else a
    reqs: list[_Req] = []
    finished: list[_Req] = []

    def used_pages() -> set[int]:
        pages: set[int] = set()
        for r in reqs:
            mine = {x // page for x in r.locs}
            _expect(not mine & pages, f"{kind}: a page is shared by two requests")
            _expect(0 not in mine, f"{kind}: page 0 handed out")
            pages |= mine
        return pages

    def snap() -> tuple[int, int]:
        return (a.available_size(), full.held_count())

    def extend(batch: list[_Req], adds: list[int]) -> None:
        prefix = _t([len(r.locs) for r in batch])
        seq = _t([len(r.locs) + k for r, k in zip(batch, adds, strict=True)])
        last = _t([r.locs[-1] if r.locs else -1 for r in batch])
        out = a.alloc_extend(prefix, prefix, seq, seq, last, sum(adds))
        if out is not None:
            got = [int(x) for x in out.tolist()]
            for r, k in zip(batch, adds, strict=True):
                r.locs += got[:k]
                got = got[k:]

    while stats.total < ops:
        op = rng.choices(["new", "extend", "decode", "finish", "misuse"], [20, 20, 30, 15, 15])[0]
        if op == "new":
            r = _Req([])
            extend([r], [rng.randint(1, 3 * page)])
            if r.locs:
                reqs.append(r)
        elif op == "extend" and reqs:
            batch = rng.sample(reqs, rng.randint(1, min(3, len(reqs))))
            extend(batch, [rng.randint(1, 2 * page) for _ in batch])
        elif op == "decode" and reqs:
            batch = rng.sample(reqs, rng.randint(1, min(4, len(reqs))))
            seq = _t([len(r.locs) + 1 for r in batch])
            out = a.alloc_decode(seq, seq, _t([r.locs[-1] for r in batch]))
            if out is not None:
                for r, x in zip(batch, out.tolist(), strict=True):
                    r.locs.append(int(x))
        elif op == "finish" and reqs:
            r = reqs.pop(rng.randrange(len(reqs)))
            a.free(_t(r.locs))
            finished.append(r)
        elif op == "misuse":
            if finished and rng.random() < 0.5:
                again = finished[-1]
                if not {x // page for x in again.locs} & used_pages():
                    _misuse(stats, "double free", a.free, _t(again.locs), snap)
            else:
                bad = full.num_pages * page + page * rng.randint(1, 50)
                _misuse(stats, "out of range", a.free, _t([bad]), snap)
                if not isinstance(a, SWATokenToKVPoolAllocator):
                    _misuse(stats, "page 0", a.free_page_ids, _t([0]), snap)
        else:
            continue
        if not op.startswith("misuse"):
            stats.ops[op] += 1
        pages = used_pages()
        free_pages = full.available_size() // page
        _expect(free_pages + len(pages) == full.num_pages, f"{kind}: free {free_pages} + held {len(pages)} pages")
        _expect(full.held_count() == len(pages), f"{kind}: ledger {full.held_count()} != {len(pages)} pages")
        locs = [x for r in reqs for x in r.locs]
        _expect(len(locs) == len(set(locs)), f"{kind}: a location is held twice")
        if rng.random() < 0.02 and not reqs:
            finished.clear()
    return stats


KINDS: dict[str, Callable[[int, random.Random], DriverStats]] = {
    "TokenToKVPoolAllocator": lambda n, rng: _slot_kind("token", lambda s: TokenToKVPoolAllocator(s), n, rng),
    "TokenToKVPoolAllocator(need_sort)": lambda n, rng: _slot_kind(
        "token-sorted", lambda s: TokenToKVPoolAllocator(s, need_sort=True), n, rng),  # fmt: skip
    "PureSWATokenToKVPoolAllocator": lambda n, rng: _slot_kind(
        "pure-swa", lambda s: PureSWATokenToKVPoolAllocator(s), n, rng),  # fmt: skip
    "SWATokenToKVPoolAllocator(page 1)": lambda n, rng: _slot_kind(
        "swa-p1", lambda s: _SWAPage1(s), n, rng),  # fmt: skip
    "MambaSlotAllocator": lambda n, rng: _slot_kind("mamba", lambda s: MambaSlotAllocator(s), n, rng),
    "RequestSlotAllocator": lambda n, rng: _slot_kind("requests", lambda s: RequestSlotAllocator(s), n, rng),
    "PagedTokenToKVPoolAllocator(page 1)": lambda n, rng: _paged_kind(
        "paged-p1", PagedTokenToKVPoolAllocator, 1, n, rng),  # fmt: skip
    "PagedTokenToKVPoolAllocator(page 4, need_sort)": lambda n, rng: _paged_kind(
        "paged-p4", lambda s, p: PagedTokenToKVPoolAllocator(s, p, need_sort=True), 4, n, rng),  # fmt: skip
    "PagedTokenToKVPoolAllocator(page 4)": lambda n, rng: _paged_kind(
        "paged-p4", PagedTokenToKVPoolAllocator, 4, n, rng),  # fmt: skip
    "SWATokenToKVPoolAllocator(page 4)": lambda n, rng: _paged_kind(
        "swa-p4", lambda s, p: SWATokenToKVPoolAllocator(s, s, page_size=p), 4, n, rng),  # fmt: skip
}


class _SWAPage1(SWATokenToKVPoolAllocator):
    """The page-1 hybrid allocator seen through the slot interface (full == SWA size, peers freed together)."""

    def __init__(self, size: int) -> None:
        super().__init__(size, size)

    def held_count(self) -> int:
        return self.full_attn_allocator.held_count()


def run_kind(name: str, ops: int, seed: int = 0) -> DriverStats:
    """Run one kind for at least ``ops`` operations (restarting with a new size every 5,000)."""
    rng = random.Random(f"{name}-{seed}")
    total = DriverStats(name)
    while total.total < ops:
        chunk = KINDS[name](min(5000, ops - total.total), rng)
        total.ops.update(chunk.ops)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for name in KINDS:
        stats = run_kind(name, args.ops, args.seed)
        print(f"{name:<40} {stats.total:>8,} ops  {stats.misuse:>7,} misuse  0 invariant failures")


if __name__ == "__main__":
    main()
