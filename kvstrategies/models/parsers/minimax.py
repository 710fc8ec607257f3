"""Family parser: MiniMax-M3 sparse layers (values and rules in :mod:`kvstrategies.models.minimax`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ...errors import KVCacheConfigError
from ..architectures import (
    any_row,
)
from ..geometry import ModelGeometry
from ..hf import ConfigDict, get_int, int_list


def _sparse_config(root: ConfigDict, text: ConfigDict) -> Mapping[str, object]:
    cfg = text.get("sparse_attention_config") or root.get("sparse_attention_config")
    if not isinstance(cfg, Mapping):
        raise KVCacheConfigError(
            "a MiniMax-M3 sparse config needs a 'sparse_attention_config' object (in text_config or the "
            f"root) with 'sparse_attention_freq' and 'sparse_index_dim'; got {cfg!r}"
        )
    return cfg


def parse_minimax_sparse(root: ConfigDict, text: ConfigDict, geometry: ModelGeometry) -> ModelGeometry:
    """Attach :class:`MiniMaxSparseGeometry` to a MiniMax-M3 sparse model (ModelConfig's MiniMax sparse layer ids)."""
    if not any_row(geometry.architectures, lambda r: r.minimax_sparse):
        return geometry
    from ..minimax import MiniMaxSparseGeometry  # the family's values: only for a MiniMax-M3 sparse config
    cfg = _sparse_config(root, text)
    freq = int_list(cfg, "sparse_attention_freq")
    if freq is None:
        raise KVCacheConfigError(
            "sparse_attention_config.sparse_attention_freq is missing; it says which layers are "
            "dense (0) and sparse (non-zero)"
        )
    layers = geometry.num_hidden_layers
    if len(freq) < layers:
        raise KVCacheConfigError(
            f"sparse_attention_config.sparse_attention_freq has {len(freq)} entries but the model has "
            f"{layers} hidden layers; give one entry per layer"
        )
    disable = int_list(cfg, "sparse_disable_index_value") or ()
    index_dim = get_int(cfg, "sparse_index_dim", minimum=1)
    sparse_geometry = MiniMaxSparseGeometry(
        dense_layer_ids=tuple(i for i in range(layers) if freq[i] == 0),
        sparse_layer_ids=tuple(i for i in range(layers) if freq[i] != 0),
        k_only_layer_ids=tuple(i for i, flag in enumerate(disable) if flag != 0),
        sparse_index_dim=index_dim,
    )
    return replace(geometry, minimax_sparse=sparse_geometry)
