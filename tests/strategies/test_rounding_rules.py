"""Every rounding, padding and alignment rule of the sizing, on the ``rounding-*`` catalog cases.

Each case was chosen so that its rule moves a number (``docs/rounding-rules.md`` lists which
cases move with which rule, and which tests fail when the rule is removed); the numbers below
are worked out by hand from SGLang's formulas, citing the SGLang function each rule reproduces.
The recorded answers of every release (``golden/sglang-<release>/rounding-*.json``) check the
same numbers against SGLang itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvstrategies.case import load_case
from kvstrategies.golden.snapshot import plan_case
from kvstrategies.strategies.budget_check import kv_allowance

CASES = Path(__file__).resolve().parents[2] / "cases"


def _plan(name: str, version: str | None = None) -> Any:
    if version is None:
        return plan_case(load_case(CASES / f"{name}.json"))
    return plan_case(load_case(CASES / f"{name}.json", sglang_version=version))


def _shape(plan: Any, name: str) -> tuple[int, ...]:
    return next(tuple(b.shape) for layout in plan.layout.pools for b in layout.buffers if b.name == name)


def _floor(value: int, page: int) -> int:
    return value // page * page


def _ceil(value: int, page: int) -> int:
    return -(-value // page) * page


# ---- token count to a page multiple ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "available", "cell", "page", "unaligned"),
    [
        # Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K + V) x 2 B = 131,072 B a token
        ("rounding-token-align-llama-3.1-8b-tp1-bf16-p64-odd-budget", 30_000_000_000, 131_072, 64, 228_881),
        # Qwen3-8B at TP 2: 36 layers x 4 heads x 128 x 2 x 1 B (fp8) = 36,864 B
        ("rounding-token-align-qwen3-8b-tp2-fp8-p32-odd-budget", 21_474_836_481, 36_864, 32, 582_542),
        # DeepSeek-V3 MLA fp8: 61 layers x (512 + 64) x 1 B = 35,136 B
        ("rounding-token-align-deepseek-v3-tp8-fp8-p64-odd-budget", 30_000_000_000, 35_136, 64, 853_825),
    ],
)
def test_token_count_is_aligned_down_to_the_page(
    name: str, available: int, cell: int, page: int, unaligned: int
) -> None:
    """``max_total_num_tokens = available // cell // P * P``
    (sglang.srt.model_executor.pool_configurator.DefaultPoolConfigurator.calculate_pool_sizes)."""
    plan = _plan(name)
    assert plan.cell_size_bytes == cell
    assert available // cell == unaligned and unaligned % page != 0
    assert plan.sizes.max_total_num_tokens == _floor(unaligned, page)


def test_token_cap_is_aligned_down_to_the_page() -> None:
    """``--max-total-tokens 100007`` at page 16 sizes a 100,000-token pool (the cap is page-aligned
    like the profiled count: DefaultPoolConfigurator.calculate_pool_sizes_from_max_tokens)."""
    plan = _plan("rounding-token-align-mistral-7b-tp1-bf16-p16-max-tokens")
    assert plan.pool_sizes.max_total_num_tokens == 100_000
    assert _shape(plan, "k_buffer[0]")[0] == 100_000 + 16


def test_hybrid_linear_kv_tokens_are_page_aligned() -> None:
    """Qwen3-Next's KV pool after the Mamba reservation is a page multiple (the configurator
    sizes its KV like DefaultPoolConfigurator: ``align_down(kv_available // cell, P)``)."""
    plan = _plan("rounding-token-align-qwen3-next-80b-a3b-tp4-bf16-p64-odd-budget")
    tokens = plan.sizes.max_total_num_tokens
    assert tokens % 64 == 0
    assert tokens == _floor(plan.resolution.reservation.kv_available_bytes // plan.cell_size_bytes, 64)
    assert (plan.resolution.reservation.kv_available_bytes // plan.cell_size_bytes) % 64 != 0


# ---- hybrid SWA -----------------------------------------------------------------------------------------------------


def test_hybrid_swa_full_and_swa_pools_are_page_aligned() -> None:
    """gpt-oss-20b, 12 full + 12 SWA layers of 8 heads x 64 x 2 x 2 B = 2,048 B: ``full =
    int(30e9 / (24,576 + 0.8 x 24,576)) = 678,168`` -> 678,144; ``swa = align(int(678,144 x 0.8)
    = 542,515, 64) = 542,464`` (sglang.srt.model_executor.pool_configurator.HybridSWAPoolConfigurator)."""
    plan = _plan("rounding-swa-split-gpt-oss-20b-tp1-bf16-p64-odd-budget")
    assert int(30_000_000_000 / (24_576 + 0.8 * 24_576)) == 678_168
    assert plan.sizes.full_max_total_num_tokens == 678_144
    assert int(678_144 * 0.8) == 542_515
    assert plan.sizes.swa_max_total_num_tokens == 542_464


@pytest.mark.parametrize(
    ("name", "window", "page", "requests", "chunk", "swa_cell", "full_cell", "cap", "full"),
    [
        # gpt-oss-20b: W = 128 - 1 (SGLang's window), 12 SWA / 12 full layers of 2,048 B
        ("rounding-swa-cap-gpt-oss-20b-tp1-bf16-p64-mrr32-chunk1000", 127, 64, 32, 1000, 24_576, 24_576,
         14_320, 1_733_248),
        # gpt-oss-120b TP 2 fp8: 18 + 18 layers of 4 heads x 64 x 2 x 1 B = 512 B
        ("rounding-swa-cap-gpt-oss-120b-tp2-fp8-p16-mrr24-chunk3000", 127, 16, 24, 3000, 9_216, 9_216,
         12_904, 4_647_424),
        # Llama-4-Scout TP 4: chunked-attention window 8,192, 36 local / 12 global layers of 1,024 B
        ("rounding-swa-cap-llama-4-scout-tp4-bf16-p64-mrr16-chunk2500", 8192, 64, 16, 2500, 36_864, 12_288,
         140_232, 3_074_368),
    ],
)  # fmt: skip
def test_request_capped_swa_pool_rounds_up_to_the_page(
    name: str, window: int, page: int, requests: int, chunk: int, swa_cell: int, full_cell: int, cap: int, full: int
) -> None:
    """``cap = (W + 128 + P + P) x mrr + 2 x chunk + P`` (compute_swa_request_cap: eviction
    interval 128, one draft token, decode allocation P); the SWA pool is ``ceil_align(cap, P)`` and
    the full pool ``align_down((A - swa x swa_cell) // full_cell, P)``."""
    plan = _plan(name)
    assert (window + 128 + page + page) * requests + 2 * chunk + page == cap
    assert cap % page != 0
    swa = _ceil(cap, page)
    assert plan.sizes.swa_max_total_num_tokens == swa
    assert plan.sizes.full_max_total_num_tokens == _floor((42_949_672_960 - swa * swa_cell) // full_cell, page) == full


def test_request_capped_swa_pool_under_a_token_cap_keeps_the_rounded_cap() -> None:
    """``--max-total-tokens 500000`` above the cap: ``swa = min(ceil_align(14,320, 64), 500,000) =
    14,336`` and ``full = align(500,000, 64) = 499,968`` (SWAChunkCapPoolConfigurator)."""
    plan = _plan("rounding-swa-cap-gpt-oss-20b-tp1-bf16-p64-mrr32-chunk1000-max-tokens")
    assert (plan.pool_sizes.full_max_total_num_tokens, plan.pool_sizes.swa_max_total_num_tokens) == (499_968, 14_336)


@pytest.mark.parametrize(
    ("name", "page", "cap", "rows"),
    [
        ("rounding-fused-kv-pad-gpt-oss-20b-tp1-bf16-p64-mrr32-max-tokens10000", 64, 10_000, 10_112),
        ("rounding-fused-kv-pad-gpt-oss-120b-tp2-fp8-p16-mrr24-max-tokens9999", 16, 9_999, 10_016),
        ("rounding-fused-kv-pad-llama-4-scout-tp4-bf16-p64-mrr16-max-tokens100000", 64, 100_000, 100_096),
    ],
)
def test_fused_kv_storage_pads_an_unaligned_pool_to_the_page(name: str, page: int, cap: int, rows: int) -> None:
    """A token cap below the SWA request cap leaves ``swa = M`` unaligned (SGLang caps by the raw
    M); the fused K/V storage of a D == Dv pool then holds ``ceil_align(M + P, P)`` rows while K and
    V address ``M + P`` (sglang.srt.mem_cache.memory_pool.MHATokenToKVPool._create_buffers_normal)."""
    plan = _plan(name)
    assert plan.pool_sizes.swa_max_total_num_tokens == cap
    assert _ceil(cap + page, page) == rows != cap + page
    assert _shape(plan, "swa.kv_storage[0]")[1] == rows
    assert _shape(plan, "swa.k_buffer[0]")[0] == cap + page


@pytest.mark.parametrize("version", ["0.5.15", "0.5.22"])
def test_before_the_fused_storage_k_and_v_are_two_unpadded_tensors(version: str) -> None:
    """Before 0.5.23 ``MHATokenToKVPool._create_buffers`` (``_create_buffers_normal`` from 0.5.16)
    allocates K and V as two ``torch.zeros((size + page_size, H, D))`` per layer: nothing is padded
    and nothing is a view (gpt-oss-20b SWA pool, 8 KV heads of 64: M = 10,000, P = 64 -> 10,064
    rows, not ``ceil_align(10,064, 64) = 10,112``)."""
    plan = _plan("rounding-fused-kv-pad-gpt-oss-20b-tp1-bf16-p64-mrr32-max-tokens10000", version)
    buffers = {b.name: b for layout in plan.layout.pools for b in layout.buffers}
    assert not any("kv_storage" in name for name in buffers)
    assert buffers["swa.k_buffer[0]"].shape == buffers["swa.v_buffer[0]"].shape == (10_064, 8, 64)
    assert buffers["swa.k_buffer[0]"].view is None
    fused = _plan("rounding-fused-kv-pad-gpt-oss-20b-tp1-bf16-p64-mrr32-max-tokens10000")
    assert _shape(fused, "swa.kv_storage[0]") == (2, 10_112, 8, 64)  # the newest release: fused and padded


# ---- speculative decoding: the decode allocation and the request row ------------------------------------------------


@pytest.mark.parametrize(
    ("name", "window", "page", "drafts", "decode_alloc", "requests", "cap"),
    [
        # top-1, 3 steps, 4 tokens: max(ceil_align(3, 64) x 1, ceil_align(4, 64)) = 64
        ("rounding-spec-v1-gpt-oss-20b-tp1-bf16-p64-eagle-s3-no-overlap", 127, 64, 4, 64, 32, 28_704),
        # top-2, 3 steps, 6 tokens: max(ceil_align(3 + 16, 16) x 2, ceil_align(6, 16)) = 64
        ("rounding-spec-v1-gpt-oss-120b-tp2-bf16-p16-eagle-topk2-no-overlap", 127, 16, 6, 64, 16, 19_712),
        # top-1, 5 steps, 6 tokens: max(ceil_align(5, 32), ceil_align(6, 32)) = 32
        ("rounding-spec-v1-llama-4-scout-tp4-bf16-p32-eagle-s5-no-overlap", 8192, 32, 6, 32, 8, 76_320),
    ],
)
def test_spec_v1_decode_allocation_is_paged(
    name: str, window: int, page: int, drafts: int, decode_alloc: int, requests: int, cap: int
) -> None:
    """Without the overlap scheduler a request's decode allocation is ``spec_v1_alloc``, its steps
    and tokens rounded up to pages; the SWA cap is ``(W + 128 x Dt + P + alloc) x mrr + chunk + P``
    with one chunk in flight (sglang.srt.mem_cache.allocation_sizing.compute_swa_request_cap)."""
    plan = _plan(name)
    assert (window + 128 * drafts + page + decode_alloc) * requests + 4096 + page == cap
    assert plan.configurator.swa_cap_tokens == cap
    assert plan.sizes.swa_max_total_num_tokens == _ceil(cap, page)


@pytest.mark.parametrize(
    ("name", "context", "extra"),
    [
        # top-1, 3 steps, 4 tokens, P 64: alloc max(3, 4) = 4; max(4 + 4, 2 x 4 + 63) = 71
        ("rounding-row-headroom-llama-3.1-8b-tp1-bf16-p64-eagle3-s3", 131_072, 71),
        # top-1, 2 steps, 3 tokens, P 32: max(4 + 3, 2 x 3 + 31) = 37
        ("rounding-row-headroom-qwen3-8b-tp1-fp8-p32-eagle-s2", 40_960, 37),
        # top-1, 1 step, 2 tokens, P 16: max(4 + 2, 2 x 2 + 15) = 19
        ("rounding-row-headroom-deepseek-v3-tp8-fp8-p16-eagle-s1", 163_840, 19),
        # top-2, 3 steps, 6 tokens, P 16: pages (15 + 3 + 15) // 16 = 2, alloc 2 x 16 x 2 = 64: 2 x 64 + 15
        ("rounding-alloc-pages-llama-3.1-8b-tp1-bf16-p16-eagle-topk2", 131_072, 143),
        # top-4, 5 steps, 8 tokens, P 64: pages (63 + 5 + 63) // 64 = 2, alloc 2 x 64 x 4 = 512: 1,024 + 63
        ("rounding-alloc-pages-qwen3-8b-tp2-bf16-p64-eagle-topk4-s5", 40_960, 1_087),
        # DCP 2 at P 32 pages at Pa = 64: pages (63 + 3 + 63) // 64 = 2, alloc 2 x 64 x 2 = 256: 512 + 63
        ("rounding-alloc-pages-deepseek-v3-tp8-dcp2-bf16-p32-eagle-topk2", 163_840, 575),
    ],
)
def test_request_row_keeps_a_page_of_headroom(name: str, context: int, extra: int) -> None:
    """``req_to_token`` columns: ``context + max(4 + D, 2 x alloc_len_per_decode + Pa - 1)``
    (sglang.srt.mem_cache.allocation_sizing.get_req_to_token_extra_context_len and
    alloc_len_per_decode; Pa = P x DCP, get_alloc_page_size)."""
    plan = _plan(name)
    assert _shape(plan, "req_to_token")[1] == context + extra


def test_dcp_alloc_page_before_0_5_19_is_the_plain_page() -> None:
    """0.5.18 pages DCP 2's decode allocation at P = 32: pages (31 + 3 + 31) // 32 = 2, alloc
    2 x 32 x 2 = 128, headroom 2 x 128 + 31 = 287 (get_alloc_page_size came in 0.5.19)."""
    plan = _plan("rounding-alloc-pages-deepseek-v3-tp8-dcp2-bf16-p32-eagle-topk2", "0.5.18")
    assert _shape(plan, "req_to_token")[1] == 163_840 + 287


# ---- DeepSeek-V4 ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "rounding-dsv4-token-align-deepseek-v4-flash-tp4-p256-odd-budget",
        "rounding-dsv4-token-align-deepseek-v4-pro-tp8-p256-odd-budget",
    ],
)
def test_dsv4_full_pool_is_page_aligned(name: str) -> None:
    """``full = align_down(int((A - fixed) / bytes_per_full_token), 256)``, ``swa =
    align_down(int(full x ratio), 256)`` (DSV4PoolConfigurator.calculate_pool_sizes, ratio 0.1)."""
    plan = _plan(name)
    conf = plan.configurator
    requests = conf.estimated_requests(plan.available_bytes)
    unaligned = int((plan.available_bytes - conf.fixed_bytes(requests)) / conf.bytes_per_full_token)
    assert unaligned % 256 != 0
    assert plan.sizes.full_max_total_num_tokens == _floor(unaligned, 256)
    assert plan.sizes.swa_max_total_num_tokens == _floor(int(plan.sizes.full_max_total_num_tokens * 0.1), 256)


def test_dsv4_token_cap_is_page_aligned() -> None:
    """``--max-total-tokens 100000`` at page 256: 390 pages, 99,840 tokens; c4 = 99,840 // 4 =
    24,960, c128 = 99,840 // 128 = 780 (DSV4PoolConfigurator.calculate_pool_sizes_from_max_tokens)."""
    plan = _plan("rounding-dsv4-token-align-deepseek-v4-flash-tp8-p256-max-tokens100000")
    sizes = plan.pool_sizes
    assert (sizes.full_max_total_num_tokens, sizes.c4_max_total_num_tokens, sizes.c128_max_total_num_tokens) == (
        99_840,
        24_960,
        780,
    )


@pytest.mark.parametrize(
    ("name", "requests", "chunk", "swa"),
    [
        # (128 + 128 + 256 + 256) x 32 + 2 x 1000 + 256 = 26,832; + 4 x 32 tails x 384 = 75,984 -> 76,032
        ("rounding-dsv4-cap-align-deepseek-v4-flash-tp4-p256-cap-mrr32-chunk1000", 32, 1000, 76_032),
        # 768 x 16 + 6,000 + 256 = 18,544; + 64 x 384 = 43,120 -> 43,264
        ("rounding-dsv4-cap-align-deepseek-v4-pro-tp8-p256-cap-mrr16-chunk3000", 16, 3000, 43_264),
        # 768 x 8 + 4,098 + 256 = 10,498; + 32 x 384 = 22,786 -> 23,040
        ("rounding-dsv4-cap-align-deepseek-v4-flash-tp8-p256-cap-mrr8-chunk2049", 8, 2049, 23_040),
    ],
)
def test_dsv4_swa_cap_rounds_up_to_the_page(name: str, requests: int, chunk: int, swa: int) -> None:
    """Cap mode: ``swa = ceil_align(cap + tails x (W + P), P)`` with W 128, P 256 and tails
    ``4 x mrr`` (radix cache on) (DSV4PoolConfigurator._resolve_swa_prefix_tails and the cap)."""
    plan = _plan(name)
    raw = (128 + 128 + 256 + 256) * requests + 2 * chunk + 256 + 4 * requests * (128 + 256)
    assert raw % 256 != 0
    assert plan.sizes.swa_max_total_num_tokens == _ceil(raw, 256) == swa


# ---- the KV allowance's padding (kvstrategies/strategies/budget_check.py), by hand ----------------------------------


def test_the_kv_allowance_pads_two_pages_of_every_dcp_rank() -> None:
    # budget_check module doc: available * dcp + ceil(2 * page * dcp * cell) = 1000 * 2 + ceil(2 * 64 * 2 * 100.5)
    # = 2000 + 25,728 = 27,728
    assert kv_allowance(1000, 64, 2, 100.5) == 27728
    assert kv_allowance(1000, 64, 1, 100.5) == 1000 + 12864  # 2 * 64 * 100.5
