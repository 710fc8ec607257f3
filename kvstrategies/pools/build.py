"""Allocate a :class:`PoolLayout` with torch: exactly its allocations, then its views."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.torch_import import import_torch
from .layout import BufferSpec, KVPoolsLayout, PoolLayout


class BuiltPool:
    """A pool's tensors by buffer name (views share storage with their allocation).

    The typed pools of :mod:`kvstrategies.pools.runtime` subclass this, so every build result
    keeps ``layout``, ``tensors``, ``pool[name]`` and ``allocated_bytes``.
    """

    def __init__(self, layout: PoolLayout, tensors: dict[str, Any]) -> None:
        self.layout = layout
        self.tensors = tensors

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.layout.pool_class}, {len(self.tensors)} tensors)"

    def __getitem__(self, name: str) -> Any:
        return self.tensors[name]

    @property
    def allocated_bytes(self) -> int:
        """Bytes of the allocations as torch reports them (``numel * element_size``)."""
        return sum(_nbytes(self.tensors[b.name]) for b in self.layout.allocations)

    def layer_buffers(self, attribute: str) -> list[Any]:
        """``[attribute[0], attribute[1], ...]``: the per-layer list SGLang keeps, in layer order."""
        out: list[Any] = []
        while f"{attribute}[{len(out)}]" in self.tensors:
            out.append(self.tensors[f"{attribute}[{len(out)}]"])
        return out


def _nbytes(tensor: Any) -> int:
    return int(tensor.numel()) * int(tensor.element_size())


def _allocate(spec: BufferSpec, device: str) -> Any:
    torch = import_torch()
    # a meta build allocates nothing: host-side tensors (req_generation) go to meta as well, so no
    # host memory grows with the plan's sizes (a what-if of 2**20 requests costs nothing)
    target = device if device == "meta" else (spec.device or device)
    return torch.zeros(spec.shape, dtype=spec.dtype.to_torch(), device=target)


def _view(spec: BufferSpec, tensors: dict[str, Any]) -> Any:
    assert spec.view is not None
    tensor = tensors[spec.view.source]
    if spec.view.window_axis is not None:  # overlapping sliding windows over one source axis
        strides = tensor.stride()
        window_stride = strides[spec.view.window_axis]
        return tensor.as_strided(spec.shape, (*strides[:2], window_stride, *strides[2:]))
    for index in spec.view.index:
        tensor = tensor[index]
    if spec.view.length is not None:
        tensor = tensor[: spec.view.length]
    return tensor


def build_pool(layout: PoolLayout, device: str) -> BuiltPool:
    """Allocate every allocation of ``layout`` (zero-filled) on ``device`` and take its views."""
    tensors: dict[str, Any] = {}
    for spec in layout.allocations:
        tensors[spec.name] = _allocate(spec, device)
    for spec in layout.buffers:
        if spec.is_view:
            tensors[spec.name] = _view(spec, tensors)
    return BuiltPool(layout, tensors)


@dataclass(frozen=True)
class KVPools:
    """One rank's pools: the request table, the token-to-KV pool, extra pools, and allocator.

    ``kvstrategies.build`` fills it with typed pools (:mod:`kvstrategies.pools.runtime`, all
    :class:`BuiltPool` subclasses) and the allocator of ``Plan.allocator_spec``; ``build_pools``
    alone gives plain :class:`BuiltPool` tensors and no allocator.
    """

    layout: KVPoolsLayout
    req_to_token_pool: BuiltPool
    token_to_kv_pool: BuiltPool
    extra: tuple[BuiltPool, ...] = ()
    allocator: Any = None

    @property
    def pools(self) -> tuple[BuiltPool, ...]:
        return (self.req_to_token_pool, self.token_to_kv_pool, *self.extra)

    @property
    def allocated_bytes(self) -> int:
        return sum(p.allocated_bytes for p in self.pools)


def build_pools(layout: KVPoolsLayout, device: str, allocator: Any = None) -> KVPools:
    return KVPools(
        layout=layout,
        req_to_token_pool=build_pool(layout.req_to_token, device),
        token_to_kv_pool=build_pool(layout.token_to_kv, device),
        extra=tuple(build_pool(p, device) for p in layout.extra),
        allocator=allocator,
    )
