"""DeepSeek-V4 compressed attention geometry (ModelConfig._derive_model_shapes, DSV4PoolConfigurator.__init__;
DeepSeekV4TokenToKVPool).

DeepSeek-V4 is an MHA-arch model (not MLA) whose every layer keeps a sliding-window latent
cache; a layer's ``compress_ratios`` entry adds a compressed cache: 0 = SWA only, 4 = one
latent row per 4 tokens plus a lightning-indexer key, 128 = one row per 128 tokens (V4.1
checkpoints add ratios 1 and 2, shared through ``kv_source_layer_ids``).
The config's list has ``num_hidden_layers + 1`` entries: the last one belongs to the NextN
(MTP) layer, i.e. to the draft, and pipeline stages split only ``num_hidden_layers``.

Fields absent from the published V4-Flash/-Pro configs take SGLang's values:
``qk_nope_head_dim = head_dim - qk_rope_head_dim`` (448), ``kv_lora_rank`` 512,
``v_head_dim`` 512 (configs README).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.validate import MAX_LAYERS, check_int, check_int_tuple
from ..errors import KVCacheConfigError
from .hf import MAX_CONFIG_INT

#: every compression ratio SGLang 0.5.23 knows (``collect_sources_by_ratio``)
KNOWN_RATIOS = frozenset({0, 1, 2, 4, 128})


@dataclass(frozen=True)
class DSV4Geometry:
    """The compressed-attention facts of one DeepSeek-V4 model (global layer ids).

    ``window_size`` is the config's ``sliding_window`` unchanged (128; SGLang does not
    subtract one here, model_config.is_hybrid_swa_model, get_hybrid_layer_ids).
    """

    compress_ratios: tuple[int, ...]
    window_size: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    index_head_dim: int
    kv_lora_rank: int = 512
    v_head_dim: int = 512
    kv_source_layer_ids: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        check_int_tuple(self.compress_ratios, "dsv4.compress_ratios", maximum=128)
        unknown = sorted({r for r in self.compress_ratios if r not in KNOWN_RATIOS})
        if unknown:
            raise KVCacheConfigError(f"dsv4.compress_ratios holds {unknown}; SGLang accepts {sorted(KNOWN_RATIOS)}")
        for name in ("window_size", "qk_nope_head_dim", "index_head_dim", "kv_lora_rank", "v_head_dim"):
            check_int(getattr(self, name), f"dsv4.{name}", minimum=1, maximum=MAX_CONFIG_INT)
        check_int(self.qk_rope_head_dim, "dsv4.qk_rope_head_dim", maximum=MAX_CONFIG_INT)
        if self.kv_source_layer_ids is not None:
            check_int_tuple(self.kv_source_layer_ids, "dsv4.kv_source_layer_ids", maximum=MAX_LAYERS)

    @property
    def head_dim(self) -> int:
        """Attention head dim ``nope + rope`` (512): the compress-state row unit."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def stage_ratios(self, start: int, end: int) -> tuple[int, ...]:
        """``compress_ratios[start:end]``: one entry per layer of the stage, ratio-0 layers included."""
        return self.compress_ratios[start:end]
