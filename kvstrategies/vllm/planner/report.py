"""What ``plan --engine vllm`` prints: the lines vLLM would log, then how the budget and the cache came about.

The log lines are vLLM's own formats: "Model loading took X GiB memory"
(``vllm/v1/worker/gpu/model_runner.py``), "Available KV cache memory: X GiB"
(``vllm/v1/worker/gpu_worker.py Worker.determine_available_memory``) and "GPU KV cache size: N
tokens, Maximum concurrency for L tokens per request: Yx" (``vllm/v1/core/kv_cache_utils.py
update_kv_cache_capacity``).
"""

from __future__ import annotations

from typing import Any

from ..strategies.document import vllm_plan_document
from ..strategies.drafts import VLLMDraft
from .budget import format_gib
from .deployment import VLLMDeploymentPlan
from .overhead import SAMPLER_BYTES_PER_LOGIT, STARTUP_HELD_BYTES

GIB = 2**30


def _gib(nbytes: int) -> str:
    return f"{nbytes / GIB:.2f} GiB"


def log_lines(plan: VLLMDeploymentPlan) -> list[str]:
    """The start-up lines vLLM would print for this deployment (the weights line only when estimated)."""
    answer = plan.answer
    lines = []
    if plan.weights is not None:
        lines.append(f"Model loading took {format_gib(plan.weights.fullest)} GiB memory")
    lines.append(f"Available KV cache memory: {format_gib(plan.budget.logged_available_bytes)} GiB")
    lines.append(answer.capacity.log_line)
    return lines


def budget_lines(plan: VLLMDeploymentPlan) -> list[str]:
    """How the budget was reached (vLLM's rule with the modelled profile, or given)."""
    budget, req = plan.budget, plan.request
    if budget.source == "kv_cache_memory_bytes":
        return [f"KV budget {budget.available_bytes:,} B given (--kv-cache-memory-bytes): vLLM skips its memory "
                "profiling and sizes the cache from it (vllm/v1/worker/gpu_worker.py "
                "determine_available_memory)"]  # fmt: skip
    stage = budget.limiting
    assert stage is not None and budget.requested_bytes is not None and budget.total_bytes is not None
    o = stage.overhead
    tp_text = f", + {_gib(o.multi_gpu)} with {req.coupled_gpus} GPUs (NCCL, custom all-reduce)" if o.multi_gpu else ""
    graphs = "and the CUDA-graph estimate"
    if req.enforce_eager:
        graphs = "(--enforce-eager: no CUDA graphs)"
    elif not req.estimate_cudagraphs:
        graphs = "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0: graphs not deducted)"
    lines = [
        f"total {_gib(budget.total_bytes)}: {budget.total_source}",
        f"requested = ceil(total x gpu_memory_utilization {budget.gpu_memory_utilization:g}) = "
        f"{_gib(budget.requested_bytes)} (vllm/v1/worker/utils.py request_memory)",
        f"- weights {_gib(stage.weights)}" + (f": {plan.weights.source}" if plan.weights is not None else ""),
        f"- profile-run peak {_gib(o.transient)}: hidden states {_gib(o.hidden_states)} + the larger of the sampler "
        f"{_gib(o.sampler)} ({SAMPLER_BYTES_PER_LOGIT:g} B x min(max_num_seqs, max_num_batched_tokens) x vocab) and "
        f"the forward MLP {_gib(o.forward)}",
        f"- resident after load {graphs} {_gib(o.resident)}{tp_text}",
    ]
    measured = stage.measured
    if measured is not None and stage.profiled is not None:
        return [*lines,
                f"= {_gib(stage.profiled)} profiled (logged as Available KV cache memory): it reserves the extensible "
                "KV cache's capacity (vllm/v1/worker/gpu_worker.py Worker.determine_available_memory)",
                f"after warmup: free {_gib(measured.headroom)} (total - {_gib(STARTUP_HELD_BYTES)} held at start - "
                f"weights, resident and non-torch {_gib(measured.non_kv_used)}), less the margin "
                f"{_gib(measured.margin)} = max(1 GiB, 0.75 x the peak) and the peak {_gib(measured.peak)} (the "
                f"profile-run peak and the CUDA-graph estimate) = {_gib(measured.kv_bytes)} for the KV cache, its "
                "blocks whose pages fit in it (vllm/v1/worker/extensible_kv_cache.py measure_kv_cache_bytes, "
                "ExtensibleKVCache.blocks_within); the profile overhead is a model fitted to public vLLM start-up "
                "logs (kvstrategies/vllm/planner/overhead.py, extensible.py)"]  # fmt: skip
    lines.append(f"= Available KV cache memory {_gib(stage.available)} (vllm/v1/worker/gpu_worker.py "
                 "Worker.determine_available_memory); the profile overhead is a model fitted to public vLLM start-up "
                 "logs (kvstrategies/vllm/planner/overhead.py, docs/vllm-bridge.md)")  # fmt: skip
    if len(budget.stages) > 1:
        shown = ", ".join(_gib(s.available) for s in budget.stages)
        lines.append(f"pipeline stages' budgets {shown}: vLLM sizes every stage by the smallest block count")
    return lines


def plan_text(plan: VLLMDeploymentPlan) -> str:
    """The human report."""
    req, answer, launch = plan.request, plan.answer, plan.launch
    where = req.gpu or "the GPU given"
    layout = f"TP {req.tensor_parallel_size} x PP {req.pipeline_parallel_size}"
    if req.data_parallel_size > 1:
        layout += f", DP {req.data_parallel_size}"
    if req.decode_context_parallel_size > 1:
        layout += f", DCP {req.decode_context_parallel_size} (a request's tokens spread over its ranks)"
    if req.enable_expert_parallel:
        layout += f", experts over EP {req.moe_parallel_size}"
    elif req.moe_parallel_size != req.tensor_parallel_size:
        layout += f", experts over TP {req.moe_parallel_size}"
    out = [f"{req.release.label} on {where}, {layout}: {req.model}", "what vLLM would log:"]
    if req.data_parallel_size > 1:
        kind = "experts split over every DP rank" if req.is_moe else "independent engines (a dense model)"
        out.insert(1, f"each of the {req.data_parallel_size} DP ranks is one engine core with its own KV cache, "
                      f"and logs what follows ({kind})")  # fmt: skip
    out += [f"  {line}" for line in log_lines(plan)]
    out.append("budget:")
    out += [f"  {line}" for line in budget_lines(plan)]
    out.append(
        f"launch: max_model_len {launch.max_model_len:,}, max_num_batched_tokens {launch.max_num_batched_tokens:,}, "
        f"max_num_seqs {launch.max_num_seqs:,}, kv_cache_dtype {launch.kv_cache_dtype}, block {answer.block_size} "
        f"({', '.join(answer.backends)}), prefix caching {'on' if launch.enable_prefix_caching else 'off'}, "
        f"async scheduling {'on' if launch.async_scheduling else 'off'}"
    )
    out.append(
        f"cache: num_gpu_blocks {answer.num_gpu_blocks:,} (block 0 is vLLM's null block), "
        f"{len(answer.stage_groups)} KV cache group(s), {answer.bytes_per_block:,} B a block, "
        f"{answer.capacity.blocks_per_request:,} blocks a request at max_model_len"
        + (f", {answer.padding_layers} padding layers" if answer.padding_layers else "")
    )
    draft = launch.deployment.draft
    if draft is not None:
        out.append(_speculative_line(draft))
    for row in plan.lengths:
        out.append(f"requests of {row.request_length:,} tokens: {row.concurrency:.2f}x concurrency "
                   f"({row.blocks_per_request:,} blocks each, vLLM's formula at that length)")  # fmt: skip
    return "\n".join(out)


#: the vLLM 0.34.0 function that builds each separate draft (``vllm/v1/worker/gpu/spec_decode/``)
_DRAFT_BUILDERS = {"draft_model": "standalone_ar/speculator.py StandaloneARSpeculator.load_draft_model",
                   "dflash": "dflash/speculator.py DFlashSpeculator.load_model"}  # fmt: skip


def _speculative_line(draft: VLLMDraft) -> str:
    """The report's line on the draft: where its layers come from and where they go."""
    lookahead = ("Mamba layers hold the lookahead: vllm/model_executor/layers/mamba/abstract.py "
                 "MambaBase.get_kv_cache_spec")
    tokens = draft.num_speculative_tokens
    if draft.method == "ngram":
        return f"speculative: {tokens} tokens a step from n-gram lookup, no draft layer ({lookahead})"
    if not draft.is_head:
        source = f"the model's {draft.num_layers} MTP layer(s)"
    elif draft.method == "draft_model":
        source = f"a draft model of {draft.num_layers} full-attention layer(s)"
    elif draft.method == "dflash":
        source = f"a DFlash draft of {draft.num_layers} full-attention layer(s)"
    else:
        source = f"an {draft.method.upper()} head of {draft.num_layers} layer(s)"
    builder = _DRAFT_BUILDERS.get(draft.method, "eagle/utils.py load_eagle_model")
    return (f"speculative: {tokens} tokens a step from {source}, which join the KV cache groups "
            f"on the last stage (the drafter's attention layers: vllm/v1/worker/gpu/spec_decode/{builder}; "
            f"{lookahead})")


def plan_json(plan: VLLMDeploymentPlan) -> dict[str, Any]:
    """The machine-readable report."""
    budget, answer = plan.budget, plan.answer
    stage = budget.limiting
    doc: dict[str, Any] = {
        "engine": plan.request.release.label,
        "model": plan.request.model,
        "gpu": plan.request.gpu,
        "data_parallel_size": plan.request.data_parallel_size,
        "decode_context_parallel_size": plan.request.decode_context_parallel_size,
        "vllm_log": {
            "lines": log_lines(plan),
            "model_loading_bytes": None if plan.weights is None else plan.weights.fullest,
            "available_kv_cache_memory_bytes": budget.logged_available_bytes,
            "gpu_kv_cache_size_tokens": answer.capacity.tokens,
            "max_model_len": answer.capacity.max_model_len,
            "max_concurrency": answer.capacity.max_concurrency,
        },
        "budget": {
            "source": budget.source,
            "total_bytes": budget.total_bytes,
            "total_source": budget.total_source,
            "gpu_memory_utilization": budget.gpu_memory_utilization,
            "requested_bytes": budget.requested_bytes,
            "weights_source": None if plan.weights is None else plan.weights.source,
            "stages": [
                {"weights_bytes": s.weights, "hidden_states_bytes": s.overhead.hidden_states,
                 "sampler_bytes": s.overhead.sampler, "forward_bytes": s.overhead.forward,
                 "resident_bytes": s.overhead.resident, "multi_gpu_bytes": s.overhead.multi_gpu,
                 "available_bytes": s.available, "profiled_bytes": s.profiled,
                 "measured": None if s.measured is None else {
                     "non_kv_used_bytes": s.measured.non_kv_used, "headroom_bytes": s.measured.headroom,
                     "peak_bytes": s.measured.peak, "margin_bytes": s.measured.margin}}
                for s in budget.stages
            ],  # fmt: skip
            "limiting_stage": None if stage is None else budget.stages.index(stage),
        },
        "request_lengths": [
            {"request_length": r.request_length, "blocks_per_request": r.blocks_per_request,
             "max_concurrency": r.concurrency, "tokens": r.tokens}
            for r in plan.lengths
        ],  # fmt: skip
        "plan": vllm_plan_document(plan.planned),
    }
    return doc
