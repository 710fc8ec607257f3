"""The common part of every typed pool: tensors by name, layer ids, locations (KVCache.set_kv_buffer).

A typed pool *is* a :class:`~kvstrategies.pools.build.BuiltPool` (``layout``, ``tensors``,
``pool[name]``, ``allocated_bytes``) with the engine-facing read/write API on top. Layer ids
are global model layer ids; a plain pool uses buffer ``layer_id - start_layer``, a composite
pool maps ids through its layout attributes.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, replace
from typing import Any, NoReturn

import torch

from ... import kernels
from ...errors import KVCacheConfigError, UnsupportedConfigurationError
from ..build import BuiltPool
from ..layout import BufferSpec, PoolLayout

Attribute = int | str | None


@dataclass(frozen=True)
class KVWriteLoc:
    """Locations of one write: ``loc`` plus pre-translated sub-pool locations (KVCache.set_kv_buffer).

    ``swa_loc`` (SWA layers of an ``SWAKVPool``) and ``full_loc`` (``HybridLinearKVPool``) are
    sliced to ``len(loc)`` when longer. ``physical`` matters only to unified pools (out of scope).
    """

    loc: torch.Tensor
    swa_loc: torch.Tensor | None = None
    full_loc: torch.Tensor | None = None
    physical: bool = False

    def sub(self, which: torch.Tensor | None) -> torch.Tensor | None:
        """``which[:len(loc)]`` (or None)."""
        return None if which is None else which[: self.loc.shape[0]]


Loc = torch.Tensor | KVWriteLoc


def plain_loc(loc: Loc) -> torch.Tensor:
    """The bare location tensor of ``loc`` (anything but a tensor is refused: SGLang passes its
    allocator's location tensors)."""
    bare = loc.loc if isinstance(loc, KVWriteLoc) else loc
    if not isinstance(bare, torch.Tensor):
        raise KVCacheConfigError(
            f"loc must be a location tensor (from this pool's allocator), got {type(bare).__name__} {bare!r:.40}"
        )
    return bare


def check_layer_id(layer_id: object, pool_class: str) -> int:
    """``layer_id`` as an int: any integer (``int``, ``numpy.int64``, a one-element integer
    tensor), never a bool, a float or a string (SGLang's pools index per-layer lists with it)."""
    if not isinstance(layer_id, bool):
        try:
            return operator.index(layer_id)  # type: ignore[arg-type]
        except (TypeError, RuntimeError):
            pass
    raise KVCacheConfigError(
        f"layer_id must be an integer layer id of this {pool_class} (a global model layer id), got "
        f"{type(layer_id).__name__} {layer_id!r:.40}"
    )


def torch_dtype(dtype: Any) -> torch.dtype:
    """A ``torch.dtype`` from a torch dtype or a :class:`~kvstrategies.core.dtypes.DType`."""
    return dtype if isinstance(dtype, torch.dtype) else dtype.to_torch()


def logical_dtype(store: torch.dtype, kv_dtype: torch.dtype) -> torch.dtype:
    """A pool's logical dtype: its storage dtype, except uint8 storage holds ``kv_dtype`` (fp8) bytes."""
    if store != torch.uint8 or kv_dtype == torch.uint8:
        return store
    if kv_dtype.itemsize != 1 or not kv_dtype.is_floating_point:
        raise KVCacheConfigError(f"a uint8 KV buffer holds fp8 bytes, but the pool's KV dtype is {kv_dtype}")
    return kv_dtype


def sub_pool(built: BuiltPool, prefix: str) -> BuiltPool:
    """The ``prefix.`` part of a composite pool as a pool of its own (same tensors, names unprefixed).

    Its layout holds the stripped buffers and the ``prefix.*`` attributes (``pool_class`` from
    ``prefix.pool_class``); planned bytes therefore stay counted once, on the composite.
    """
    head = f"{prefix}."
    attrs = dict(built.layout.attributes)
    buffers = tuple(_strip(b, head) for b in built.layout.buffers if b.name.startswith(head))
    if not buffers and f"{head}pool_class" not in attrs:
        raise KVCacheConfigError(f"pool {built.layout.pool_class} has no sub-pool {prefix!r}")
    sub_attrs = tuple((k[len(head):], v) for k, v in built.layout.attributes if k.startswith(head))
    pool_class = str(attrs.get(f"{head}pool_class", prefix))
    layout = PoolLayout(pool_class, buffers, tuple((k, v) for k, v in sub_attrs if k != "pool_class"))
    tensors = {b.name[len(head):]: built.tensors[b.name] for b in built.layout.buffers if b.name.startswith(head)}
    return BuiltPool(layout, tensors)


def _strip(buf: BufferSpec, head: str) -> BufferSpec:
    view = buf.view
    if view is not None:

        source = view.source[len(head):] if view.source.startswith(head) else view.source
        view = replace(view, source=source)
    return BufferSpec(buf.name[len(head):], buf.shape, buf.dtype, buf.role, view, buf.device, buf.engine_facing)


class TypedPool(BuiltPool):
    """A built pool with typed access: attributes of its layout, layer-id mapping, bounds checks.

    ``use_triton`` is handed to every kernel (None: Triton on CUDA tensors, True: Triton or an
    error, needing ``TRITON_INTERPRET=1`` off CUDA; False: the torch reference).
    ``check_bounds`` validates locations against ``[0, rows)`` before a write (one host sync).
    """

    def __init__(
        self,
        built: BuiltPool,
        *,
        start_layer: int = 0,
        use_triton: bool | None = None,
        check_bounds: bool = True,
    ) -> None:
        super().__init__(built.layout, built.tensors)
        self.start_layer = start_layer
        self.use_triton = use_triton
        self.check_bounds = check_bounds

    # ---- layout facts --------------------------------------------------------------------------
    def attribute(self, name: str, default: Attribute = None, *, required: bool = True) -> Attribute:
        """A layout attribute (``size``, ``page_size``, ``layer_num``, ...)."""
        for key, value in self.layout.attributes:
            if key == name:
                return value
        if required:
            raise KVCacheConfigError(f"pool {self.layout.pool_class} has no attribute {name!r} in its layout")
        return default

    def int_attribute(self, name: str) -> int:
        value = self.attribute(name)
        if not isinstance(value, int):
            raise KVCacheConfigError(f"pool {self.layout.pool_class} attribute {name!r} is {value!r}, not an int")
        return value

    @property
    def size(self) -> int:
        """Usable token slots ``T`` (rows are ``T + P``)."""
        return self.int_attribute("size")

    @property
    def page_size(self) -> int:
        return self.int_attribute("page_size")

    @property
    def layer_num(self) -> int:
        return self.int_attribute("layer_num")

    @property
    def end_layer(self) -> int:
        return self.start_layer + self.layer_num

    # ---- layer ids -----------------------------------------------------------------------------
    def local_layer(self, layer_id: int) -> int:
        """``layer_id - start_layer``; a layer id that is not an integer, or outside
        ``[start_layer, end_layer)``, raises."""
        index = check_layer_id(layer_id, self.layout.pool_class) - self.start_layer
        if not 0 <= index < self.layer_num:
            raise KVCacheConfigError(
                f"layer_id {layer_id} is not held by this {self.layout.pool_class} (layers "
                f"[{self.start_layer}, {self.end_layer})); pass a global layer id of this stage"
            )
        return index

    # ---- locations -----------------------------------------------------------------------------
    def check_loc(self, loc: torch.Tensor, rows: int, what: str = "loc") -> None:
        """Locations must be 1-D integers in ``[0, rows)`` (KVCache.set_kv_buffer, bounds)."""
        if loc.is_floating_point() or loc.is_complex() or loc.dtype == torch.bool:
            raise KVCacheConfigError(f"{what} must be an int64 (or int32) tensor, got {loc.dtype}")
        if not self.check_bounds or loc.numel() == 0 or loc.device.type == "meta":
            return
        low, high = int(loc.min().item()), int(loc.max().item())
        if low < 0 or high >= rows:
            raise KVCacheConfigError(
                f"{what} holds locations in [{low}, {high}] but this {self.layout.pool_class} has rows [0, {rows}); "
                "pass locations from this pool's allocator"
            )


    def layer_target(self, layer_id: int, loc: Loc) -> tuple[int, torch.Tensor]:
        """``(local layer index, bare location tensor)`` of one write (layer checked first)."""
        return self.local_layer(layer_id), plain_loc(loc)


class TokenRowPool(TypedPool):
    """A typed pool of token-major per-layer buffers with ``T + P`` rows (MHA and MLA families).

    Subclasses set ``dtype`` (logical) and ``store_dtype`` (:meth:`init_dtypes`) and list the
    buffers :meth:`move_kv_cache` copies rows of in :meth:`move_buffers`.
    """

    dtype: torch.dtype
    store_dtype: torch.dtype

    def checked_layer_buffers(self, prefix: str, what: str) -> list[torch.Tensor]:
        """``layer_buffers(prefix)``, one per layer (else ``"{pool}: {n} {what} for {L} layers"``)."""
        buffers: list[torch.Tensor] = self.layer_buffers(prefix)
        if len(buffers) != self.layer_num:
            raise KVCacheConfigError(f"{self.layout.pool_class}: {len(buffers)} {what} for {self.layer_num} layers")
        return buffers

    def init_dtypes(self, first: list[torch.Tensor], kv_dtype: torch.dtype) -> None:
        """``store_dtype`` from the first buffer (uint8 for one-byte ``kv_dtype`` without one); ``dtype`` logical."""
        store = first[0].dtype if first else (torch.uint8 if kv_dtype.itemsize == 1 else kv_dtype)
        self.store_dtype = store
        self.dtype = logical_dtype(store, kv_dtype)

    @property
    def rows(self) -> int:
        """``T + P`` rows per buffer."""
        return self.size + self.page_size

    def _view(self, buf: torch.Tensor) -> torch.Tensor:
        return buf.view(self.dtype) if buf.dtype != self.dtype else buf

    def move_buffers(self) -> list[torch.Tensor]:
        """Token-major buffers :meth:`move_kv_cache` copies rows of."""
        return []

    def move_kv_cache(self, dst_loc: torch.Tensor, src_loc: torch.Tensor) -> None:
        """Copy rows ``src_loc[i] -> dst_loc[i]`` in every layer (MHATokenToKVPool.set_kv_buffer; no overlap)."""
        if dst_loc.numel() != src_loc.numel():
            raise KVCacheConfigError(f"move_kv_cache: {dst_loc.numel()} destinations for {src_loc.numel()} sources")
        self.check_loc(dst_loc, self.rows, "dst_loc")
        self.check_loc(src_loc, self.rows, "src_loc")
        kernels.move_kv_cache(self.move_buffers(), dst_loc, src_loc, use_triton=self.use_triton)
        self.move_extra(dst_loc, src_loc)

    def move_extra(self, dst_loc: torch.Tensor, src_loc: torch.Tensor) -> None:
        """Buffers that are not token-major (interleaved / native scales, DSA index keys) move here."""


class ReadOnlyKVPool(TypedPool):
    """A pool whose writes go through platform kernels this library does not reproduce.

    DeepSeek-V4 stores (DeepSeekV4TokenToKVPool: pre-quantized packs, fused norm/RoPE kernels,
    compressor states) and the Ascend NPU stores (memory_pool_npu set_kv_buffer: NPU kernels) are exposed
    read-only: every buffer by name (``pool[name]``, :meth:`buffer`), per-layer lists through
    :meth:`layer_buffers`; every write raises :class:`UnsupportedConfigurationError`.
    """

    def __init__(self, built: BuiltPool, *, section: str, start_layer: int = 0, **kwargs: Any) -> None:
        super().__init__(built, start_layer=start_layer, **kwargs)
        self.section = section
        self.full_to_swa_index_mapping: torch.Tensor | None = None

    def buffer(self, name: str) -> torch.Tensor:
        if name not in self.tensors:
            raise KVCacheConfigError(f"{self.layout.pool_class} has no buffer {name!r}")
        return self.tensors[name]  # type: ignore[no-any-return]

    def get_key_buffer(self, layer_id: int) -> torch.Tensor:
        """``k_buffer[layer_id - start_layer]`` where the pool has one (NPU pools)."""
        return self.buffer(f"k_buffer[{self.local_layer(layer_id)}]")

    def get_value_buffer(self, layer_id: int) -> torch.Tensor:
        return self.buffer(f"v_buffer[{self.local_layer(layer_id)}]")

    def register_mapping(self, mapping: torch.Tensor) -> None:
        """Keep the allocator's full-to-SWA mapping (DSV4 uses the SWA allocator)."""
        self.full_to_swa_index_mapping = mapping

    def _refuse(self, what: str) -> NoReturn:
        raise UnsupportedConfigurationError(
            f"{self.layout.pool_class}.{what} is not implemented: its store is specified in {self.section} "
            "only through platform kernels this library does not reproduce; the pool's buffers are read-only here"
        )

    def set_kv_buffer(self, *args: Any, **kwargs: Any) -> None:
        self._refuse("set_kv_buffer")

    def set_mla_kv_buffer(self, *args: Any, **kwargs: Any) -> None:
        self._refuse("set_mla_kv_buffer")

    def set_index_k_scale_buffer(self, *args: Any, **kwargs: Any) -> None:
        self._refuse("set_index_k_scale_buffer")

    def set_index_k_buffer(self, *args: Any, **kwargs: Any) -> None:
        self._refuse("set_index_k_buffer")

    def move_kv_cache(self, *args: Any, **kwargs: Any) -> None:
        self._refuse("move_kv_cache")
