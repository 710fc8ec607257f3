"""The weights one vLLM worker holds ("Model loading took X GiB"), per pipeline stage, in bytes.

vLLM's ``model_memory_usage`` (``vllm/v1/worker/gpu/model_runner.py``, logged as "Model loading
took") is the torch memory after ``load_model``: the stage's parameters at their loaded dtypes plus
its buffers. The parameters come from the project's weight estimate
(:mod:`kvstrategies.planner.weights`, which prices FP8 / MXFP4 / NVFP4 / AWQ / GPTQ checkpoints),
or the checkpoint's safetensors headers when a folder is given (:mod:`kvstrategies.planner.checkpoint`),
or ``--weight-bytes``. The estimate counts the groups as SGLang's model classes hold them; where
vLLM's classes hold them otherwise, :func:`vllm_layout` says so (each step citing vLLM's code), and a
multimodal model's vision tower is added to the first stage (:func:`tower_bytes`). The buffers added
here are the rotary embeddings' ``cos_sin_cache`` tensors as ``get_rope`` builds and shares them
(:func:`rope_buffer_bytes`) and each attention layer's scales (:func:`attention_layer_scale_bytes`).
Held to vLLM's own model built on ``meta`` by the weight recordings
(``golden/vllm-<v>-weights``, :mod:`kvstrategies.vllm.planner.weight_catalog`), whose listed differences say
what is not modelled: a kernel's repacking at load (MXFP4 MoE padding,
``mxfp4_round_up_hidden_size_and_intermediate_size`` in
``vllm/model_executor/layers/fused_moe/oracle/mxfp4.py``), MLA's absorbed projections.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ...core.dtypes import DType
from ...core.releases import VLLM, EngineRelease, ReleaseRule, span
from ...models.architectures import model_type_row
from ...models.hf import text_config
from ...planner.checkpoint import ShardingFacts, rank_bytes, read_checkpoint
from ...planner.moe_layout import num_routed_experts
from ...planner.weights import ParamKind, WeightEstimate, estimate_weights

GIB = 2**30
#: up to vLLM 0.27.1 every attention layer also holds ``q_range``, ``k_range``, ``v_range`` (float32 scalars, the
#: constants of ``calc_kv_scales``: ``vllm/model_executor/layers/attention/attention.py set_default_quant_scales``)
ATTENTION_RANGE_CONSTANTS = ReleaseRule(
    "vllm-attention-range-constants",
    span(last="0.27.1", engine=VLLM),
    "every attention layer holds three float32 range constants (q_range, k_range, v_range: 12 B) beside its four "
    "scales",
    "vllm/model_executor/layers/attention/attention.py set_default_quant_scales (vllm/attention/layer.py in the "
    "older releases)",
    topic="weights",
)
#: the four float32 scalars every attention layer registers as buffers (``_k_scale``, ``_v_scale``, ``_q_scale``,
#: ``_prob_scale``: ``vllm/model_executor/layers/attention/attention.py set_default_quant_scales``), in bytes
ATTENTION_SCALE_BYTES = 4 * 4


@dataclass(frozen=True)
class VLLMWeights:
    """Bytes each pipeline stage's worker holds after loading (rank 0 of the stage), and their source."""

    per_stage: tuple[int, ...]
    source: str

    @property
    def fullest(self) -> int:
        return max(self.per_stage)


#: the rope types whose cache holds ``max_position x factor`` rows (``LinearScalingRotaryEmbedding``,
#: ``DynamicNTKScalingRotaryEmbedding``) and ``original_max_position_embeddings x factor`` (YaRN), in
#: ``vllm/model_executor/layers/rotary_embedding/__init__.py get_rope``
_SCALED_ROWS = ("linear", "dynamic")
_YARN_ROWS = ("yarn", "deepseek_yarn")


def rope_buffer_bytes(config: Mapping[str, Any], dtype: DType) -> int:
    """Bytes of the ``cos_sin_cache`` buffers ``get_rope`` builds (one per distinct rotary setting, shared by the
    layers that ask for it): ``rows x rotary_dim x dtype``, ``rotary_dim`` = ``qk_rope_head_dim`` or ``head_dim x
    partial_rotary_factor``; ``rows`` = ``max_position_embeddings`` (the model type's config-class default when
    config.json has none: Gemma-3 131,072, Falcon 2,048), times the factor for linear and dynamic-NTK scaling, or
    ``original_max_position_embeddings x factor`` for YaRN. A second, unscaled cache where some layers have a rope
    base of their own (Gemma-3's local layers, MiMo-V2's sliding-window layers: ``swa_rope_theta``; DeepSeek-V4's
    compressed layers: ``compress_rope_theta``); float32 where the model class asks for it (the model type's
    ``vllm_rope_float32``: gpt-oss; DeepSeek-V4, ``DeepseekV4ScalingRotaryEmbedding``)."""
    t = text_config(config)
    row = model_type_row(t.get("model_type") or config.get("model_type"))
    defaults = dict(row.geometry_defaults)

    def num(key: str, where: Mapping[str, Any] = t) -> float:
        value = where.get(key, config.get(key, defaults.get(key)))
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0

    heads, hidden = num("num_attention_heads"), num("hidden_size")
    if not heads or not hidden:
        return 0
    rotary = int(num("qk_rope_head_dim") or (num("head_dim") or hidden / heads) * (num("partial_rotary_factor") or 1.0))
    rows = int(num("max_position_embeddings"))
    scaling = t.get("rope_scaling") or t.get("rope_parameters")
    scaled = rows
    if isinstance(scaling, Mapping):
        kind = str(scaling.get("rope_type") or scaling.get("type") or "")
        factor = num("factor", scaling)
        if kind in _SCALED_ROWS and factor:
            scaled = int(rows * factor)
        elif kind in _YARN_ROWS and factor and num("original_max_position_embeddings", scaling):
            scaled = int(num("original_max_position_embeddings", scaling) * factor)
    own_theta = t.get("swa_rope_theta", t.get("compress_rope_theta"))
    second = rows if row.rope_per_layer_type or (own_theta is not None and own_theta != t.get("rope_theta")) else 0
    itemsize = 4 if row.vllm_rope_float32 else dtype.itemsize
    return (scaled + second) * rotary * itemsize


def vllm_layout(estimate: WeightEstimate) -> WeightEstimate:
    """The estimate's groups as vLLM's model classes hold them, where SGLang's differ:

    * every token embedding is a ``VocabParallelEmbedding``, its vocabulary split over TP (SGLang's
      Gemma-3 keeps a plain ``nn.Embedding`` whole on every rank; ``vllm/model_executor/models/gemma3.py
      Gemma3Model.__init__``);
    * an untied ``lm_head`` lives on the last pipeline stage only (``PPMissingLayer`` on the others; e.g.
      ``vllm/model_executor/models/llama.py LlamaForCausalLM.__init__``), where some SGLang classes build
      it on every stage.
    """
    vocab = next((g.tp_units for g in estimate.head if g.kind is ParamKind.LM_HEAD), 0)
    embedding = tuple(replace(g, tp_units=vocab) if g.kind is ParamKind.EMBEDDING and not g.tp_units else g
                      for g in estimate.embedding)  # fmt: skip
    return replace(estimate, embedding=embedding, lm_head_every_stage=False)


def attention_scale_bytes(estimate: WeightEstimate, pp: int, pp_rank: int, per_layer: int) -> int:
    """``per_layer`` bytes for each attention layer of stage ``pp_rank`` (a layer whose groups live under
    ``self_attn``; linear-attention and Mamba mixers register no attention scales)."""
    from ...planner.weights import get_pp_indices

    start, end = get_pp_indices(estimate.num_layers, pp_rank, pp)
    attention = [any(g.module.startswith("self_attn.") for g in kind.groups) for kind in estimate.kinds]
    return per_layer * sum(attention[estimate.kind_of[layer]] for layer in range(start, end))


#: ``--enable-expert-parallel`` is planned from this release (its weights recorded by 0.33.0 and 0.34.0 through the
#: bridge; older releases: refused, not recorded)
EXPERT_PARALLEL = ReleaseRule(
    "vllm-expert-parallel",
    span("0.33.0", engine=VLLM),
    "--enable-expert-parallel is planned: whole experts a rank and each MoE layer's int32 expert map (older "
    "releases: refused, not recorded)",
    "vllm/model_executor/layers/fused_moe/layer.py FusedMoE.__init__ (determine_expert_map)",
    topic="weights",
)


def _stage_layers_with_experts(estimate: WeightEstimate, pp: int, pp_rank: int) -> tuple[int, ...]:
    """The decoder layers of stage ``pp_rank`` that hold routed experts."""
    from ...planner.weights import get_pp_indices

    start, end = get_pp_indices(estimate.num_layers, pp_rank, pp)
    return tuple(layer for layer in range(start, end)
                 if any(g.kind is ParamKind.EXPERT for g in estimate.groups_of(layer)))  # fmt: skip


def stage_expert_bytes(estimate: WeightEstimate, split: int, pp: int, pp_rank: int, *, mtp: bool = False) -> float:
    """Bytes of routed experts one rank of stage ``pp_rank`` holds when each expert is split over ``split`` ranks
    (``sum over expert layers of per_rank(split) x bytes per parameter``; ``mtp``: the last stage's MTP layers'
    experts too)."""
    total = 0.0
    for layer in _stage_layers_with_experts(estimate, pp, pp_rank):
        kinds = [g.kind for g in estimate.groups_of(layer)]
        terms = estimate.layer_terms(layer, split)
        total += sum(t for t, kind in zip(terms, kinds, strict=True) if kind is ParamKind.EXPERT)
    if mtp and pp_rank == pp - 1:
        total += sum(g.per_rank(split) * estimate.fmt.bytes_for(g) for g in estimate.mtp if g.kind is ParamKind.EXPERT)
    return total


def expert_parallel_bytes(estimate: WeightEstimate, num_experts: int, tp: int, pp: int, pp_rank: int) -> int:
    """What ``--enable-expert-parallel`` adds to a rank of stage ``pp_rank`` over the TP split of the experts over
    the ``tp`` ranks they span (EP = TP x DP): each MoE layer's ``expert_map`` (int32 a global expert:
    ``FusedMoE.__init__`` -> ``determine_expert_map``), and where ``E`` is not a multiple of ``tp`` the first ranks'
    one more whole expert (``ceil(E / tp)`` of ``E``; the experts' bytes are otherwise those of the TP split, a rank
    holding ``E / tp`` experts whole instead of ``1 / tp`` of each)."""
    layers = len(_stage_layers_with_experts(estimate, pp, pp_rank))
    expert_bytes = stage_expert_bytes(estimate, tp, pp, pp_rank)
    local = -(-num_experts // tp)
    uneven = expert_bytes * (local * tp / num_experts - 1) if num_experts else 0.0
    return 4 * num_experts * layers + round(uneven)


def _with_moe_split(
    stages: tuple[int, ...], estimate: WeightEstimate, config: Mapping[str, Any], tp: int, pp: int, *,
    moe_tp: int, expert_parallel: bool, mtp: bool,
) -> tuple[tuple[int, ...], str]:
    """The stages with the routed experts over ``moe_tp`` ranks (DP x TP) instead of the ``tp`` the stages were
    split over, whole under ``--enable-expert-parallel`` (:func:`expert_parallel_bytes`), and the source's note."""
    experts = num_routed_experts(config)
    extra = [0] * pp
    note = ""
    if moe_tp != tp:
        for r in range(pp):
            moved = stage_expert_bytes(estimate, moe_tp, pp, r, mtp=mtp) - stage_expert_bytes(estimate, tp, pp, r,
                                                                                               mtp=mtp)
            extra[r] += round(moved)
        note = f"; routed experts over DP x TP = {moe_tp} ranks (FusedMoEParallelConfig.make)"
    if expert_parallel:
        for r in range(pp):
            extra[r] += expert_parallel_bytes(estimate, experts, moe_tp, pp, r)
        note = (f"; experts over EP {moe_tp} ({-(-experts // moe_tp)} of {experts} whole experts a rank, and the "
                "expert maps)")  # fmt: skip
    return tuple(s + e for s, e in zip(stages, extra, strict=True)), note


def attention_layer_scale_bytes(config: Mapping[str, Any], dtype: DType, quantization: str | None,
                                release: EngineRelease | None = None) -> int:  # fmt: skip
    """The scale bytes one attention layer holds: :data:`ATTENTION_SCALE_BYTES`, and under an FP8 method (a
    ``quant_method: fp8`` checkpoint or ``--quantization fp8``) on a non-MLA layer the four KV-cache scale
    parameters in the model dtype (``q_scale``, ``k_scale``, ``v_scale``, ``prob_scale``: ``Fp8Config.get_quant_method``
    gives the layer ``Fp8KVCacheMethod``, ``vllm/model_executor/layers/quantization/kv_cache.py
    BaseKVCacheMethod.create_weights``; kept after loading)."""
    t = text_config(config)
    qcfg = t.get("quantization_config") or config.get("quantization_config")
    method = quantization or (str(qcfg.get("quant_method") or "").lower() if isinstance(qcfg, Mapping) else "")
    fp8_kv = method == "fp8" and not t.get("kv_lora_rank")
    ranges = 3 * 4 if release is not None and ATTENTION_RANGE_CONSTANTS.holds(release) else 0
    return ATTENTION_SCALE_BYTES + ranges + (4 * dtype.itemsize if fp8_kv else 0)


def tower_bytes(config: Mapping[str, Any], tp: int, base: float) -> tuple[int, str]:
    """The vision tower of a multimodal model on the first stage: split over TP as vLLM's default
    ``mm_encoder_tp_mode`` (``weights``) shards it, absent from later stages ("encoders run on the first
    stage only": ``vllm/model_executor/models/interfaces.py SupportsMultiModal._mark_tower_model``)."""
    from ...sglang.budget import vision_tower_bytes

    return vision_tower_bytes(config, tp, tp, base)


def vllm_weights(
    config: Mapping[str, Any],
    *,
    tp: int,
    pp: int,
    dtype: DType,
    quantization: str | None = None,
    weight_bytes: int | None = None,
    checkpoint: str | None = None,
    mtp: bool = False,
    release: EngineRelease | None = None,
    expert_parallel: bool = False,
    moe_tp: int | None = None,
) -> VLLMWeights:
    """Each stage's resident weight bytes (see the module doc); ``mtp``: the last stage also holds the MTP
    draft's layers (its embedding and head are the target's: ``maybe_share_target_embed``,
    ``share_target_lm_head`` in ``vllm/v1/worker/gpu/spec_decode/eagle/utils.py``); ``moe_tp``: the ranks a MoE
    layer's routed experts span (``--data-parallel-size`` x TP; ``tp`` when ``None``)."""
    moe_split = tp if moe_tp is None else moe_tp
    rope = rope_buffer_bytes(config, dtype)
    rope_text = f" + {rope / 2**20:.1f} MiB RoPE cos_sin_cache" if rope else ""
    if weight_bytes is not None:
        return VLLMWeights((weight_bytes,) * pp, "given per rank (--weight-bytes)")
    ckpt = read_checkpoint(checkpoint) if checkpoint is not None and quantization is None else None
    if ckpt is not None and ckpt.source == "headers":
        facts = ShardingFacts.from_config(config, serve_bytes=dtype.itemsize)
        stages = tuple(rank_bytes(ckpt, facts, tp=tp, pp=pp, pp_rank=r, include_mtp=mtp) + rope for r in range(pp))
        draft_text = ""
        if mtp:
            draft = stages[-1] - rope - rank_bytes(ckpt, facts, tp=tp, pp=pp, pp_rank=pp - 1)
            draft_text = f"; + {draft / GIB:.2f} GiB of MTP draft layers on the last stage"
        if expert_parallel or moe_split != tp:
            estimate = vllm_layout(estimate_weights(config, dtype=dtype.torch_name, quantization=quantization))
            stages, ep_text = _with_moe_split(stages, estimate, config, tp, pp, moe_tp=moe_split,
                                              expert_parallel=expert_parallel, mtp=mtp)  # fmt: skip
            draft_text += ep_text
        return VLLMWeights(stages, f"from the {ckpt.label}, split over TP {tp} x PP {pp}{rope_text}{draft_text}")
    estimate = vllm_layout(estimate_weights(config, dtype=dtype.torch_name, quantization=quantization))
    tower, tower_text = tower_bytes(config, tp, estimate.fmt.base_bytes)
    per_layer = attention_layer_scale_bytes(config, dtype, quantization, release)
    stages = tuple(estimate.stage_bytes(tp, pp, r, include_mtp=mtp) + attention_scale_bytes(estimate, pp, r, per_layer)
                   + rope + (tower if r == 0 else 0) for r in range(pp))  # fmt: skip
    notes = "".join(f"; note: {n}" for n in estimate.fmt.notes) + tower_text
    if expert_parallel or moe_split != tp:
        stages, ep_text = _with_moe_split(stages, estimate, config, tp, pp, moe_tp=moe_split,
                                          expert_parallel=expert_parallel, mtp=mtp)  # fmt: skip
        notes += ep_text
    if mtp:
        draft = estimate.stage_bytes(tp, pp, pp - 1, include_mtp=True) - estimate.stage_bytes(tp, pp, pp - 1)
        notes += f"; + {draft / GIB:.2f} GiB of MTP draft layers on the last stage"
    return VLLMWeights(
        stages,
        f"estimated from the config: {estimate.main_params / 1e9:.2f}B parameters, {estimate.fmt.name}, "
        f"split over TP {tp} x PP {pp}{rope_text}{notes}",
    )
