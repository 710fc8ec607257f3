"""``HybridSWAGeometry``: the full / sliding-window layer split of a hybrid-SWA model.

Parsed by :mod:`kvstrategies.models.parsers.hybrid_swa` (the detection and window rules).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.validate import MAX_LAYERS, check_bool, check_float, check_int_tuple, check_opt_int
from ..errors import KVCacheConfigError
from .hf import MAX_CONFIG_INT

DEFAULT_SWA_FULL_TOKENS_RATIO = 0.8


@dataclass(frozen=True)
class HybridSWAGeometry:
    """The hybrid sliding-window split of one model (global layer ids, model_config.is_hybrid_swa_model,
    get_hybrid_layer_ids).

    ``sliding_window_size`` is the engine's window ``W`` (tokens a SWA layer still attends to),
    e.g. 127 for GPT-OSS (HF ``sliding_window = 128`` is inclusive), 8192 for Llama-4 (its
    ``attention_chunk_size``). ``is_compress_model``: the SWA pool gets its own KV heads and head
    dims (``swa_*`` of :class:`ModelGeometry`). DeepSeek-V4 (``is_deepseek_v4``) carries no id
    lists: its layer split is ``compress_ratios`` (its own strategy). ``mtp_local_layer_ids``:
    draft depths stored at SWA geometry with full capacity (HybridSWAPoolConfigurator.__init__ draft layers ``dSF``).
    ``draft_layer_ids``: a draft worker's own split when SGLang renames the draft's architecture.
    ``mla_scale_dims`` = ``(full D, full Dv, swa D, swa Dv)`` of the MXFP8 scale term of an MLA
    model (SGLang's HybridSWAPoolConfigurator._full_cell_bytes applies the MHA scale formula to MLA models too),
    None for MHA models.
    """

    full_attention_layer_ids: tuple[int, ...]
    swa_attention_layer_ids: tuple[int, ...]
    sliding_window_size: int | None
    is_compress_model: bool = False
    default_swa_full_tokens_ratio: float = DEFAULT_SWA_FULL_TOKENS_RATIO
    mtp_local_layer_ids: tuple[int, ...] | None = None
    is_deepseek_v4: bool = False
    mla_scale_dims: tuple[int, int, int, int] | None = None
    #: ``(full, swa)`` layer ids of the model SGLang loads for a draft worker when its draft
    #: architecture splits layers its own way (MiMo-V2 / Step-3.5 MTP: one SWA layer); None: the
    #: draft's layers are ``[0, D)`` of this split
    draft_layer_ids: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    def __post_init__(self) -> None:
        check_int_tuple(self.full_attention_layer_ids, "hybrid_swa.full_attention_layer_ids", maximum=MAX_LAYERS)
        check_int_tuple(self.swa_attention_layer_ids, "hybrid_swa.swa_attention_layer_ids", maximum=MAX_LAYERS)
        check_opt_int(self.sliding_window_size, "hybrid_swa.sliding_window_size", minimum=1, maximum=MAX_CONFIG_INT)
        check_float(self.default_swa_full_tokens_ratio, "hybrid_swa.default_swa_full_tokens_ratio", low=0.0, high=1.0)
        if self.mtp_local_layer_ids is not None:
            check_int_tuple(self.mtp_local_layer_ids, "hybrid_swa.mtp_local_layer_ids", maximum=MAX_LAYERS)
        if self.mla_scale_dims is not None:
            check_int_tuple(self.mla_scale_dims, "hybrid_swa.mla_scale_dims", maximum=MAX_CONFIG_INT)
        if self.draft_layer_ids is not None:
            if not isinstance(self.draft_layer_ids, tuple) or len(self.draft_layer_ids) != 2:
                raise KVCacheConfigError(
                    f"hybrid_swa.draft_layer_ids must be a (full_ids, swa_ids) pair of tuples, got "
                    f"{self.draft_layer_ids!r:.80}; give two tuples of layer ids or None"
                )
            check_int_tuple(self.draft_layer_ids[0], "hybrid_swa.draft_layer_ids[0]", maximum=MAX_LAYERS)
            check_int_tuple(self.draft_layer_ids[1], "hybrid_swa.draft_layer_ids[1]", maximum=MAX_LAYERS)
        check_bool(self.is_compress_model, "hybrid_swa.is_compress_model")
        check_bool(self.is_deepseek_v4, "hybrid_swa.is_deepseek_v4")

    def local_full_attention_layer_ids(self, start: int, end: int) -> tuple[int, ...]:
        """Global ids of the full-attention layers in the stage ``[start, end)``."""
        return tuple(i for i in self.full_attention_layer_ids if start <= i < end)

    def local_swa_attention_layer_ids(self, start: int, end: int) -> tuple[int, ...]:
        """Global ids of the sliding-window layers in the stage ``[start, end)``."""
        return tuple(i for i in self.swa_attention_layer_ids if start <= i < end)
