"""The launch pipeline: the steps in SGLang's order, the raw input, and the entry point.

Mirrors the order of ``sglang.srt.server_args.ServerArgs.resolve_once`` over the
``arg_groups`` hooks: cuda graphs, platform, capacity tier, prefill graph, memory fraction,
model overrides, generic backend, page default, DP division, PP overlap, speculative defaults,
SWA ratio, capability, multimodal reserve. :func:`_validate` refuses inputs SGLang's argument
parser rejects.
"""

from __future__ import annotations

from dataclasses import replace

from ....core.releases import NEWEST_SGLANG, EngineRelease
from ....errors import KVCacheConfigError
from ....planner.gpus import Accelerator
from . import backends, deepseek, family_backends, graph_rules, graphs, memory, model_overrides, speculative
from .core import (
    LaunchInputs,
    LaunchModelFacts,
    LaunchResolution,
    LaunchSettings,
    ResolutionDraft,
    Step,
    check_release_serves,
)
from .speculative import _SPEC_ALGORITHMS

PIPELINE: tuple[Step, ...] = (
    model_overrides.mamba_auto_default_step,
    graphs.cuda_graph_step,
    memory.platform_step,
    memory.capacity_tier_step,
    graphs.prefill_graph_step,
    memory.mem_fraction_step,
    deepseek.dsv4_override,
    deepseek.dsa_override,
    family_backends.attention_override,
    family_backends.model_backend_check,
    model_overrides.hybrid_swa_memory_override,
    model_overrides.mamba_strategy_override,
    backends.generic_backend_step,
    graphs.page_default_step,
    graphs.dp_attention_step,
    model_overrides.pipeline_overlap_step,
    speculative.speculative_step,
    model_overrides.swa_ratio_step,
    model_overrides.capability_step,
    model_overrides.multimodal_reserve_step,
)


def _initial(inp: LaunchInputs) -> ResolutionDraft:
    """The raw user input before any step (ServerArgs.resolve_once order: kept separately, last declaration wins)."""
    s, gpu = inp.settings, inp.gpu
    _validate(inp)
    return ResolutionDraft(
        gpu_mem_mib=gpu.capacity_mib,
        mem_fraction_static=s.mem_fraction_static,
        chunked_prefill_size=s.chunked_prefill_size,
        max_prefill_tokens=16384 if s.max_prefill_tokens is None else s.max_prefill_tokens,
        cuda_graph_max_bs=s.cuda_graph_max_bs,
        prefill_cuda_graph=_default_prefill_graph(inp),
        kv_cache_dtype=s.kv_cache_dtype or "auto",
        page_size=s.page_size,
        attention_backend=s.attention_backend,
        prefill_attention_backend=s.prefill_attention_backend,
        decode_attention_backend=s.decode_attention_backend,
        swa_full_tokens_ratio=s.swa_full_tokens_ratio,
        disable_hybrid_swa_memory=s.disable_hybrid_swa_memory,
        mamba_radix_cache_strategy=s.mamba_radix_cache_strategy,
        disable_overlap_schedule=s.disable_overlap_schedule,
        disable_radix_cache=s.disable_radix_cache,
        max_running_requests=s.max_running_requests,
        speculative_algorithm=s.speculative_algorithm,
        speculative_num_steps=s.speculative_num_steps,
        speculative_eagle_topk=s.speculative_eagle_topk,
        speculative_num_draft_tokens=s.speculative_num_draft_tokens,
        dsa_prefill_backend=deepseek.dsa_backend_field_defaults(inp.release)[0],
        dsa_decode_backend=deepseek.dsa_backend_field_defaults(inp.release)[1],
    )


def _default_prefill_graph(inp: LaunchInputs) -> str:
    """``breakable`` on CUDA (``tc_piecewise`` where :data:`.graph_rules.PREFILL_DEFAULT_TC_PIECEWISE` holds; its
    rules turn it off elsewhere), ``disabled`` off CUDA and where the piecewise graph is opt-in
    (:data:`.graph_rules.PIECEWISE_GRAPH_OPT_IN`, up to 0.5.9)."""
    if not inp.gpu.is_cuda or graph_rules.PIECEWISE_GRAPH_OPT_IN.holds(inp.release):
        return "disabled"
    return "tc_piecewise" if graph_rules.PREFILL_DEFAULT_TC_PIECEWISE.holds(inp.release) else "breakable"


def _validate(inp: LaunchInputs) -> None:
    s = inp.settings
    check_release_serves(inp.model.model_type, inp.release)
    if min(inp.tp_size, inp.pp_size, inp.attn_dp_size) < 1 or inp.tp_size % inp.attn_dp_size:
        raise KVCacheConfigError(
            f"tp_size={inp.tp_size}, pp_size={inp.pp_size}, attn_dp_size={inp.attn_dp_size}: "
            "sizes must be >= 1 and tp_size divisible by attn_dp_size"
        )
    if s.mem_fraction_static is not None and not 0 < s.mem_fraction_static < 1:
        raise KVCacheConfigError(f"mem_fraction_static must be in (0, 1), got {s.mem_fraction_static}")
    if s.speculative_algorithm is not None and s.speculative_algorithm.upper() not in _SPEC_ALGORITHMS:
        raise KVCacheConfigError(
            f"unknown speculative_algorithm {s.speculative_algorithm!r}; use one of {sorted(_SPEC_ALGORITHMS)}"
        )
    if s.disaggregation_mode not in ("null", "prefill", "decode"):
        raise KVCacheConfigError(f"disaggregation_mode must be null, prefill or decode, got {s.disaggregation_mode!r}")


def resolve_launch_defaults(
    model: LaunchModelFacts,
    gpu: Accelerator,
    *,
    tp_size: int = 1,
    pp_size: int = 1,
    attn_dp_size: int = 1,
    settings: LaunchSettings | None = None,
    dcp_size: int = 1,
    release: EngineRelease = NEWEST_SGLANG,
) -> LaunchResolution:
    """Run :data:`PIPELINE` for ``release`` and return every resolved setting with the defaults applied.

    The steps write into one :class:`ResolutionDraft` (the ``ServerArgs`` object that
    ``resolve_once`` changes in place); the frozen :class:`LaunchResolution` is built once at the end."""
    inp = LaunchInputs(model, gpu, tp_size, pp_size, attn_dp_size, settings or LaunchSettings(), dcp_size, release)
    draft = _initial(inp)
    for step in PIPELINE:
        step(inp, draft)
        if draft.attn_dp_size is not None and draft.attn_dp_size != inp.attn_dp_size:  # a step forced DP attention
            inp = replace(inp, attn_dp_size=draft.attn_dp_size)
    return draft.freeze()
