"""Engine developers' edges: registering before a built-in in a fresh process, a custom strategy
that sizes more than its budget, and the README's K/V write when TP exceeds the KV heads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kvstrategies import KVCacheSettings, ParallelLayout, parse_hf_config, plan, register, resolve_kv_cache_dtype
from kvstrategies.core.sizing import PoolSizes
from kvstrategies.errors import InsufficientMemoryError
from kvstrategies.presets import load_preset_config
from kvstrategies.strategies import unregister
from kvstrategies.strategies.budget_check import kv_allowance
from kvstrategies.strategies.default import DefaultPoolConfigurator

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30


def test_register_before_a_builtin_works_in_a_fresh_process() -> None:
    script = (
        "from kvstrategies import register\n"
        "from kvstrategies.strategies.default import DefaultPoolConfigurator\n"
        "from kvstrategies.strategies.registry import registered\n"
        "class Mine(DefaultPoolConfigurator): pass\n"
        "register(Mine, before='DefaultPoolConfigurator')\n"
        "names = [s.__name__ for s in registered()]\n"
        "assert names.index('Mine') + 1 == names.index('DefaultPoolConfigurator'), names\n"
        "print(names[-2:])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['Mine', 'DefaultPoolConfigurator']"


class Greedy(DefaultPoolConfigurator):
    """Sizes twice the tokens its budget holds (a bug an engine's own strategy could have)."""

    def calculate_pool_sizes(self, available_bytes: int, page_size: int) -> PoolSizes:
        sizes = super().calculate_pool_sizes(available_bytes, page_size)
        return sizes.replace(max_total_num_tokens=2 * sizes.max_total_num_tokens)


def _llama(tp: int = 1, kv: str = "auto") -> KVCacheSettings:
    geometry = parse_hf_config(load_preset_config("llama-3.1-8b"))
    return KVCacheSettings(geometry=geometry, kv_cache_dtype=resolve_kv_cache_dtype(kv, geometry.model_dtype),
                           parallel=ParallelLayout(tp_size=tp))  # fmt: skip


def test_a_custom_strategy_larger_than_its_budget_is_refused() -> None:
    ctx = _llama()
    honest = plan(ctx, 8 * GIB)  # 8 GiB / 131,072 B per token = 65,536 tokens: within the budget
    assert honest.sizes.max_total_num_tokens == 65_536
    register(Greedy, before="DefaultPoolConfigurator")
    try:
        # (131,072 tokens + the page of padding SGLang allocates) x 131,072 B = 17,180,000,256 B of K/V,
        # against 8 GiB + two pages of 131,072 B = 8,590,196,736 B
        with pytest.raises(InsufficientMemoryError, match="Greedy lays out 17,180,000,256 B of K/V buffers") as info:
            plan(ctx, 8 * GIB)
        assert "(at most 8,590,196,736 B with two pages of padding)" in str(info.value)
        what_if = plan(ctx, 8 * GIB, pool_max_tokens=4096)  # a what-if layout follows the asked size
        assert what_if.pool_sizes.max_total_num_tokens == 4096
    finally:
        unregister(Greedy)
    assert plan(ctx, 8 * GIB).sizes == honest.sizes


def test_the_allowance_is_the_budget_plus_two_pages() -> None:
    assert kv_allowance(8 * GIB, 64, 1, 131_072.0) == 8 * GIB + 2 * 64 * 131_072
    assert kv_allowance(100, 1, 2, 10.5) == 200 + 42  # DCP 2: the group's logical tokens, two pages of 2


@pytest.mark.parametrize("tp", [8, 16])
def test_readme_kv_write_has_the_right_head_count_when_tp_exceeds_kv_heads(tp: int) -> None:
    torch = pytest.importorskip("torch")
    from kvstrategies import build

    ctx = _llama(tp=tp, kv="fp8_e4m3")
    small = plan(ctx, available_bytes=40 * GIB, pool_max_tokens=4096)
    pools = build(small, "cpu")
    kv, alloc = pools.token_to_kv_pool, pools.allocator
    heads = ctx.geometry.num_kv_heads(ctx.parallel.attn_tp_size)  # the README's line
    assert heads == 1  # 8 KV heads: one per rank at TP 8, one replicated head per rank at TP 16 (not 8 // 16 = 0)
    loc = alloc.alloc(64)
    cache_k = torch.randn(64, heads, ctx.geometry.head_dim, dtype=torch.bfloat16)
    kv.set_kv_buffer(0, loc, cache_k, cache_k)
    assert tuple(kv.get_key_buffer(0)[loc].shape) == (64, 1, 128)


def test_kv_bytes_counts_only_kv_buffers_and_nothing_for_a_pool_without_them() -> None:
    """``budget_check.kv_bytes``: what SGLang's ``get_kv_size_bytes`` counts, the KV-role buffers of the
    token-to-KV pool and the extra pools; a pool with none (a Mamba state pool) adds 0 B, the request table
    is not counted. K and V of 10 x 2 x 64 bf16 = 2,560 B each; the state and the table are left out."""
    from kvstrategies.core.dtypes import DType
    from kvstrategies.pools.layout import BufferRole, BufferSpec, KVPoolsLayout, PoolLayout
    from kvstrategies.strategies.budget_check import kv_bytes, overshoot_note

    kv = PoolLayout("MHATokenToKVPool", (BufferSpec("k_buffer[0]", (10, 2, 64), DType.BFLOAT16),
                                         BufferSpec("v_buffer[0]", (10, 2, 64), DType.BFLOAT16)))  # fmt: skip
    state = PoolLayout("MambaPool", (BufferSpec("temporal", (1, 3, 8), DType.FLOAT32, role=BufferRole.STATE),))
    table = PoolLayout("ReqToTokenPool", (BufferSpec("req_to_token", (9, 100), DType.INT32),))
    layout = KVPoolsLayout(req_to_token=table, token_to_kv=kv, extra=(state,))
    assert kv_bytes(layout) == 2 * 10 * 2 * 64 * 2 == 5_120
    from kvstrategies.core.releases import NEWEST_SGLANG as NEWEST
    from kvstrategies.strategies.request_math import DFLASH_DRAFT_CELL_ADDED as RULE

    assert overshoot_note(layout, 5_120, 1, NEWEST, (RULE,)) is None  # exactly the budget: no note
    assert "more than the KV budget" in str(overshoot_note(layout, 5_119, 1, NEWEST, (RULE,)))
