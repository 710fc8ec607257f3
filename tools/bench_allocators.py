#!/usr/bin/env python3
"""What misuse detection costs: allocator operations per second with ``check_misuse`` on and off.

Each workload is a steady scheduler-like loop on one allocator (CPU tensors, or ``--device``):

* ``token``: ``alloc(n)`` then ``free`` of the batch (page size 1);
* ``paged-extend``/``paged-decode``: a batch of requests extends by a prefill chunk, decodes a
  token per step, and frees its locations when done (page size ``--page-size``);
* ``swa-decode``: the same decode loop on the hybrid SWA allocator (both sides checked);
* ``mamba``: ``alloc(1)`` / ``free`` of state slots; ``requests``: request rows.

Prints microseconds per operation for both settings and the overhead of the checks. The checks
are one gather + compare + scatter on a bool mask per call (and a ``unique`` for frees).

    python tools/bench_allocators.py                    # CPU, page 64, batch 64
    python tools/bench_allocators.py --device cuda --batch 256
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvstrategies.allocators import (  # noqa: E402
    MambaSlotAllocator,
    PagedTokenToKVPoolAllocator,
    RequestSlotAllocator,
    SWATokenToKVPoolAllocator,
    TokenToKVPoolAllocator,
)

I64 = torch.int64


def _token(check: bool, device: str, batch: int, page: int) -> Callable[[], int]:
    a = TokenToKVPoolAllocator(1 << 20, device=device, check_misuse=check)

    def step() -> int:
        locs = a.alloc(batch)
        assert locs is not None
        a.free(locs)
        return 2

    return step


def _paged_loop(a: PagedTokenToKVPoolAllocator | SWATokenToKVPoolAllocator, device: str, batch: int, page: int,
                decode_steps: int) -> Callable[[], int]:  # fmt: skip
    prefill = 4 * page

    def step() -> int:
        zeros = torch.zeros(batch, dtype=I64)
        seq = torch.full((batch,), prefill, dtype=I64)
        out = a.alloc_extend(zeros.to(device), zeros, seq.to(device), seq, torch.full((batch,), -1, dtype=I64,
                             device=device), batch * prefill)  # fmt: skip
        assert out is not None
        locs = [out]
        last = out.view(batch, prefill)[:, -1]
        for _ in range(decode_steps):
            seq = seq + 1
            new = a.alloc_decode(seq.to(device), seq, last)
            assert new is not None
            locs.append(new)
            last = new
        a.free(torch.cat(locs))
        return 2 + decode_steps

    return step


def _paged_extend(check: bool, device: str, batch: int, page: int) -> Callable[[], int]:
    return _paged_loop(PagedTokenToKVPoolAllocator(1 << 22, page, device=device, check_misuse=check),
                       device, batch, page, 0)  # fmt: skip


def _paged_decode(check: bool, device: str, batch: int, page: int) -> Callable[[], int]:
    return _paged_loop(PagedTokenToKVPoolAllocator(1 << 22, page, device=device, check_misuse=check),
                       device, batch, page, 32)  # fmt: skip


def _swa_decode(check: bool, device: str, batch: int, page: int) -> Callable[[], int]:
    a = SWATokenToKVPoolAllocator(1 << 22, 1 << 21, page_size=page, device=device, check_misuse=check)
    return _paged_loop(a, device, batch, page, 32)


def _mamba(check: bool, device: str, batch: int, page: int) -> Callable[[], int]:
    m = MambaSlotAllocator(1 << 16, device=device, check_misuse=check)

    def step() -> int:
        slots = [m.alloc(1) for _ in range(batch)]
        m.free(torch.cat([s for s in slots if s is not None]))
        return batch + 1

    return step


def _requests(check: bool, device: str, batch: int, page: int) -> Callable[[], int]:
    r = RequestSlotAllocator(1 << 16, check_misuse=check)

    def step() -> int:
        rows = r.alloc(batch)
        assert rows is not None
        r.free(rows)
        return 2

    return step


WORKLOADS: dict[str, Callable[[bool, str, int, int], Callable[[], int]]] = {
    "token": _token,
    "paged-extend": _paged_extend,
    "paged-decode": _paged_decode,
    "swa-decode": _swa_decode,
    "mamba": _mamba,
    "requests": _requests,
}


def per_op_us(step: Callable[[], int], seconds: float, device: str) -> float:
    """Median-free simple rate: run ``step`` for about ``seconds``; microseconds per allocator call."""
    step()  # warm up
    ops, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        ops += step()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / ops * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--page-size", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=1.0, help="per workload and setting")
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"device {args.device}, batch {args.batch}, page {args.page_size}; microseconds per allocator call")
    print(f"{'workload':<14}{'checked':>10}{'unchecked':>11}{'overhead':>10}")
    for name in args.workloads:
        on = per_op_us(WORKLOADS[name](True, args.device, args.batch, args.page_size), args.seconds, args.device)
        off = per_op_us(WORKLOADS[name](False, args.device, args.batch, args.page_size), args.seconds, args.device)
        print(f"{name:<14}{on:>10.1f}{off:>11.1f}{(on / off - 1) * 100:>9.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
