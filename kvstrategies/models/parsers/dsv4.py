"""Family parser: DeepSeek-V4 compressed attention (values in :mod:`kvstrategies.models.dsv4`)."""

from __future__ import annotations

from dataclasses import replace

from ...errors import KVCacheConfigError
from ..architectures import (
    any_row,
)
from ..geometry import AttentionArch, ModelGeometry
from ..hf import ConfigDict, get_int, get_opt_int, int_list


def parse_dsv4(root: ConfigDict, text: ConfigDict, geometry: ModelGeometry) -> ModelGeometry:
    """Attach :class:`DSV4Geometry` to a DeepSeek-V4 family config; others pass through.

    The base parse already makes it MHA (the architecture is not in the MLA list) with
    ``num_pp_layers = num_hidden_layers``; this keeps both and checks them.
    """
    if not any_row(geometry.architectures, lambda r: r.dsv4):
        return geometry
    from ..dsv4 import KNOWN_RATIOS, DSV4Geometry  # the family's values: only for a DeepSeek-V4 config
    ratios = int_list(text, "compress_ratios")
    if ratios is None:
        raise KVCacheConfigError(
            "DeepSeek-V4 config has no 'compress_ratios'; add the per-layer list (0, 4 or 128 per layer)"
        )
    if len(ratios) < geometry.num_hidden_layers:
        raise KVCacheConfigError(
            f"DeepSeek-V4 'compress_ratios' has {len(ratios)} entries for num_hidden_layers "
            f"{geometry.num_hidden_layers}; it needs one per layer (plus one per MTP layer)"
        )
    unknown = sorted({r for r in ratios if r not in KNOWN_RATIOS})
    if unknown:
        raise KVCacheConfigError(
            f"DeepSeek-V4 'compress_ratios' holds unsupported ratio(s) {unknown}; "
            f"SGLang accepts {sorted(KNOWN_RATIOS)}"
        )
    window = get_opt_int(text, "sliding_window", minimum=1)
    if window is None:
        window = get_int(text, "window_size", minimum=1)
    head_dim = get_int(text, "head_dim", minimum=1)
    rope = get_int(text, "qk_rope_head_dim", minimum=0)
    if rope >= head_dim:
        raise KVCacheConfigError(
            f"DeepSeek-V4 qk_rope_head_dim {rope} must be smaller than head_dim {head_dim} "
            "(qk_nope_head_dim = head_dim - qk_rope_head_dim)"
        )
    sources = int_list(text, "kv_source_layer_ids")
    dsv4 = DSV4Geometry(
        compress_ratios=ratios,
        window_size=window,
        qk_nope_head_dim=head_dim - rope,
        qk_rope_head_dim=rope,
        index_head_dim=get_int(text, "index_head_dim", minimum=1),
        kv_lora_rank=get_int(text, "kv_lora_rank", 512, minimum=1),
        v_head_dim=get_int(text, "v_head_dim", 512, minimum=1),
        kv_source_layer_ids=sources,
    )
    return replace(
        geometry,
        attention_arch=AttentionArch.MHA,
        mla=None,
        dsa=None,
        num_pp_layers=geometry.num_hidden_layers,
        dsv4=dsv4,
    )
