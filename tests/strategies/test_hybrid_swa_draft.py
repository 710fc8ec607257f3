"""Hybrid-SWA draft workers: own sizing, adopted target sizes, pools (KVCacheConfigurator._derive_pool_sizes,
KVCacheConfigurator._resolve_memory_pool_config draft branch; HybridSWAPoolConfigurator).

Numbers are computed here from the formulas (gpt-oss-120b: 8 KV heads, head_dim 64, layer_types
alternating sliding / full from layer 0; MiMo-V2-Flash: SGLang's MiMoV2MTP draft holds SWA layer
0 only).
"""

from __future__ import annotations

from typing import Any

import pytest

from kvstrategies import plan
from kvstrategies.api import build
from kvstrategies.strategies.hybrid_swa import HybridSWAPoolConfigurator

from ..helpers import GIB, case_settings

GPT_OSS = "gpt-oss-120b"
SPEC: dict[str, Any] = {
    "speculative_algorithm": "EAGLE3",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
}


def _buffers(planned: Any) -> dict[str, tuple[tuple[int, ...], str]]:
    return {b.name: (b.shape, b.dtype.torch_name) for b in planned.layout.token_to_kv.buffers}


def test_one_layer_draft_is_all_swa_and_built_for_the_target_sizes() -> None:
    ctx = case_settings(GPT_OSS, tp_size=2, page_size=16, kv_cache_dtype="bf16", is_draft_worker=True,
                        eagle_draft_num_layers=1, **SPEC)  # fmt: skip
    budget = 40 * GIB + 12345
    planned = plan(ctx, budget)
    assert isinstance(planned.configurator, HybridSWAPoolConfigurator)
    # swa_pt = 4 heads * (64 + 64) * 2 B = 1024; all-SWA: swa = align(budget // 1024, 16), full = 0
    assert planned.cell_size_bytes == 1024
    swa = (budget // 1024) // 16 * 16
    assert (planned.sizes.max_total_num_tokens, planned.sizes.full_max_total_num_tokens) == (swa, 0)
    assert planned.sizes.swa_max_total_num_tokens == swa
    # the pools are the target's sizes (its cell paid for the draft layer), unscaled without DCP
    target = plan(ctx.target_context(), budget)
    assert planned.adopted_sizes == target.sizes
    full, swa_t = target.sizes.full_max_total_num_tokens, target.sizes.swa_max_total_num_tokens
    assert full is not None and swa_t is not None
    buffers = _buffers(planned)
    assert buffers["swa.k_buffer[0]"] == ((swa_t + 16, 4, 64), "bfloat16")
    assert not any(name.startswith("full.k_buffer") for name in buffers)  # no full layer in the draft
    # the SWA index mapping is the target allocator's, registered on the draft pool: not the draft's
    assert "full_to_swa_index_mapping" not in buffers
    assert planned.allocator_spec is None


def test_target_cell_pays_for_the_draft_that_the_draft_does_not_pay_again() -> None:
    fields = {"tp_size": 2, "page_size": 64, "kv_cache_dtype": "bf16", "eagle_draft_num_layers": 2, **SPEC}
    target = plan(case_settings(GPT_OSS, **fields), 80 * GIB)
    draft = plan(case_settings(GPT_OSS, is_draft_worker=True, **fields), 80 * GIB)
    # target: 18 full + 18 SWA layers of 1024 B, plus dF = 2 draft layers at full bytes (no
    # eagle_draft_swa_num_layers given): (18 + 2) * 1024 + 0.8 * 18 * 1024
    assert target.cell_size_bytes == 20 * 1024 + 0.8 * (18 * 1024)
    # draft: its own layers 0 (SWA) and 1 (full), nothing more
    assert draft.cell_size_bytes == 1024 + 0.8 * 1024
    full = int(80 * GIB // (1024 + 0.8 * 1024)) // 64 * 64
    assert draft.sizes.full_max_total_num_tokens == full
    assert draft.sizes.swa_max_total_num_tokens == int(full * 0.8) // 64 * 64
    assert draft.adopted_sizes == target.sizes
    buffers = _buffers(draft)
    assert buffers["full.k_buffer[0]"][0] == (target.sizes.full_max_total_num_tokens + 64, 4, 64)
    assert buffers["swa.k_buffer[0]"][0] == (target.sizes.swa_max_total_num_tokens + 64, 4, 64)


def test_mimo_draft_is_sglangs_one_swa_layer_mtp_head() -> None:
    """``MiMoV2FlashForCausalLM`` drafts load as ``MiMoV2MTP``: SWA layer 0 only, whatever D is."""
    ctx = case_settings("mimo-v2-flash", tp_size=4, page_size=64, kv_cache_dtype="bf16", is_draft_worker=True,
                        eagle_draft_num_layers=4, **SPEC)  # fmt: skip
    planned = plan(ctx, 40 * GIB)
    cfg = planned.configurator
    assert isinstance(cfg, HybridSWAPoolConfigurator)
    assert (cfg.full_layer_ids, cfg.swa_layer_ids) == ((), (0,))
    # SWA layer: swa_num_key_value_heads 8 // TP4 = 2 heads * (192 + 128) * 2 B
    assert planned.cell_size_bytes == 2 * (192 + 128) * 2


@pytest.mark.parametrize("preset", [GPT_OSS, "llama-4-scout", "mimo-v2-flash"])
def test_draft_pools_build_exactly_as_laid_out(preset: str) -> None:
    pytest.importorskip("torch")
    ctx = case_settings(preset, tp_size=4, page_size=16, is_draft_worker=True, eagle_draft_num_layers=4, **SPEC)
    planned = plan(ctx, 20 * GIB, pool_max_tokens=65536)
    pools = build(planned, "meta")
    assert pools.token_to_kv_pool.allocated_bytes == planned.layout.token_to_kv.planned_bytes


def test_dcp_draft_pools_span_the_widened_ids_at_the_widened_page() -> None:
    """Under DCP the draft indexes the target allocator's ids directly: sizes x dcp, page x dcp,
    and its heads ignore DCP (8 KV heads at TP4 -> 2; the target keeps 8 // (4 // 4) = 8)."""
    ctx = case_settings(GPT_OSS, tp_size=4, dcp_size=4, page_size=64, kv_cache_dtype="fp8_e4m3",
                        is_draft_worker=True, eagle_draft_num_layers=1, **SPEC)  # fmt: skip
    planned = plan(ctx, 12 * GIB, pool_max_tokens=65536)
    full, swa = 65536, int(65536 * 0.8) // 64 * 64  # the target's what-if sizes
    assert planned.pool_sizes.full_max_total_num_tokens == full * 4
    assert planned.pool_sizes.swa_max_total_num_tokens == swa * 4
    assert _buffers(planned)["swa.k_buffer[0]"] == ((swa * 4 + 256, 2, 64), "uint8")  # FP8 stored as uint8


@pytest.mark.parametrize("bad", [((0,),), 5, ((0,), (1,), (2,))])
def test_malformed_draft_layer_ids_is_a_config_error(bad: Any) -> None:
    from kvstrategies.errors import KVCacheConfigError
    from kvstrategies.models.hybrid_swa import HybridSWAGeometry

    with pytest.raises(KVCacheConfigError, match="draft_layer_ids must be a"):
        HybridSWAGeometry(full_attention_layer_ids=(1,), swa_attention_layer_ids=(0,), sliding_window_size=4,
                          draft_layer_ids=bad)  # fmt: skip
