"""What every allocator shares: the error classes, argument helpers and the misuse ledger.

:class:`SlotLedger` is the one place that knows which ids (token locations, pages, state slots)
are handed out. Every allocator marks what it hands out and checks what it is given back, so
misuse is caught where it happens instead of corrupting the free list (SGLang catches a double
free only when the pool overfills, and never for Mamba or request slots):

* freeing an id that is out of range (``0``, the padding slot/page, included), not handed out,
  or twice in one call raises :class:`AllocatorMisuseError`;
* handing out an id that is still held (a corrupted free list) raises it too.

The checks are on by default; ``check_misuse=False`` on any allocator turns them off (the
ledger is then never touched; ``tools/bench_allocators.py`` measures the difference). On the
``meta`` device nothing is real, so nothing is tracked.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from ..errors import KVCacheConfigError, require

Device = str | torch.device
I64 = torch.int64


class AllocatorStateError(RuntimeError):
    """An allocator invariant broke (SGLang asserts here): e.g. a double free or a missing peer."""


class AllocatorMisuseError(AllocatorStateError):
    """The caller gave back an id it does not hold (double free, never handed out, out of range),
    or opened a group inside a group. Raised at the faulty call; the allocator is unchanged."""


@runtime_checkable
class HasMaxTotalTokens(Protocol):
    max_total_num_tokens: int


def size_of(config: int | Any, attr: str) -> int:
    """``config`` itself when it is an int, else ``getattr(config, attr)`` (a sizes object)."""
    value = config if isinstance(config, int) else getattr(config, attr, None)
    if not isinstance(value, int) or value < 0:
        raise KVCacheConfigError(f"resize needs a non-negative int or an object with .{attr}; got {config!r}")
    return value


def check_count(n: int, what: str = "need_size") -> int:
    require(isinstance(n, int) and n >= 0, f"{what} must be a non-negative int, got {n!r}")
    return int(n)


def check_id_tensor(ids: torch.Tensor, device: Device, what: str = "locations") -> None:
    """An id tensor holds integers, and values this allocator can read: a ``meta`` tensor (no
    values) is accepted only by an allocator on ``meta``."""
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise KVCacheConfigError(f"{what} must be an integer tensor (int64 or int32), got {ids.dtype}")
    if ids.device.type == "meta" and torch.device(device).type != "meta":
        raise KVCacheConfigError(
            f"{what} are a meta tensor, which holds no values; pass the ids this allocator handed out"
        )


def as_locs(locs: torch.Tensor | Sequence[int], device: Device) -> torch.Tensor:
    """A 1-D int64 tensor on ``device`` (int32 input, lists and tuples of ints accepted)."""
    if isinstance(locs, torch.Tensor):
        check_id_tensor(locs, device)
        return locs.reshape(-1).to(device=device, dtype=I64)
    try:
        if isinstance(locs, (str, bytes)):
            raise TypeError(type(locs).__name__)
        values = [operator.index(loc) for loc in locs]
    except TypeError as exc:
        raise KVCacheConfigError(f"locations must be a tensor or a sequence of ints, got {locs!r:.60}") from exc
    return torch.tensor(values, dtype=I64, device=device)


def as_id_list(ids: Any, what: str = "rows") -> list[int]:
    """Python ints from an int, a sequence of ints or a host integer tensor (request rows)."""
    if isinstance(ids, torch.Tensor):
        check_id_tensor(ids, "cpu", what)
        return [int(i) for i in ids.reshape(-1).tolist()]
    try:
        if isinstance(ids, (str, bytes)):
            raise TypeError(type(ids).__name__)
        return [operator.index(ids)] if not hasattr(ids, "__iter__") else [operator.index(i) for i in ids]
    except TypeError as exc:
        raise KVCacheConfigError(
            f"{what} must be an int, a sequence of ints or an integer tensor, got {ids!r:.60}"
        ) from exc


def check_batch(owner: str, device: Device, extend_num_tokens: Any = None, **tensors: Any) -> None:
    """The per-request tensors of ``alloc_extend`` / ``alloc_decode``: 1-D integer tensors of one
    length (the batch) holding values (``*_cpu`` ones on the host, the others a ``meta`` tensor
    only for an allocator on ``meta``), and ``extend_num_tokens`` a non-negative int."""
    lengths = set()
    for name, value in tensors.items():
        if not isinstance(value, torch.Tensor):
            raise KVCacheConfigError(f"{owner}: {name} must be a 1-D integer tensor, got {type(value).__name__}")
        check_id_tensor(value, "cpu" if name.endswith("_cpu") else device, name)
        if value.dim() != 1:
            raise KVCacheConfigError(f"{owner}: {name} must be 1-D (one entry per request), got {tuple(value.shape)}")
        lengths.add(int(value.numel()))
    if len(lengths) > 1:
        shapes = ", ".join(f"{n} {int(v.numel())}" for n, v in tensors.items())
        raise KVCacheConfigError(f"{owner}: the per-request tensors differ in length ({shapes}); one entry per request")
    if extend_num_tokens is not None:
        check_count(extend_num_tokens, "extend_num_tokens")


def _same_form(current: Any, given: Any) -> bool:
    """``given`` has the form of ``current`` (a state from ``backup_state``): tuples of the same
    length, tensors of the same dtype on the same device, lists of tensors, non-negative ints."""
    if isinstance(current, tuple):
        return isinstance(given, tuple) and len(given) == len(current) and all(
            _same_form(a, b) for a, b in zip(current, given, strict=True)
        )
    if isinstance(current, list):
        return isinstance(given, (list, tuple)) and all(isinstance(x, torch.Tensor) for x in given)
    if isinstance(current, torch.Tensor):
        return isinstance(given, torch.Tensor) and given.dtype == current.dtype and given.device == current.device
    if isinstance(current, int):
        return isinstance(given, int) and not isinstance(given, bool) and given >= 0
    return type(given) is type(current)


def check_state(owner: Any, state: Any) -> None:
    """``state`` came from ``owner.backup_state()`` (its form is checked against a fresh backup)."""
    if not _same_form(owner.backup_state(), state):
        raise KVCacheConfigError(
            f"{type(owner).__name__}.restore_state needs a state returned by its backup_state(), got {state!r:.60}"
        )


def num_new_pages(prefix_lens_cpu: torch.Tensor, seq_lens_cpu: torch.Tensor, page_size: int) -> int:
    """Pages a batch extension needs: ``sum_i ceil(seq_i / P) - ceil(prefix_i / P)``."""
    p = page_size
    seq_pages = (seq_lens_cpu.to(I64) + p - 1) // p
    prefix_pages = (prefix_lens_cpu.to(I64) + p - 1) // p
    return int((seq_pages - prefix_pages).sum().item())


def take_head(free: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(free[:n], free[n:])``: the ids handed out and the free list left (free lists are replaced,
    never written in place, so a backup is a reference)."""
    return free[:n], free[n:]


class SlotLedger:
    """Which ids in ``[1, capacity]`` are held, as a bool mask on the allocator's device.

    ``enabled`` False (opted out, or the ``meta`` device): every method is a no-op.
    """

    def __init__(self, capacity: int, device: torch.device, owner: str, *, enabled: bool = True) -> None:
        self.owner = owner
        self.device = device
        self.enabled = bool(enabled) and device.type != "meta"
        self.capacity = capacity
        self.held = torch.zeros(0, dtype=torch.bool, device=device)
        self.reset(capacity)

    def reset(self, capacity: int) -> None:
        """Nothing held, ``capacity`` ids."""
        self.capacity = capacity
        if self.enabled:
            self.held = torch.zeros(capacity + 1, dtype=torch.bool, device=self.device)

    def take(self, ids: torch.Tensor) -> None:
        """Mark ``ids`` handed out; an id already held means the free list was corrupted."""
        if not self.enabled or ids.numel() == 0:
            return
        if bool(self.held[ids].any()):
            twice = ids[self.held[ids]][:8].tolist()
            raise AllocatorStateError(f"{self.owner}: ids {twice} handed out while still held (free list corrupted)")
        self.held[ids] = True

    def give_back(self, ids: torch.Tensor, *, what: str = "id", unique: bool = True) -> None:
        """Check and unmark ``ids`` being freed (``unique``: a repeat within the call is misuse too)."""
        if not self.enabled or ids.numel() == 0:
            return
        bad_range = (ids < 1) | (ids > self.capacity)
        if bool(bad_range.any()):
            raise AllocatorMisuseError(
                f"{self.owner}: freeing {what}s out of range [1, {self.capacity}]: {ids[bad_range][:8].tolist()}"
            )
        not_held = ~self.held[ids]
        if bool(not_held.any()):
            raise AllocatorMisuseError(
                f"{self.owner}: freeing {what}s that are not handed out (double free or never allocated): "
                f"{ids[not_held][:8].tolist()}"
            )
        if unique and ids.numel() > 1 and int(torch.unique(ids).numel()) != int(ids.numel()):
            raise AllocatorMisuseError(f"{self.owner}: the same {what} is freed twice in one call")
        self.held[ids] = False

    def rebuild(self, free_ids: Sequence[torch.Tensor]) -> None:
        """Held = every id not in ``free_ids`` (after ``restore_state``)."""
        if not self.enabled:
            return
        held = torch.ones(self.capacity + 1, dtype=torch.bool, device=self.device)
        held[0] = False
        for ids in free_ids:
            if ids.numel():
                held[ids] = False
        self.held = held

    def held_count(self) -> int:
        return int(self.held.sum()) if self.enabled else -1
