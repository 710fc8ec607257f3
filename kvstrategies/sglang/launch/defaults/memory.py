"""The capacity tier, the NPU platform table and ``mem_fraction_static`` (the reserve ``R``).

Mirrors ``sglang.srt.arg_groups.memory_hook.handle_gpu_memory_settings`` (capacity tier,
reserved memory, the default fraction), ``memory_hook.adjust_mem_fraction_for_vlm`` (the VLM
cut) and ``arg_groups.platform_hook.handle_platform_defaults`` (NPU backends, page and table).
The fraction is computed before the model overrides, so it never sees their request caps.
"""

from __future__ import annotations

from ....core.releases import NEWEST_SGLANG, ByRelease, EngineRelease, ReleaseRule, span
from .core import (
    GPU_MEMORY_HOOK,
    MODEL_OVERRIDES_HOOK,
    NPU_PLATFORM_HOOK,
    PAGE_SIZE_HOOK,
    VLM_MEMORY_HOOK,
    LaunchInputs,
    LaunchResolution,
    ResolutionDraft,
    _declare,
    _multimodal_active,
    large_hopper_qwen3_vl,
)

#: a capacity-tier decode-graph max_bs above a user --max-running-requests is cut to it
DECODE_GRAPH_CAPPED_BY_REQUESTS = ReleaseRule(
    "launch-decode-graph-capped-by-requests",
    span("0.5.22"),
    "the capacity tier's decode cuda-graph max_bs is capped by a user --max-running-requests",
    "sglang.srt.arg_groups.memory_hook.handle_gpu_memory_settings (decode_max_bs_is_default)",
    topic="launch",
)


#: the 20-35 GiB tier (A10, L4, RTX 4090 / 5090): ``(chunk, decode max_bs below TP 4, at TP >= 4)``
WORKSTATION_TIER: ByRelease[tuple[int, int, int]] = ByRelease(
    "launch-workstation-tier",
    (("0.5.1", (2048, 16, 80)), ("0.5.5", (2048, 24, 80)), ("0.5.20", (4096, 48, 160))),
    "capacity tier of a 20-35 GiB GPU: (chunked_prefill_size, decode cuda-graph max_bs at TP < 4, at TP >= 4)",
    "sglang.srt.arg_groups.memory_hook.handle_gpu_memory_settings (before 0.5.19: "
    "ServerArgs._handle_gpu_memory_settings)",
)


#: the reserve behind ``mem_fraction_static`` follows the chunk and graph sizes, and every capacity tier fills the
#: decode graph's max_bs; before, a flat reserve per capacity tier (plus 2 GiB for a draft, 6 GiB for STANDALONE, 4 GiB
#: under DP attention), the chunk 2048 / 8192 / 16384 and the decode graph's max_bs only below 35 GiB (8, 80 at TP 4)
RESERVE_FROM_SIZES = ReleaseRule(
    "launch-reserve-from-sizes",
    span("0.5.3"),
    "mem_fraction_static's reserve follows the chunk and graph sizes, every capacity tier sets the decode graph "
    "max_bs (before: a flat reserve per tier, (2.8 + tp x pp / 10) GiB below 35 GiB, (9.5 + tp x pp / 2) below 90, "
    "(12 + tp x pp / 2) below 160, 32 GiB above; chunk 2048 / 8192 / 16384; max_bs 8 / 80 below 35 GiB only)",
    "sglang.srt.server_args.ServerArgs._handle_gpu_memory_settings (before: ServerArgs.__post_init__)",
    topic="launch",
)


def capacity_tier(
    gpu_mem_mib: float | None, tp_size: int, release: EngineRelease = NEWEST_SGLANG
) -> tuple[int, int | None]:
    """memory_hook.handle_gpu_memory_settings: ``(chunked_prefill_size, decode graph max_bs)`` from the capacity (MiB)
    and TP size (the 20-35 GiB tier per release: :data:`WORKSTATION_TIER`; up to 0.5.2 three tiers and no max_bs
    from 35 GiB up, :data:`RESERVE_FROM_SIZES`)."""
    if not RESERVE_FROM_SIZES.holds(release):
        if gpu_mem_mib is None:
            return 4096, None
        if gpu_mem_mib < 35840:
            return 2048, 8 if tp_size < 4 else 80
        return (8192 if gpu_mem_mib < 163840 else 16384), None
    if gpu_mem_mib is None:
        return 4096, 160
    if gpu_mem_mib < 20480:
        return 2048, 8
    if gpu_mem_mib < 35840:
        chunk, small, large = WORKSTATION_TIER.at(release)
        return chunk, small if tp_size < 4 else large
    if gpu_mem_mib < 61440:
        return 4096, 32 if tp_size < 4 else 160
    if gpu_mem_mib < 163840:
        return 8192, 256 if tp_size < 4 else 512
    return 16384, 512


def mem_fraction_from_reserve(gpu_mem_mib: float, reserved_mib: float) -> float:
    """memory_hook.handle_gpu_memory_settings: ``round((gpu_mem - R) / gpu_mem, 3)`` (Python's correctly rounded
    ``round``)."""
    return round((gpu_mem_mib - reserved_mib) / gpu_mem_mib, 3)


def vlm_fraction_factor(vision_layers: int | None, vision_hidden: int | None) -> float:
    """memory_hook.adjust_mem_fraction_for_vlm: ``0.95 * clamp(1 - 0.1 * (c - 1), 0.8, 1.05)``,
    ``c = L * H**2 / (24 * 1024**2)``.

    ``L`` defaults to 24 and ``H`` to 1024 when the vision config lacks them (configs
    that call the depth ``depth`` get 24: SGLang reads ``num_hidden_layers`` only).
    """
    layers = 24 if vision_layers is None else vision_layers
    hidden = 1024 if vision_hidden is None else vision_hidden
    c = layers * hidden**2 / (24 * 1024**2)
    return 0.95 * min(max(1 - 0.1 * (c - 1), 0.8), 1.05)


def platform_step(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """Platform defaults (platform_hook.handle_platform_defaults): NPU uses ``ascend`` backends, page 128 and its own
    chunk/max_bs table."""
    if not inp.gpu.is_npu:
        return
    for name in ("attention_backend", "prefill_attention_backend", "decode_attention_backend"):
        if getattr(res, name) is None:
            _declare(res, name, "ascend", f"NPU platform hook ({MODEL_OVERRIDES_HOOK.at(inp.release)})")
    if res.page_size is None:
        _declare(res, "page_size", 128, f"NPU platform default ({PAGE_SIZE_HOOK.at(inp.release)})")
    mem, small = res.gpu_mem_mib, inp.tp_size < 4
    if mem is not None and mem <= 65536:
        chunk, dmb = (4096, 16 if small else 64) if mem <= 32768 else (8192, 64 if small else 256)
        why = f"NPU table for {mem:g} MiB, tp {inp.tp_size} ({NPU_PLATFORM_HOOK.at(inp.release)})"
        if res.chunked_prefill_size is None:
            _declare(res, "chunked_prefill_size", chunk, why)
        if res.cuda_graph_max_bs is None:
            _declare(res, "cuda_graph_max_bs", dmb, why)


def capacity_tier_step(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """Capacity tier (memory_hook.handle_gpu_memory_settings): fill chunk and decode max_bs from the capacity; a table
    max_bs is capped by a *user* ``--max-running-requests`` (the only request cap visible this early,
    ServerArgs.resolve_once order)."""
    chunk, dmb = capacity_tier(res.gpu_mem_mib, inp.tp_size, inp.release)
    mem = "unknown" if res.gpu_mem_mib is None else f"{res.gpu_mem_mib:g} MiB"
    source = GPU_MEMORY_HOOK.at(inp.release)
    why = f"capacity tier: gpu_mem {mem}, tp {inp.tp_size} ({source})"
    if res.chunked_prefill_size is None:
        _declare(res, "chunked_prefill_size", chunk, why)
    if res.cuda_graph_max_bs is None and dmb is not None:
        mrr = inp.settings.max_running_requests
        if mrr is not None and dmb > mrr and DECODE_GRAPH_CAPPED_BY_REQUESTS.holds(inp.release):
            dmb, why = mrr, f"capacity tier {dmb} capped by --max-running-requests {mrr} ({source})"
        if large_hopper_qwen3_vl(inp) and mrr is not None and dmb < mrr <= 512:
            why = "Qwen3-VL, large Hopper: --max-running-requests (qwen3_vl.expand_multimodal_decode_graph...)"
            dmb = mrr
        _declare(res, "cuda_graph_max_bs", dmb, why)


#: the reserve follows the PD role: a decode node sizes activations to its decode batch and skips the
#: prefill graph, a prefill node skips the decode graph and the DP padding, a disabled decode graph and
#: DeepEP's decode-graph buffers count; before, every role reserves as a mixed node
RESERVE_BY_PD_ROLE = ReleaseRule(
    "launch-reserve-by-pd-role",
    span("0.5.15"),
    "mem_fraction_static reserve per PD role (decode: decode-batch activations, no prefill graph; prefill: no decode "
    "graph or DP padding), none for a disabled decode graph, +2048 MiB for DeepEP decode graphs (before: one reserve)",
    "sglang.srt.server_args.ServerArgs._handle_gpu_memory_settings (0.5.19: arg_groups.memory_hook)",
    topic="launch",
)


#: no reserve for a speculative draft; before, +6 GiB for STANDALONE and +4 GiB for any other algorithm but NGRAM,
#: added after the 10 GiB floor
NO_SPECULATIVE_RESERVE = ReleaseRule(
    "launch-no-speculative-reserve",
    span("0.5.14"),
    "mem_fraction_static reserves nothing for speculative decoding (before: +6144 MiB STANDALONE, +4096 MiB other "
    "algorithms except NGRAM, after the 10240 MiB floor)",
    "sglang.srt.server_args.ServerArgs._handle_gpu_memory_settings",
    topic="launch",
)


#: the reserve for an EAGLE-family draft (every algorithm but STANDALONE and NGRAM) before the reserve was dropped
EAGLE_DRAFT_RESERVE_MIB: ByRelease[float] = ByRelease(
    "launch-eagle-draft-reserve-mib",
    (("0.5.1", 2048.0), ("0.5.10", 4096.0)),
    "the mem_fraction_static reserve (MiB) for an EAGLE-family draft model and its graphs",
    "sglang.srt.server_args.ServerArgs._handle_gpu_memory_settings",
    topic="launch",
)


def speculative_reserve_mib(algorithm: str | None, release: EngineRelease) -> float:
    """The draft's share of ``R`` before :data:`NO_SPECULATIVE_RESERVE` (MiB): 6144 for STANDALONE,
    0 for NGRAM, :data:`EAGLE_DRAFT_RESERVE_MIB` (4096; 2048 up to 0.5.9) for the others; 0 without speculation or
    from 0.5.14."""
    if algorithm is None or NO_SPECULATIVE_RESERVE.holds(release):
        return 0.0
    algo = algorithm.upper()
    return 6144.0 if algo == "STANDALONE" else 0.0 if algo == "NGRAM" else EAGLE_DRAFT_RESERVE_MIB.at(release)


def flat_reserve_mib(inp: LaunchInputs, gpu_mem_mib: float) -> float:
    """Up to 0.5.2 (:data:`RESERVE_FROM_SIZES`, ``ServerArgs.__post_init__``): ``(2.8 + p / 10)`` GiB below 35 GiB,
    ``(9.5 + p / 2)`` below 90, ``(12 + p / 2)`` below 160, 32 GiB above (``p = tp x pp``), plus 6 GiB for STANDALONE
    or 2 GiB for any other draft (NGRAM too), plus 4 GiB under DP attention (MiB)."""
    parallel = inp.tp_size * inp.pp_size
    if gpu_mem_mib < 35840:
        reserve = (2.8 + parallel / 10) * 1024
    elif gpu_mem_mib < 92160:
        reserve = (9.5 + parallel / 2) * 1024
    elif gpu_mem_mib < 163840:
        reserve = (12 + parallel / 2) * 1024
    else:
        reserve = 32 * 1024
    algorithm = inp.settings.speculative_algorithm
    if algorithm is not None:
        reserve += 6 * 1024 if algorithm.upper() == "STANDALONE" else 2 * 1024
    if inp.attn_dp_size > 1:
        reserve += 4 * 1024
    return reserve


def reserved_memory_mib(inp: LaunchInputs, res: ResolutionDraft | LaunchResolution) -> float:
    """memory_hook.handle_gpu_memory_settings-4.3: ``R = 512 + 1.5 * tokens + tp * pp / 8 * 1024 + G`` MiB, floored at
    10240 on GPUs > 60 GiB, plus 2048 for DeepEP with decode graphs, plus the draft's share before 0.5.14
    (:func:`speculative_reserve_mib`).

    ``G``: ``2 * dmb`` (decode graph), ``3 * dmb * dp`` (+``1.5 * dmb * dp`` if dmb > 300) for DP
    attention, ``8 * len(prefill bs)`` (non-MLA) or 1536 (MLA) for the prefill graph, +1024 for
    breakable prefill with DeepEP.
    """
    s, m = inp.settings, inp.model
    if not RESERVE_FROM_SIZES.holds(inp.release) and res.gpu_mem_mib is not None:
        return flat_reserve_mib(inp, res.gpu_mem_mib)
    by_role = RESERVE_BY_PD_ROLE.holds(inp.release)
    pd_prefill = by_role and s.disaggregation_mode == "prefill"
    pd_decode = by_role and s.disaggregation_mode == "decode"
    dmb = res.cuda_graph_max_bs or 0
    chunk = res.chunked_prefill_size
    if pd_decode:
        reqs = s.max_running_requests or res.cuda_graph_max_bs or 1
        tokens = max(reqs * (s.speculative_num_draft_tokens or 1), 2048)
    elif chunk is not None and chunk > 0:
        tokens = max(chunk, 2048)
    else:
        tokens = max(res.max_prefill_tokens, 2048)
    reserve = 512 + 1.5 * tokens + (inp.tp_size * inp.pp_size / 8) * 1024
    decode_on = (res.decode_cuda_graph != "disabled" or not by_role) and not pd_prefill
    if decode_on:
        reserve += 2 * dmb
    if inp.attn_dp_size > 1 and not pd_prefill:
        reserve += 3 * dmb * inp.attn_dp_size + (1.5 * dmb * inp.attn_dp_size if dmb > 300 else 0)
    if res.prefill_cuda_graph != "disabled" and not pd_decode:
        reserve += 1536 if m.is_mla else 8 * res.prefill_graph_bs_count
        if res.prefill_cuda_graph == "breakable" and s.moe_a2a_backend == "deepep":
            reserve += 1024
    if res.gpu_mem_mib is not None and res.gpu_mem_mib > 61440:
        reserve = max(reserve, 10240)
    if by_role and decode_on and s.moe_a2a_backend == "deepep":
        reserve += 2048
    return reserve + speculative_reserve_mib(s.speculative_algorithm, inp.release)


#: ``mem_fraction_static`` when SGLang cannot read the GPU's capacity (``gpu_mem is None``)
UNKNOWN_CAPACITY_FRACTION: ByRelease[float] = ByRelease(
    "launch-unknown-capacity-fraction",
    (("0.5.1", 0.88), ("0.5.20", 0.95)),
    "mem_fraction_static when the GPU capacity is unknown (the VLM cut still applies)",
    "sglang.srt.arg_groups.memory_hook.handle_gpu_memory_settings (before 0.5.19: "
    "ServerArgs._handle_gpu_memory_settings)",
)


def mem_fraction_step(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """Memory fraction (memory_hook.handle_gpu_memory_settings): the default fraction (unknown capacity:
    :data:`UNKNOWN_CAPACITY_FRACTION`), then the VLM cut (memory_hook.adjust_mem_fraction_for_vlm, not
    re-rounded)."""
    if res.mem_fraction_static is not None:
        return
    source = GPU_MEMORY_HOOK.at(inp.release)
    if res.gpu_mem_mib is None:
        mfs = UNKNOWN_CAPACITY_FRACTION.at(inp.release)
        _declare(res, "mem_fraction_static", mfs, f"capacity unknown ({source})")
    else:
        reserve = reserved_memory_mib(inp, res)
        mfs = mem_fraction_from_reserve(res.gpu_mem_mib, reserve)
        res.reserved_mib = reserve
        _declare(res, "mem_fraction_static", mfs,
                 f"round(({res.gpu_mem_mib:g} - R {reserve:g}) / {res.gpu_mem_mib:g}, 3) ({source})")  # fmt: skip
    m = inp.model
    if _multimodal_active(inp) and inp.settings.disaggregation_mode != "decode" and m.has_vision_config:
        factor = vlm_fraction_factor(m.vision_layers, m.vision_hidden)
        _declare(res, "mem_fraction_static", mfs * factor,
                 f"VLM cut x{factor:.4f} ({VLM_MEMORY_HOOK.at(inp.release)})")  # fmt: skip
