"""Pure-data pool layouts: named buffers with shape, dtype and bytes, no torch.

A :class:`PoolLayout` is what ``layout(sizes)`` returns and exactly what ``build()`` allocates:
each :class:`BufferSpec` is either an *allocation* (backing storage, zero-filled) or a *view*
into one (``k_buffer[l]`` as ``kv_storage[l][0, :N]``). Planned bytes are the allocations'
bytes, so planned == allocated by construction; views are listed for engines and snapshots.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from ..core.dtypes import DType
from ..errors import KVCacheConfigError


class BufferRole(enum.Enum):
    KV = "kv"  # per-token KV data and its scales (counted by SGLang's get_kv_size_bytes)
    STATE = "state"  # request-scoped state (Mamba, DSV4 compression state)
    INDEX = "index"  # request tables and other integer indexes
    WORKSPACE = "workspace"  # shared scratch (FP4 dequant workspace)


@dataclass(frozen=True)
class ViewOf:
    """A view ``source[index...][:length]``: select leading ``index`` dims, narrow the next to ``length``.

    ``window_axis`` set: instead an overlapping sliding-window view (``as_strided``) of a source
    ``(A, B, *rest)`` with shape ``(A, B, steps, *rest')``, where step ``t`` reads ``rest`` along
    source axis ``window_axis`` from ``t``; the view's own shape says ``steps`` and the window width
    (SGLang's deduplicated speculative conv window, MambaPool conv window). Views hold no bytes of their own.
    """

    source: str
    index: tuple[int, ...] = ()
    length: int | None = None
    window_axis: int | None = None

    def of(self, source: str) -> ViewOf:
        """The same view of another allocation (``replace(self, source=...)``, cheaper)."""
        fields = self.__dict__.copy()
        fields["source"] = source
        copy: ViewOf = object.__new__(ViewOf)
        object.__setattr__(copy, "__dict__", fields)
        return copy


@dataclass(frozen=True)
class BufferSpec:
    """One tensor: ``nbytes = prod(shape) * dtype.itemsize``; ``view`` set for views."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    role: BufferRole = BufferRole.KV
    view: ViewOf | None = None
    device: str | None = None  # None: the pool's device; "cpu" for host-side tensors
    engine_facing: bool = True  # False for backing storage that engines address via views

    def __post_init__(self) -> None:
        for d in self.shape:
            if not isinstance(d, int) or d < 0:
                raise KVCacheConfigError(f"buffer {self.name} has an invalid shape {self.shape}")
        object.__setattr__(self, "_nbytes", math.prod(self.shape) * self.dtype.itemsize)  # read often: once

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        nbytes: int = self.__dict__["_nbytes"]
        return nbytes

    @property
    def is_view(self) -> bool:
        return self.view is not None

    def renamed(self, name: str, view: ViewOf | None = None) -> BufferSpec:
        """This buffer as ``name`` (a view of ``view``), otherwise the same: a copy, not checked
        again (its shape was checked when this one was built). Per-layer buffers of one shape
        are built this way."""
        fields = self.__dict__.copy()
        fields["name"] = name
        fields["view"] = view
        copy: BufferSpec = object.__new__(BufferSpec)
        object.__setattr__(copy, "__dict__", fields)
        return copy


@lru_cache(maxsize=512)
def layer_names(prefix: str, names: tuple[str, ...], layer_num: int) -> tuple[tuple[str, ...], ...]:
    """Per layer, each of ``names`` as that layer's buffer under ``prefix`` (``("full", ("k_buffer",), 2)``
    -> ``(("full.k_buffer[0]",), ("full.k_buffer[1]",))``); cached, as every plan of a model names the same
    layers again."""
    pre = f"{prefix}." if prefix else ""
    return tuple(tuple(f"{pre}{name}[{layer}]" for name in names) for layer in range(layer_num))


@dataclass(frozen=True)
class PoolLayout:
    """All buffers of one pool (sub-pools flattened with a ``prefix.`` on their names)."""

    pool_class: str
    buffers: tuple[BufferSpec, ...]
    attributes: tuple[tuple[str, int | str | None], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        names = [b.name for b in self.buffers]
        if len(names) != len(set(names)):
            dupes = sorted({n for n in names if names.count(n) > 1})
            raise KVCacheConfigError(f"pool {self.pool_class} names buffers twice: {dupes}")
        allocations = {b.name for b in self.buffers if b.view is None}
        for buf in self.buffers:
            if buf.view is not None and buf.view.source not in allocations:
                raise KVCacheConfigError(f"view {buf.name} refers to unknown allocation {buf.view.source}")

    @cached_property
    def allocations(self) -> tuple[BufferSpec, ...]:
        return tuple(b for b in self.buffers if b.view is None)

    @cached_property
    def engine_buffers(self) -> tuple[BufferSpec, ...]:
        """Tensors an engine addresses (views included, hidden backing storage excluded)."""
        return tuple(b for b in self.buffers if b.engine_facing)

    @cached_property
    def planned_bytes(self) -> int:
        """Bytes this pool allocates: the sum over allocations (views share their storage)."""
        return sum(b.nbytes for b in self.allocations)

    def bytes_by_role(self) -> dict[str, int]:
        return dict(self._bytes_by_role)

    @cached_property
    def _bytes_by_role(self) -> tuple[tuple[str, int], ...]:
        totals: dict[str, int] = {}
        for buf in self.allocations:
            totals[buf.role.value] = totals.get(buf.role.value, 0) + buf.nbytes
        return tuple(totals.items())

    def prefixed(self, prefix: str) -> PoolLayout:
        """The same pool with every name (and view source) under ``prefix.``."""
        return PoolLayout(self.pool_class, _prefixed(self.buffers, prefix), self.attributes)


def _prefixed(buffers: tuple[BufferSpec, ...], prefix: str) -> tuple[BufferSpec, ...]:
    """``buffers`` with every name (and view source) under ``prefix.``: copies, not re-checked
    (each shape was checked when the buffer was built)."""

    def rename(buf: BufferSpec) -> BufferSpec:
        view = None
        if buf.view is not None:
            view = buf.view.of(f"{prefix}.{buf.view.source}")
        return buf.renamed(f"{prefix}.{buf.name}", view)

    return tuple(rename(b) for b in buffers)


def combine(
    pool_class: str,
    parts: dict[str, PoolLayout],
    *,
    extra: tuple[BufferSpec, ...] = (),
    attributes_first: tuple[tuple[str, int | str | None], ...] = (),
    prefixed: bool = False,
) -> PoolLayout:
    """A composite pool (``full.`` / ``swa.`` sub-pools) as one flat layout (checked once, as a
    whole); ``attributes_first`` go before the sub-pools' attributes. ``prefixed``: each part's
    buffers already carry its prefix (built under it), so they are taken as they are."""
    buffers: list[BufferSpec] = []
    attributes: list[tuple[str, int | str | None]] = list(attributes_first)
    for prefix, part in parts.items():
        buffers.extend(part.buffers if prefixed else _prefixed(part.buffers, prefix))
        attributes.append((f"{prefix}.pool_class", part.pool_class))
        attributes.extend((f"{prefix}.{k}", v) for k, v in part.attributes)
    buffers.extend(extra)
    return PoolLayout(pool_class, tuple(buffers), tuple(attributes))


@dataclass(frozen=True)
class KVPoolsLayout:
    """Everything one rank allocates: the request table, the token-to-KV pool, extra pools."""

    req_to_token: PoolLayout
    token_to_kv: PoolLayout
    extra: tuple[PoolLayout, ...] = ()

    @property
    def pools(self) -> tuple[PoolLayout, ...]:
        return (self.req_to_token, self.token_to_kv, *self.extra)

    @property
    def planned_bytes(self) -> int:
        return sum(p.planned_bytes for p in self.pools)
