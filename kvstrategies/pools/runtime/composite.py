"""Composite pools that route a global layer id to a dense sub-pool (the ``set_kv_buffer`` of SGLang's
HybridLinearKVPool, SWAKVPool and MiniMaxSparseKVPool).

* ``SWAKVPool``: full and sliding-window sub-pools; ``layers_mapping[g] = (dense, is_swa)``.
* ``HybridLinearKVPool``: one full-attention sub-pool over the softmax layers of a Mamba hybrid.
* ``MiniMaxSparseKVPool``: main K/V plus the lightning indexer's K/V and K-only pools.

Sub-pools are typed pools of their own over the composite's tensors (``full.k_buffer[0]`` is the
full sub-pool's ``k_buffer[0]``), built dense (``start_layer = 0``) as in SGLang.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from ...errors import KVCacheConfigError, UnsupportedConfigurationError
from ...kernels.reference import Scale
from ...models.minimax import MiniMaxLocalLayers
from ..build import BuiltPool
from .base import KVWriteLoc, Loc, TypedPool, check_layer_id, plain_loc
from .mamba import MambaPool
from .mha import MHATokenToKOnlyPool, MHATokenToKVPool
from .mla import MLATokenToKVPool

_SLOT = re.compile(r"^(full|swa)\[(\d+)\]$")
_MAPPED = re.compile(r"^(\w+)\[(\d+)\]$")


def _mapped_ids(layout_attributes: tuple[tuple[str, Any], ...], name: str) -> dict[int, Any]:
    """``{g: value}`` of the attributes ``name[g] = value``."""
    out: dict[int, Any] = {}
    for key, value in layout_attributes:
        match = _MAPPED.match(key)
        if match and match.group(1) == name:
            out[int(match.group(2))] = value
    return out


class SWAKVPool(TypedPool):
    """Hybrid sliding-window pool (SWAKVPool and its set_kv_buffer).

    ``set_kv_buffer(layer, loc, k, v, k_scale, v_scale)``: full layers write ``loc``; SWA layers
    **must** get ``KVWriteLoc(loc, swa_loc=...)`` (SGLang asserts; the pool never translates
    inside a write). :meth:`write_loc` builds it once per batch from the allocator's
    ``full_to_swa_index_mapping`` (registered on this pool), as the attention backend does.
    MLA sub-pools get no scales. ``move_kv_cache(tgt, src)`` moves ``tgt/src`` in the full pool
    and ``mapping[tgt]/mapping[src]`` in the SWA pool.
    """

    def __init__(
        self, built: BuiltPool, *, full_kv_pool: TypedPool, swa_kv_pool: TypedPool, **kwargs: Any
    ) -> None:
        super().__init__(built, **kwargs)
        self.full_kv_pool: Any = full_kv_pool
        self.swa_kv_pool: Any = swa_kv_pool
        self.layers_mapping: dict[int, tuple[int, bool]] = {}
        for layer, where in _mapped_ids(self.layout.attributes, "layers_mapping").items():
            match = _SLOT.match(str(where))
            if match is None:
                raise KVCacheConfigError(f"SWAKVPool layers_mapping[{layer}] = {where!r} is not full[i] / swa[i]")
            self.layers_mapping[layer] = (int(match.group(2)), match.group(1) == "swa")
        self.full_to_swa_index_mapping: torch.Tensor | None = self.tensors.get("full_to_swa_index_mapping")

    @property
    def size_swa(self) -> int:
        return self.int_attribute("size_swa")

    def register_mapping(self, mapping: torch.Tensor) -> None:
        """The allocator's ``full_to_swa_index_mapping`` (SWATokenToKVPoolAllocator)."""
        self.full_to_swa_index_mapping = mapping

    def translate_loc_from_full_to_swa(self, loc: torch.Tensor) -> torch.Tensor:
        """``mapping[loc]``: the SWA peer of each full location (0: none; -1 for -1)."""
        if self.full_to_swa_index_mapping is None:
            raise KVCacheConfigError("SWAKVPool has no full_to_swa_index_mapping; build it with its allocator")
        return self.full_to_swa_index_mapping[loc.to(torch.int64)]

    def write_loc(self, loc: torch.Tensor) -> KVWriteLoc:
        """``KVWriteLoc(loc, swa_loc=mapping[loc])`` for a batch's writes."""
        return KVWriteLoc(loc, swa_loc=self.translate_loc_from_full_to_swa(loc))

    def route(self, layer_id: int) -> tuple[Any, int, bool]:
        """``(sub-pool, dense index, is_swa)`` of a global layer id."""
        layer_id = check_layer_id(layer_id, "SWAKVPool")
        if layer_id not in self.layers_mapping:
            raise KVCacheConfigError(
                f"layer_id {layer_id} is neither a full nor an SWA layer of this SWAKVPool "
                f"(layers {sorted(self.layers_mapping)})"
            )
        dense, is_swa = self.layers_mapping[layer_id]
        return (self.swa_kv_pool if is_swa else self.full_kv_pool), dense, is_swa

    def _loc(self, loc: Loc, is_swa: bool, layer_id: int) -> torch.Tensor:
        if not is_swa:
            return plain_loc(loc)
        swa = loc.sub(loc.swa_loc) if isinstance(loc, KVWriteLoc) else None
        if swa is None:
            raise KVCacheConfigError(
                f"layer {layer_id} is a sliding-window layer: pass KVWriteLoc(loc, swa_loc=...) "
                "(pool.write_loc(loc) translates through the full-to-SWA mapping), SWAKVPool.set_kv_buffer"
            )
        return swa

    def set_kv_buffer(
        self,
        layer_id: int,
        loc: Loc,
        cache_k: torch.Tensor,
        cache_v: torch.Tensor,
        k_scale: Scale | None = None,
        v_scale: Scale | None = None,
    ) -> None:
        pool, dense, is_swa = self.route(layer_id)
        where = self._loc(loc, is_swa, layer_id)
        if isinstance(pool, MLATokenToKVPool):
            pool.set_kv_buffer(dense, where, cache_k, cache_v)
        else:
            pool.set_kv_buffer(dense, where, cache_k, cache_v, k_scale, v_scale)

    def set_mla_kv_buffer(
        self, layer_id: int, loc: Loc, cache_k_nope: torch.Tensor, cache_k_rope: torch.Tensor | None = None
    ) -> None:
        pool, dense, is_swa = self.route(layer_id)
        if not isinstance(pool, MLATokenToKVPool):
            raise UnsupportedConfigurationError(
                f"set_mla_kv_buffer on a {type(pool).__name__} sub-pool (SWAKVPool.set_kv_buffer: MLA sub-pools only)"
            )
        pool.set_mla_kv_buffer(dense, self._loc(loc, is_swa, layer_id), cache_k_nope, cache_k_rope)

    def get_key_buffer(self, layer_id: int) -> torch.Tensor:
        pool, dense, _ = self.route(layer_id)
        return pool.get_key_buffer(dense)  # type: ignore[no-any-return]

    def get_value_buffer(self, layer_id: int) -> torch.Tensor:
        pool, dense, _ = self.route(layer_id)
        return pool.get_value_buffer(dense)  # type: ignore[no-any-return]

    def get_kv_buffer(self, layer_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.get_key_buffer(layer_id), self.get_value_buffer(layer_id)

    def move_kv_cache(self, dst_loc: torch.Tensor, src_loc: torch.Tensor) -> None:
        self.full_kv_pool.move_kv_cache(dst_loc, src_loc)
        self.swa_kv_pool.move_kv_cache(
            self.translate_loc_from_full_to_swa(dst_loc), self.translate_loc_from_full_to_swa(src_loc)
        )


class HybridLinearKVPool(TypedPool):
    """Full-attention KV of a Mamba hybrid (HybridLinearKVPool and its set_kv_buffer).

    Global layer ids map to the dense sub-pool through ``full_attention_layer_id_mapping``
    (unknown id: :class:`KVCacheConfigError`, a ``ValueError`` like SGLang's); a
    ``KVWriteLoc.full_loc``, when given, replaces ``loc``. The Mamba state is not written through
    this pool: :attr:`mamba_pool` exposes it (HybridLinearKVPool.set_kv_buffer).
    """

    def __init__(self, built: BuiltPool, *, full_kv_pool: TypedPool, mamba_pool: MambaPool | None = None,
                 **kwargs: Any) -> None:
        super().__init__(built, **kwargs)
        self.full_kv_pool: Any = full_kv_pool
        self.mamba_pool = mamba_pool
        mapped = _mapped_ids(self.layout.attributes, "full_attention_layer_id_mapping")
        self.full_attention_layer_id_mapping: dict[int, int] = {layer: int(index) for layer, index in mapped.items()}

    @property
    def size(self) -> int:
        return self.full_kv_pool.size  # type: ignore[no-any-return]

    @property
    def page_size(self) -> int:
        return self.full_kv_pool.page_size  # type: ignore[no-any-return]

    def dense_layer(self, layer_id: int) -> int:
        if layer_id not in self.full_attention_layer_id_mapping:
            raise KVCacheConfigError(
                f"layer_id {layer_id} is not a full-attention layer of this HybridLinearKVPool "
                f"(full layers {sorted(self.full_attention_layer_id_mapping)})"
            )
        return self.full_attention_layer_id_mapping[layer_id]

    @staticmethod
    def _loc(loc: Loc) -> torch.Tensor:
        if isinstance(loc, KVWriteLoc):
            full = loc.sub(loc.full_loc)
            return full if full is not None else loc.loc
        return loc

    def set_kv_buffer(
        self,
        layer_id: int,
        loc: Loc,
        cache_k: torch.Tensor,
        cache_v: torch.Tensor,
        k_scale: Scale | None = None,
        v_scale: Scale | None = None,
    ) -> None:
        """SGLang's default scales are 1.0 (a division by 1.0 changes nothing); None here."""
        self.full_kv_pool.set_kv_buffer(self.dense_layer(layer_id), self._loc(loc), cache_k, cache_v, k_scale, v_scale)

    def set_mla_kv_buffer(
        self, layer_id: int, loc: Loc, cache_k_nope: torch.Tensor, cache_k_rope: torch.Tensor | None = None
    ) -> None:
        if not isinstance(self.full_kv_pool, MLATokenToKVPool):
            raise UnsupportedConfigurationError(
                "set_mla_kv_buffer needs an MLA full-attention sub-pool (HybridLinearKVPool.set_kv_buffer)"
            )
        self.full_kv_pool.set_mla_kv_buffer(self.dense_layer(layer_id), self._loc(loc), cache_k_nope, cache_k_rope)

    def set_index_k_scale_buffer(
        self, layer_id: int, loc: Loc, index_k: torch.Tensor, index_k_scale: torch.Tensor
    ) -> None:
        setter = getattr(self.full_kv_pool, "set_index_k_scale_buffer", None)
        if setter is None:
            raise UnsupportedConfigurationError("set_index_k_scale_buffer needs a DSA full-attention sub-pool")
        setter(self.dense_layer(layer_id), self._loc(loc), index_k, index_k_scale)

    def get_key_buffer(self, layer_id: int) -> torch.Tensor:
        return self.full_kv_pool.get_key_buffer(self.dense_layer(layer_id))  # type: ignore[no-any-return]

    def get_value_buffer(self, layer_id: int) -> torch.Tensor:
        return self.full_kv_pool.get_value_buffer(self.dense_layer(layer_id))  # type: ignore[no-any-return]

    def get_kv_buffer(self, layer_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.get_key_buffer(layer_id), self.get_value_buffer(layer_id)

    def move_kv_cache(self, dst_loc: torch.Tensor, src_loc: torch.Tensor) -> None:
        self.full_kv_pool.move_kv_cache(dst_loc, src_loc)


class MiniMaxSparseKVPool(TypedPool):
    """MiniMax-M3 sparse attention (MiniMaxSparseKVPool and its set_kv_buffer).

    ``set_kv_buffer``: the main MHA pool at ``layer_id - start_layer``. ``set_index_kv_buffer``:
    the index K/V pool at the layer's dense index among K/V-indexed sparse layers;
    ``set_index_k_buffer``: the K-only pool (plain indexing, location 0 written); other layers
    raise :class:`KVCacheConfigError`. The fused main+index store is the same as the separate
    stores. ``move_kv_cache`` is not supported (SGLang raises ``NotImplementedError``).
    """

    def __init__(
        self,
        built: BuiltPool,
        *,
        main_pool: MHATokenToKVPool,
        index_kv_pool: MHATokenToKVPool | None,
        index_k_pool: MHATokenToKOnlyPool | None,
        layers: MiniMaxLocalLayers,
        **kwargs: Any,
    ) -> None:
        super().__init__(built, **kwargs)
        self.main_pool = main_pool
        self.index_kv_pool = index_kv_pool
        self.index_k_pool = index_k_pool
        self.kv_sparse_index = {g: i for i, g in enumerate(layers.kv_sparse)}
        self.k_only_index = {g: i for i, g in enumerate(layers.k_only)}

    @property
    def size(self) -> int:
        return self.main_pool.size

    @property
    def page_size(self) -> int:
        return self.main_pool.page_size

    def set_kv_buffer(
        self,
        layer_id: int,
        loc: Loc,
        cache_k: torch.Tensor,
        cache_v: torch.Tensor,
        k_scale: Scale | None = None,
        v_scale: Scale | None = None,
    ) -> None:
        self.main_pool.set_kv_buffer(layer_id, loc, cache_k, cache_v, k_scale, v_scale)

    def get_key_buffer(self, layer_id: int) -> torch.Tensor:
        return self.main_pool.get_key_buffer(layer_id)

    def get_value_buffer(self, layer_id: int) -> torch.Tensor:
        return self.main_pool.get_value_buffer(layer_id)

    def get_kv_buffer(self, layer_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.main_pool.get_kv_buffer(layer_id)

    def _dense(self, table: dict[int, int], layer_id: int, what: str) -> int:
        if layer_id not in table:
            raise KVCacheConfigError(f"layer_id {layer_id} has no {what} (layers {sorted(table)})")
        return table[layer_id]

    def set_index_kv_buffer(
        self,
        layer_id: int,
        loc: Loc,
        index_k: torch.Tensor,
        index_v: torch.Tensor,
        k_scale: Scale | None = None,
        v_scale: Scale | None = None,
    ) -> None:
        dense = self._dense(self.kv_sparse_index, layer_id, "index K/V cache")
        assert self.index_kv_pool is not None
        self.index_kv_pool.set_kv_buffer(dense, loc, index_k, index_v, k_scale, v_scale)

    def set_index_k_buffer(self, layer_id: int, loc: Loc, index_k: torch.Tensor, k_scale: Scale | None = None) -> None:
        dense = self._dense(self.k_only_index, layer_id, "K-only index cache")
        assert self.index_k_pool is not None
        self.index_k_pool.set_k_buffer(dense, loc, index_k, k_scale)

    def get_index_k_buffer(self, layer_id: int) -> torch.Tensor:
        """The indexer keys of a sparse layer (K/V-indexed or K-only)."""
        if layer_id in self.kv_sparse_index and self.index_kv_pool is not None:
            return self.index_kv_pool.get_key_buffer(self.kv_sparse_index[layer_id])
        dense = self._dense(self.k_only_index, layer_id, "index cache")
        assert self.index_k_pool is not None
        return self.index_k_pool.get_key_buffer(dense)

    def get_index_v_buffer(self, layer_id: int) -> torch.Tensor:
        dense = self._dense(self.kv_sparse_index, layer_id, "index V cache")
        assert self.index_kv_pool is not None
        return self.index_kv_pool.get_value_buffer(dense)

    def move_kv_cache(self, dst_loc: torch.Tensor, src_loc: torch.Tensor) -> None:
        raise UnsupportedConfigurationError(
            "MiniMaxSparseKVPool.move_kv_cache is not supported (as in SGLang's MiniMaxSparseKVPool)"
        )
