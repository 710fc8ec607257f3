"""``MambaGeometry``: the linear-state (Mamba2 / GDN / Mamba-1 / KDA) part of a hybrid model.

SGLang calls such models "Mamba-ish" (sizing.md 2.7): some layers carry softmax-attention KV,
the others a fixed-size recurrent state per request (a conv window and an SSM "temporal" state).
The geometry keeps the TP-independent config numbers; :meth:`MambaGeometry.state_shapes` turns
them into one rank's shapes (layouts.md 2.1, SGLang ``mamba_utils.py``).

Families parsed here (one parser, :func:`parse_mamba`, registered in ``models/__init__.py``):

| family | softmax-attention layers | state layers | mixer |
| --- | --- | --- | --- |
| Qwen3-Next, Qwen3.5 (GDN) | ``(l + 1) % full_attention_interval == 0`` (not ``layer_types``) | the others | Mamba2 |
| Nemotron-H | pattern ``*`` | pattern ``M`` | Mamba2 |
| Falcon-H1 | every layer | every layer | Mamba2 |
| Jamba | ``l % attn_layer_period == attn_layer_offset`` | the others | Mamba-1 full rank |
| Kimi-Linear (KDA) | layers whose 1-based index is not in ``kda_layers`` | the others | KDA (transposed conv) |

Jamba is not Mamba-ish in SGLang 0.5.23 (served through the generic fallback, every layer
priced as attention); :attr:`MambaGeometry.sglang_generic_fallback` marks it so plans can say so.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

from ..dtypes import DType
from ..errors import KVCacheConfigError
from ..validate import MAX_LAYERS, check_bool, check_instance, check_int, check_int_tuple
from .architectures import LinearAttention, model_type_row, rows_for
from .geometry import ModelGeometry
from .hf import MAX_CONFIG_INT, ConfigDict, architectures, as_int, get_int, int_list, str_list
from .parse import replace

#: SSM / conv state dtypes SGLang accepts; anything else is ignored (resolve.md 3.1)
STATE_DTYPES = (DType.FLOAT32, DType.BFLOAT16, DType.FLOAT16)


class MixerKind(enum.Enum):
    MAMBA2 = "mamba2"  # Mamba2 and Gated DeltaNet: Mamba2StateShape.create
    MAMBA1 = "mamba1"  # full-rank Mamba-1 (Jamba)
    KDA = "kda"  # Kimi Delta Attention: KimiLinearStateShape.create


def _check_dims(mixer: object) -> None:
    """Every field of a mixer is a positive int (direct construction fails here, not mid-plan)."""
    for item in fields(mixer):  # type: ignore[arg-type]
        check_int(getattr(mixer, item.name), f"mamba.mixer.{item.name}", minimum=1, maximum=MAX_CONFIG_INT)


def _divide(numerator: int, denominator: int, what: str) -> int:
    """SGLang's ``divide``: exact division or an error naming the quantity."""
    if numerator % denominator:
        raise KVCacheConfigError(
            f"{what} = {numerator} is not divisible by the linear-attention TP size {denominator}; "
            "pick a tp_size that divides it"
        )
    return numerator // denominator


@dataclass(frozen=True)
class MambaStateShapes:
    """One rank's per-layer, per-slot state: conv tensors and the temporal (SSM) tensor.

    ``conv_window_axis`` says which conv axis is the ``K - 1`` window (1 for ``(channels, K-1)``,
    0 for KDA's transposed ``(K-1, channels)``); the speculative conv-window buffers widen it.
    """

    conv: tuple[tuple[int, int], ...]
    temporal: tuple[int, int, int]
    conv_window_axis: int = 1

    def bytes_per_layer(self, conv_dtype: DType, ssm_dtype: DType) -> int:
        """``sum(prod(conv)) * es(conv) + prod(temporal) * es(ssm)`` bytes per slot and layer."""
        conv = sum(math.prod(shape) for shape in self.conv)
        return conv * conv_dtype.itemsize + math.prod(self.temporal) * ssm_dtype.itemsize


@dataclass(frozen=True)
class Mamba2Mixer:
    """``Mamba2StateShape.create`` inputs (TP-independent), shared by Mamba2 and GDN.

    Under TP ``tp``: groups are replicated when ``n_groups % tp != 0``
    (``n_groups += tp - n_groups``); ``conv_dim = intermediate + 2 * n_groups * state``;
    conv ``(conv_dim / tp, conv_kernel - 1)``; temporal ``(num_heads / tp, head_dim, state)``.
    """

    intermediate_size: int
    n_groups: int
    num_heads: int
    head_dim: int
    state_size: int
    conv_kernel: int

    kind = MixerKind.MAMBA2

    def __post_init__(self) -> None:
        _check_dims(self)

    def state_shapes(self, tp: int) -> MambaStateShapes:
        groups = self.n_groups
        if groups % tp:
            # SGLang adds tp - n_groups (meant for n_groups < tp; e.g. 8 groups at TP 3 become 3)
            groups += tp - groups
        conv_dim = self.intermediate_size + 2 * groups * self.state_size
        conv = (_divide(conv_dim, tp, "Mamba conv_dim"), self.conv_kernel - 1)
        temporal = (_divide(self.num_heads, tp, "Mamba num_heads"), self.head_dim, self.state_size)
        return MambaStateShapes((conv,), temporal)


@dataclass(frozen=True)
class Mamba1Mixer:
    """Full-rank Mamba-1: conv ``(intermediate / tp, K - 1)``, temporal ``(intermediate / tp, 1, state)``."""

    intermediate_size: int
    state_size: int
    conv_kernel: int

    kind = MixerKind.MAMBA1

    def __post_init__(self) -> None:
        _check_dims(self)

    def state_shapes(self, tp: int) -> MambaStateShapes:
        channels = _divide(self.intermediate_size, tp, "Mamba intermediate_size")
        return MambaStateShapes(((channels, self.conv_kernel - 1),), (channels, 1, self.state_size))


@dataclass(frozen=True)
class KDAMixer:
    """``KimiLinearStateShape.create``: conv ``(K - 1, proj/tp + 2 * proj_k/tp)`` (window axis
    first), temporal ``(num_heads / tp, head_dim, head_dim)``; ``proj = H * hd``, ``proj_k = Hk * hdk``.
    """

    num_heads: int
    head_dim: int
    num_k_heads: int
    head_k_dim: int
    conv_kernel: int

    kind = MixerKind.KDA

    def __post_init__(self) -> None:
        _check_dims(self)

    def state_shapes(self, tp: int) -> MambaStateShapes:
        proj = _divide(self.num_heads * self.head_dim, tp, "KDA num_heads * head_dim")
        proj_k = _divide(self.num_k_heads * self.head_k_dim, tp, "KDA num_k_heads * head_k_dim")
        conv = (self.conv_kernel - 1, proj + 2 * proj_k)
        temporal = (_divide(self.num_heads, tp, "KDA num_heads"), self.head_dim, self.head_dim)
        return MambaStateShapes((conv,), temporal, conv_window_axis=0)


MambaMixer = Mamba2Mixer | Mamba1Mixer | KDAMixer


@dataclass(frozen=True)
class MambaGeometry:
    """The linear-state side of a hybrid model (global layer ids, TP-independent numbers).

    ``ssm_dtype`` is the config's ``mamba_ssm_dtype`` (text config first), float32 when absent
    or not one of float32/bfloat16/float16; the env knob ``SGLANG_MAMBA_SSM_DTYPE`` overrides it
    in the strategy.
    """

    family: str
    mixer: MambaMixer
    full_attention_layer_ids: tuple[int, ...]
    mamba_layer_ids: tuple[int, ...]
    ssm_dtype: DType = DType.FLOAT32
    sglang_generic_fallback: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.family, str):
            raise KVCacheConfigError(f"mamba.family must be a string, got {self.family!r:.80}")
        check_instance(self.mixer, (Mamba2Mixer, Mamba1Mixer, KDAMixer), "mamba.mixer", "use a parsed geometry")
        check_int_tuple(self.full_attention_layer_ids, "mamba.full_attention_layer_ids", maximum=MAX_LAYERS)
        check_int_tuple(self.mamba_layer_ids, "mamba.mamba_layer_ids", maximum=MAX_LAYERS)
        if not self.mamba_layer_ids:  # a state pool of zero bytes per slot: SGLang divides by it
            field = _LAYER_SPLIT_FIELDS.get(self.family, "the layer pattern")
            raise KVCacheConfigError(
                f"{self.family} config has no Mamba / linear-attention layer (decided by {field}); "
                f"fix {field} in config.json"
            )
        check_instance(self.ssm_dtype, DType, "mamba.ssm_dtype", "use DType.from_name(name)")
        check_bool(self.sglang_generic_fallback, "mamba.sglang_generic_fallback")

    @property
    def kind(self) -> MixerKind:
        return self.mixer.kind

    @property
    def is_kda(self) -> bool:
        return self.mixer.kind is MixerKind.KDA

    def state_shapes(self, tp: int) -> MambaStateShapes:
        """Per-layer, per-slot shapes on a rank of linear-attention TP size ``tp``."""
        return self.mixer.state_shapes(tp)

    def mamba_cache_per_req(self, tp: int, conv_dtype: DType, ssm_dtype: DType) -> int:
        """SGLang ``mamba_cache_per_req``: one slot's bytes over *all* Mamba layers (resolve.md 3.1)."""
        return self.state_shapes(tp).bytes_per_layer(conv_dtype, ssm_dtype) * len(self.mamba_layer_ids)


# ---- parsing ------------------------------------------------------------------------------


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
    # SGLang warns and keeps float32 for any other name (resolve.md 3.1)
    return dtype if dtype in STATE_DTYPES else DType.FLOAT32


def _split(num_layers: int, is_full: list[bool]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    full = tuple(i for i in range(num_layers) if is_full[i])
    linear = tuple(i for i in range(num_layers) if not is_full[i])
    return full, linear


def _gdn(root: ConfigDict, text: ConfigDict, geometry: ModelGeometry) -> MambaGeometry:
    n = geometry.num_hidden_layers
    interval = get_int(text, "full_attention_interval", minimum=1)
    # Qwen3.5 configs also carry layer_types; SGLang ignores it and uses the interval (sizing.md 2.7)
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
        codes = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}
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
    return MambaGeometry(LinearAttention.NEMOTRON_H.value, mixer, full, linear, _ssm_dtype(root, text)), geometry


def _falcon_h1(root: ConfigDict, text: ConfigDict, geometry: ModelGeometry) -> MambaGeometry:
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
        num_k_heads=heads,  # Kimi-Linear passes no key-side values: the defaults apply (layouts.md 2.1)
        head_k_dim=head_dim,
        conv_kernel=get_int(linear_cfg, "short_conv_kernel_size", 4, minimum=2),
    )
    # Kimi-Linear does not hand its config to the state-dtype helper: float32 unless the env says otherwise
    return MambaGeometry(LinearAttention.KIMI_LINEAR.value, mixer, full, linear, DType.FLOAT32)


#: the config fields that decide which layers are linear, per family (for MambaGeometry's errors)
_LAYER_SPLIT_FIELDS = {
    LinearAttention.GDN.value: "full_attention_interval",
    LinearAttention.NEMOTRON_H.value: "hybrid_override_pattern / layers_block_type",
    LinearAttention.JAMBA.value: "attn_layer_period / attn_layer_offset",
    LinearAttention.KIMI_LINEAR.value: "linear_attn_config.kda_layers",
}


def parse_mamba(root: ConfigDict, text: ConfigDict, geometry: ModelGeometry) -> ModelGeometry:
    """Family parser: attach a :class:`MambaGeometry` to Mamba-ish hybrids (sizing.md 2.7)."""
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
