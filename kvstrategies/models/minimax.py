"""``MiniMaxSparseGeometry``: MiniMax-M3 block-sparse attention layers (ModelConfig's MiniMax sparse layer ids).

A MiniMax-M3 sparse model (architecture ``MiniMaxM3SparseForCausalLM`` or
``MiniMaxM3SparseForConditionalGeneration``) mixes *dense* attention layers with *sparse* ones.
Every layer keeps its K/V in one MHA pool; a sparse layer also keeps its lightning-indexer keys
(``sparse_index_dim`` wide, one head), and, unless the layer is in the "disable index value"
list, the indexer's values too. From ``sparse_attention_config`` (in ``text_config`` or the root):

* dense layer ids: ``sparse_attention_freq[i] == 0``; sparse: ``!= 0``;
* K-only indexer layers: sparse layers with ``sparse_disable_index_value[i] != 0`` (empty if absent);
* ``sparse_index_dim``: the indexer head dim.

A decision of this library (SGLang does not check it): the ``sparse_attention_freq`` list is required and must cover
every hidden layer (a shorter list would leave layers in neither set, which SGLang sizes as no KV but
still addresses in the main pool); entries past ``num_hidden_layers`` (MTP layers) are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.validate import MAX_LAYERS, check_int, check_int_tuple
from .hf import MAX_CONFIG_INT


@dataclass(frozen=True)
class MiniMaxLocalLayers:
    """One stage's layer sets (global ids inside ``[start, end)``)."""

    dense: tuple[int, ...]
    sparse: tuple[int, ...]
    k_only: tuple[int, ...]  # sparse layers whose indexer keeps K only

    @property
    def kv_sparse(self) -> tuple[int, ...]:
        """Sparse layers whose indexer keeps both K and V."""
        k_only = set(self.k_only)
        return tuple(layer for layer in self.sparse if layer not in k_only)

    @property
    def num_layers(self) -> int:
        """Layers of the main K/V pool (dense + sparse)."""
        return len(self.dense) + len(self.sparse)


@dataclass(frozen=True)
class MiniMaxSparseGeometry:
    """Model-wide MiniMax-M3 sparse layer sets (global ids) and the indexer head dim."""

    dense_layer_ids: tuple[int, ...]
    sparse_layer_ids: tuple[int, ...]
    k_only_layer_ids: tuple[int, ...]  # every id flagged in sparse_disable_index_value
    sparse_index_dim: int

    def __post_init__(self) -> None:
        for name in ("dense_layer_ids", "sparse_layer_ids", "k_only_layer_ids"):
            check_int_tuple(getattr(self, name), f"minimax_sparse.{name}", maximum=MAX_LAYERS)
        check_int(self.sparse_index_dim, "minimax_sparse.sparse_index_dim", minimum=1, maximum=MAX_CONFIG_INT)

    def local(self, start: int, end: int) -> MiniMaxLocalLayers:
        """The layer sets of the stage ``[start, end)``; K-only = local sparse layers in the list."""
        flagged = set(self.k_only_layer_ids)
        dense = tuple(i for i in self.dense_layer_ids if start <= i < end)
        sparse = tuple(i for i in self.sparse_layer_ids if start <= i < end)
        return MiniMaxLocalLayers(dense, sparse, tuple(i for i in sparse if i in flagged))
