"""What SGLang keeps on the GPU beyond the checkpoint's own tensors, per rank, after the weights load.

The ``Load weight end ... mem usage`` a server logs is measured after every layer's
``process_weights_after_loading``, so it holds more than the stored tensors where SGLang pads,
copies or keeps index buffers. Each extra below is what the named SGLang code allocates (bytes per
rank):

* **expert padding**: the FlashInfer TRT-LLM MoE runner and ROCm's aiter fp8 MoE store each local
  expert with its columns rounded up to 128 (:mod:`.moe_layout`): ``expert bytes x (stored /
  columns - 1)``;
* **MLA absorbed projections**: DeepSeek-style attention splits ``kv_b_proj`` into ``w_kc`` and
  ``w_vc`` copies and keeps both beside it (``sglang/srt/models/deepseek_common/
  deepseek_weight_loader.py``, ``post_load_weights``): ``kv_lora_rank x heads / attn_tp x
  (qk_nope + v_head)`` values per layer, in bf16 (2 bytes) from a 16-bit ``kv_b_proj`` or a
  128 x 128 block-FP8 one on CUDA (``block_quant_dequant``), in fp8 (1 byte) from an fp8 one on
  ROCm (``block_quant_to_tensor_quant``);
* **NVFP4 experts' swizzled scales**: ModelOpt NVFP4 MoE keeps a second fp8 copy of every
  expert block-scale tensor, swizzled and padded (``modelopt_quant.py``,
  ``ModelOptNvFp4FusedMoEMethod.create_weights``: ``w13_blockscale_swizzled`` and
  ``w2_blockscale_swizzled`` from ``quantization/utils.py``, ``swizzle_blockscale``, rows rounded
  up to 128 and scale columns to 4), unless the MoE runner is FlashInfer TRT-LLM, which aliases
  the originals: ``local experts x (r128(2 c) x r4(h / 16) + r128(h) x r4(c / 16))`` bytes per
  NVFP4 MoE layer (``c`` columns per rank, ``h`` hidden; ``c`` instead of ``2 c`` for ungated
  experts);
* **ROCm INT4 experts' index buffers**: compressed-tensors W4A16 experts on ROCm run on the Triton
  kernel (``CompressedTensorsWNA16TritonMoE``), which keeps the ``w13/w2_weight_g_idx`` and
  ``*_g_idx_sort_indices`` int32 buffers its parent creates (``compressed_tensors_wNa16_moe.py``,
  ``CompressedTensorsWNA16MoE.create_weights``); the CUDA Marlin path empties them:
  ``2 x local experts x (hidden + columns) x 4`` bytes per MoE layer;
* **a self-draft's own embedding and LM head**: an MTP / NextN draft (the target checkpoint's
  own MTP layers, no ``--speculative-draft-model-path`` of another model) builds a
  ``VocabParallelEmbedding`` and a ``ParallelLMHead`` of its own (``Qwen3_5ForCausalLMMTP``,
  ``DeepseekModelNextN``, ``Glm4MoeModelNextN``, ``MiMoV2MTP`` ...). They are swapped for the
  target's tensors only in ``EAGLEWorkerV2.alloc_memory_pool`` (``init_lm_head`` ->
  ``set_embed_and_head``), which ``Scheduler.init_memory_pools`` calls after
  ``init_target_memory_pool`` has sized the KV cache from the free memory: while the pool is
  sized both copies are resident (sgl-project/sglang#36452). ``rows x hidden x bytes`` each,
  ``rows = pad(vocab, 64) / tp`` (padded to ``64 x tp`` when that does not divide:
  ``VocabParallelEmbedding.__init__``); no head of its own when the embeddings are tied;
* **a separate draft model** (``--speculative-draft-model-path`` naming another model): loaded by
  the draft worker before the pool is sized, all of it (:mod:`.draft_model`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..models.hf import text_config
from ..planner.moe_layout import MoELayout
from ..planner.request import DeploymentRequest
from ..planner.weight_quant import MIXED_PRECISION_LABEL
from ..planner.weights import ParamGroup, ParamKind, WeightEstimate, gated_mlp
from .draft_model import draft_model_bytes, vocab_rows_per_rank


@dataclass(frozen=True)
class ResidentExtra:
    """``nbytes`` one rank keeps beyond the stored tensors, and why (SGLang's code)."""

    name: str
    nbytes: int
    reason: str


def resident_extras(
    req: DeploymentRequest, config: Mapping[str, Any], estimate: WeightEstimate, layout: MoELayout | None
) -> tuple[ResidentExtra, ...]:
    """The extras of the fullest rank of ``req`` (module doc); layers split by PP like the weights."""
    share = _stage_share(estimate.num_layers, req.pp_size)
    out = [
        extra
        for extra in (
            _expert_padding(req, estimate, layout, share),
            _mla_copies(req, config, estimate, share),
            _rocm_wna16_indices(req, config, estimate, layout, share),
            _nvfp4_swizzled_scales(config, estimate, layout, share),
            _self_draft_copies(req, config, estimate),
            _draft_model(req, estimate),
        )
        if extra is not None and extra.nbytes > 0
    ]
    return tuple(out)


def _stage_share(layers: int, pp: int) -> float:
    """The fullest stage's share of the decoder layers (``get_pp_indices`` gives it the extras)."""
    return -(-layers // pp) / layers if layers else 1.0


def _quantized_experts(estimate: WeightEstimate) -> tuple[float, int]:
    """``(bytes per rank-parameter of the first expert group, in layer order; expert groups)``."""
    layers = sum(
        len(kind.layers) for kind in estimate.kinds for group in kind.groups if group.kind is ParamKind.EXPERT
    )
    for layer in estimate.distinct_layers():
        for pos, group in enumerate(estimate.groups_of(layer)):
            if group.kind is ParamKind.EXPERT:
                per = estimate.price(layer, pos)
                if per:
                    return per, layers
    return 0.0, layers


def _expert_bytes(estimate: WeightEstimate, tp: int) -> float:
    """Bytes one rank holds of every routed-expert group, summed in layer order."""
    positions = [
        tuple(pos for pos, g in enumerate(kind.groups) if g.kind is ParamKind.EXPERT) for kind in estimate.kinds
    ]
    terms: list[float] = []
    for layer, kind in enumerate(estimate.kind_of):
        if positions[kind]:
            row = estimate.layer_terms(layer, tp)
            terms += [row[pos] for pos in positions[kind]]
    return sum(terms)


def _expert_padding(
    req: DeploymentRequest, estimate: WeightEstimate, layout: MoELayout | None, share: float
) -> ResidentExtra | None:
    if layout is None:
        return None
    per, _ = _quantized_experts(estimate)
    fp8 = 0.999 < per < 1.01  # fp8 values (+ block scales)
    nvfp4 = estimate.fmt.name == "nvfp4" and per < 1
    stored = layout.stored_columns(fp8_experts=fp8, nvfp4_experts=nvfp4)
    if stored == layout.columns:
        return None
    experts = _expert_bytes(estimate, req.tp_size)
    why = (
        "the FlashInfer TRT-LLM MoE runner rounds them up to 128 (fused_moe_triton/layer.py, FusedMoE.__init__)"
        if layout.runner == "flashinfer_trtllm"
        else "ROCm's aiter fp8 MoE pads them to 128 (sglang/srt/layers/moe/utils.py, get_moe_weight_sizes)"
    )
    return ResidentExtra(
        "expert padding",
        int(experts * share * (stored / layout.columns - 1)),
        f"each rank stores {stored} columns of every expert instead of {layout.columns}: {why}",
    )


def _mla_copies(
    req: DeploymentRequest, config: Mapping[str, Any], estimate: WeightEstimate, share: float
) -> ResidentExtra | None:
    t = text_config(config)
    found = [
        (kind.layers[0], pos, len(kind.layers))
        for kind in estimate.kinds
        for pos, g in enumerate(kind.groups)
        if g.name == "kv_b_proj" and kind.layers
    ]
    if not found or t.get("qk_nope_head_dim") is None:
        return None
    attn_tp = max(1, req.tp_size // max(1, req.attn_dp_size))
    layer, pos, _ = min(found)  # the first MLA layer's kv_b_proj
    per_layer = estimate.groups_of(layer)[pos].per_rank(attn_tp)  # kv_lora_rank x heads / attn_tp x (qk_nope + v_head)
    stored = estimate.price(layer, pos)
    hip = req.gpu is not None and req.gpu.is_hip
    copy_bytes = 1 if (stored < 1.5 and hip) else 2  # fp8 on ROCm, else bf16
    return ResidentExtra(
        "MLA w_kc / w_vc",
        int(per_layer * sum(count for _, _, count in found) * share * copy_bytes),
        f"kv_b_proj's absorbed copies ({copy_bytes}-byte, every MLA layer; "
        "deepseek_common/deepseek_weight_loader.py, post_load_weights)",
    )


def _rocm_wna16_indices(
    req: DeploymentRequest,
    config: Mapping[str, Any],
    estimate: WeightEstimate,
    layout: MoELayout | None,
    share: float,
) -> ResidentExtra | None:
    hip = req.gpu is not None and req.gpu.is_hip
    if layout is None or not hip or not estimate.fmt.name.startswith("compressed-tensors int"):
        return None
    _, moe_layers = _quantized_experts(estimate)
    if estimate.fmt.expert_bytes >= 1 or not moe_layers:
        return None
    hidden = int(text_config(config)["hidden_size"])
    per_layer = 2 * layout.local_experts * (hidden + layout.columns) * 4
    return ResidentExtra(
        "ROCm INT4 expert index buffers",
        int(per_layer * moe_layers * share),
        "g_idx and sort-index int32 buffers the Triton W4A16 MoE keeps (compressed_tensors_wNa16_moe.py, "
        "CompressedTensorsWNA16MoE.create_weights; the Marlin path on CUDA empties them)",
    )


#: the MoE runners that alias the expert scales instead of copying them (``is_flashinfer_trtllm``
#: or ``is_flashinfer_trtllm_routed`` in ``ModelOptNvFp4FusedMoEMethod.__init__``)
TRTLLM_RUNNERS = frozenset({"flashinfer_trtllm", "flashinfer_trtllm_routed"})

#: NVFP4's scale block: one fp8 scale per 16 values (``ModelOptFp4Config.group_size``)
NVFP4_GROUP = 16


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _nvfp4_moe_layers(estimate: WeightEstimate) -> int:
    """Decoder layers whose routed experts are priced as NVFP4 (under a byte per parameter)."""
    count = 0
    for layer in range(estimate.num_layers):
        groups = estimate.groups_of(layer)
        if any(g.kind is ParamKind.EXPERT and estimate.price(layer, pos) < 1 for pos, g in enumerate(groups)):
            count += 1
    return count


def _nvfp4_swizzled_scales(
    config: Mapping[str, Any], estimate: WeightEstimate, layout: MoELayout | None, share: float
) -> ResidentExtra | None:
    nvfp4 = estimate.fmt.name == "nvfp4" or estimate.fmt.name.startswith(MIXED_PRECISION_LABEL)  # NVFP4 experts
    if layout is None or not nvfp4 or layout.runner in TRTLLM_RUNNERS:
        return None
    layers = _nvfp4_moe_layers(estimate)
    if not layers:
        return None
    hidden, columns = int(text_config(config)["hidden_size"]), layout.columns
    shards = 2 if gated_mlp(config) else 1  # w13 holds gate and up, or up alone (is_gated=False)
    w13 = _round_up(shards * columns, 128) * _round_up(hidden // NVFP4_GROUP, 4)
    w2 = _round_up(hidden, 128) * _round_up(columns // NVFP4_GROUP, 4)
    return ResidentExtra(
        "NVFP4 swizzled expert scales",
        int(layout.local_experts * (w13 + w2) * layers * share),
        "a second, swizzled fp8 copy of the expert block scales (modelopt_quant.py, "
        "ModelOptNvFp4FusedMoEMethod.create_weights: w13/w2_blockscale_swizzled; the FlashInfer TRT-LLM "
        "MoE runner shares the originals instead)",
    )


#: the speculative algorithms whose draft worker is an ``EAGLEWorkerV2`` (NEXTN resolves to EAGLE)
_EAGLE_FAMILY = frozenset({"EAGLE", "NEXTN", "MTP"})


def is_self_draft(req: DeploymentRequest, estimate: WeightEstimate) -> bool:
    """The draft is the target checkpoint's own MTP layers (EAGLE / NEXTN without another model)."""
    algorithm = (req.speculative_algorithm or "").upper()
    other = req.speculative_draft_model_path not in (None, "", req.model)
    return algorithm in _EAGLE_FAMILY and estimate.mtp_params > 0 and not other


def _self_draft_copies(
    req: DeploymentRequest, config: Mapping[str, Any], estimate: WeightEstimate
) -> ResidentExtra | None:
    if not is_self_draft(req, estimate):
        return None
    t = text_config(config)
    vocab, hidden = int(t["vocab_size"]), int(t["hidden_size"])
    tied = bool(t.get("tie_word_embeddings", config.get("tie_word_embeddings", False)))
    attn_tp = max(1, req.tp_size // max(1, req.attn_dp_size))
    embed = ParamGroup("draft embed_tokens", vocab * hidden, ParamKind.EMBEDDING, 0, "embed_tokens")
    head = ParamGroup("draft lm_head", vocab * hidden, ParamKind.LM_HEAD, 0, "lm_head")
    embed_bytes = vocab_rows_per_rank(vocab, attn_tp) * hidden * estimate.fmt.bytes_for(embed)
    head_bytes = 0.0 if tied else vocab_rows_per_rank(vocab, req.tp_size) * hidden * estimate.fmt.bytes_for(head)
    # under PP the embedding sits on the first stage, the head on the last: the fullest rank has one
    nbytes = embed_bytes + head_bytes if req.pp_size == 1 else max(embed_bytes, head_bytes)
    what = "embedding" if tied else "embedding and LM head"
    return ResidentExtra(
        "draft embedding / head copies",
        int(nbytes),
        f"the MTP draft builds its own {what} and gives them back for the target's only after the KV "
        "pool is sized (EAGLEWorkerV2.init_lm_head -> set_embed_and_head, called from alloc_memory_pool "
        "after Scheduler.init_target_memory_pool)",
    )


def _draft_model(req: DeploymentRequest, estimate: WeightEstimate) -> ResidentExtra | None:
    path = req.speculative_draft_model_path
    if path in (None, "", req.model) or is_self_draft(req, estimate) or req.speculative_algorithm is None:
        return None
    from .launch.apply import draft_config

    config = draft_config(path)
    if config is None:
        return None
    attn_tp = max(1, req.tp_size // max(1, req.attn_dp_size))
    nbytes, how = draft_model_bytes(config, tp=req.tp_size, attn_tp=attn_tp)
    return ResidentExtra(
        "draft model weights",
        nbytes,
        f"the draft model ({how}), loaded by the draft worker before Scheduler.init_memory_pools sizes the "
        "target's KV cache",
    )
