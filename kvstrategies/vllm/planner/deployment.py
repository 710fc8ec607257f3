"""``kvstrategies plan MODEL --engine vllm``: request -> vLLM's launch defaults -> budget -> the vLLM strategies.

1. the vLLM launch the request stands for, read by the vLLM strategies
   (:mod:`kvstrategies.vllm.strategies.engine_args` / ``launch``): ``max_model_len``,
   ``max_num_batched_tokens`` / ``max_num_seqs`` from vLLM's batch defaults for the GPU;
2. the budget (:mod:`.budget`): ``--kv-cache-memory-bytes`` as given, else vLLM's utilization rule
   with the weights of :mod:`.weights` and the profile overhead of :mod:`.overhead` (from 0.34.0 the
   extensible KV cache: the profiled figure reserves the capacity, the measured bytes give the blocks
   that fit, :mod:`.extensible`);
3. :func:`kvstrategies.api.plan` with that budget: blocks, groups, tensors, "GPU KV cache size"
   and "Maximum concurrency" exactly as vLLM computes them from that budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...api import Plan, plan
from ...case import parse_case
from ...core.dtypes import DType
from ...core.releases import VLLM
from ...errors import KVCacheConfigError
from ...models.hf import text_config
from ...models.parse import model_dtype_of
from ...planner.config_fields import validate_config_fields
from ..strategies.engine_args import vllm_deployment
from ..strategies.launch import VLLMLaunch, resolve_model_launch
from ..strategies.sizing import blocks_per_request
from ..strategies.specs import CacheLimits
from ..strategies.strategies import VLLMKVCachePlan
from .budget import EXTENSIBLE_KV_CACHE, VLLMBudget, extensible_budget, given_budget, vllm_budget
from .draft_head import draft_head, draft_head_bytes, draft_model_shape, is_latent_head
from .extensible import blocks_within, segment_strides
from .gpu_memory import cuda_total
from .load_refusals import check_weight_load
from .overhead import ProfileSettings, ProfileShape, profile_overhead
from .request import VLLMPlanRequest
from .weights import VLLMWeights, vllm_weights


@dataclass(frozen=True)
class LengthConcurrency:
    """vLLM's concurrency formula at a request length: ``num_blocks / blocks_per_request(L)``."""

    request_length: int
    blocks_per_request: int
    concurrency: float

    @property
    def tokens(self) -> int:
        return int(self.concurrency * self.request_length)


@dataclass(frozen=True)
class VLLMDeploymentPlan:
    """A planned vLLM deployment: the launch, the budget, the weights and vLLM's sizing from them."""

    request: VLLMPlanRequest
    launch: VLLMLaunch
    budget: VLLMBudget
    weights: VLLMWeights | None
    planned: Plan
    lengths: tuple[LengthConcurrency, ...]

    @property
    def answer(self) -> VLLMKVCachePlan:
        answer = self.planned.vllm
        assert answer is not None  # planned for a vLLM release
        return answer


def serving_dtype(req: VLLMPlanRequest) -> DType:
    """``--dtype``, else ``auto``: the config's dtype, float32 checkpoints served in bfloat16
    (``vllm/config/model.py _resolve_auto_dtype``)."""
    name = req.dtype
    if name in (None, "auto"):
        return model_dtype_of(req.config, text_config(req.config))
    aliases = {"half": "float16", "float": "float32"}
    return DType.from_name(aliases.get(name, name))


#: ``--kv-cache-dtype`` as vLLM spells it -> the case's name (vLLM's ``fp8`` is e4m3 on CUDA,
#: ``vllm/config/cache.py CacheDType``); the names the vLLM strategies size
CASE_KV_DTYPE: dict[str, str] = {
    "auto": "auto", "bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
    "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "nvfp4": "nvfp4",
}  # fmt: skip


def case_kv_dtype(name: str, release: str) -> str:
    """The case's KV dtype for vLLM's ``--kv-cache-dtype name``; other names refused, saying why."""
    from ..strategies.layers import VLLM_KV_CACHE_DTYPES

    if name in CASE_KV_DTYPE:
        return CASE_KV_DTYPE[name]
    if name not in VLLM_KV_CACHE_DTYPES:
        raise KVCacheConfigError(
            f"vLLM {release} refuses: Invalid kv_cache_dtype: {name!r:.40}. Valid values are: "
            f"{list(VLLM_KV_CACHE_DTYPES)} (vllm/config/cache.py CacheConfig)"
        )
    raise KVCacheConfigError(
        f"--kv-cache-dtype {name}: vLLM packs it its own way (its backend's customize_spec), which the vLLM plan does "
        f"not model; it sizes {', '.join(sorted(set(CASE_KV_DTYPE) - {'bf16', 'fp16'}))}"
    )


def case_fields(req: VLLMPlanRequest, budget_bytes: int) -> dict[str, Any]:
    """The case the vLLM strategies read (:mod:`kvstrategies.vllm.strategies.engine_args`'s mapping)."""
    kv = case_kv_dtype(req.kv_cache_dtype, req.release.text)
    if req.kv_cache_dtype == "fp8" and "index_topk" in text_config(req.config):
        raise KVCacheConfigError(
            "--kv-cache-dtype fp8 on a DeepSeek sparse-attention model: vLLM reads the alias as fp8_ds_mla on "
            "FLASHMLA_SPARSE, a packed 656-byte-a-token layout the vLLM plan does not model "
            "(vllm/model_executor/layers/attention/mla_attention.py _canonicalize_sparse_mla_kv_cache_dtype); "
            "give --kv-cache-dtype fp8_e4m3"
        )
    return {
        **req.source,
        "engine": VLLM,
        "vllm_version": req.release.text,
        "gpu": req.gpu,
        "tp_size": req.tensor_parallel_size,
        "dcp_size": req.decode_context_parallel_size,
        "pp_size": req.pipeline_parallel_size,
        "kv_cache_dtype": kv,
        "model_dtype": serving_dtype(req).torch_name,
        "page_size": req.block_size or 1,
        "context_length": req.max_model_len,
        "max_running_requests": req.max_num_seqs,
        # SGLang's -1: no chunking, vLLM's --no-enable-chunked-prefill (engine_args.CHUNKED_PREFILL_OFF)
        "chunked_prefill_size": -1 if req.enable_chunked_prefill is False else req.max_num_batched_tokens,
        "disable_radix_cache": req.enable_prefix_caching is False,
        "disable_overlap_schedule": req.async_scheduling is False,
        "disable_hybrid_swa_memory": req.disable_hybrid_kv_cache_manager,
        "available_bytes": budget_bytes,
        **_speculative_fields(req),
    }


def _speculative_fields(req: VLLMPlanRequest) -> dict[str, Any]:
    """vLLM's speculation as the case reads it (:mod:`kvstrategies.vllm.strategies.drafts`): a chain (top-k 1) of
    ``num_speculative_tokens`` steps from the model's MTP layers (``EAGLE`` without a head's shape), an EAGLE head of
    MLA layers (its layer count alone: the target's latent), a draft head (``EAGLE`` / ``EAGLE3`` with its layers, KV
    heads and head size) or a draft model (``STANDALONE``)."""
    tokens = req.num_speculative_tokens
    if tokens is None:
        return {}
    fields: dict[str, Any] = {"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 1,
                              "speculative_num_steps": tokens, "speculative_num_draft_tokens": tokens + 1}  # fmt: skip
    if req.speculative_method == "ngram":  # no draft layer: SGLang's NGRAM proposes as many tokens plus one
        fields["speculative_algorithm"] = "NGRAM"
        fields.pop("speculative_eagle_topk")
    elif req.speculative_method == "draft_model" and req.draft_config is not None:  # SGLang's name for it
        fields["speculative_algorithm"] = "STANDALONE"
        fields.update(draft_model_shape(req.draft_config).case_fields())
    elif req.draft_config is not None and is_latent_head(req.draft_config, req.speculative_method):
        # no head shape: the vLLM strategies give it the target's latent (kvstrategies/vllm/strategies/drafts.py)
        if text_config(req.config).get("num_nextn_predict_layers"):
            raise KVCacheConfigError(
                "--speculative-config: an EAGLE head of MLA layers beside a model with MTP layers is planned as the "
                "model's MTP layers only; give method mtp (the model's own draft), or a Llama EAGLE head"
            )
        fields["eagle_draft_num_layers"] = draft_head(req.draft_config, "eagle").num_layers
    elif req.speculative_method != "mtp" and req.draft_config is not None:
        fields["speculative_algorithm"] = req.speculative_method.upper()
        fields.update(draft_head(req.draft_config, req.speculative_method).case_fields())
    return fields


def _with_draft_model(weights: VLLMWeights, req: VLLMPlanRequest, tp: int, pp: int, dtype: DType) -> VLLMWeights:
    """The last stage with the draft model's weights: built on that stage under the target's pipeline group, it
    holds that stage's share of its layers and its own LM head, no embedding at PP > 1, in its own quantization
    (``quant_config=None`` in ``StandaloneARSpeculator.load_draft_model``: the draft's config decides)."""
    from pathlib import Path

    folder = None if req.draft_model is None or not Path(req.draft_model).is_dir() else req.draft_model
    draft = vllm_weights(req.draft_config or {}, tp=tp, pp=pp, dtype=dtype, checkpoint=folder, release=req.release)
    last = draft.per_stage[-1]
    return VLLMWeights(weights.per_stage[:-1] + (weights.per_stage[-1] + last,),
                       f"{weights.source}; + {last / 2**30:.2f} GiB of the draft model on the last stage "
                       f"({draft.source})")  # fmt: skip


def resolved_launch(req: VLLMPlanRequest) -> VLLMLaunch:
    """vLLM's launch after its defaults (the budget does not change them)."""
    settings = parse_case(case_fields(req, 1)).settings
    return resolve_model_launch(vllm_deployment(settings, 1), settings.geometry, req.release.text)


def budget_for(req: VLLMPlanRequest, launch: VLLMLaunch) -> tuple[VLLMBudget, VLLMWeights | None]:
    """The KV budget (module doc, step 2) and the weights it subtracted (``None`` when given)."""
    if req.kv_cache_memory_bytes is not None:
        return given_budget(req.kv_cache_memory_bytes), None
    if req.gpu is None and req.gpu_memory_mib is None:
        raise KVCacheConfigError("name a GPU (--gpu) or give --kv-cache-memory-bytes")
    dtype = serving_dtype(req)
    tp, pp = req.tensor_parallel_size, req.pipeline_parallel_size
    checkpoint = None if req.model_folder is None else str(req.model_folder)
    weights = vllm_weights(req.config, tp=tp, pp=pp, dtype=dtype, quantization=req.weight_quantization,
                           weight_bytes=req.weight_bytes, checkpoint=checkpoint,
                           mtp=req.num_speculative_tokens is not None and req.speculative_method == "mtp",
                           release=req.release, expert_parallel=req.enable_expert_parallel,
                           moe_tp=req.moe_parallel_size)  # fmt: skip
    if req.speculative_method == "draft_model" and req.draft_config is not None \
            and req.num_speculative_tokens is not None and req.weight_bytes is None:  # fmt: skip
        weights = _with_draft_model(weights, req, tp, pp, dtype)
    elif req.draft_config is not None and req.num_speculative_tokens is not None and req.weight_bytes is None \
            and is_latent_head(req.draft_config, req.speculative_method):  # fmt: skip
        raise KVCacheConfigError(
            "--speculative-config model: an EAGLE head of MLA layers (kv_lora_rank in its config: deepseek_eagle.py "
            "EagleDeepseekV3ForCausalLM) is planned for its KV cache, but its weights are not modelled; give "
            "--weight-bytes (the rank's weights with the draft) or --kv-cache-memory-bytes"
        )
    elif req.draft_config is not None and req.num_speculative_tokens is not None and req.weight_bytes is None:
        head = draft_head_bytes(req.draft_config, req.speculative_method, tp=tp, dtype=dtype)
        weights = VLLMWeights(weights.per_stage[:-1] + (weights.per_stage[-1] + head,),
                              f"{weights.source}; + {head / 2**30:.2f} GiB of the {req.speculative_method.upper()} "
                              "draft head on the last stage (its embedding, and an EAGLE or DFlash draft's LM head, "
                              "are the target's)")  # fmt: skip
    shape = ProfileShape.from_config(req.config, activation_bytes=dtype.itemsize if dtype.itemsize <= 2 else 2)
    stages = []
    for rank in range(pp):
        settings = ProfileSettings(
            max_num_batched_tokens=launch.max_num_batched_tokens,
            max_num_seqs=launch.max_num_seqs,
            tp_size=tp,
            world_size=req.coupled_gpus,
            cuda_graphs=not req.enforce_eager,
            # the extensible KV cache (0.34.0) measures the captured graphs whatever the estimate flag says
            graphs_deducted=req.estimate_cudagraphs or EXTENSIBLE_KV_CACHE.holds(req.release),
            last_stage=rank == pp - 1,
        )
        stages.append((weights.per_stage[rank], profile_overhead(shape, settings)))
    total = cuda_total(req.gpu or "GPU", req.gpu_memory_mib)
    if EXTENSIBLE_KV_CACHE.holds(req.release):
        budget = extensible_budget(total.total_bytes, req.gpu_memory_utilization, stages, total_source=total.source,
                                   release=req.release.text, graph_estimate=req.estimate_cudagraphs)  # fmt: skip
        return budget, weights
    budget = vllm_budget(total.total_bytes, req.utilization, stages, total_source=total.source,
                         release=req.release.text)  # fmt: skip
    return budget, weights


def concurrency_at(answer: VLLMKVCachePlan, length: int) -> LengthConcurrency:
    """vLLM's ``get_max_concurrency_for_kv_cache_config`` with ``L`` in place of ``max_model_len``."""
    launch = answer.launch
    limits = CacheLimits(length, launch.max_in_flight_tokens, launch.mamba_cache_mode,
                         launch.deployment.decode_context_parallel_size)
    per_request = blocks_per_request(answer.stage_groups, limits)
    return LengthConcurrency(length, per_request, answer.num_gpu_blocks / per_request)


def _planned(req: VLLMPlanRequest, budget: VLLMBudget) -> Plan:
    """The vLLM strategies' plan from the budget; under the extensible KV cache, the blocks whose pages fit in
    the measured bytes (``ExtensibleKVCache.blocks_within``), within the capacity the profiled figure reserved."""
    stage = budget.limiting
    if budget.source != "extensible_kv_cache" or stage is None or stage.profiled is None:
        case = parse_case(case_fields(req, budget.available_bytes))
        return plan(case.settings, case.available_bytes)
    reserved = parse_case(case_fields(req, budget.logged_available_bytes))
    capacity = plan(reserved.settings, reserved.available_bytes).vllm
    assert capacity is not None
    strides = segment_strides(capacity.tensors, capacity.kv_cache_layout, capacity.num_gpu_blocks)
    blocks = blocks_within(budget.available_bytes, strides, capacity.num_gpu_blocks)
    case = parse_case(case_fields(req, blocks * capacity.bytes_per_block))
    return plan(case.settings, case.available_bytes)


def plan_vllm(req: VLLMPlanRequest) -> VLLMDeploymentPlan:
    """Plan ``req`` end to end (module doc)."""
    validate_config_fields(req.config)  # the SGLang planner's field rules: the weight estimate and profile read them
    launch = resolved_launch(req)
    check_weight_load(req.config, req.tensor_parallel_size, req.release.text, req.weight_quantization,
                      req.enable_expert_parallel, req.data_parallel_size)  # fmt: skip
    budget, weights = budget_for(req, launch)
    planned = _planned(req, budget)
    answer = planned.vllm
    assert answer is not None
    lengths = tuple(concurrency_at(answer, length) for length in dict.fromkeys(req.request_lengths))
    return VLLMDeploymentPlan(req, answer.launch, budget, weights, planned, lengths)
