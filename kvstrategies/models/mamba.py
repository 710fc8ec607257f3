"""``MambaGeometry``: the linear-state (Mamba2 / GDN / Mamba-1 / KDA) part of a hybrid model.

SGLang calls such models "Mamba-ish" (``sglang.srt.configs.hybrid_arch.mambaish_config``):
some layers carry softmax-attention KV, the others a fixed-size recurrent state per request
(a conv window and an SSM "temporal" state).
The geometry keeps the TP-independent config numbers; :meth:`MambaGeometry.state_shapes` turns
them into one rank's shapes (mamba_utils state shapes, SGLang ``mamba_utils.py``).

Families (parsed by :func:`kvstrategies.models.parsers.mamba.parse_mamba`):

| family | softmax-attention layers | state layers | mixer |
| --- | --- | --- | --- |
| Qwen3-Next, Qwen3.5 (GDN) | ``(l + 1) % full_attention_interval == 0`` (not ``layer_types``) | the others | Mamba2 |
| Nemotron-H | pattern ``*`` | pattern ``M`` | Mamba2 |
| Falcon-H1 | every layer | every layer | Mamba2 |
| Jamba | ``l % attn_layer_period == attn_layer_offset`` | the others | Mamba-1 full rank |
| Kimi-Linear (KDA) | layers whose 1-based index is not in ``kda_layers`` | the others | KDA (transposed conv) |

Jamba is not Mamba-ish in any SGLang release (served through the generic path, every layer
priced and built as attention KV); :attr:`MambaGeometry.sglang_generic_fallback` marks it, and the
SGLang strategies size it as SGLang does (``strategies.checks.uses_mamba_pools``).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from ..core.dtypes import DType
from ..core.validate import MAX_LAYERS, check_bool, check_instance, check_int, check_int_tuple
from ..errors import KVCacheConfigError
from .architectures import LinearAttention
from .hf import MAX_CONFIG_INT

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

#: SSM / conv state dtypes SGLang accepts; anything else is ignored (mamba_utils mamba_cache_per_req)
STATE_DTYPES = (DType.FLOAT32, DType.BFLOAT16, DType.FLOAT16)


class MixerKind(enum.Enum):
    MAMBA2 = "mamba2"  # Mamba2 and Gated DeltaNet: Mamba2StateShape.create
    MAMBA1 = "mamba1"  # full-rank Mamba-1 (Jamba)
    KDA = "kda"  # Kimi Delta Attention: KimiLinearStateShape.create


def _check_dims(mixer: DataclassInstance) -> None:
    """Every field of a mixer is a positive int (direct construction fails here, not mid-plan)."""
    for item in fields(mixer):
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

    def state_shapes(self, tp: int, *, fused_conv: bool = True) -> MambaStateShapes:
        """``fused_conv``: q, k and v conv states in one tensor (SGLang 0.5.10 on); else three,
        ``(K - 1, proj/tp)``, ``(K - 1, proj_k/tp)`` twice (same bytes)."""
        proj = _divide(self.num_heads * self.head_dim, tp, "KDA num_heads * head_dim")
        proj_k = _divide(self.num_k_heads * self.head_k_dim, tp, "KDA num_k_heads * head_k_dim")
        window = self.conv_kernel - 1
        conv = ((window, proj + 2 * proj_k),) if fused_conv else ((window, proj), (window, proj_k), (window, proj_k))
        temporal = (_divide(self.num_heads, tp, "KDA num_heads"), self.head_dim, self.head_dim)
        return MambaStateShapes(conv, temporal, conv_window_axis=0)


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
    #: the model's MTP draft worker holds no linear-attention layer (Nemotron-H's default MTP
    #: pattern): SGLang sizes and builds that draft as a plain attention model
    draft_without_state: bool = False

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
        check_bool(self.draft_without_state, "mamba.draft_without_state")

    @property
    def kind(self) -> MixerKind:
        return self.mixer.kind

    @property
    def is_kda(self) -> bool:
        return self.mixer.kind is MixerKind.KDA

    def state_shapes(self, tp: int, *, fused_kda_conv: bool = True) -> MambaStateShapes:
        """Per-layer, per-slot shapes on a rank of linear-attention TP size ``tp`` (``fused_kda_conv``:
        :meth:`KDAMixer.state_shapes`)."""
        if isinstance(self.mixer, KDAMixer):
            return self.mixer.state_shapes(tp, fused_conv=fused_kda_conv)
        return self.mixer.state_shapes(tp)

    def mamba_cache_per_req(self, tp: int, conv_dtype: DType, ssm_dtype: DType) -> int:
        """SGLang ``mamba_cache_per_req``: one slot's bytes over *all* Mamba layers (mamba_utils
        mamba_cache_per_req)."""
        return self.state_shapes(tp).bytes_per_layer(conv_dtype, ssm_dtype) * len(self.mamba_layer_ids)


#: the config fields that decide which layers are linear, per family (for MambaGeometry's errors)
_LAYER_SPLIT_FIELDS = {
    LinearAttention.GDN.value: "full_attention_interval",
    LinearAttention.NEMOTRON_H.value: "hybrid_override_pattern / layers_block_type",
    LinearAttention.JAMBA.value: "attn_layer_period / attn_layer_offset",
    LinearAttention.KIMI_LINEAR.value: "linear_attn_config.kda_layers",
}
