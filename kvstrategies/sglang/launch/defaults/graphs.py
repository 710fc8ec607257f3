"""CUDA graphs, the prefill-graph batch list, the DP split of the chunk and the page default.

Mirrors ``sglang.srt.arg_groups.cuda_graph_hook`` (decode and breakable prefill graphs, the
prefill-graph batch sizes), ``arg_groups.parallel_hook.handle_data_parallelism``
(``chunked_prefill_size //= attn_dp_size`` and the prefill-graph re-clamp) and
``arg_groups.overrides._page_size_default`` (page 1 when nothing set one).
"""

from __future__ import annotations

from ....core.releases import ReleaseRule, span
from ....models.architectures import LaunchBackendRule, names_holding, names_where
from . import graph_rules as rules
from .core import (
    CUDA_GRAPH_HOOK,
    DATA_PARALLEL_HOOK,
    PAGE_SIZE_HOOK,
    LaunchInputs,
    ResolutionDraft,
    _declare,
    _multimodal_active,
)

_NEMOTRON_H = names_where(lambda row: row.launch_backend_rule is LaunchBackendRule.NEMOTRON_H)

#: under PP > 1 the breakable prefill graph is opt-in (off by default; opted in, capped at 8192
#: tokens); before, PP keeps the breakable graph at the chunk size
PP_PREFILL_GRAPH_OPT_IN = ReleaseRule(
    "launch-pp-prefill-graph-opt-in",
    span("0.5.19"),
    "pp_size > 1 disables the breakable prefill cuda graph by default (opt-in capped at 8192 tokens)",
    "sglang.srt.arg_groups.cuda_graph_hook.apply_cuda_graph_compatibility; memory_hook.handle_gpu_memory_settings",
    topic="launch",
)
#: KDA hybrid linear attention (Kimi-Linear) turns the breakable prefill graph off
KDA_DISABLES_PREFILL_GRAPH = ReleaseRule(
    "launch-kda-disables-prefill-graph",
    span("0.5.20"),
    "KDA hybrid linear attention disables the breakable prefill cuda graph",
    "sglang.srt.arg_groups.cuda_graph_hook.apply_cuda_graph_compatibility (uses_kda_attention)",
    topic="launch",
)
#: the MLA prefill graph follows the chunk, capped at 8192 tokens; before 0.5.23 it is a flat 2048
#: (whatever the chunk, -1 included)
MLA_PREFILL_GRAPH_FOLLOWS_CHUNK = ReleaseRule(
    "launch-mla-prefill-graph-follows-chunk",
    span("0.5.23"),
    "MLA prefill-graph max_bs = min(8192, chunked_prefill_size) (before: 2048)",
    "sglang.srt.arg_groups.memory_hook.handle_gpu_memory_settings (prefill_cuda_graph_config.max_bs)",
    topic="launch",
)


#: the MLA prefill graph is a flat 2048 tokens (until :data:`MLA_PREFILL_GRAPH_FOLLOWS_CHUNK`); before, the chunk
#: like every model
MLA_PREFILL_GRAPH_FLAT = ReleaseRule(
    "launch-mla-prefill-graph-flat",
    span("0.5.8"),
    "MLA prefill-graph max_bs = 2048 (before: chunked_prefill_size, as for every model)",
    "sglang.srt.server_args.ServerArgs._handle_piecewise_cuda_graph (piecewise_cuda_graph_max_tokens)",
    topic="launch",
)
#: the prefill graph's max tokens follows the chunked prefill size; before, a flat 4096 whatever the chunk
PREFILL_GRAPH_FOLLOWS_CHUNK = ReleaseRule(
    "launch-prefill-graph-follows-chunk",
    span("0.5.7"),
    "the prefill graph's max tokens is chunked_prefill_size (before: the field default 4096, whatever the chunk)",
    "sglang.srt.server_args.ServerArgs._handle_piecewise_cuda_graph (piecewise_cuda_graph_max_tokens)",
    topic="launch",
)
#: ``ServerArgs.piecewise_cuda_graph_max_tokens``'s field default (what 0.5.6 keeps)
PIECEWISE_GRAPH_MAX_TOKENS_DEFAULT = 4096
#: the prefill graph's token list is 640..1024/64, 1280..4096/256, 4608../512 past 512; before, 640..4096/128,
#: 4352../256
PREFILL_GRAPH_FINE_SIZES = ReleaseRule(
    "launch-prefill-graph-fine-sizes",
    span("0.5.8"),
    "the prefill graph's sizes past 512 are 640..1024/64, 1280..4096/256, 4608../512 (before: 640..4096/128, "
    "4352../256)",
    "sglang.srt.server_args.ServerArgs._generate_piecewise_cuda_graph_tokens",
    topic="launch",
)


def coarse_prefill_graph_bs_count(max_bs: int) -> int:
    """Up to 0.5.7 (:data:`PREFILL_GRAPH_FINE_SIZES`): the sizes 4..32/4, 48..256/16, 288..512/32, 640..4096/128,
    4352../256 that are <= max_bs. Lengths: 42 (2048), 74 (8192), 106 (16384)."""
    fixed = (range(4, 33, 4), range(48, 257, 16), range(288, 513, 32), range(640, 4097, 128))
    return sum(1 for sizes in fixed for b in sizes if b <= max_bs) + len(range(4352, max_bs + 1, 256))


def prefill_graph_batch_sizes(max_bs: int, sixty_four_from: int = 576) -> tuple[int, ...]:
    """arg_groups.cuda_graph_hook: 4..32/4, 48..256/16, 288..512/32, 576..1024/64, 1280..4096/256, 4608../512, <=
    max_bs (``sixty_four_from``: where the step-64 range starts, 640 up to 0.5.8:
    :data:`.graph_rules.PIECEWISE_TOKENS_64_FROM`).

    Lengths: 42 (2048), 50 (4096), 58 (8192), 74 (16384).
    """
    ranges = ((4, 32, 4), (48, 256, 16), (288, 512, 32), (sixty_four_from, 1024, 64), (1280, 4096, 256))
    sizes = [b for lo, hi, step in ranges for b in range(lo, hi + 1, step)]
    sizes += range(4608, max_bs + 1, 512)
    return tuple(b for b in sizes if b <= max_bs)


def prefill_graph_bs_count(max_bs: int, sixty_four_from: int = 576) -> int:
    """``prefill_graph_bs_count(max_bs)`` without building the list (any ``max_bs``)."""
    fixed = sum(1 for b in prefill_graph_batch_sizes(min(max_bs, 4096), sixty_four_from) if b <= max_bs)
    return fixed + len(range(4608, max_bs + 1, 512))


def cuda_graph_step(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """CUDA graphs (arg_groups.cuda_graph_hook): decode graph ``full``; prefill ``breakable`` on CUDA, disabled
    elsewhere, and disabled by the rules evaluated before the memory step. A multimodal model on the
    release's piecewise allow-list goes to ``tc_piecewise`` and meets that backend's rules instead
    (the release rules are in :mod:`.graph_rules`)."""
    s, m, r = inp.settings, inp.model, inp.release
    if s.disable_cuda_graph or s.disaggregation_mode == "prefill":
        why = "--disable-cuda-graph" if s.disable_cuda_graph else f"PD prefill role ({DATA_PARALLEL_HOOK.at(r)})"
        _declare(res, "decode_cuda_graph", "disabled", why)
    multimodal = _multimodal_active(inp)
    flag_off = s.disable_cuda_graph or s.disable_prefill_cuda_graph
    dcp = inp.dcp_size > 1 and rules.PREFILL_GRAPH_OFF_FOR_DCP.holds(r)
    breakable_listed = m.has_arch(names_holding("breakable_multimodal", r))
    kept = breakable_listed and rules.BREAKABLE_LIST_KEEPS_BREAKABLE.holds(r)
    moved = multimodal and rules.TC_PIECEWISE_MOVE.holds(r) and m.has_arch(names_holding("piecewise_multimodal", r))
    moved = moved and not kept
    if res.prefill_cuda_graph == "tc_piecewise":  # the release's default (graph_rules.PREFILL_DEFAULT_TC_PIECEWISE)
        piecewise_listed = m.has_arch(names_holding("piecewise_multimodal", r))
        prefill_off = [
            (flag_off, "prefill graph disabled by flag"),
            (m.has_arch(names_holding("piecewise_graph_off", r)), "model-arch blacklist"),
            (res.speculative_algorithm is not None and rules.PIECEWISE_OFF_FOR_SPECULATIVE.holds(r),
             "speculative decoding"),
            (multimodal and not piecewise_listed, "multimodal model"),
            (inp.attn_dp_size > 1, "DP attention"),
            (inp.pp_size > 1, "pipeline parallelism (pp_size > 1)"),
            (s.moe_a2a_backend != "none", "MoE A2A backend"),
            (s.disaggregation_mode != "null", "PD disaggregation"),
        ]
    elif res.prefill_cuda_graph == "breakable" and not flag_off and moved:
        _declare(res, "prefill_cuda_graph", "tc_piecewise",
                 f"validated multimodal decoder prefill ({CUDA_GRAPH_HOOK.at(r)})")  # fmt: skip
        prefill_off = [
            (inp.attn_dp_size > 1, "DP attention"),
            (inp.pp_size > 1, "pipeline parallelism (pp_size > 1)"),
            (s.moe_a2a_backend != "none", "MoE A2A backend"),
            (s.disaggregation_mode != "null", "PD disaggregation"),
            (dcp, "decode context parallel (dcp_size > 1)"),
        ]
    else:
        mla = m.is_mla and rules.BREAKABLE_OFF_FOR_MLA.holds(r)
        mla = mla and (not m.is_dsa or rules.BREAKABLE_OFF_FOR_DSA.holds(r))
        allowed = rules.BREAKABLE_MULTIMODAL_ALLOW_LIST.holds(r) and breakable_listed
        prefill_off = [
            (flag_off, "prefill graph disabled by flag"),
            (not inp.gpu.is_cuda, "breakable prefill graph is CUDA-only"),
            (inp.pp_size > 1 and PP_PREFILL_GRAPH_OPT_IN.holds(r), "pp_size > 1: the breakable graph is opt-in"),
            (mla, "MLA attention"),
            (m.has_arch(_NEMOTRON_H) and rules.BREAKABLE_OFF_FOR_NEMOTRON_H.holds(r), "NemotronH (hybrid Mamba2)"),
            (m.is_kda and KDA_DISABLES_PREFILL_GRAPH.holds(r), "KDA hybrid linear attention"),
            (m.is_dsv4, "DeepSeek-V4 disables the prefill graph"),
            (dcp, "decode context parallel (dcp_size > 1)"),
            (s.moe_a2a_backend not in rules.BREAKABLE_A2A_BACKENDS.at(r), "moe_a2a_backend"),
            (inp.attn_dp_size > 1 and rules.BREAKABLE_OFF_FOR_DP_ATTENTION.holds(r), "DP attention"),
            (multimodal and not allowed, "multimodal model not on the breakable allow-list"),
            (s.disaggregation_mode == "decode", "PD decode role"),
        ]
    for cond, why in prefill_off:
        if cond:
            _declare(res, "prefill_cuda_graph", "disabled", f"{why} ({CUDA_GRAPH_HOOK.at(r)})")
            return


def prefill_graph_step(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """Prefill graph sizes (arg_groups.cuda_graph_hook): prefill graph ``max_bs`` (tokens) and its batch list length.

    ``max_bs = chunk`` (non-MLA) or ``min(8192, chunk)`` (MLA; a flat 2048 where
    :data:`MLA_PREFILL_GRAPH_FOLLOWS_CHUNK` does not hold, the chunk up to 0.5.7), then the PP cap 8192 (only while the
    prefill graph is still breakable) and ``min(., max_total_tokens)``. With chunked prefill off
    (``-1``) ``max_bs`` is ``-1`` and the batch list is empty: no prefill graph is captured and
    none is reserved for (SGLang: ``memory_hook.handle_gpu_memory_settings``). With DeepEP the
    list is the 2048 default's, aligned to multiples of 8: 38 sizes up to 2048.
    """
    if not rules.PIECEWISE_GRAPH_FIELDS.holds(inp.release):  # 0.5.3: no prefill graph, no sizes
        res.prefill_graph_max_bs, res.prefill_graph_bs_count = None, 0
        return
    if res.prefill_cuda_graph == "breakable" and inp.settings.moe_a2a_backend == "deepep":
        # cuda_graph_hook.apply_deepep_adjustments (before the memory step): the buckets of the 2048
        # default aligned up to multiples of 8 fix the list and its max_bs, whatever the chunk
        aligned = sorted({(b + 7) // 8 * 8 for b in prefill_graph_batch_sizes(2048)})
        res.prefill_graph_max_bs, res.prefill_graph_bs_count = aligned[-1], len(aligned)
        return
    chunk = res.chunked_prefill_size
    max_bs = chunk if chunk is not None else res.max_prefill_tokens
    if not PREFILL_GRAPH_FOLLOWS_CHUNK.holds(inp.release):  # 0.5.6: the field default
        flat = PIECEWISE_GRAPH_MAX_TOKENS_DEFAULT
        res.prefill_graph_max_bs, res.prefill_graph_bs_count = flat, coarse_prefill_graph_bs_count(flat)
        return
    if inp.model.is_mla and MLA_PREFILL_GRAPH_FOLLOWS_CHUNK.holds(inp.release):
        max_bs = min(8192, max_bs)
    elif inp.model.is_mla and MLA_PREFILL_GRAPH_FLAT.holds(inp.release):
        max_bs = 2048
    if inp.pp_size > 1 and res.prefill_cuda_graph == "breakable" and PP_PREFILL_GRAPH_OPT_IN.holds(inp.release):
        max_bs = min(max_bs, 8192)
    if inp.settings.max_total_tokens is not None:
        max_bs = min(max_bs, inp.settings.max_total_tokens)
    res.prefill_graph_max_bs, res.prefill_graph_bs_count = max_bs, _bs_count(inp, max_bs)


def _bs_count(inp: LaunchInputs, max_bs: int) -> int:
    """The release's prefill-graph list length for ``max_bs`` tokens."""
    if not PREFILL_GRAPH_FINE_SIZES.holds(inp.release):
        return coarse_prefill_graph_bs_count(max_bs)
    return prefill_graph_bs_count(max_bs, rules.PIECEWISE_TOKENS_64_FROM.at(inp.release))


def page_default_step(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """Page default (overrides._page_size_default): page 1 if still unset."""
    if res.page_size is not None:
        return
    _declare(res, "page_size", 1, f"default ({PAGE_SIZE_HOOK.at(inp.release)})")


def dp_attention_step(inp: LaunchInputs, res: ResolutionDraft) -> None:
    """DP attention (parallel_hook.handle_data_parallelism): ``chunked_prefill_size //= attn_dp_size``; prefill graph
    re-clamped."""
    dp, chunk = inp.attn_dp_size, res.chunked_prefill_size
    if dp <= 1 or chunk is None or chunk <= 0:
        return
    _declare(res, "chunked_prefill_size", chunk // dp,
             f"DP attention: {chunk} // {dp} ({DATA_PARALLEL_HOOK.at(inp.release)})")  # fmt: skip
    # parallel_hook.handle_data_parallelism re-clamps only a prefill graph still enabled.
    graph_on = res.prefill_cuda_graph != "disabled"
    if graph_on and res.prefill_graph_max_bs is not None and res.prefill_graph_max_bs > chunk // dp:
        max_bs = chunk // dp
        res.prefill_graph_max_bs, res.prefill_graph_bs_count = max_bs, _bs_count(inp, max_bs)
