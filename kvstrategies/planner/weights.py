"""Parameter counts and weight bytes estimated from a raw Hugging Face ``config.json``.

The KV budget is what is left after the weights (KVCacheConfigurator._profile_available_bytes: budget ~= P0 * mfs -
weights per rank), so planning without a GPU needs the resident weight bytes of one rank. This
module counts parameters tensor group by tensor group from the config alone:

* dense decoders (Llama, Qwen2/3, Mistral, Phi-3, Gemma, Falcon), GQA/MQA, qk-norm, biases;
* MoE: routed experts, shared experts (DeepSeek ``n_shared_experts``, Qwen
  ``shared_expert_intermediate_size`` + its gate, Llama-4's one shared expert), routers (+
  correction bias), dense-first layers (``first_k_dense_replace``, ``moe_layer_freq``,
  ``mlp_only_layers``, ``decoder_sparse_step``, Jamba's period/offset, Llama-4's interleave step);
* MLA (``q_lora_rank`` / ``kv_lora_rank``) and the DSA indexer;
* hybrids: GDN (Qwen3-Next, Qwen3.5), Mamba2 (Nemotron-H, Falcon-H1), Mamba1 (Jamba), KDA
  (Kimi-Linear); MiMo-V2's separate SWA head counts; gpt-oss biases and sinks;
* DeepSeek-V4 approximately (grouped low-rank output, compressors, indexers, hyper-connections);
* MTP/NextN layers separately (``mtp_params``), including the embedding and head copies a
  DeepSeek-style checkpoint stores with them.

Vision towers, audio encoders and other multimodal parts are not in the groups (text decoder
only); :func:`vision_tower_params` approximates a ViT tower and the planner adds it, saying so.

Bytes use the checkpoint's dtype and ``quantization_config`` (:class:`WeightFormat`, priced by
:mod:`kvstrategies.planner.weight_quant`): FP8 with block scales (1 + 4/16384 B/param at 128x128),
MXFP4 experts (0.5 + 1/32 B/param, gpt-oss; also DeepSeek-V4 ``expert_dtype: fp4``), NVFP4
(0.5 + 1/16), AWQ/GPTQ/compressed-tensors integer groups with their scales and zero points, and
the modules a config leaves unquantized. Embeddings, lm_head, norms, biases and routers keep the
model dtype. A config float32 counts 2 bytes, as SGLang's ``auto``
serves float32 checkpoints in 16 bits (arg_groups.overrides kv_cache_dtype defaults).

Per-rank split (:meth:`WeightEstimate.weight_bytes_per_rank`), a documented approximation of
SGLang's sharding: every group carries the size of the dimension TP shards (heads, intermediate
size, experts, vocab); a rank holds ``count / units * max(1, units // tp)`` of it, so KV heads
fewer than ``tp`` are replicated (8 KV heads at TP16 keep one each), while norms, routers and the
MLA/DSA down-projections (``q_a``, ``kv_a``, indexer) are replicated. Vocab padding is ignored.
Pipeline stages own ``get_pp_indices`` layer ranges (sglang.srt.distributed.utils.get_pp_indices); the embedding lives
on the first stage, final norm + lm_head on the last.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from ..core.dtypes import DType
from ..core.releases import NEWEST_SGLANG, EngineRelease
from ..core.validate import MAX_LAYERS, TrackedConfig, reading_config
from ..errors import KVCacheConfigError
from ..models.architectures import (
    Attention,
    LinearAttention,
    ModelType,
    any_row,
    holds_in,
    model_type_row,
    rows_for,
    with_config_aliases,
    with_nested_defaults,
)
from ..models.hf import as_int


class ParamKind(enum.Enum):
    """What a tensor group is, which decides its bytes under a quantization scheme."""

    EMBEDDING = "embedding"
    LM_HEAD = "lm_head"
    ATTENTION = "attention"  # attention / token-mixer projections (quantizable)
    DENSE = "dense"  # dense MLP, shared experts, state-space projections (quantizable)
    EXPERT = "expert"  # routed experts (quantizable)
    ROUTER = "router"
    SMALL = "small"  # norms, biases, sinks, conv kernels, A/D/dt vectors: model dtype


@dataclass(frozen=True)
class ParamGroup:
    """``count`` parameters of one kind; ``tp_units`` = size of the TP-sharded dim (0 = replicated).

    ``module``: the SGLang module prefix the group's weights live in (``model.layers.3.self_attn.
    qkv_proj``, ``model.layers.3.mlp.experts``, ``lm_head``), the name quantization exclusion lists
    are matched against; empty for norms and other groups no list can name.
    ``fixed_bytes``: bytes per parameter whatever the format (a float32 router).
    """

    name: str
    count: int
    kind: ParamKind
    tp_units: int = 0
    module: str = ""
    fixed_bytes: float | None = None

    def per_rank(self, tp: int) -> float:
        """Parameters one TP rank holds: ``count / units * max(1, units // tp)``."""
        if self.tp_units <= 0 or tp <= 1:
            return float(self.count)
        return self.count / self.tp_units * max(1, self.tp_units // tp)


_Groups = tuple[ParamGroup, ...]
_A = TypeVar("_A")

# --- weight formats --------------------------------------------------------------------------

@dataclass(frozen=True)
class WeightFormat:
    """Bytes per parameter by :class:`ParamKind`; ``name`` says which scheme was read.

    ``modules`` prices one module at a time where the scheme names modules (exclusion lists,
    compressed-tensors targets): :meth:`bytes_for` asks it first.
    """

    name: str
    base_bytes: float  # embeddings, lm_head, routers, small tensors (the model dtype)
    attention_bytes: float
    dense_bytes: float
    expert_bytes: float
    notes: tuple[str, ...] = ()  # what the answer must say about the pricing
    modules: ModulePricer | None = None

    def bytes_per_param(self, kind: ParamKind) -> float:
        if kind is ParamKind.ATTENTION:
            return self.attention_bytes
        if kind is ParamKind.DENSE:
            return self.dense_bytes
        if kind is ParamKind.EXPERT:
            return self.expert_bytes
        return self.base_bytes

    def bytes_for(self, group: ParamGroup) -> float:
        """Bytes per parameter of ``group``: its fixed dtype, else the module rule, else its kind."""
        return self.module_bytes(group, group.module)

    def module_bytes(self, group: ParamGroup, module: str) -> float:
        """:meth:`bytes_for` of ``group`` placed at the module ``module`` (a layer's full name)."""
        if group.fixed_bytes is not None:
            return group.fixed_bytes
        if self.modules is not None:
            priced = self.modules.bytes_for(module, group.kind.value)
            if priced is not None:
                return self.base_bytes if priced == UNQUANTIZED else priced
        return self.bytes_per_param(group.kind)


class ModulePricer(Protocol):
    """Per-module pricing of a quantization scheme (:mod:`kvstrategies.planner.weight_quant`)."""

    def bytes_for(self, module: str, kind: str) -> float | None:
        """Bytes per parameter of ``module`` (a :class:`ParamKind` value ``kind``): a figure,
        :data:`UNQUANTIZED` (the model dtype), or ``None`` to fall back to the kind's default."""
        ...


UNQUANTIZED = -1.0  # ModulePricer's "left in the model dtype"


QUANTIZATIONS = ("none", "fp8", "mxfp4", "nvfp4", "w4a16")


def _text(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The text-model config: ``text_config`` over the top level (tolerant of wrappers), with the fields
    its config class reads under other names (``ModelType.config_aliases``)."""
    merged = {k: v for k, v in cfg.items() if k not in ("text_config", "vision_config")}
    text = cfg.get("text_config") or cfg.get("language_config") or {}
    merged.update(with_nested_defaults(cfg, text) if isinstance(text, Mapping) else text)
    merged = dict(with_config_aliases(merged))
    for key, value in model_type_row(merged.get("model_type")).weight_defaults:
        merged.setdefault(key, value)
    return merged


def _config_dtype_bytes(t: Mapping[str, Any]) -> float:
    name = t.get("torch_dtype") or t.get("dtype")
    if name is None:
        return 2.0  # no dtype -> float32 -> `auto` serves float16 (arg_groups.overrides kv_cache_dtype defaults)
    dtype = DType.from_name(str(name))
    return 2.0 if dtype is DType.FLOAT32 else float(dtype.itemsize)


def weight_format_from_config(
    cfg: Mapping[str, Any], *, dtype: str | DType | None = None, quantization: str | None = None
) -> WeightFormat:
    """Read the weight format from ``torch_dtype``/``dtype`` and ``quantization_config``.

    ``dtype`` overrides the model dtype (``"float32"`` really counts 4 bytes then);
    ``quantization`` overrides the checkpoint's scheme: one of ``QUANTIZATIONS``.
    """
    t = _text(cfg)
    if dtype is not None:
        base = float((dtype if isinstance(dtype, DType) else DType.from_name(dtype)).itemsize)
    else:
        base = _config_dtype_bytes(t)
    qcfg = _hf_weight_names(t, t.get("quantization_config") or {})
    method = quantization if quantization is not None else str(qcfg.get("quant_method") or "none")
    if method.lower() == "none":
        return WeightFormat(f"{_dtype_label(base)}", base, base, base, base)
    from .weight_quant import DEFAULT_FUSED, MLA_FUSED, quant_bytes  # per-scheme bytes and module rules

    fused = MLA_FUSED if _is_mla(t) else DEFAULT_FUSED  # the model's packed_modules_mapping
    q = quant_bytes(qcfg, override=quantization, expert_dtype=str(t.get("expert_dtype", "")), fused=fused)

    def pick(value: float | None) -> float:
        return base if value is None else value

    return WeightFormat(q.name, base, pick(q.attention), pick(q.dense), pick(q.expert), q.notes, q.modules)


def _hf_weight_names(t: Mapping[str, Any], qcfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ModelOpt config's module lists (``exclude_modules`` / ``ignore``, ``quantized_layers``) in SGLang's
    names: the model class's ``hf_to_sglang_mapper`` prefixes applied, longest first, as
    ``ModelOptQuantConfig.apply_weight_name_mapper`` (and the mixed-precision config's) applies them
    (:attr:`Architecture.hf_weight_prefixes`: Nemotron-H's ``backbone.`` -> ``model.``)."""
    prefixes = next((row.hf_weight_prefixes for row in rows_for(_arch(t)) if row.hf_weight_prefixes), ())
    if not prefixes or not isinstance(qcfg, Mapping):
        return qcfg
    ordered = sorted(prefixes, key=lambda pair: len(pair[0]), reverse=True)

    def mapped(name: str) -> str:
        old, new = next(((o, n) for o, n in ordered if name.startswith(o)), ("", ""))
        return new + name[len(old):] if old else name

    out = dict(qcfg)
    for key in ("exclude_modules", "ignore"):
        if isinstance(out.get(key), list):
            out[key] = [mapped(v) if isinstance(v, str) else v for v in out[key]]
    if isinstance(out.get("quantized_layers"), Mapping):
        out["quantized_layers"] = {mapped(str(k)): v for k, v in out["quantized_layers"].items()}
    return out


def _dtype_label(nbytes: float) -> str:
    return {2.0: "16-bit", 4.0: "float32", 1.0: "8-bit"}.get(nbytes, f"{nbytes}-byte")


# --- the estimate ----------------------------------------------------------------------------


def get_pp_indices(num_layers: int, rank: int, pp: int) -> tuple[int, int]:
    """Layer range ``[start, end)`` of PP stage ``rank`` (sglang.srt.distributed.utils.get_pp_indices: last stages get
    extras)."""
    base, rem = divmod(num_layers, pp)
    if rank >= pp - rem:
        start = rank * (base + 1) - (pp - rem)
        return start, start + base + 1
    return rank * base, rank * base + base


@dataclass(frozen=True)
class LayerKind:
    """The groups every decoder layer of one kind holds (same token mixer, feed-forward and
    DeepSeek-V4 compression ratio), and the layers of that kind (ascending).

    ``groups`` name their modules relative to the layer (``self_attn.qkv_proj``); layer ``i``'s
    full names are ``model.layers.{i}.`` + that (:meth:`WeightEstimate.module_name`).
    """

    groups: _Groups
    layers: tuple[int, ...]


@dataclass(frozen=True)
class WeightEstimate:
    """Parameter groups of a model: embedding, the decoder layers by kind, head, MTP layers.

    ``kinds`` holds each distinct layer once; ``kind_of[i]`` is the kind of layer ``i``, so a
    94-layer model of two kinds is counted and priced twice, not 94 times (only a format whose
    module rules name modules prices layer by layer: an exclusion list may name one layer).
    ``layers`` rebuilds the old per-layer view (every group with its full module name).
    ``tied``: lm_head shares the embedding (counted once when one stage holds both).
    ``lm_head_every_stage``: the model class builds its (untied) lm_head on every pipeline
    stage, not only the last (the architecture row's ``lm_head_every_stage``).
    """

    model_type: str
    embedding: _Groups
    kinds: tuple[LayerKind, ...]
    kind_of: tuple[int, ...]
    head: _Groups
    mtp: _Groups
    tied: bool
    fmt: WeightFormat
    lm_head_every_stage: bool = False
    _memo: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def num_layers(self) -> int:
        return len(self.kind_of)

    @property
    def layers(self) -> tuple[_Groups, ...]:
        """One tuple of groups per decoder layer, modules named ``model.layers.{i}.*``."""
        cached: tuple[_Groups, ...] | None = self._memo.get("layers")
        if cached is None:
            cached = tuple(
                tuple(
                    replace(g, module=self.module_name(i, g)) if g.module else g for g in self.groups_of(i)
                )
                for i in range(self.num_layers)
            )
            self._memo["layers"] = cached
        return cached

    def groups_of(self, layer: int) -> _Groups:
        """The groups of decoder layer ``layer`` (modules relative to the layer)."""
        return self.kinds[self.kind_of[layer]].groups

    @staticmethod
    def module_name(layer: int, group: ParamGroup) -> str:
        """``group``'s full module name in decoder layer ``layer`` (empty for unnamed groups)."""
        return f"model.layers.{layer}.{group.module}" if group.module else ""

    @property
    def prices_by_kind(self) -> bool:
        """Every layer of a kind costs the same per parameter (no module rules to tell them apart)."""
        return self.fmt.modules is None

    def distinct_layers(self) -> tuple[int, ...]:
        """Layers that stand for all: the first of each kind when prices go by kind, else every
        layer; ascending, so a scan of these in order meets each group and price first where
        a scan of every layer would."""
        if self.prices_by_kind:
            return tuple(sorted(kind.layers[0] for kind in self.kinds if kind.layers))
        return tuple(range(self.num_layers))

    def remember(self, key: str, make: Callable[[], _A]) -> _A:
        """``make()``, worked out once per estimate and kept under ``key`` (a fact of the
        estimate alone, such as its quantized linears, that every plan of the model reads)."""
        memo_key = ("remember", key)
        if memo_key not in self._memo:
            self._memo[memo_key] = make()
        value: _A = self._memo[memo_key]
        return value

    def price(self, layer: int, position: int) -> float:
        """Bytes per parameter of group ``position`` of decoder layer ``layer`` (:meth:`WeightFormat.bytes_for`
        of the group at its full module name); priced once per kind, or once per layer under module rules."""
        kind = self.kind_of[layer]
        key = ("price", kind, position) if self.prices_by_kind else ("price", layer, position)
        value: float | None = self._memo.get(key)
        if value is None:
            group = self.kinds[kind].groups[position]
            value = self.fmt.module_bytes(group, self.module_name(layer, group))
            self._memo[key] = value
        return value

    def layer_terms(self, layer: int, tp: int, attn_tp: int | None = None) -> tuple[float, ...]:
        """Bytes one rank holds of each group of decoder layer ``layer`` (see :meth:`_bytes`)."""
        kind = self.kind_of[layer]
        key = ("terms", kind if self.prices_by_kind else layer, tp, attn_tp)
        terms: tuple[float, ...] | None = self._memo.get(key)
        if terms is None:
            ranks = self._kind_ranks(kind, tp, attn_tp)
            terms = tuple(rank * self.price(layer, pos) for pos, rank in enumerate(ranks))
            self._memo[key] = terms
        return terms

    def _kind_ranks(self, kind: int, tp: int, attn_tp: int | None) -> tuple[float, ...]:
        key = ("ranks", kind, tp, attn_tp)
        ranks: tuple[float, ...] | None = self._memo.get(key)
        if ranks is None:
            a_tp = tp if attn_tp is None else attn_tp
            ranks = tuple(g.per_rank(a_tp if g.kind in _ATTN_TP_KINDS else tp) for g in self.kinds[kind].groups)
            self._memo[key] = ranks
        return ranks

    @property
    def main_params(self) -> int:
        """Parameters of the served model without MTP layers."""
        body = sum(len(kind.layers) * _total(kind.groups) for kind in self.kinds)
        return _total(self.embedding) + body + _total(self._head(True))

    @property
    def mtp_params(self) -> int:
        """Parameters of the MTP/NextN layers as a checkpoint stores them."""
        return _total(self.mtp)

    @property
    def total_params(self) -> int:
        return self.main_params + self.mtp_params

    def _head(self, with_embedding: bool) -> _Groups:
        if self.tied and with_embedding:
            return tuple(g for g in self.head if g.kind is not ParamKind.LM_HEAD)
        return self.head

    def _terms(self, groups: _Groups, tp: int, attn_tp: int | None = None) -> list[float]:
        a_tp = tp if attn_tp is None else attn_tp
        return [g.per_rank(a_tp if g.kind in _ATTN_TP_KINDS else tp) * self.fmt.bytes_for(g) for g in groups]

    def _bytes(self, groups: _Groups, tp: int, attn_tp: int | None = None) -> float:
        """``attn_tp``: the attention-TP size under DP attention (``tp / attn_dp``): attention
        projections and the embedding are sharded over it, not over ``tp``
        (``sglang/srt/layers/vocab_parallel_embedding.py``, ``is_dp_attention_enabled``)."""
        return sum(self._terms(groups, tp, attn_tp))

    def weight_bytes(self, *, include_mtp: bool = False) -> int:
        """All weights of the model (one copy), in bytes."""
        return self.weight_bytes_per_rank(1, 1, include_mtp=include_mtp)

    def stage_bytes(
        self, tp: int, pp: int, pp_rank: int, *, include_mtp: bool = False, attn_tp: int | None = None
    ) -> int:
        """Bytes one TP rank of PP stage ``pp_rank`` holds: ``ceil`` of the sum, group by group
        in layer order, of ``per_rank x bytes per parameter``.

        The draft's MTP layers (without their embedding/head copies, which SGLang shares with
        the target) are charged to the last stage when ``include_mtp``.
        """
        if tp < 1 or pp < 1 or not 0 <= pp_rank < pp:
            raise KVCacheConfigError(f"invalid tp={tp} pp={pp} pp_rank={pp_rank}")
        key = ("stage", tp, pp, pp_rank, include_mtp, attn_tp)  # the fix search asks again for each change
        known: int | None = self._memo.get(key)
        if known is None:
            known = self._memo[key] = self._stage_bytes(tp, pp, pp_rank, include_mtp, attn_tp)
        return known

    def _stage_bytes(self, tp: int, pp: int, pp_rank: int, include_mtp: bool, attn_tp: int | None) -> int:
        start, end = get_pp_indices(self.num_layers, pp_rank, pp)
        first, last = pp_rank == 0, pp_rank == pp - 1
        terms: list[float] = []
        if first:
            terms += self._terms(self.embedding, tp, attn_tp)
        for layer in range(start, end):
            terms += self.layer_terms(layer, tp, attn_tp)
        if not last and self.lm_head_every_stage and not self.tied:
            terms += self._terms(tuple(g for g in self.head if g.kind is ParamKind.LM_HEAD), tp, attn_tp)
        if last:
            terms += self._terms(self._head(with_embedding=first), tp, attn_tp)
            if include_mtp:
                mtp = tuple(g for g in self.mtp if g.kind not in (ParamKind.EMBEDDING, ParamKind.LM_HEAD))
                terms += self._terms(mtp, tp, attn_tp)
        return math.ceil(sum(terms))

    def weight_bytes_per_rank(
        self, tp: int = 1, pp: int = 1, *, include_mtp: bool = False, attn_tp: int | None = None
    ) -> int:
        """Resident weight bytes of the fullest rank (max over PP stages) at ``tp`` x ``pp``."""
        return max(self.stage_bytes(tp, pp, r, include_mtp=include_mtp, attn_tp=attn_tp) for r in range(pp))


#: group kinds sharded over the attention-TP group under DP attention (:meth:`WeightEstimate._bytes`)
_ATTN_TP_KINDS = (ParamKind.ATTENTION, ParamKind.EMBEDDING)


def _total(groups: _Groups) -> int:
    return sum(g.count for g in groups)


def estimate_weights(
    cfg: Mapping[str, Any],
    *,
    dtype: str | DType | None = None,
    quantization: str | None = None,
    release: EngineRelease | None = None,
) -> WeightEstimate:
    """Count a model's parameters from its raw HF config dict and attach its weight format, as SGLang
    ``release`` builds the model (default: the newest).

    A field the estimator needs but cannot read raises :class:`KVCacheConfigError` naming it.
    """
    if not isinstance(cfg, Mapping):
        raise KVCacheConfigError(f"a model config must be a JSON object, got {type(cfg).__name__}")

    t = _TextConfig(NEWEST_SGLANG if release is None else release)
    with reading_config(t, "estimating the weights", "pass the resident weight bytes (--weight-bytes)"):
        t.update(_text(cfg))
        counted, t.last_key = _count(t)
        return WeightEstimate(**counted, fmt=weight_format_from_config(cfg, dtype=dtype, quantization=quantization))


def _count(t: TrackedConfig) -> tuple[dict[str, Any], Any]:
    """The parameter groups of the text config ``t`` (the :class:`WeightEstimate` fields but the
    format), and the last field read (a failing format names it, as it did after a fresh count)."""
    h, vocab = int(t["hidden_size"]), int(t["vocab_size"])
    n = as_int(t["num_hidden_layers"], "num_hidden_layers", minimum=1, maximum=MAX_LAYERS)
    tied = bool(t.get("tie_word_embeddings", False))
    norm = 2 * h if model_type_row(t.get("model_type")).layernorm_bias else h  # LayerNorm with bias
    hc = _hc_head(t, h)
    # a plain nn.Embedding (Gemma-3) is whole on every rank; SGLang's VocabParallelEmbedding splits the vocabulary
    embedding_units = 0 if model_type_row(t.get("model_type")).replicated_embedding else vocab
    kinds, kind_of = _layer_kinds(t, n)
    counted = {
        "model_type": str(t.get("model_type", "")),
        "embedding": (
            ParamGroup("embed_tokens", vocab * h, ParamKind.EMBEDDING, embedding_units, "model.embed_tokens"),
        ),
        "kinds": kinds,
        "kind_of": kind_of,
        "head": (
            ParamGroup("norm", norm, ParamKind.SMALL),
            *hc,
            ParamGroup("lm_head", vocab * h, ParamKind.LM_HEAD, vocab, "lm_head", _lm_head_bytes(t)),
        ),
        "mtp": _mtp(t, h, vocab, n),
        "tied": tied,
        "lm_head_every_stage": any_row(_arch(t), lambda r: r.lm_head_every_stage),
    }
    return counted, t.last_key


def _lm_head_bytes(t: Mapping[str, Any]) -> float | None:
    """4.0 where the release builds the LM head in float32 (row fact ``lm_head_fp32``: Qwen3-Next's
    ``self.lm_head = self.lm_head.float()`` in ``Qwen3NextForCausalLM.__init__`` up to 0.5.5)."""
    release = getattr(t, "release", NEWEST_SGLANG)
    return 4.0 if any_row(_arch(t), lambda r: holds_in(r, "lm_head_fp32", release)) else None


def _layer_kinds(t: Mapping[str, Any], n: int) -> tuple[tuple[LayerKind, ...], tuple[int, ...]]:
    """The distinct decoder layers of ``t`` and the kind of each of its ``n`` layers.

    A layer's groups depend on its token mixer, its feed-forward and (DeepSeek-V4) its
    compression ratio only, so one layer of each kind is built. The config is read in the order
    a layer-by-layer build reads it (layer 0 built before its key), so a broken field is named
    as it always was.
    """
    index: dict[tuple[str, str, int], int] = {}
    templates: list[_Groups] = []
    members: list[list[int]] = []
    kind_of: list[int] = []
    for i in range(n):
        mixer, ffn = _mixer(t, i), _ffn(t, i)
        first = _layer_groups(t, i, mixer, ffn) if not templates else None
        key = (mixer, ffn, _dsv4_ratio(t, i) if _is_dsv4(t) else 0)
        kind = index.get(key)
        if kind is None:
            kind = index[key] = len(templates)
            templates.append(first if first is not None else _layer_groups(t, i, mixer, ffn))
            members.append([])
        members[kind].append(i)
        kind_of.append(kind)
    kinds = tuple(LayerKind(groups, tuple(layers)) for groups, layers in zip(templates, members, strict=True))
    return kinds, tuple(kind_of)


def count_params(cfg: Mapping[str, Any]) -> tuple[int, int]:
    """``(main_params, mtp_params)`` of a raw HF config."""
    est = estimate_weights(cfg)
    return est.main_params, est.mtp_params


# --- families --------------------------------------------------------------------------------


class _TextConfig(TrackedConfig):
    """The text config an estimate reads, remembering the per-model answers (MLA? DeepSeek-V4?)
    that the per-layer readers would otherwise work out again for every layer."""

    def __init__(self, release: EngineRelease) -> None:
        super().__init__()
        self.answers: dict[str, Any] = {}
        self.release = release  # the SGLang release whose model classes are counted


def _remembered(t: Mapping[str, Any], name: str, compute: Callable[[], _A]) -> _A:
    answers: dict[str, Any] | None = getattr(t, "answers", None)
    if answers is None:
        return compute()
    if name not in answers:
        answers[name] = compute()
    answer: _A = answers[name]
    return answer


def _conventions(t: Mapping[str, Any]) -> ModelType:
    """The ``model_type`` row the per-layer readers consult (worked out once per estimate)."""
    return _remembered(t, "conventions", lambda: model_type_row(t.get("model_type")))


def _arch(t: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(a) for a in t.get("architectures") or ())


def _is_dsv4(t: Mapping[str, Any]) -> bool:
    return _remembered(t, "dsv4", lambda: any_row(_arch(t), lambda r: r.dsv4))


def _is_mla(t: Mapping[str, Any]) -> bool:
    def compute() -> bool:
        mla = any_row(_arch(t), lambda r: r.attention is Attention.MLA)
        return mla or (t.get("kv_lora_rank") is not None and not _is_dsv4(t))

    return _remembered(t, "mla", compute)


def _dsv4_ratio(t: Mapping[str, Any], i: int) -> int:
    """DeepSeek-V4 layer ``i``'s ``compress_ratios`` entry (0 past the list: no compressor)."""
    ratios = t.get("compress_ratios") or []
    return int(ratios[i]) if i < len(ratios) else 0


def _num_experts(t: Mapping[str, Any]) -> int:
    for key in ("n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts"):
        if t.get(key):
            return int(t[key])
    return 0


def _is_moe_layer(t: Mapping[str, Any], i: int) -> bool:
    """Whether layer ``i`` has routed experts (dense-first layers and interleaving rules)."""
    if _remembered(t, "experts", lambda: _num_experts(t)) == 0:
        return False
    if i in (t.get("mlp_only_layers") or ()):
        return False
    freq = t.get("moe_layer_freq")
    if isinstance(freq, list):  # MiMo-V2: one flag per layer
        return bool(freq[i])
    if i < int(t.get("first_k_dense_replace") or 0):
        return False
    if "expert_layer_period" in t:  # Jamba
        return i % int(t["expert_layer_period"]) == int(t.get("expert_layer_offset", 0))
    step = int(t.get("interleave_moe_layer_step") or t.get("decoder_sparse_step") or 1)
    if freq is not None and "first_k_dense_replace" in t:  # DeepSeek: i % moe_layer_freq == 0
        return i % int(freq) == 0
    return (i + 1) % step == 0


def _mixer(t: Mapping[str, Any], i: int) -> str:
    """Token mixer of layer ``i``: attention, mla, swa, gdn, kda, mamba1, mamba2, hybrid, none."""
    linear = _conventions(t).linear_attention
    if linear is LinearAttention.NEMOTRON_H:
        return {"M": "mamba2", "*": "attention"}.get(str(t["hybrid_override_pattern"])[i], "none")
    if linear is LinearAttention.GDN:
        return "attention" if (i + 1) % int(t.get("full_attention_interval", 4)) == 0 else "gdn"
    if linear is LinearAttention.FALCON_H1:
        return "hybrid"  # attention and Mamba2 in parallel in every layer
    if linear is LinearAttention.JAMBA:
        period, offset = int(t["attn_layer_period"]), int(t["attn_layer_offset"])
        return "attention" if i % period == offset else "mamba1"
    if "linear_attn_config" in t:  # Kimi-Linear: 1-based kda_layers (SGLang's KimiLinearConfig)
        return "kda" if i + 1 in t["linear_attn_config"]["kda_layers"] else "mla"
    if _is_mla(t):
        return "mla"
    pattern = t.get("hybrid_layer_pattern")
    if isinstance(pattern, list) and pattern[i] == 1:
        return "swa"
    return "attention"


def _ffn(t: Mapping[str, Any], i: int) -> str:
    """Feed-forward of layer ``i``: moe, dense, or none (Nemotron-H mixer-only layers)."""
    if _conventions(t).linear_attention is LinearAttention.NEMOTRON_H:
        return {"-": "dense", "E": "moe"}.get(str(t["hybrid_override_pattern"])[i], "none")
    return "moe" if _is_moe_layer(t, i) else "dense"


def _layer(t: Mapping[str, Any], i: int, index: int | None = None) -> _Groups:
    """The groups of decoder layer ``i``, their modules named ``model.layers.{index}.*``
    (``index`` defaults to ``i``; an MTP layer built like layer ``i`` passes its own)."""
    groups = _layer_groups(t, i, _mixer(t, i), _ffn(t, i))
    prefix = f"model.layers.{i if index is None else index}."
    return tuple(replace(g, module=prefix + g.module) if g.module else g for g in groups)


def _in_block(module: str, block: str) -> str:
    """``module`` (relative to its layer) as SGLang names it in a model whose layers hold one block ``block``
    (:attr:`Architecture.single_block`): ``self_attn.o_proj`` -> ``mixer.o_proj``; an ungated MLP's fused
    ``gate_up_proj`` is its ``up_proj`` (Nemotron-H's ``NemotronHMLP``)."""
    if not block:
        return module
    head, _, rest = module.partition(".")
    if head in ("self_attn", "mlp", "mixer") and rest:
        module = f"{block}.{rest}"
    return module.replace(".gate_up_proj", ".up_proj") if module.endswith(".gate_up_proj") else module


def _layer_groups(t: Mapping[str, Any], i: int, mixer: str, ffn: str) -> _Groups:
    """The groups of decoder layer ``i`` (token mixer ``mixer``, feed-forward ``ffn``), modules
    relative to the layer; groups of no parameters left out."""
    h = int(t["hidden_size"])
    groups: list[ParamGroup] = [ParamGroup("layer_norms", _layer_norms(t, h), ParamKind.SMALL)]
    if _is_dsv4(t):
        groups += _dsv4_attention(t, i)
    elif mixer in ("attention", "swa"):
        groups += _attention(t, swa=mixer == "swa")
    elif mixer == "mla":
        groups += _mla(t)
    elif mixer == "gdn":
        groups += _gdn(t)
    elif mixer == "kda":
        groups += _kda(t)
    elif mixer == "mamba1":
        groups += _mamba1(t)
    elif mixer == "mamba2":
        groups += _mamba2(t)
    elif mixer == "hybrid":
        groups += _attention(t) + _mamba2(t)
    if ffn == "moe":
        groups += _moe(t)
        if t.get("residual_moe"):  # Grok: a dense MLP beside the experts in every layer
            groups += _dense_mlp(t, i)
    elif ffn == "dense":
        groups += _dense_mlp(t, i)
    block = next((row.single_block for row in rows_for(_arch(t)) if row.single_block), "")
    return tuple(replace(g, module=_in_block(g.module, block)) if g.module else g for g in groups if g.count)


def _layer_norms(t: Mapping[str, Any], h: int) -> int:
    # Gemma-2/3: 4 (input, post-attention, pre- and post-feedforward); Nemotron-H: 1 per
    # (single-mixer) layer; Falcon: one LayerNorm (weight + bias) feeding attention and MLP = 2
    return model_type_row(t.get("model_type", "")).norms_per_layer * h


def _attention(t: Mapping[str, Any], *, swa: bool = False) -> list[ParamGroup]:
    """q/k/v/o (+bias, qk-norm, sinks, output gate). KV groups shard by KV heads (replicated < tp)."""
    h, conventions = int(t["hidden_size"]), model_type_row(t.get("model_type", ""))
    pre = "swa_" if swa and "swa_num_attention_heads" in t else ""
    nh = int(t[pre + "num_attention_heads"])
    nkv = _num_kv_heads(t, pre)
    hd = int(t.get(pre + "head_dim") or t.get("attention_head_dim") or h // int(t["num_attention_heads"]))
    vd = int(t.get(pre + "v_head_dim") or hd)
    gate = 2 if (t.get("attn_output_gate") or conventions.attn_output_gate) else 1
    bias = bool(t.get("attention_bias")) or conventions.qkv_bias or bool(t.get("bias"))
    o_bias = bias and conventions.o_proj_bias
    groups = [
        ParamGroup("q_proj", h * nh * hd * gate, ParamKind.ATTENTION, nh, "self_attn.qkv_proj"),
        ParamGroup("kv_proj", h * nkv * (hd + vd), ParamKind.ATTENTION, nkv, "self_attn.qkv_proj"),
        ParamGroup("o_proj", nh * vd * h, ParamKind.ATTENTION, nh, "self_attn.o_proj"),
    ]
    if bias:
        groups.append(ParamGroup("qkv_bias", nh * hd * gate + nkv * (hd + vd), ParamKind.SMALL, nh))
    if o_bias:
        groups.append(ParamGroup("o_bias", h, ParamKind.SMALL))
    if t.get("qk_norm_type") == "per_layer":
        groups.append(ParamGroup("qk_norm", (nh + nkv) * hd, ParamKind.SMALL, nh))
    elif conventions.qk_norm or (t.get("use_qk_norm") and not conventions.qk_norm_weightless):
        groups.append(ParamGroup("qk_norm", 2 * hd, ParamKind.SMALL))
    if conventions.attention_sinks or (swa and t.get("add_swa_attention_sink_bias")):
        groups.append(ParamGroup("sinks", nh, ParamKind.SMALL, nh))
    return groups


def _num_kv_heads(t: Mapping[str, Any], pre: str = "") -> int:
    if t.get("multi_query") and not t.get("new_decoder_architecture"):
        return 1  # Falcon-7B MQA (ModelConfig.get_num_kv_heads)
    for key in (pre + "num_key_value_heads", "num_kv_heads", "n_head_kv", "num_key_value_heads"):
        if t.get(key):
            return int(t[key])
    return int(t["num_attention_heads"])


def _mla(t: Mapping[str, Any]) -> list[ParamGroup]:
    """MLA: q (LoRA or full), kv_a (replicated), kv_b, o; plus the DSA indexer when present."""
    h, nh = int(t["hidden_size"]), int(t["num_attention_heads"])
    nope, rope, vd = int(t["qk_nope_head_dim"]), int(t["qk_rope_head_dim"]), int(t["v_head_dim"])
    kvr, qr = int(t["kv_lora_rank"]), t.get("q_lora_rank")
    # SGLang fuses q_a_proj and kv_a_proj_with_mqa into one replicated linear when q_lora_rank
    # is set (DeepseekV2AttentionMLA.fused_qkv_a_proj_with_mqa)
    kv_a = "self_attn.fused_qkv_a_proj_with_mqa" if qr else "self_attn.kv_a_proj_with_mqa"
    groups: list[ParamGroup] = []
    if qr:
        groups += [
            ParamGroup("q_a_proj", h * int(qr), ParamKind.ATTENTION, 0, kv_a),
            ParamGroup("q_a_norm", int(qr), ParamKind.SMALL),
            ParamGroup("q_b_proj", int(qr) * nh * (nope + rope), ParamKind.ATTENTION, nh, "self_attn.q_b_proj"),
        ]
    else:
        groups.append(ParamGroup("q_proj", h * nh * (nope + rope), ParamKind.ATTENTION, nh, "self_attn.q_proj"))
    groups += [
        ParamGroup("kv_a_proj", h * (kvr + rope), ParamKind.ATTENTION, 0, kv_a),
        ParamGroup("kv_a_norm", kvr, ParamKind.SMALL),
        ParamGroup("kv_b_proj", kvr * nh * (nope + vd), ParamKind.ATTENTION, nh, "self_attn.kv_b_proj"),
        ParamGroup("o_proj", nh * vd * h, ParamKind.ATTENTION, nh, "self_attn.o_proj"),
    ]
    if t.get("index_topk") is not None and qr:  # DSA lightning indexer (replicated)
        inh, ihd = int(t["index_n_heads"]), int(t["index_head_dim"])
        groups += [
            ParamGroup(
                "indexer", int(qr) * inh * ihd + h * ihd + h * inh, ParamKind.ATTENTION, 0, "self_attn.indexer"
            ),
            ParamGroup("indexer_k_norm", 2 * ihd, ParamKind.SMALL),
        ]
    return groups


def _dsv4_attention(t: Mapping[str, Any], i: int) -> list[ParamGroup]:
    """DeepSeek-V4 (approximate): q LoRA, one shared KV head, grouped low-rank output,
    compressor (ratio > 0) and indexer (ratio 4), sinks and hyper-connection mixers."""
    h, nh, hd = int(t["hidden_size"]), int(t["num_attention_heads"]), int(t["head_dim"])
    qr, olr, og = int(t["q_lora_rank"]), int(t["o_lora_rank"]), int(t["o_groups"])
    ratio = _dsv4_ratio(t, i)
    groups = [
        ParamGroup("wq_a", h * qr, ParamKind.ATTENTION),
        ParamGroup("wq_b", qr * nh * hd, ParamKind.ATTENTION, nh),
        ParamGroup("wkv", h * hd, ParamKind.ATTENTION),
        ParamGroup("wo_a", nh * hd * olr, ParamKind.ATTENTION, og),
        ParamGroup("wo_b", og * olr * h, ParamKind.ATTENTION, og),
        ParamGroup("attn_small", qr + hd + nh, ParamKind.SMALL),
        ParamGroup("hyper_connections", 2 * _hc_mixer(t, h), ParamKind.SMALL),
    ]
    if ratio:
        groups.append(_dsv4_compressor("compressor", h, hd, ratio))
    if ratio == 4:
        inh, ihd = int(t["index_n_heads"]), int(t["index_head_dim"])
        groups += [
            ParamGroup("indexer", qr * inh * ihd + h * inh, ParamKind.ATTENTION),
            _dsv4_compressor("indexer_compressor", h, ihd, ratio),
        ]
    return groups


def _dsv4_compressor(name: str, h: int, dim: int, ratio: int) -> ParamGroup:
    coff = 2 if ratio == 4 else 1  # overlapping windows for ratio 4
    return ParamGroup(name, 2 * h * coff * dim + ratio * coff * dim + dim, ParamKind.ATTENTION)


def _hc_mixer(t: Mapping[str, Any], h: int) -> int:
    m = int(t.get("hc_mult") or 0)
    mix = (2 + m) * m
    return m * h * mix + mix + 3 if m else 0


def _hc_head(t: Mapping[str, Any], h: int) -> _Groups:
    m = int(t.get("hc_mult") or 0)
    return (ParamGroup("hc_head", m * h * m + m + 1, ParamKind.SMALL),) if m else ()


def _gdn(t: Mapping[str, Any]) -> list[ParamGroup]:
    """Gated DeltaNet (Qwen3-Next/3.5): qkvz + ba projections, conv, A/dt, gated norm, out."""
    h = int(t["hidden_size"])
    nk, dk = int(t["linear_num_key_heads"]), int(t["linear_key_head_dim"])
    nv, dv = int(t["linear_num_value_heads"]), int(t["linear_value_head_dim"])
    conv = (2 * nk * dk + nv * dv) * int(t.get("linear_conv_kernel_dim", 4))
    return [
        ParamGroup("in_proj", h * (2 * nk * dk + 2 * nv * dv + 2 * nv), ParamKind.ATTENTION, nv, "linear_attn.in_proj"),
        ParamGroup("conv_A_dt_norm", conv + 2 * nv + dv, ParamKind.SMALL, nv),
        ParamGroup("out_proj", nv * dv * h, ParamKind.ATTENTION, nv, "linear_attn.out_proj"),
    ]


def _kda(t: Mapping[str, Any]) -> list[ParamGroup]:
    """Kimi Delta Attention: q/k/v, short convs, low-rank f and g gates, beta, out."""
    h, lac = int(t["hidden_size"]), t["linear_attn_config"]
    nh, hd, k = int(lac["num_heads"]), int(lac["head_dim"]), int(lac.get("short_conv_kernel_size", 4))
    inner = nh * hd
    return [
        ParamGroup("qkv_proj", 3 * h * inner, ParamKind.ATTENTION, nh, "self_attn.qkv_proj"),
        ParamGroup("gates", 2 * (h * hd + hd * inner) + h * nh, ParamKind.ATTENTION, nh, "self_attn.gates"),
        ParamGroup("conv_A_dt_norm", 3 * inner * k + nh + inner + hd, ParamKind.SMALL, nh),
        ParamGroup("o_proj", inner * h, ParamKind.ATTENTION, nh, "self_attn.o_proj"),
    ]


def _mamba2(t: Mapping[str, Any]) -> list[ParamGroup]:
    """Mamba2 mixer (Nemotron-H, Falcon-H1): in_proj, conv1d, dt/A/D, gated norm, out_proj."""
    h = int(t["hidden_size"])
    heads = int(t.get("mamba_num_heads") or t["mamba_n_heads"])
    head_dim = int(t.get("mamba_head_dim") or t.get("mamba_d_head") or 0)
    inner = int(t.get("mamba_d_ssm") or heads * head_dim or int(t.get("mamba_expand", 2)) * h)
    ng = int(t.get("n_groups") or t.get("mamba_n_groups") or 1)
    ds = int(t.get("ssm_state_size") or t["mamba_d_state"])
    kernel = int(t.get("conv_kernel") or t.get("mamba_d_conv") or 4)
    conv_dim = inner + 2 * ng * ds
    conv_bias = conv_dim if t.get("use_conv_bias", t.get("mamba_conv_bias", True)) else 0
    norm = inner if t.get("mamba_rms_norm", True) else 0
    return [
        ParamGroup("in_proj", h * (2 * inner + 2 * ng * ds + heads), ParamKind.ATTENTION, heads, "mixer.in_proj"),
        ParamGroup("conv_A_D_dt_norm", conv_dim * kernel + conv_bias + 3 * heads + norm, ParamKind.SMALL, heads),
        ParamGroup("out_proj", inner * h, ParamKind.ATTENTION, heads, "mixer.out_proj"),
    ]


def _mamba1(t: Mapping[str, Any]) -> list[ParamGroup]:
    """Mamba1 mixer (Jamba): in/x/dt/out projections, conv1d, A_log, D, dt/B/C norms."""
    h = int(t["hidden_size"])
    inner = int(t.get("mamba_expand", 2)) * h
    ds, k = int(t.get("mamba_d_state", 16)), int(t.get("mamba_d_conv", 4))
    rank = int(t.get("mamba_dt_rank") or math.ceil(h / 16))
    small = inner * k + inner + inner + inner * ds + inner + rank + 2 * ds
    return [
        ParamGroup("in_proj", h * 2 * inner, ParamKind.ATTENTION, inner, "mamba.in_proj"),
        ParamGroup("x_dt_proj", inner * (rank + 2 * ds) + rank * inner, ParamKind.ATTENTION, inner, "mamba.x_proj"),
        ParamGroup("conv_A_D_norms", small, ParamKind.SMALL, inner),
        ParamGroup("out_proj", inner * h, ParamKind.ATTENTION, inner, "mamba.out_proj"),
    ]


def gated_mlp(cfg: Mapping[str, Any]) -> bool:
    """Whether the model's MLPs and experts are gated (gate and up fused: ``2 I`` outputs), as
    SGLang builds them; a ``relu2`` MLP (Nemotron-H) is not."""
    return _gated(_text(cfg))


def _gated(t: Mapping[str, Any]) -> bool:
    act = str(t.get("mlp_hidden_act") or "")
    return model_type_row(t.get("model_type")).gated_mlp and act != "relu2"


def _dense_mlp(t: Mapping[str, Any], i: int) -> list[ParamGroup]:
    h = int(t["hidden_size"])
    size = t.get("intermediate_size_mlp") or t.get("ffn_hidden_size") or t.get("intermediate_size")
    inter = int(size) if size else 4 * h  # Falcon-7B: 4h, no gate
    groups = _mlp_pair(t, "mlp", "mlp", h, inter)
    if model_type_row(t.get("model_type")).mlp_bias:  # Phi-3-small: up_proj (column) and down_proj (row) biases
        groups += [
            ParamGroup("mlp.gate_up_bias", (2 if _gated(t) else 1) * inter, ParamKind.SMALL, inter),
            ParamGroup("mlp.down_bias", h, ParamKind.SMALL),
        ]
    return groups


def _mlp_pair(t: Mapping[str, Any], name: str, module: str, h: int, inter: int, copies: int = 1) -> list[ParamGroup]:
    """A (gated) MLP as SGLang builds it: ``{module}.gate_up_proj`` (column-parallel, ``2 h I``
    or ``h I`` ungated) and ``{module}.down_proj`` (row-parallel, ``h I``), split over ``I``."""
    up = 2 if _gated(t) else 1
    return [
        ParamGroup(f"{name}.gate_up_proj", copies * up * h * inter, ParamKind.DENSE, inter, f"{module}.gate_up_proj"),
        ParamGroup(f"{name}.down_proj", copies * h * inter, ParamKind.DENSE, inter, f"{module}.down_proj"),
    ]


def _moe(t: Mapping[str, Any]) -> list[ParamGroup]:
    """Routed experts (+gpt-oss biases), router (+correction bias), shared experts."""
    h, e = int(t["hidden_size"]), _num_experts(t)
    im = int(t.get("moe_intermediate_size") or t["intermediate_size"])
    conventions = model_type_row(t.get("model_type", ""))
    block = next((row.moe_block for row in rows_for(_arch(t))), "mlp")
    # gated experts hold gate, up and down (3 h I); a relu2 MLP (Nemotron-H) only up and down
    # (sglang/srt/models/nemotron_h.py, NemotronHMoE: FusedMoE with is_gated=False)
    latent = _moe_latent_size(t)
    per_expert = (3 if _gated(t) else 2) * (latent or h) * im
    groups = [ParamGroup("experts", e * per_expert, ParamKind.EXPERT, e * im, f"{block}.experts")]
    if latent:
        groups += [
            ParamGroup("fc1_latent_proj", h * latent, ParamKind.DENSE, 0, f"{block}.fc1_latent_proj"),
            ParamGroup("fc2_latent_proj", latent * h, ParamKind.DENSE, 0, f"{block}.fc2_latent_proj"),
        ]
    router = h * e
    if conventions.moe_expert_bias:
        groups.append(ParamGroup("expert_bias", e * (2 * im + h), ParamKind.SMALL, e))
        router += e
    elif t.get("topk_method") == "noaux_tc" or t.get("use_routing_bias") or conventions.moe_router_bias:
        # e_score_correction_bias: float32 (deepseek_v2.MoEGate, minimax_m2.MiniMaxM2MoE, glm4_moe.Glm4MoeGate)
        groups.append(ParamGroup("e_score_correction_bias", e, ParamKind.ROUTER, 0, "", 4.0))
    # a float32 router where the release builds it so (row fact router_fp32: GLM-4.5's Glm4MoeGate from 0.5.19)
    release = getattr(t, "release", NEWEST_SGLANG)
    fp32 = 4.0 if any_row(_arch(t), lambda r: holds_in(r, "router_fp32", release)) else None
    groups.append(ParamGroup("router", router, ParamKind.ROUTER, 0, f"{block}.gate", fp32))
    n_shared = int(t.get("n_shared_experts") or t.get("num_shared_experts") or 0)
    shared_size = int(t.get("shared_expert_intermediate_size") or 0)
    if n_shared and t.get("moe_shared_expert_intermediate_size"):
        # Nemotron-H: one MLP of moe_shared_expert_intermediate_size x n_shared_experts (NemotronHMoE.shared_experts)
        wide = int(t["moe_shared_expert_intermediate_size"]) * n_shared
        groups += _mlp_pair(t, "shared_experts", f"{block}.shared_experts", h, wide)
    elif n_shared:
        groups += _mlp_pair(t, "shared_experts", f"{block}.shared_experts", h, im, n_shared)
    elif shared_size:
        groups += [
            *_mlp_pair(t, "shared_expert", f"{block}.shared_expert", h, shared_size),
            ParamGroup("shared_expert_gate", h, ParamKind.ROUTER, 0, f"{block}.shared_expert_gate"),
        ]
    elif conventions.moe_shared_expert:
        groups += _mlp_pair(t, "shared_expert", f"{block}.shared_expert", h, im)
    return groups


def _moe_latent_size(t: Mapping[str, Any]) -> int:
    """Nemotron-H's latent MoE: the routed experts work in ``moe_latent_size`` instead of ``hidden_size``,
    between two replicated projections ``fc1_latent_proj`` (h -> latent) and ``fc2_latent_proj`` (latent -> h)
    (``sglang/srt/models/nemotron_h.py`` ``NemotronHMoE.__init__``: ``moe_hidden_size``, ``use_latent_moe``);
    0 for every other MoE."""
    if model_type_row(t.get("model_type")).linear_attention is not LinearAttention.NEMOTRON_H:
        return 0
    latent = t.get("moe_latent_size")
    return int(latent) if isinstance(latent, int) and not isinstance(latent, bool) and latent > 0 else 0


def _mtp(t: Mapping[str, Any], h: int, vocab: int, n: int) -> _Groups:
    """MTP/NextN layers: DeepSeek/GLM style (``num_nextn_predict_layers``: enorm, hnorm, eh_proj,
    one MoE decoder layer, its own embedding and shared head), Qwen3.5 ``mtp_num_hidden_layers``
    and MiniMax ``num_mtp_modules`` (no embedding/head copies)."""
    nextn = int(t.get("num_nextn_predict_layers") or 0)
    own = int(t.get("mtp_num_hidden_layers") or 0) or (
        int(t.get("num_mtp_modules") or 0) * int(t.get("mtp_transformer_layers") or 1) if t.get("use_mtp") else 0
    )
    count = nextn or own
    if not count:
        return ()
    groups: list[ParamGroup] = []
    last = n - 1  # the MTP block is built like the last (MoE, full-attention) layer
    while _mixer(t, last) not in ("attention", "mla") and last > 0 and not _is_dsv4(t):
        last -= 1
    for j in range(count):
        groups += _layer(t, last if not _is_dsv4(t) else n + j, n + j)  # the checkpoint's layers.{n + j}
        groups += [
            ParamGroup("mtp_norms", 3 * h, ParamKind.SMALL),
            ParamGroup("eh_proj", 2 * h * h, ParamKind.DENSE, 0, f"model.layers.{n + j}.eh_proj"),
        ]
        if nextn and not _is_dsv4(t):
            at = f"model.layers.{n + j}"
            groups += [
                ParamGroup("mtp_embed_tokens", vocab * h, ParamKind.EMBEDDING, vocab, f"{at}.embed_tokens"),
                ParamGroup("mtp_shared_head", vocab * h, ParamKind.LM_HEAD, vocab, f"{at}.shared_head.head"),
            ]
    return tuple(groups)


def moonvit_groups(cfg: Mapping[str, Any]) -> _Groups:
    """Kimi-K2.5's MoonViT tower and patch-merger projector, group by group (empty for other towers).

    SGLang builds (``sglang/srt/models/kimi_k25.py``): per encoder block a ``VisionAttention``
    whose ``wqkv`` (``3 h x h`` + bias) and ``wo`` (``h x h``, replicated bias) split over the
    attention-TP group by heads, an ``MLP2`` of two plain ``nn.Linear`` (``i x h`` + bias, ``h x i``
    + bias: replicated) and two LayerNorms; the patch embedding (``h x 3 x p x p`` + bias), the
    fixed position table (``init_pos_emb_height x init_pos_emb_width x h``) and a final LayerNorm;
    the ``K2VLMultiModalProjector``: a LayerNorm and two ``ReplicatedLinear`` of
    ``(h m^2)^2 + h m^2`` and ``text_hidden x h m^2 + text_hidden`` (``m x m``: ``merge_kernel_size``).
    All in the model dtype: the tower gets no quantization config.
    """
    v = cfg.get("vision_config")
    if not isinstance(v, Mapping) or "vt_hidden_size" not in v:
        return ()
    h, inter = int(v["vt_hidden_size"]), int(v["vt_intermediate_size"])
    layers, heads, patch = int(v["vt_num_hidden_layers"]), int(v["vt_num_attention_heads"]), int(v["patch_size"])
    merge = v.get("merge_kernel_size") or [2, 2]
    m2 = int(merge[0]) * int(merge[1])
    text_h = int(v.get("text_hidden_size") or _text(cfg)["hidden_size"])
    pos = int(v.get("init_pos_emb_height", 64)) * int(v.get("init_pos_emb_width", 64)) * h
    return (
        ParamGroup("vision.wqkv", layers * (3 * h * h + 3 * h), ParamKind.SMALL, heads, "vision_tower.wqkv"),
        ParamGroup("vision.wo", layers * h * h, ParamKind.SMALL, heads, "vision_tower.wo"),
        ParamGroup("vision.replicated", layers * (2 * h * inter + inter + 2 * h + 4 * h), ParamKind.SMALL),
        ParamGroup("vision.embeddings", h * 3 * patch * patch + h + pos + 2 * h, ParamKind.SMALL),
        ParamGroup("mm_projector", 2 * h + (h * m2) ** 2 + h * m2 + text_h * h * m2 + text_h, ParamKind.SMALL),
    )


def vision_tower_params(cfg: Mapping[str, Any]) -> int:
    """Approximate parameters of a ViT-style vision tower and its projector (0 without one).

    ``layers * (4 h^2 + 2 h i)`` (attention q/k/v/o and a two-matrix MLP of ``vision_config``;
    ``3 h i`` for a gated one, the model-type row's ``vision_gated_mlp``)
    + the patch embedding (``channels * temporal * patch^2 * h``) + a merger/projector of
    ``(h m^2)^2 + h m^2 * out`` (``spatial_merge_size`` m, ``out_hidden_size``; Gemma-3's
    ``mm_input_projection`` when the text hidden size is given), once more per Qwen3-VL deepstack
    layer, + a learned position table of ``num_position_embeddings x h``. Norms and biases are
    left out (under 1% of a tower). An estimate: pass a checkpoint for exact bytes.

    Qwen2-VL's ``vision_config`` names the width ``embed_dim``, the MLP ``mlp_ratio x embed_dim``, the
    channels ``in_chans`` and the merger's output ``hidden_size`` (``sglang/srt/models/qwen2_vl.py``,
    ``Qwen2VisionTransformer``: ``Qwen2VisionBlock`` of ``VisionAttention`` qkv/proj and
    ``Qwen2VisionMLP`` fc1/fc2, ``Qwen2VisionPatchEmbed``, ``Qwen2VisionPatchMerger``).
    """
    v = cfg.get("vision_config")
    if not isinstance(v, Mapping):
        return 0

    def num(key: str, default: int = 0) -> int:
        value = v.get(key, default)
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default

    h, inter, merger_out = num("hidden_size"), num("intermediate_size"), 0
    if num("embed_dim") and not inter:  # Qwen2-VL: hidden_size is the merger's output
        h, merger_out = num("embed_dim"), h
        ratio = v.get("mlp_ratio", 4)
        inter = int(h * ratio) if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) else 0
    layers = num("num_hidden_layers") or num("depth")
    if not (h and inter and layers):
        return 0
    patch = num("patch_size", 14)
    channels = num("num_channels") or num("in_channels") or num("in_chans") or 3
    embed = channels * max(1, num("temporal_patch_size", 1)) * patch * patch * h
    merge = num("spatial_merge_size")
    text_h = int(_text(cfg).get("hidden_size") or 0)
    out = num("out_hidden_size") or merger_out or text_h
    projector = (h * merge * merge) ** 2 + h * merge * merge * out if merge else h * out
    # Qwen3-VL: one more merger per deepstack layer (sglang/srt/models/qwen3_vl.py,
    # Qwen3VLMoeVisionModel.deepstack_merger_list) and a learned position table
    # (num_position_embeddings x h, Qwen3VLMoeVisionModel.pos_embed)
    deepstack = v.get("deepstack_visual_indexes")
    mergers = 1 + (len(deepstack) if isinstance(deepstack, list) else 0)
    positions = num("num_position_embeddings") * h
    mlp = (3 if model_type_row(cfg.get("model_type")).vision_gated_mlp else 2) * h * inter
    return layers * (4 * h * h + mlp) + embed + mergers * projector + positions
