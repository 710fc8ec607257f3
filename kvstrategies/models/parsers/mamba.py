"""Family parser: Mamba-ish hybrids (families and values in :mod:`kvstrategies.models.mamba`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from ...core.dtypes import DType
from ...core.validate import MAX_LAYERS
from ...errors import KVCacheConfigError
from ..architectures import (
    NEMOTRON_H_BLOCK_CODES,
    LinearAttention,
    model_type_row,
    rows_for,
)
from ..geometry import ModelGeometry
from ..hf import ConfigDict, architectures, as_int, get_int, int_list, str_list

if TYPE_CHECKING:  # the family's values load with the first Mamba-ish config (an MHA case never needs them)
    from ..mamba import MambaGeometry


def _ssm_dtype(root: ConfigDict, text: ConfigDict) -> DType:
    """``mamba_ssm_dtype`` of the text config, else the root; float32 unless a valid state dtype."""
    raw = text.get("mamba_ssm_dtype")
    if raw is None:
        raw = root.get("mamba_ssm_dtype")
    if not isinstance(raw, str):
        return DType.FLOAT32
    try:
        dtype = DType.from_name(raw)
    except KVCacheConfigError:
        return DType.FLOAT32
    # SGLang warns and keeps float32 for any other name (mamba_utils mamba_cache_per_req)
    from ..mamba import STATE_DTYPES

    return dtype if dtype in STATE_DTYPES else DType.FLOAT32


def _split(num_layers: int, is_full: list[bool]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    full = tuple(i for i in range(num_layers) if is_full[i])
    linear = tuple(i for i in range(num_layers) if not is_full[i])
    return full, linear


def _gdn(root: ConfigDict, text: ConfigDict, geometry: ModelGeometry) -> MambaGeometry:
    from ..mamba import Mamba2Mixer, MambaGeometry

    n = geometry.num_hidden_layers
    interval = get_int(text, "full_attention_interval", minimum=1)
    # Qwen3.5 configs also carry layer_types; SGLang ignores it and uses the interval (sglang.srt.configs.mamba_utils)
    full, linear = _split(n, [(i + 1) % interval == 0 for i in range(n)])
    value_heads = get_int(text, "linear_num_value_heads", minimum=1)
    value_dim = get_int(text, "linear_value_head_dim", minimum=1)
    mixer = Mamba2Mixer(
        intermediate_size=value_dim * value_heads,
        n_groups=get_int(text, "linear_num_key_heads", minimum=1),
        num_heads=value_heads,
        head_dim=value_dim,
        state_size=get_int(text, "linear_key_head_dim", minimum=1),
        conv_kernel=get_int(text, "linear_conv_kernel_dim", minimum=2),
    )
    return MambaGeometry(LinearAttention.GDN.value, mixer, full, linear, _ssm_dtype(root, text))


def _nemotron_pattern(text: ConfigDict) -> str:
    blocks = str_list(text, "layers_block_type")
    if blocks is not None:
        codes = NEMOTRON_H_BLOCK_CODES
        unknown = sorted(set(blocks) - set(codes))
        if unknown:
            raise KVCacheConfigError(
                f"config field 'layers_block_type' has unknown entries {unknown}; use mamba, attention, mlp, moe"
            )
        return "".join(codes[b] for b in blocks)
    pattern = text.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or not pattern:
        raise KVCacheConfigError(
            "Nemotron-H config needs 'hybrid_override_pattern' (e.g. 'M-M*-') or 'layers_block_type'"
        )
    bad = sorted(set(pattern) - set("M*-E"))
    if bad:
        raise KVCacheConfigError(
            f"config field 'hybrid_override_pattern' has characters {bad}; only M, *, - and E are allowed"
        )
    return pattern


def _first_int(text: ConfigDict, keys: tuple[str, ...], default: int) -> int:
    for key in keys:
        if text.get(key) is not None:
            return as_int(text[key], key, minimum=1)
    return default


def _nemotron_h(root: ConfigDict, text: ConfigDict, geometry: ModelGeometry) -> tuple[MambaGeometry, ModelGeometry]:
    from ..mamba import Mamba2Mixer, MambaGeometry

    pattern = _nemotron_pattern(text)
    n = len(pattern)
    if n > MAX_LAYERS:
        raise KVCacheConfigError(
            f"Nemotron-H layer pattern has {n} layers, more than the {MAX_LAYERS} accepted; fix config.json"
        )
    if n != geometry.num_hidden_layers:
        # the pattern is the source of truth for Nemotron-H's layer count
        geometry = replace(geometry, num_hidden_layers=n, num_pp_layers=n)
    full = tuple(i for i, c in enumerate(pattern) if c == "*")
    linear = tuple(i for i, c in enumerate(pattern) if c == "M")
    heads = get_int(text, "mamba_num_heads", minimum=1)
    head_dim = get_int(text, "mamba_head_dim", minimum=1)
    mixer = Mamba2Mixer(
        intermediate_size=heads * head_dim,
        n_groups=_first_int(text, ("n_groups", "mamba_n_groups"), 8),
        num_heads=heads,
        head_dim=head_dim,
        state_size=get_int(text, "ssm_state_size", minimum=1),
        conv_kernel=_first_int(text, ("conv_kernel", "mamba_d_conv"), 4),
    )
    attention_head_dim = text.get("head_dim") or text.get("attention_head_dim")
    if attention_head_dim is not None:
        dim = as_int(attention_head_dim, "attention_head_dim", minimum=1)
        geometry = replace(geometry, head_dim=dim, v_head_dim=dim)
    mamba = MambaGeometry(LinearAttention.NEMOTRON_H.value, mixer, full, linear, _ssm_dtype(root, text),
                          draft_without_state=_nemotron_mtp_without_mamba(text))  # fmt: skip
    return mamba, geometry


def _nemotron_mtp_without_mamba(text: ConfigDict) -> bool:
    """Whether the MTP draft has no Mamba layer: SGLang's ``hybrid_arch.mamba2_config`` then gives
    the draft no Mamba state (NemotronHConfig's default MTP pattern ``*E``: attention, MoE)."""
    blocks = str_list(text, "mtp_layers_block_type")
    if blocks is not None:
        return "mamba" not in blocks
    pattern = text.get("mtp_hybrid_override_pattern")
    return "M" not in (pattern if isinstance(pattern, str) else "*E")


def _falcon_h1(root: ConfigDict, text: ConfigDict, geometry: ModelGeometry) -> MambaGeometry:
    from ..mamba import Mamba2Mixer, MambaGeometry

    n = geometry.num_hidden_layers
    d_ssm = text.get("mamba_d_ssm")
    if d_ssm is None:
        intermediate = get_int(text, "mamba_expand", 2, minimum=1) * get_int(text, "hidden_size", minimum=1)
    else:
        intermediate = as_int(d_ssm, "mamba_d_ssm", minimum=1)
    heads = get_int(text, "mamba_n_heads", minimum=1)
    raw_head = text.get("mamba_d_head", "auto")
    head_dim = intermediate // heads if raw_head == "auto" else as_int(raw_head, "mamba_d_head", minimum=1)
    if head_dim * heads != intermediate:
        raise KVCacheConfigError(
            f"Falcon-H1 mamba_d_head ({head_dim}) x mamba_n_heads ({heads}) must equal the Mamba "
            f"intermediate size {intermediate} (mamba_d_ssm or mamba_expand * hidden_size)"
        )
    mixer = Mamba2Mixer(
        intermediate_size=intermediate,
        n_groups=get_int(text, "mamba_n_groups", 1, minimum=1),
        num_heads=heads,
        head_dim=head_dim,
        state_size=get_int(text, "mamba_d_state", minimum=1),
        conv_kernel=get_int(text, "mamba_d_conv", 4, minimum=2),
    )
    every = tuple(range(n))  # each Falcon-H1 layer has attention and Mamba side by side
    return MambaGeometry(LinearAttention.FALCON_H1.value, mixer, every, every, _ssm_dtype(root, text))


def _jamba(root: ConfigDict, text: ConfigDict, geometry: ModelGeometry) -> MambaGeometry:
    from ..mamba import Mamba1Mixer, MambaGeometry

    n = geometry.num_hidden_layers
    period = get_int(text, "attn_layer_period", 8, minimum=1)
    offset = get_int(text, "attn_layer_offset", 4)
    full, linear = _split(n, [i % period == offset for i in range(n)])
    mixer = Mamba1Mixer(
        intermediate_size=get_int(text, "mamba_expand", 2, minimum=1) * get_int(text, "hidden_size", minimum=1),
        state_size=get_int(text, "mamba_d_state", 16, minimum=1),
        conv_kernel=get_int(text, "mamba_d_conv", 4, minimum=2),
    )
    return MambaGeometry(
        LinearAttention.JAMBA.value, mixer, full, linear, _ssm_dtype(root, text), sglang_generic_fallback=True
    )


def _kimi_linear(text: ConfigDict, geometry: ModelGeometry) -> MambaGeometry:
    from ..mamba import KDAMixer, MambaGeometry

    n = geometry.num_hidden_layers
    linear_cfg = text.get("linear_attn_config")
    if not isinstance(linear_cfg, Mapping):
        raise KVCacheConfigError("Kimi-Linear config needs a 'linear_attn_config' object (kda_layers, num_heads, ...)")
    kda_1_based = int_list(linear_cfg, "kda_layers") or ()
    kda = set(kda_1_based)
    # kda_layers is 1-based: layer l (0-based) is KDA iff l + 1 is listed; full_attn_layers is not read
    full, linear = _split(n, [(i + 1) not in kda for i in range(n)])
    heads = get_int(linear_cfg, "num_heads", minimum=1)
    head_dim = get_int(linear_cfg, "head_dim", minimum=1)
    mixer = KDAMixer(
        num_heads=heads,
        head_dim=head_dim,
        num_k_heads=heads,  # Kimi-Linear passes no key-side values: the defaults apply (mamba_utils state shapes)
        head_k_dim=head_dim,
        conv_kernel=get_int(linear_cfg, "short_conv_kernel_size", 4, minimum=2),
    )
    # Kimi-Linear does not hand its config to the state-dtype helper: float32 unless the env says otherwise
    return MambaGeometry(LinearAttention.KIMI_LINEAR.value, mixer, full, linear, DType.FLOAT32)


def parse_mamba(root: ConfigDict, text: ConfigDict, geometry: ModelGeometry) -> ModelGeometry:
    """Family parser: attach a :class:`MambaGeometry` to Mamba-ish hybrids (sglang.srt.configs.mamba_utils)."""
    kinds = {row.linear_attention for row in rows_for(architectures(root))}
    kinds.add(model_type_row(text.get("model_type", geometry.model_type)).linear_attention)
    if LinearAttention.GDN in kinds:
        return replace(geometry, mamba=_gdn(root, text, geometry))
    if LinearAttention.NEMOTRON_H in kinds:
        mamba, geometry = _nemotron_h(root, text, geometry)
        return replace(geometry, mamba=mamba)
    if LinearAttention.FALCON_H1 in kinds:
        return replace(geometry, mamba=_falcon_h1(root, text, geometry))
    if LinearAttention.JAMBA in kinds:
        return replace(geometry, mamba=_jamba(root, text, geometry))
    if LinearAttention.KIMI_LINEAR in kinds:
        return replace(geometry, mamba=_kimi_linear(text, geometry))
    return geometry
