"""``kvstrategies compare``'s second table: each engine on the budget its own rule gives it.

The first table gives vLLM SGLang's KV budget (``--kv-cache-memory-bytes``), so it shows how the two
engines lay out the same bytes. This one (the default with ``--gpu``; ``--own-budgets`` /
``--no-own-budgets``) plans vLLM with its own budget instead: ``gpu_memory_utilization`` (default
0.92) minus its weights and modelled profile (:mod:`.deployment`), beside SGLang's
``mem_fraction_static`` budget, at each request length (``--max-model-len L``), and says why the
budgets differ (:func:`budget_reasons`: each rule's terms side by side).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.releases import NEWEST_VLLM, EngineRelease
from ..errors import KVCacheConfigError
from ..sglang.budget import KVBudget
from ..vllm.planner.budget import VLLMBudget
from ..vllm.planner.deployment import plan_vllm
from ..vllm.planner.request import VLLMPlanRequest
from ..vllm.strategies.engine_args import VLLM_KV_DTYPE_NAMES
from .deployment import DeploymentPlan

GIB = 2**30


@dataclass(frozen=True)
class OwnBudgetRow:
    """One request length: vLLM on its own budget (``error`` when vLLM refuses)."""

    request_length: int
    vllm_budget_bytes: int | None
    vllm_tokens: int | None
    vllm_concurrency: float | None
    error: str | None = None
    vllm_budget: VLLMBudget | None = None


def vllm_request_for(
    sglang: DeploymentPlan, length: int, gpu: str | None, release: EngineRelease = NEWEST_VLLM
) -> VLLMPlanRequest:
    """The vLLM launch of the same model, GPU, TP/PP and KV dtype at ``--max-model-len length``."""
    req = sglang.request
    if req is None or gpu is None:
        raise KVCacheConfigError("--own-budgets needs a GPU (--gpu) and a model (not a case file)")
    kv = str(sglang.case.raw.get("kv_cache_dtype") or "auto")
    # the SGLang request carries its checkpoint folder in ``source`` (the weights step reads it); vLLM's
    # reads it as ``model_folder``, and its case refuses the key
    source = {key: value for key, value in req.source.items() if key != "checkpoint"}
    checkpoint = req.source.get("checkpoint", req.model_folder)
    return VLLMPlanRequest(
        model=req.model,
        source=source,
        config=req.hf_config(),
        model_folder=None if checkpoint is None else str(checkpoint),
        gpu=gpu,
        tensor_parallel_size=req.tp_size,
        pipeline_parallel_size=req.pp_size,
        kv_cache_dtype=VLLM_KV_DTYPE_NAMES.get(kv, kv),
        max_model_len=length,
        weight_quantization=req.weight_quantization,
        weight_bytes=req.weight_bytes,
        release=release,
        **_speculative_fields(sglang),
    )


def _speculative_fields(sglang: DeploymentPlan) -> dict[str, Any]:
    """The same speculation in vLLM's terms: the model's MTP layers, or a separate draft as an EAGLE / EAGLE3 head
    read from its config (none without speculation; the case's vLLM mapping refuses what vLLM does not run)."""
    spec = sglang.case.settings.speculative
    req = sglang.request
    if not spec.enabled or req is None:
        return {}
    if spec.algorithm.value not in ("EAGLE", "EAGLE3") or (spec.eagle_topk or 1) != 1:
        raise KVCacheConfigError(
            f"speculative decoding {spec.algorithm.value} (top-k {spec.eagle_topk or 1}): vLLM's plan takes the "
            "model's MTP layers or an EAGLE / EAGLE3 head, a chain (top-k 1)"
        )
    tokens = spec.num_steps or max(1, (spec.num_draft_tokens or 1) - 1)
    if spec.draft_num_kv_heads is None:
        return {"num_speculative_tokens": tokens}
    from ..sglang.launch.apply import draft_config

    method = "eagle3" if spec.algorithm.value == "EAGLE3" else "eagle"
    return {"num_speculative_tokens": tokens, "speculative_method": method,
            "draft_model": req.speculative_draft_model_path,
            "draft_config": draft_config(req.speculative_draft_model_path)}  # fmt: skip


def own_budget_rows(
    sglang: DeploymentPlan, lengths: tuple[int, ...], gpu: str | None, release: EngineRelease = NEWEST_VLLM
) -> tuple[OwnBudgetRow, ...]:
    rows = []
    for length in lengths:
        try:
            planned = plan_vllm(vllm_request_for(sglang, length, gpu, release))
        except KVCacheConfigError as exc:
            rows.append(OwnBudgetRow(length, None, None, None, str(exc)))
            continue
        capacity = planned.answer.capacity
        rows.append(OwnBudgetRow(length, planned.budget.available_bytes, capacity.tokens, capacity.max_concurrency,
                                 vllm_budget=planned.budget))  # fmt: skip
    return tuple(rows)


def own_budget_text(
    sglang: DeploymentPlan, rows: tuple[OwnBudgetRow, ...], release: EngineRelease = NEWEST_VLLM
) -> list[str]:
    """The second table of ``compare`` (module doc)."""
    from ..vllm.planner.budget import EXTENSIBLE_KV_CACHE

    budget = sglang.budget
    mfs = "" if budget.mem_fraction_static is None else f" (mem_fraction_static {budget.mem_fraction_static:g})"
    rule = ("by its extensible KV cache: the memory measured after warmup less a margin and the activation peak"
            if EXTENSIBLE_KV_CACHE.holds(release) else "by gpu_memory_utilization 0.92 minus its weights and profile")
    out = [
        "",
        f"each engine on its own budget: SGLang {budget.available_bytes / GIB:.2f} GiB "
        f"{'given (--available-bytes)' if budget.source == 'given' else 'by its rule'}{mfs}; "
        f"{release.label} {rule} (a model fitted to public vLLM logs, docs/vllm-bridge.md), planned at "
        "--max-model-len L",
        f"{'request length':>14}  {'SGLang tokens':>13}  {'SGLang requests':>15}  {'vLLM KV budget':>14}  "
        f"{'vLLM KV cache size':>18}  {'vLLM concurrency':>16}",
    ]
    by_length = {fit.request_length: fit for fit in sglang.fit.lengths}
    for row in rows:
        fit = by_length.get(row.request_length)
        requests = 0 if fit is None else fit.requests
        head = f"{row.request_length:>14,}  {sglang.sizes.max_total_num_tokens:>13,}  {requests:>15,}  "
        if row.error is not None:
            out.append(head + f"vLLM refuses: {row.error}")
            continue
        assert row.vllm_budget_bytes is not None and row.vllm_tokens is not None and row.vllm_concurrency is not None
        out.append(head + f"{row.vllm_budget_bytes / GIB:>10.2f} GiB  {row.vllm_tokens:>18,}  "
                   f"{row.vllm_concurrency:>15.2f}x")  # fmt: skip
    out += budget_reasons(budget, next((r.vllm_budget for r in rows if r.vllm_budget is not None), None))
    return out


def _g(nbytes: int | float) -> str:
    return f"{nbytes / GIB:.2f} GiB"


def budget_reasons(sglang: KVBudget, vllm: VLLMBudget | None) -> list[str]:
    """Why the two budgets differ: each rule's terms side by side (GiB per rank)."""
    if vllm is None or vllm.limiting is None or sglang.capacity_bytes is None or vllm.requested_bytes is None:
        return []
    stage = vllm.limiting
    assert vllm.total_bytes is not None and vllm.gpu_memory_utilization is not None
    held = sglang.overhead_bytes or 0
    slack = sglang.slack_bytes or 0
    weights = sglang.weight_bytes or 0
    mfs = sglang.mem_fraction_static
    diff = vllm.available_bytes - sglang.available_bytes
    unrequested = vllm.total_bytes - vllm.requested_bytes
    sglang_line = (
        f"  - SGLang: {_g(sglang.capacity_bytes)} - {_g(held)} held before loading - {_g(weights)} weights - "
        f"{_g(slack)} kept free by (1 - mem_fraction_static {mfs:g}) for activations and CUDA graphs"
        + (f" - {_g(sglang.multimodal_bytes)} multimodal" if sglang.multimodal_bytes else "")
        + f" = {_g(sglang.available_bytes)} (the planner's SGLang budget, docs/validation.md)"
    )
    head = f"why the budgets differ ({'+' if diff >= 0 else '-'}{_g(abs(diff))} for vLLM):"
    weights_text = f"weights: SGLang {_g(weights)}, vLLM {_g(stage.weights)}" + (
        "" if weights == stage.weights else " (each engine's resident extras: RoPE cache, padding, copies)")
    measured = stage.measured
    if measured is not None:  # vLLM 0.34.0's extensible KV cache: sized from the memory measured after warmup
        outside = vllm.total_bytes - stage.weights - vllm.available_bytes
        return [head, sglang_line,
                f"  - vLLM: free after warmup {_g(measured.headroom)} - margin {_g(measured.margin)} - activation and "
                f"CUDA-graph peak {_g(measured.peak)} = {_g(vllm.available_bytes)} (the extensible KV cache: "
                "vllm/v1/worker/extensible_kv_cache.py measure_kv_cache_bytes; free = total - held at start - "
                f"weights {_g(stage.weights)} - resident {_g(stage.overhead.resident + stage.overhead.multi_gpu)})",
                f"  - outside weights and KV: SGLang {_g(held + slack)}, vLLM {_g(outside)}; "
                f"{weights_text}"]  # fmt: skip
    return [
        head,
        sglang_line,
        f"  - vLLM: ceil({_g(vllm.total_bytes)} x gpu_memory_utilization {vllm.gpu_memory_utilization:g}) = "
        f"{_g(vllm.requested_bytes)} - {_g(stage.weights)} weights - {_g(stage.overhead.total)} modelled profile "
        f"(activation peak {_g(stage.overhead.transient)}, resident {_g(stage.overhead.resident)}"
        + (f", multi-GPU {_g(stage.overhead.multi_gpu)}" if stage.overhead.multi_gpu else "")
        + f") = {_g(vllm.available_bytes)} (vllm/v1/worker/gpu_worker.py Worker.determine_available_memory)",
        f"  - outside weights and KV: SGLang {_g(held + slack)}, vLLM {_g(unrequested + stage.overhead.total)} "
        f"({_g(unrequested)} never requested + the profile); {weights_text}",
    ]
