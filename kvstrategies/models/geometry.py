"""``ModelGeometry``: what a model's config says about its KV cache, and nothing else.

One frozen value per model, parsed once from the HF ``config.json`` (see :mod:`.parse`).
Family-specific parts (DSA indexer, hybrid SWA layers, Mamba state, MiniMax sparse layers,
DeepSeek-V4 compression) are optional sub-values owned by their own modules.
"""

from __future__ import annotations

import enum
import importlib
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from ..core.dtypes import DType
from ..core.validate import MAX_LAYERS, check_bool, check_instance, check_int, check_opt_int, check_opt_str
from ..errors import KVCacheConfigError
from .hf import MAX_CONFIG_INT

if TYPE_CHECKING:  # the family geometries load with the first model of their family
    from .dsv4 import DSV4Geometry
    from .hybrid_swa import HybridSWAGeometry
    from .mamba import MambaGeometry
    from .minimax import MiniMaxSparseGeometry

#: family field -> (module, class) of its geometry, checked only when the field is set
_FAMILY_GEOMETRY = {
    "hybrid_swa": (".hybrid_swa", "HybridSWAGeometry"),
    "mamba": (".mamba", "MambaGeometry"),
    "minimax_sparse": (".minimax", "MiniMaxSparseGeometry"),
    "dsv4": (".dsv4", "DSV4Geometry"),
}


class AttentionArch(enum.Enum):
    MHA = "mha"  # MHA / GQA / MQA: per-head K and V rows
    MLA = "mla"  # multi-head latent attention: one compressed latent row per token


@dataclass(frozen=True)
class MLADims:
    """Latent-attention dims (ModelConfig._derive_model_shapes); ``swa_*`` differ only for Dots3 configs."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    swa_kv_lora_rank: int
    swa_qk_rope_head_dim: int

    def __post_init__(self) -> None:
        for item in fields(self):
            minimum = 1 if item.name.endswith("kv_lora_rank") else 0
            check_int(getattr(self, item.name), f"geometry.mla.{item.name}", minimum=minimum, maximum=MAX_CONFIG_INT)

    @property
    def latent_dim(self) -> int:
        """``kv_lora_rank + qk_rope_head_dim`` elements per token and layer (576 for DeepSeek)."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True)
class DSAGeometry:
    """DeepSeek sparse-attention indexer (model_config.is_deepseek_dsa).

    A layer "skips top-k" (reuses the previous layer's selection and stores no index keys of its
    own) by the first rule that applies: ``indexer_types``, the LongCat ``cli_factor``,
    ``index_topk_pattern``, else the frequency/offset rule.
    """

    index_head_dim: int
    index_topk: int
    index_kpool: int = 1
    indexer_types: tuple[str, ...] | None = None
    cli_factor: int = 1
    index_topk_pattern: str | None = None
    index_topk_freq: int = 1
    index_skip_topk_offset: int | None = None
    index_kpool_compress: bool = False  # HF ``index_kpool_compress``: per-request compress tails (DSATokenToKVPool)

    def __post_init__(self) -> None:
        for name in ("index_head_dim", "index_topk", "index_kpool", "cli_factor", "index_topk_freq"):
            check_int(getattr(self, name), f"geometry.dsa.{name}", minimum=1, maximum=MAX_CONFIG_INT)
        check_opt_int(self.index_skip_topk_offset, "geometry.dsa.index_skip_topk_offset", maximum=MAX_CONFIG_INT)
        if self.indexer_types is not None and (
            not isinstance(self.indexer_types, tuple) or not all(isinstance(t, str) for t in self.indexer_types)
        ):
            raise KVCacheConfigError(
                f"geometry.dsa.indexer_types must be a tuple of strings, got {self.indexer_types!r:.80}"
            )
        check_opt_str(self.index_topk_pattern, "geometry.dsa.index_topk_pattern")
        check_bool(self.index_kpool_compress, "geometry.dsa.index_kpool_compress")

    def skips_topk(self, layer: int) -> bool:
        """True when ``layer`` has no index-K buffer of its own (``dsa_layer_skips_topk``)."""
        if self.indexer_types is not None:
            return 0 <= layer < len(self.indexer_types) and self.indexer_types[layer] == "shared"
        if self.cli_factor > 1:
            return layer % self.cli_factor != 0
        if self.index_topk_pattern is not None:
            return layer < len(self.index_topk_pattern) and self.index_topk_pattern[layer] == "S"
        freq = self.index_topk_freq or 1
        if self.index_skip_topk_offset is not None:
            return max(layer - self.index_skip_topk_offset + 1, 0) % freq != 0
        return max(layer - 1, 0) % freq != 0

    @property
    def index_k_bytes_per_token(self) -> int:
        """``ceil_div(index_head_dim + index_head_dim // 128 * 4, index_kpool)``: uint8 key + fp32 scales."""
        return -(-self.raw_index_k_bytes_per_token // self.index_kpool)

    @property
    def raw_index_k_bytes_per_token(self) -> int:
        """``index_head_dim + index_head_dim // 128 * 4``: one token's key and scales, no kpool sharing."""
        return self.index_head_dim + (self.index_head_dim // 128) * 4


def _geometry_class(name: str) -> type:
    """The class a set ``ModelGeometry`` field holds (a family's module imported on first use)."""
    if name == "mla":
        return MLADims
    if name == "dsa":
        return DSAGeometry
    module, cls = _FAMILY_GEOMETRY[name]
    found: type = getattr(importlib.import_module(module, __package__), cls)
    return found


@dataclass(frozen=True)
class ModelGeometry:
    """KV-relevant facts of one model (global, before any parallel split).

    ``num_pp_layers`` is the layer count the pipeline split divides
    (``max(num_hidden_layers, num_attention_layers)``, sglang.srt.distributed.utils.get_pp_indices).
    """

    architectures: tuple[str, ...]
    model_type: str
    num_hidden_layers: int
    num_pp_layers: int
    total_num_kv_heads: int
    num_attention_heads: int
    head_dim: int
    v_head_dim: int
    context_len: int
    model_dtype: DType = DType.BFLOAT16
    attention_arch: AttentionArch = AttentionArch.MHA
    mla: MLADims | None = None
    swa_head_dim: int | None = None
    swa_v_head_dim: int | None = None
    swa_total_num_kv_heads: int | None = None
    loop_num: int = 1
    num_nextn_predict_layers: int | None = None
    #: layers SGLang's draft worker of this model holds whatever the config says (its draft
    #: architecture rename: Qwen3-MoE / MiMo-V2 MTP heads hold 1); None: no such rename
    draft_num_layers: int | None = None
    checkpoint_kv_fp8: bool = False
    quantization: str | None = None
    is_multimodal: bool = False
    dsa: DSAGeometry | None = None
    hybrid_swa: HybridSWAGeometry | None = None
    mamba: MambaGeometry | None = None
    minimax_sparse: MiniMaxSparseGeometry | None = None
    dsv4: DSV4Geometry | None = None
    #: the text config's ``sliding_window`` as given (None when absent or ``use_sliding_window`` is
    #: false): vLLM builds its sliding-window layers with it; SGLang's window is ``hybrid_swa``'s
    config_sliding_window: int | None = None
    #: routed experts as vLLM counts them (``ModelArchConfigConvertor.get_num_experts``: the first of
    #: ``num_experts``, ``moe_num_experts``, ``n_routed_experts``, ``num_local_experts``); 0 for a dense model
    num_experts: int = 0
    #: the context length under transformers 4 where it differs (a config whose rope parameters transformers 5
    #: keeps per attention type keeps its top-level factor there: Gemma 3 131,072 -> 1,048,576); None: the same
    context_len_transformers4: int | None = None

    def __post_init__(self) -> None:
        """Types and ranges of the scalar fields (a hand-built geometry fails here, not mid-plan)."""
        fix = "parse the geometry from a config with kvstrategies.parse_hf_config"
        if not isinstance(self.architectures, tuple) or not all(isinstance(a, str) for a in self.architectures):
            raise KVCacheConfigError(
                f"geometry.architectures must be a tuple of strings, got {self.architectures!r:.80}"
            )
        if not isinstance(self.model_type, str):
            raise KVCacheConfigError(f"geometry.model_type must be a string, got {self.model_type!r:.80}")
        check_int(self.num_hidden_layers, "geometry.num_hidden_layers", minimum=1, maximum=MAX_LAYERS, fix=fix)
        check_int(self.num_pp_layers, "geometry.num_pp_layers", minimum=1, maximum=2 * MAX_LAYERS, fix=fix)
        check_int(self.loop_num, "geometry.loop_num", minimum=1, maximum=MAX_LAYERS // self.num_hidden_layers, fix=fix)
        for name in ("total_num_kv_heads", "num_attention_heads", "context_len"):
            check_int(getattr(self, name), f"geometry.{name}", minimum=1, maximum=MAX_CONFIG_INT, fix=fix)
        for name in ("head_dim", "v_head_dim"):  # 0 for MLA models (SGLang's dummy head_dim is never read)
            check_int(getattr(self, name), f"geometry.{name}", minimum=0, maximum=MAX_CONFIG_INT, fix=fix)
        for name in ("swa_head_dim", "swa_v_head_dim", "swa_total_num_kv_heads"):
            check_opt_int(getattr(self, name), f"geometry.{name}", minimum=1, maximum=MAX_CONFIG_INT, fix=fix)
        check_opt_int(self.num_nextn_predict_layers, "geometry.num_nextn_predict_layers", maximum=MAX_LAYERS, fix=fix)
        check_opt_int(self.config_sliding_window, "geometry.config_sliding_window", minimum=1, maximum=MAX_CONFIG_INT)
        check_opt_int(self.context_len_transformers4, "geometry.context_len_transformers4", minimum=1,
                      maximum=MAX_CONFIG_INT, fix=fix)  # fmt: skip
        check_opt_int(self.draft_num_layers, "geometry.draft_num_layers", minimum=1, maximum=MAX_LAYERS, fix=fix)
        check_instance(self.model_dtype, DType, "geometry.model_dtype", "use DType.from_name(name)")
        check_instance(self.attention_arch, AttentionArch, "geometry.attention_arch", fix)
        if self.attention_arch is AttentionArch.MLA and not isinstance(self.mla, MLADims):
            raise KVCacheConfigError(f"an MLA geometry needs its MLADims (geometry.mla), got {self.mla!r:.80}; {fix}")
        for name in ("mla", "dsa", "hybrid_swa", "mamba", "minimax_sparse", "dsv4"):
            if getattr(self, name) is not None:
                check_instance(getattr(self, name), _geometry_class(name), f"geometry.{name}", fix)
        for name in ("checkpoint_kv_fp8", "is_multimodal"):
            check_bool(getattr(self, name), f"geometry.{name}")
        check_opt_str(self.quantization, "geometry.quantization")

    @property
    def use_mla(self) -> bool:
        return self.attention_arch is AttentionArch.MLA

    @property
    def is_dsa(self) -> bool:
        return self.dsa is not None

    @property
    def family(self) -> str:
        """A short label for listings: dsv4, hybrid-swa, hybrid-linear, dsa, mla, minimax-sparse, mha."""
        if self.dsv4 is not None:
            return "dsv4"
        if self.hybrid_swa is not None:
            return "hybrid-swa"
        if self.mamba is not None:
            return "hybrid-linear"
        if self.dsa is not None:
            return "dsa"
        if self.use_mla:
            return "mla"
        if self.minimax_sparse is not None:
            return "minimax-sparse"
        return "mha"

    def num_kv_heads(self, attn_tp_size: int, dcp_size: int = 1) -> int:
        """KV heads on one rank: ``max(1, H_total // (tp // dcp))`` (ModelConfig.get_num_kv_heads).

        With ``tp // dcp`` above ``H_total`` each rank keeps one replicated head (8 heads at
        TP16 -> 1, not 0.5); DCP replicates KV across its group, so it *raises* the count.
        """
        kv_tp = max(1, attn_tp_size // dcp_size)
        return max(1, self.total_num_kv_heads // kv_tp)

    def num_swa_kv_heads(self, attn_tp_size: int) -> int:
        """Sliding-window KV heads per rank; falls back to :meth:`num_kv_heads` without DCP."""
        if self.swa_total_num_kv_heads is not None:
            return max(1, self.swa_total_num_kv_heads // attn_tp_size)
        return self.num_kv_heads(attn_tp_size)
