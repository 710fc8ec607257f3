"""The deployment planner (kvstrategies.planner): launch defaults, budget, breakdown, fit, fixes,
sweep, plot. Expected numbers are computed by hand in the comments and written as literals."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kvstrategies.errors import InsufficientMemoryError, KVCacheConfigError
from kvstrategies.planner import (
    DeploymentRequest,
    TokenPool,
    plan_deployment,
    sweep,
    sweep_csv,
    sweep_table,
)
from kvstrategies.planner.fit import largest_true
from kvstrategies.planner.gpus import lookup_gpu
from kvstrategies.planner.report import answer_text
from kvstrategies.sglang.budget import weights_per_rank
from tests.helpers import SMALL_LLAMA, planner_request

GIB = 2**30
LLAMA8 = {"preset": "llama-3.1-8b"}
# Llama-3.1-8B: 32 layers x 8 KV heads x (128 + 128) x 2 B = 131,072 B per token (bf16).
DENSE_BUDGET = 10 * GIB + 100 * 131_072  # raw 82,020 tokens -> page 64: 1,281 pages = 81,984 tokens


def dense(**changes: object) -> DeploymentRequest:
    base = DeploymentRequest("llama-3.1-8b", LLAMA8, page_size=64, available_bytes=DENSE_BUDGET)
    return base.replace(**changes)


# ---- fit: concurrency and the longest request, one dense case by hand ------------------------------------


def test_dense_concurrency_and_max_length_by_hand() -> None:
    planned = plan_deployment(dense(request_lengths=(100, 1000, 8192, 81_984, 81_985)))
    fit = planned.fit
    assert planned.sizes.max_total_num_tokens == 81_984
    # requests: clamp(int(81,984 / 131,072 * 512) = 320, 2048, 4096) = 2048 <= 81,984 // 2
    assert fit.max_running_requests == 2048
    assert (fit.capacity_tokens, fit.page_size, fit.context_len) == (81_984, 64, 131_072)
    got = [(x.request_length, x.tokens_per_request, x.requests, x.limited_by) for x in fit.lengths]
    assert got == [
        (100, 128, 640, "token pool"),  # ceil_align(100, 64) = 128; 81,984 // 128 = 640
        (1000, 1024, 80, "token pool"),  # 1024 per request; 81,984 // 1024 = 80
        (8192, 8192, 10, "token pool"),  # 81,984 // 8192 = 10
        (81_984, 81_984, 1, "token pool"),  # exactly the pool
        (81_985, 82_048, 0, "token pool"),  # one page more than the pool
    ]
    # 131,072 > 81,984: the whole context does not fit; the binary search lands on the pool size.
    assert not fit.context_fits and fit.max_fitting_length == 81_984
    assert fit.sglang_max_req_len == 81_983  # min(131,072 - 1, 81,984 - 1)


def test_concurrency_is_capped_by_max_running_requests() -> None:
    fit = plan_deployment(dense(max_running_requests=7, request_lengths=(1000,))).fit
    assert [(x.requests, x.limited_by) for x in fit.lengths] == [(7, "max_running_requests")]


def test_fixes_are_replanned_by_hand() -> None:
    fixes = plan_deployment(dense()).fixes
    assert [(f.flag, f.capacity_tokens, f.max_fitting_length) for f in fixes] == [
        # fp8: 65,536 B per token -> 164,040 raw -> 164,032 page-aligned >= 131,072
        ("--kv-cache-dtype fp8_e4m3", 164_032, 131_072),
        # ranked cheapest first (fixes.COST_ORDER): a shorter context costs no hardware, so it
        # comes before TP 2; planned again, its budget is the given one: 81,984 tokens again
        ("--context-length 81984", 81_984, 81_984),
        # TP 2: 4 heads per rank, same per-rank budget -> the same 164,032 tokens
        ("--tp 2", 164_032, 131_072),
    ]
    assert fixes[2].note == "same KV budget per rank (--available-bytes)"
    assert plan_deployment(dense(available_bytes=20 * GIB)).fixes == ()  # 163,840 tokens: fits


def test_binary_search() -> None:
    assert largest_true(lambda n: n <= 81_984, 131_072) == 81_984
    assert largest_true(lambda n: n <= 10, 10) == 10
    assert largest_true(lambda n: n == 0, 5) == 0
    pool = TokenPool("swa", 1000, 64, span=257)
    assert (pool.tokens_for(100), pool.tokens_for(10_000), pool.requests_at(10_000)) == (128, 320, 3)


def test_hybrid_swa_short_requests_are_bound_by_the_swa_pool() -> None:
    req = DeploymentRequest("gpt-oss-120b", {"preset": "gpt-oss-120b"}, available_bytes=20 * GIB,
                            request_lengths=(200, 8192))  # fmt: skip
    planned = plan_deployment(req)
    full, swa = planned.sizes.full_max_total_num_tokens, planned.sizes.swa_max_total_num_tokens
    assert full is not None and swa is not None
    fit = planned.fit
    assert fit.capacity_tokens == full  # the full pool bounds one request (TpModelWorker max_req_len)
    short, long = fit.lengths
    # L 200: full holds full // 200, the SWA pool (0.8 of it) swa // 200 -> SWA binds (< 2048 requests).
    assert (short.requests, short.limited_by) == (swa // 200, "swa pool")
    # L 8192: an SWA request holds at most W + ev + P + P = 127 + 128 + 1 + 1 = 257 slots.
    assert (long.requests, long.limited_by) == (min(full // 8192, swa // 257), "full pool")
    assert fit.max_fitting_length == min(full, fit.context_len)


# ---- launch defaults: two worked launches -----------------------------------------------------


def test_worked_launch_1_llama_8b_h100() -> None:
    planned = plan_deployment(DeploymentRequest("llama-3.1-8b", LLAMA8, gpu=lookup_gpu("H100-80GB")))
    assert [(d.setting, d.value) for d in planned.defaults] == [
        ("chunked_prefill_size", 8192),
        ("cuda_graph_max_bs", 256),
        ("mem_fraction_static", 0.83),  # round((81559 - 13904) / 81559, 3)
        ("attention_backend", "fa3"),
        ("page_size", 1),
        ("swa_full_tokens_ratio", 0.8),
        ("head_dim", 128),  # the preset's config omits it: hidden_size // num_attention_heads
        ("kv_cache_dtype", "torch.bfloat16"),  # auto = the model dtype
        ("max_running_requests", 2048),  # derived: int(410,721 / 131,072 * 512) = 1604 -> 2048
    ]
    budget = planned.budget
    # held before load int(1.145 GiB) = 1,229,434,388 B (planner/preload.py, TP1: no peers), so
    # P0 = 85,520,809,984 - 1,229,434,388 = 84,291,375,596 B; weights 8,030,261,248 params x 2 B =
    # 16,060,522,496 B + RoPE cache max(131072, align128(131072 + 256)) x 128 x 4 B = 67,239,936 B;
    # budget = int(P0 - weights - P0 * 0.17) = 53,834,079,312.
    assert budget.overhead_bytes == 1_229_434_388
    assert (budget.weight_bytes, budget.available_bytes) == (16_127_762_432, 53_834_079_312)
    assert planned.sizes.max_total_num_tokens == 410_721  # 53,834,079,312 // 131,072
    ctx = planned.planned.ctx
    assert (ctx.page_size, ctx.backends.attention_backend, ctx.scheduling.chunked_prefill_size) == (1, "fa3", 8192)
    assert ctx.scheduling.swa_full_tokens_ratio is None  # the 0.8 fallback is not "explicit" (arg_groups.overrides)
    # the rows add up to the GPU: overhead + weights + pools + request table + slack = capacity
    assert sum(row.nbytes for row in planned.breakdown.rows) == 85_520_809_984


def test_worked_launch_9_deepseek_v4_flash_h200_tp8() -> None:
    req = DeploymentRequest("deepseek-v4-flash", {"preset": "deepseek-v4-flash"}, tp_size=8, gpu=lookup_gpu("H200"))
    planned = plan_deployment(req)
    assert [(d.setting, d.value) for d in planned.defaults] == [
        ("prefill_cuda_graph", "disabled"),
        ("chunked_prefill_size", 8192),
        ("cuda_graph_max_bs", 512),
        ("mem_fraction_static", 0.897),  # R = 512 + 1.5 * 8192 + 1024 + 2 * 512 = 14848
        ("attention_backend", "dsv4"),
        ("dsv4_attn_backend", "flashmla"),
        ("page_size", 256),
        ("kv_cache_dtype", "fp8_e4m3"),
        ("swa_full_tokens_ratio", 0.1),
        ("max_running_requests", 256),
    ]
    ctx = planned.planned.ctx
    assert (ctx.page_size, ctx.kv_cache_dtype.name, ctx.backends.dsv4_attn_backend) == (256, "fp8_e4m3", "flashmla")
    assert (ctx.scheduling.swa_full_tokens_ratio, ctx.scheduling.max_running_requests) == (0.1, 256)
    assert planned.launch is not None and planned.launch.reserved_mib == 14848
    assert planned.sizes.max_running_requests == 256
    kinds = {row.label.split(" ")[1] for row in planned.breakdown.rows if row.area == "kv-budget"}
    assert {"swa", "c4", "c128", "state"} <= kinds  # each pool by kind, read from the layout


def test_given_settings_are_not_defaulted() -> None:
    req = DeploymentRequest("llama-3.1-8b", LLAMA8, gpu=lookup_gpu("B200"), kv_cache_dtype="fp8_e4m3",
                            page_size=32, mem_fraction_static=0.8, weight_bytes=16 * GIB)  # fmt: skip
    planned = plan_deployment(req)
    settings = {d.setting for d in planned.defaults}
    assert not {"kv_cache_dtype", "mem_fraction_static"} & settings
    assert planned.planned.ctx.page_size == 32  # trtllm_mha keeps 16/32/64/128 (overrides._page_size_default)
    assert planned.budget.weight_source == "given per rank (--weight-bytes)"


def test_weight_bytes_given_budget_by_hand() -> None:
    req = DeploymentRequest("llama-3.1-8b", LLAMA8, gpu=lookup_gpu("H100"), weight_bytes=16 * GIB)
    # P0 = 79.6474609375 - 1.145 GiB held = 78.50246 GiB; weights given (no RoPE added):
    # int((78.50246 - 16 - 78.50246 * 0.17) GiB) = 52,781,972,560 B
    assert plan_deployment(req).budget.available_bytes == 52_781_972_560
    given = plan_deployment(req.replace(overhead_bytes=GIB))  # --gpu-overhead 1GiB: the old flat figure
    assert given.budget.available_bytes == 52_911_197_388  # int((78.6474609375 - 16 - 78.6474609375 * 0.17) GiB)


def test_mem_fraction_fix_is_the_smallest_that_fits() -> None:
    req = DeploymentRequest("gpt-oss-120b", {"preset": "gpt-oss-120b"}, gpu=lookup_gpu("H100"))
    planned = plan_deployment(req)
    assert not planned.fit.context_fits
    fixes = {fix.setting: fix for fix in planned.fixes}
    assert set(fixes) == {"kv_cache_dtype", "tp_size", "mem_fraction_static", "context_length", "gpu"}  # gpu: H200
    value = fixes["mem_fraction_static"].value
    assert isinstance(value, float)
    assert plan_deployment(req.replace(mem_fraction_static=value), suggest=False).fit.context_fits
    below = round(value - 0.001, 3)
    assert not plan_deployment(req.replace(mem_fraction_static=below), suggest=False).fit.context_fits


def test_request_table_larger_than_the_slack_is_a_warning() -> None:
    req = DeploymentRequest("llama-4-scout", {"preset": "llama-4-scout"}, tp_size=8, gpu=lookup_gpu("H100"))
    planned = plan_deployment(req)
    # 2049 rows x (10,485,760 + 4) columns x 4 B = 85.9 GB of request table vs ~14.8 GiB of slack
    assert planned.breakdown.request_table_bytes > planned.budget.slack_bytes  # type: ignore[operator]
    assert any("request table" in warning for warning in planned.breakdown.warnings)


# ---- breakdown through the generic layout API -----------------------------------------------------------


def test_breakdown_pools_match_the_layout() -> None:
    for preset in ("gpt-oss-120b", "qwen3-next-80b-a3b", "deepseek-v3.2"):
        planned = plan_deployment(
            DeploymentRequest(preset, {"preset": preset}, tp_size=4, page_size=64, available_bytes=30 * GIB)
        )
        layout = planned.layout
        charged = sum(row.nbytes for row in planned.breakdown.rows if row.area == "kv-budget" and row.kind != "unused")
        assert charged == layout.token_to_kv.planned_bytes + sum(p.planned_bytes for p in layout.extra)
        assert planned.breakdown.request_table_bytes == layout.req_to_token.planned_bytes
        assert planned.breakdown.left_bytes == 30 * GIB - charged


def test_state_pools_are_their_own_rows() -> None:
    req = DeploymentRequest("qwen3-next-80b-a3b", {"preset": "qwen3-next-80b-a3b"}, tp_size=4, available_bytes=46 * GIB)
    rows = plan_deployment(req).breakdown.rows
    labels = [(row.label, row.kind) for row in rows]
    assert ("MambaPool mamba [state]", "state") in labels
    assert ("HybridLinearKVPool full (MHATokenToKVPool) [kv]", "kv") in labels


def test_final_layout_builds_exactly_on_meta() -> None:
    from kvstrategies.pools.build import build_pools

    planned = plan_deployment(DeploymentRequest("gpt-oss-20b", {"preset": "gpt-oss-20b"}, gpu=lookup_gpu("H100")))
    built = build_pools(planned.layout, "meta")
    assert built.token_to_kv_pool.allocated_bytes == planned.layout.token_to_kv.planned_bytes


# ---- sweep -------------------------------------------------------------------------------------------------


def test_sweep_grid_and_errors() -> None:
    base = DeploymentRequest("llama-3.1-70b", {"preset": "llama-3.1-70b"}, gpu=lookup_gpu("H100"))
    rows = sweep(base, tp_sizes=(1, 4), kv_cache_dtypes=("bf16", "fp8_e4m3"), page_sizes=(1, 64),
                 gpus=(lookup_gpu("H100"), lookup_gpu("H200")))  # fmt: skip
    assert len(rows) == 16
    tp1_h100 = [r for r in rows if r.tp == 1 and r.gpu == "H100-80GB"]
    assert all(r.error and "do not fit" in r.error and r.tokens is None for r in tp1_h100)
    ok = [r for r in rows if r.tp == 4 and r.gpu == "H100-80GB" and r.page_request == 1]
    assert [r.kv for r in ok] == ["bf16", "fp8_e4m3"]
    assert ok[1].tokens is not None and ok[0].tokens is not None and ok[1].tokens > 1.99 * ok[0].tokens
    csv_text = sweep_csv(rows)
    assert csv_text.splitlines()[0].startswith("gpu,tp,kv_request,page_request,kv,page,")
    assert len(csv_text.splitlines()) == 17
    assert "error:" in sweep_table(rows)


# ---- bad inputs ----------------------------------------------------------------------------------------------


def test_bad_inputs_raise_config_errors() -> None:
    with pytest.raises(KVCacheConfigError, match="no memory budget"):
        DeploymentRequest("x", LLAMA8)
    with pytest.raises(KVCacheConfigError, match="mem-fraction-static"):
        DeploymentRequest("x", LLAMA8, gpu=lookup_gpu("H100"), mem_fraction_static=1.2)
    with pytest.raises(KVCacheConfigError, match="request-length"):
        DeploymentRequest("x", LLAMA8, available_bytes=GIB, request_lengths=(0,))
    with pytest.raises(InsufficientMemoryError, match="do not fit"):
        plan_deployment(DeploymentRequest("x", {"preset": "llama-3.1-405b"}, tp_size=8, gpu=lookup_gpu("H100")))
    with pytest.raises(KVCacheConfigError, match="unknown GPU"):
        lookup_gpu("Z100")


# ---- plot ----------------------------------------------------------------------------------------------------


def test_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from kvstrategies.planner.plot import plot_breakdown

    planned = plan_deployment(DeploymentRequest("llama-3.1-8b", LLAMA8, gpu=lookup_gpu("H100")))
    out = plot_breakdown(planned, tmp_path / "plan.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kvstrategies.planner.plot import plot_breakdown

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    planned = plan_deployment(dense())
    with pytest.raises(KVCacheConfigError, match=r"pip install 'kvstrategies\[plot\]'"):
        plot_breakdown(planned, tmp_path / "plan.png")


# ---- the budget, the answer and the fit at their edges, by hand (SGLang 0.5.23) ----------------------------


#: its parameters: embedding + head 2 x 1000 x 64, per layer q/o 2 x 64^2 + k/v 2 x 16 x 64 + MLP 3 x 128 x 64
#: + norms 2 x 64, and the final norm 64
SMALL_PARAMS = 2 * 1000 * 64 + 2 * (2 * 64 * 64 + 2 * 16 * 64 + 3 * 128 * 64 + 2 * 64) + 64


# --- budget.weights_per_rank ---------------------------------------------------------------------


def test_the_weight_source_names_expert_parallelism_only_above_one() -> None:
    """The estimate's note says how the weights split: ``TP x PP`` and, only when experts are spread
    (``--ep-size`` > 1), over which EP size; EP 1 is no expert split and is not named."""
    _, source = weights_per_rank(planner_request(SMALL_LLAMA), SMALL_LLAMA)
    assert "split over TP 1 x PP 1 (fullest rank)" in source and "EP" not in source


def test_a_multimodal_class_without_a_vision_tower_adds_no_tower_bytes() -> None:
    """A ``*ForConditionalGeneration`` class counts as multimodal (``launch_facts``), but with no
    ``vision_config`` there is no tower to count: the weights are the language model's alone,
    2 B x 197,952 parameters = 395,904 B at TP 1 (the same as the ``*ForCausalLM`` class)."""
    assert SMALL_PARAMS == 197_952
    for arch in ("LlamaForCausalLM", "LlamaForConditionalGeneration"):
        config = {**SMALL_LLAMA, "architectures": [arch]}
        nbytes, source = weights_per_rank(planner_request(config), config)
        assert (nbytes, "vision tower" in source) == (2 * SMALL_PARAMS, False)


# --- report: the answer's totals ------------------------------------------------------------------


def test_the_answer_names_replicas_alone_or_times_the_attention_dp_workers() -> None:
    """``answer_text``: the total is per-pool tokens x workers; with one attention-DP worker the workers
    are "2 DP replicas", with 2 attention-DP workers "2 attention-DP workers x 2 DP replicas"."""
    for extra, over in (({}, "over 2 DP replicas"), ({"tp_size": 2, "attn_dp_size": 2},
                                                       "over 2 attention-DP workers x 2 DP replicas")):
        planned = plan_deployment(DeploymentRequest("m", {"preset": "llama-3.1-8b"}, gpu=lookup_gpu("H100"),
                                                    dp_replicas=2, **extra), suggest=False)  # fmt: skip
        scale = 2 * planned.fit.attn_dp_size
        total = [line for line in answer_text(planned) if line.startswith("  in total")]
        assert total == [f"  in total       {planned.sizes.max_total_num_tokens * scale:,} tokens {over}"]


# --- resident extras under PP, the engine table, the fit and the longest request -----------------


def test_rocm_int4_index_buffers_follow_the_fullest_pp_stage() -> None:
    """The ROCm W4A16 MoE's g_idx / sort-index buffers (compressed_tensors_wNa16_moe.py,
    ``CompressedTensorsWNA16MoE.create_weights``) are per MoE layer: Kimi-K2.5 at TP 8 keeps
    2 x 384 x (7168 + 256) x 4 B = 22,806,528 B per layer for its 60 MoE layers; at PP 2 the fullest
    stage holds ceil(61 / 2) = 31 of the 61 layers (``get_pp_indices``), so 31 / 61 of them:
    int(22,806,528 x 60 x 31 / 61) = 695,412,165 B."""
    from kvstrategies.planner.weights import estimate_weights
    from kvstrategies.sglang.load_refusals import request_layout
    from kvstrategies.sglang.resident import resident_extras

    doc = json.loads((Path(__file__).parents[1] / "fixtures" / "published" / "kimi-k2.5.json").read_text())
    config = doc["config"]
    req = DeploymentRequest("k", {"hf_config": config}, tp_size=8, pp_size=2, gpu=lookup_gpu("MI355X"))
    extras = resident_extras(req, config, estimate_weights(config), request_layout(req, config))
    found = {e.name: e.nbytes for e in extras}
    assert 2 * 384 * (7168 + 256) * 4 == 22_806_528
    assert found["ROCm INT4 expert index buffers"] == int(22_806_528 * 60 * 31 / 61) == 695_412_165


def test_the_engine_table_says_how_sglang_splits_a_mamba_budget_before_the_header() -> None:
    """``comparison_text`` (``kvstrategies compare``): when SGLang splits the budget between its Mamba
    slot pool and its token pool, that line follows the budget line, before the table's header:
    3 GiB with 1 GiB of token pool leaves 2.00 GiB for the slots."""
    from kvstrategies.planner.compare import EngineComparison, comparison_text

    lines = comparison_text(EngineComparison(3 * 2**30, "H100", (), (), sglang_token_bytes=2**30))
    assert lines[0].startswith("KV budget per rank: 3,221,225,472 bytes (3.00 GiB)")
    assert lines[1] == "SGLang splits it: 2.00 GiB for its Mamba slot pool, 1.00 GiB for its token pool"
    assert lines[2].lstrip().startswith("request length")


def test_the_moonvit_tower_splits_over_the_attention_tp_group() -> None:
    """MoonViT's ``VisionAttention`` (sglang/srt/models/kimi_k25.py) splits wqkv and wo over the
    attention-TP group, tp / attn_dp ranks. Kimi-K2.5's tower holds 471,143,920 parameters, of which
    27 x (3456 x 1152 + 3456 + 1152 x 1152) = 143,420,544 are split: at TP 8 with attention DP 8 a rank
    keeps all of them (2 B each: 942,287,840 B); with attention DP 2 (attention TP 4) it keeps a
    quarter of the split part, 471,143,920 - 143,420,544 x 3 / 4 = 363,578,512 parameters = 727,157,024 B."""
    from kvstrategies.sglang.budget import _vision_tower_bytes

    config = json.loads((Path(__file__).parents[1] / "fixtures" / "published" / "kimi-k2.5.json").read_text())["config"]
    assert 27 * (3456 * 1152 + 3456 + 1152 * 1152) == 143_420_544
    for attn_dp, nbytes in ((8, 942_287_840), (2, 727_157_024)):
        req = DeploymentRequest("k", {"hf_config": config}, tp_size=8, attn_dp_size=attn_dp, gpu=lookup_gpu("H200"))
        assert _vision_tower_bytes(req, config, 2.0)[0] == nbytes


def test_a_hybrid_swa_fit_has_a_full_pool_from_one_token() -> None:
    """``fit_model`` (planner/fit.py): a hybrid-SWA plan has a full-attention pool and an SWA pool; only
    when SGLang sizes no full-attention tokens at all (``full_max_total_num_tokens`` 0) is the SWA pool
    the only one. gpt-oss-20b on an H100 with the full pool forced to 0 tokens has the SWA pool alone,
    with 1 or 2 tokens both pools."""
    import dataclasses

    from kvstrategies.planner.fit import fit_model

    planned = plan_deployment(DeploymentRequest("g", {"preset": "gpt-oss-20b"}, gpu=lookup_gpu("H100")), suggest=False)
    swa = planned.sizes.swa_max_total_num_tokens
    assert swa is not None and swa > 0
    for full, pools in ((0, [("swa", swa)]), (1, [("full", 1), ("swa", swa)]), (2, [("full", 2), ("swa", swa)])):
        sizes = dataclasses.replace(planned.sizes, full_max_total_num_tokens=full)
        assert [(p.name, p.capacity) for p in fit_model(planned.planned.ctx, sizes).pools] == pools


def test_sglangs_longest_request_is_one_below_the_context_or_the_pool() -> None:
    """``TpModelWorker.alloc_memory_pool`` (sglang/srt/managers/tp_worker.py): ``max_req_len = min(context_len - 1,
    max_total_num_tokens - 1)``. Llama-3.1-8B on an H100 pools far more than its 131,072-token
    context, so the longest request SGLang takes is 131,071 tokens."""
    planned = plan_deployment(DeploymentRequest("l", {"preset": "llama-3.1-8b"}, gpu=lookup_gpu("H100")), suggest=False)
    assert planned.fit.context_len == 131_072 and planned.fit.capacity_tokens > 131_073
    assert planned.fit.sglang_max_req_len == 131_071


def test_the_budget_step_prints_gib_of_2_to_the_30_bytes() -> None:
    """``budget_text`` prints sizes in GiB (2**30 B, as SGLang's logs do): a given KV budget of
    3 x 2**30 B reads 3.00 GiB; the H100's 81,559 MiB read 81,559 / 1024 = 79.65 GiB."""
    from kvstrategies.planner.report import budget_text

    llama = {"preset": "llama-3.1-8b"}
    given = plan_deployment(DeploymentRequest("l", llama, available_bytes=3 * 2**30), suggest=False)
    assert budget_text(given)[0] == "budget step    skipped: KV budget 3.00 GiB per rank given"
    h100 = plan_deployment(DeploymentRequest("l", llama, gpu=lookup_gpu("H100")), suggest=False)
    assert budget_text(h100)[0].startswith("budget step    H100-80GB 79.65 GiB, mem_fraction_static")
