"""Ascend NPU strategy: Default's numbers with the NPU branches, NPU pool layouts (memory_pool_npu).

Every expected number is computed by hand from SGLang's rules and written as a literal, with the
formula next to it. Layouts are built on ``meta`` (no NPU needed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kvstrategies import plan, select_configurator
from kvstrategies.api import Plan, build
from kvstrategies.case import load_case
from kvstrategies.core.dtypes import DType
from kvstrategies.core.sizing import PoolSizes
from kvstrategies.document import plan_document
from kvstrategies.errors import (
    KVCacheConfigError,
    UnsupportedConfigurationError,
)
from kvstrategies.pools.ascend import (
    NPUIndexer,
    npu_k_only_layout,
    npu_mha_layout,
    npu_mla_layout,
    npu_num_pages,
)
from kvstrategies.pools.build import build_pool
from kvstrategies.pools.layout import PoolLayout
from kvstrategies.presets import load_preset_config
from kvstrategies.strategies import DefaultPoolConfigurator
from kvstrategies.strategies.ascend import AscendPoolConfigurator
from kvstrategies.strategies.registry import registered

from ..helpers import case_settings

GIB40 = 42_949_672_960
CASES = Path(__file__).parents[2] / "cases"
NPU_CASES = sorted(CASES.glob("npu-*.json"))
WHAT_IF = PoolSizes(max_total_num_tokens=1024, max_running_requests=8)


def ascend(preset: str | dict[str, Any], **fields: Any) -> AscendPoolConfigurator:
    cfg = select_configurator(case_settings(preset, device="npu", **fields))
    assert type(cfg) is AscendPoolConfigurator
    return cfg


def shapes(layout: PoolLayout) -> dict[str, tuple[tuple[int, ...], DType]]:
    return {b.name: (b.shape, b.dtype) for b in layout.allocations}


def dsa_every_4th_layer() -> dict[str, Any]:
    """DeepSeek-V3.2 with a GLM-style ``index_topk_freq = 4`` (the skip variant of
    the DeepSeek-V3.2 DSA example in tests/strategies/test_default_advanced.py)."""
    config = dict(load_preset_config("deepseek-v3.2"))
    config["index_topk_freq"] = 4
    return config


# ---- selection (create_memory_pool_configurator, KVCacheConfigurator._build_token_to_kv_pool) ------------------------


def test_npu_selects_ascend_and_cuda_keeps_default() -> None:
    assert type(select_configurator(case_settings("llama-3.1-8b", device="npu"))) is AscendPoolConfigurator
    assert type(select_configurator(case_settings("llama-3.1-8b", device="npu:3"))) is AscendPoolConfigurator
    assert type(select_configurator(case_settings("llama-3.1-8b"))) is DefaultPoolConfigurator
    assert type(select_configurator(case_settings("deepseek-v3.2", device="npu", tp_size=8))) is AscendPoolConfigurator


@pytest.mark.parametrize("preset", ["gpt-oss-20b", "qwen3-next-80b-a3b", "deepseek-v4-flash"])
def test_hybrid_swa_mamba_and_dsv4_keep_their_strategies_on_npu(preset: str) -> None:
    ctx = case_settings(preset, device="npu", page_size=128)
    assert not AscendPoolConfigurator.is_applicable(ctx)


def test_registered_right_before_default() -> None:
    order = list(registered())
    assert order.index(AscendPoolConfigurator) == order.index(DefaultPoolConfigurator) - 1


def test_fp4_and_mxfp8_have_no_npu_pool() -> None:
    for dtype in ("nvfp4", "fp4_mx_block16", "mxfp8"):
        with pytest.raises(UnsupportedConfigurationError, match="npu"):
            select_configurator(case_settings("llama-3.1-8b", device="npu", kv_cache_dtype=dtype))
    assert issubclass(UnsupportedConfigurationError, KVCacheConfigError)


# ---- NPUMHATokenToKVPool (NPUMHATokenToKVPool) ----------------------------------------------------------------


def test_npu_mha_llama_8b_bf16_page_128() -> None:
    cfg = ascend("llama-3.1-8b", page_size=128)
    assert cfg.cell_size_bytes == 131_072  # 8 heads * (128 + 128) * 32 layers * 2 B, Default's cell
    layout = cfg.token_to_kv_layout(WHAT_IF)
    assert layout.pool_class == "NPUMHATokenToKVPool"
    # pages = T // P + 1 = 1024 // 128 + 1 = 9; stacked [L, pages, P, H, D]
    assert shapes(layout) == {
        "k_buffer": ((32, 9, 128, 8, 128), DType.BFLOAT16),
        "v_buffer": ((32, 9, 128, 8, 128), DType.BFLOAT16),
    }
    assert layout.allocations[0].nbytes == 75_497_472  # 32 * 9 * 128 * 8 * 128 * 2
    assert layout.planned_bytes == 150_994_944  # (1024 + 128) * 131,072: the CUDA figure for a page multiple
    views = {b.name: b for b in layout.buffers if b.is_view}
    assert len(views) == 64
    assert views["k_buffer[31]"].shape == (9, 128, 8, 128)
    assert views["v_buffer[0]"].view is not None and views["v_buffer[0]"].view.source == "v_buffer"
    built = build_pool(layout, "meta")
    assert built["k_buffer[5]"].shape == (9, 128, 8, 128)
    assert built.allocated_bytes == 150_994_944


def test_npu_mha_non_page_multiple_floors_the_pages() -> None:
    """The Llama-3.1-8B bf16 layout (T = 1000, P = 16): CUDA allocates 1,024 fused rows, NPU
    63 pages."""
    layout = npu_mha_layout(
        size=1000, page_size=16, head_num=8, head_dim=128, v_head_dim=128, layer_num=32, store_dtype=DType.BFLOAT16
    )
    assert shapes(layout)["k_buffer"] == ((32, 63, 16, 8, 128), DType.BFLOAT16)  # 1000 // 16 + 1 = 63
    # 32 layers * 1,008 rows * 8 heads * 128 * 2 B * (K + V) vs 134,217,728 on CUDA
    assert layout.planned_bytes == 132_120_576


def test_npu_mha_fp8_stores_uint8() -> None:
    layout = ascend("llama-3.1-8b", page_size=128, kv_cache_dtype="fp8_e4m3").token_to_kv_layout(WHAT_IF)
    assert shapes(layout)["v_buffer"] == ((32, 9, 128, 8, 128), DType.UINT8)
    assert layout.planned_bytes == 75_497_472  # 2 * 32 * 9 * 128 * 8 * 128 * 1


def test_npu_mha_builder_sizes_v_with_head_dim() -> None:
    """_build_ascend_*_kv_pool: the NPU MHA builder passes no v_head_dim; the cell still prices D + Dv."""
    config = dict(load_preset_config("llama-3.1-8b"), head_dim=192, v_head_dim=128)
    cfg = ascend(config, page_size=128)
    assert cfg.cell_size_bytes == 163_840  # 8 * (192 + 128) * 32 * 2
    assert shapes(cfg.token_to_kv_layout(WHAT_IF))["v_buffer"] == ((32, 9, 128, 8, 192), DType.BFLOAT16)


def test_npu_mha_heads_under_dcp_and_pp() -> None:
    cfg = ascend("llama-3.1-70b", tp_size=8, dcp_size=2, pp_size=2, pp_rank=1, page_size=128)
    # 8 KV heads // (TP 8 // DCP 2) = 2 heads; PP stage 1 of 2 holds layers [40, 80)
    assert shapes(cfg.token_to_kv_layout(WHAT_IF))["k_buffer"] == ((40, 9, 128, 2, 128), DType.BFLOAT16)


def test_npu_k_only_pool() -> None:
    layout = npu_k_only_layout(
        size=1024, page_size=128, head_num=1, head_dim=128, layer_num=2, store_dtype=DType.BFLOAT16
    )
    assert layout.pool_class == "NPUMHATokenToKOnlyPool"
    assert shapes(layout) == {"k_buffer": ((2, 9, 128, 1, 128), DType.BFLOAT16)}
    assert layout.planned_bytes == 589_824  # 2 * 9 * 128 * 128 * 2


# ---- NPUMiniMaxSparseKVPool (NPUMiniMaxSparseKVPool) -------------------------------------------------------------

MINIMAX_M3 = {
    "architectures": ["MiniMaxM3SparseForCausalLM"],
    "model_type": "minimax_m3",
    "num_hidden_layers": 4,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "head_dim": 128,
    "max_position_embeddings": 65536,
    "torch_dtype": "bfloat16",
    "sparse_attention_config": {
        "sparse_attention_freq": [0, 1, 1, 1],
        "sparse_disable_index_value": [0, 0, 1, 0],
        "sparse_index_dim": 128,
    },
}


def test_npu_minimax_sparse_pool() -> None:
    cfg = ascend(MINIMAX_M3, tp_size=2, page_size=128, kv_cache_dtype="fp8_e4m3")
    layout = cfg.token_to_kv_layout(WHAT_IF)
    assert layout.pool_class == "NPUMiniMaxSparseKVPool"
    # main: 4 layers, 8 // 2 = 4 heads, fp8 -> uint8; index pools in the model dtype (bf16):
    # K/V-indexed sparse layers 1 and 3, K-only layer 2
    assert shapes(layout) == {
        "main.k_buffer": ((4, 9, 128, 4, 128), DType.UINT8),
        "main.v_buffer": ((4, 9, 128, 4, 128), DType.UINT8),
        "index_kv.k_buffer": ((2, 9, 128, 1, 128), DType.BFLOAT16),
        "index_kv.v_buffer": ((2, 9, 128, 1, 128), DType.BFLOAT16),
        "index_k.k_buffer": ((1, 9, 128, 1, 128), DType.BFLOAT16),
    }
    assert dict(layout.attributes)["index_k.pool_class"] == "NPUMHATokenToKOnlyPool"
    # (2*4*4*128*1) main + (2*2 + 1) * 128 * 2 index bytes per token = 4,096 + 1,280
    assert layout.planned_bytes == 1152 * 5_376


# ---- NPUMLATokenToKVPool (NPUMLATokenToKVPool) ----------------------------------------------------------------


def test_npu_mla_deepseek_v3_splits_nope_and_rope() -> None:
    cfg = ascend("deepseek-v3", tp_size=8, page_size=128)
    assert cfg.cell_size_bytes == 70_272  # 576 * 61 * 2, Default's MLA cell
    layout = cfg.token_to_kv_layout(WHAT_IF)
    assert layout.pool_class == "NPUMLATokenToKVPool"
    assert shapes(layout) == {
        "k_buffer": ((61, 9, 128, 1, 512), DType.BFLOAT16),  # nope (kv_lora_rank)
        "v_buffer": ((61, 9, 128, 1, 64), DType.BFLOAT16),  # rope
    }
    assert layout.planned_bytes == 80_953_344  # (1024 + 128) * 70,272, as CUDA's MLATokenToKVPool


def test_npu_dsa_bf16_indexer_bytes_and_layout() -> None:
    """DefaultPoolConfigurator._compute_dsa_indexer_cell_size NPU branch: a non-fp8 KV cache keeps a bf16 indexer
    (per_tok 128, esz 2)."""
    cfg = ascend("deepseek-v3.2", tp_size=8, page_size=64, kv_cache_dtype="bf16")
    assert cfg.indexer_bytes(61) == 15_616  # 128 * 61 layers * 2 B (CUDA: 132 * 61 * 1 = 8,052)
    # 576 * 61 * 2 + 15,616 (CUDA: 78,324, tests/strategies/test_default_advanced.py)
    assert cfg.cell_size_bytes == 85_888
    sizes = cfg.calculate_pool_sizes(GIB40, 64)
    assert sizes.max_total_num_tokens == 500_032  # 40 GiB // 85,888 = 500,066 -> page 64
    layout = cfg.token_to_kv_layout(WHAT_IF)
    # pages = 1024 // 64 + 1 = 17; index_size = T * dcp = 1024, index_page_size = P = 64
    assert shapes(layout) == {
        "k_buffer": ((61, 17, 64, 1, 512), DType.BFLOAT16),
        "v_buffer": ((61, 17, 64, 1, 64), DType.BFLOAT16),
        "index_k_buffer": ((61, 17, 64, 1, 128), DType.BFLOAT16),
    }
    assert layout.allocations[2].nbytes == 16_990_208  # 61 * 17 * 64 * 128 * 2
    assert layout.planned_bytes == 1_088 * 85_888  # (T + P) * cell: sizing and pool agree


def test_npu_dsa_fp8_sizes_like_cuda() -> None:
    """fp8 keeps the uint8 + fp32-scale indexer on NPU too: the DeepSeek-V3.2 DSA example's (fp8 scaled)
    numbers."""
    cfg = ascend("deepseek-v3.2", tp_size=8, page_size=64, kv_cache_dtype="fp8_e4m3")
    assert cfg.indexer_bytes(61) == 8_052  # ceil_div(128 + 4, 1) * 61 * 1
    assert cfg.cell_size_bytes == 48_068  # 656 * 61 + 8,052
    sizes = cfg.calculate_pool_sizes(GIB40, 64)
    assert sizes.max_total_num_tokens == 893_504


def test_npu_dsa_fp8_without_arch35_stores_the_raw_split() -> None:
    layout = ascend("deepseek-v3.2", tp_size=8, page_size=64, kv_cache_dtype="fp8_e4m3").token_to_kv_layout(WHAT_IF)
    assert shapes(layout) == {
        "k_buffer": ((61, 17, 64, 1, 512), DType.UINT8),
        "v_buffer": ((61, 17, 64, 1, 64), DType.UINT8),
        "index_k_buffer": ((61, 17, 64, 1, 128), DType.UINT8),
    }
    # 704 B per token and layer stored, 788 priced (the sizing keeps CUDA's cell, as SGLang does; see the strategy)
    assert layout.planned_bytes == 46_723_072  # 61 * 1,088 * (512 + 64 + 128)


def test_npu_dsa_fp8_arch35_packs_nope_rope_scales() -> None:
    cfg = ascend(
        "deepseek-v3.2", tp_size=8, page_size=64, kv_cache_dtype="fp8_e4m3", platform={"is_npu_arch35": True}
    )
    layout = cfg.token_to_kv_layout(WHAT_IF)
    # record [fp8 nope 512 | bf16 rope 2*64 | fp32 scales 512/128*4] = 656 bytes in k_buffer
    assert shapes(layout) == {
        "k_buffer": ((61, 17, 64, 1, 656), DType.FLOAT8_E4M3FN),
        "v_buffer": ((61, 17, 64, 1, 0), DType.BFLOAT16),  # zero-width placeholder (memory_pool_npu stacked tensors)
        "index_k_buffer": ((61, 17, 64, 1, 128), DType.FLOAT8_E4M3FN),
        "index_k_scale_buffer": ((61, 17, 64, 1), DType.FLOAT32),
    }
    nbytes = {b.name: b.nbytes for b in layout.allocations}
    assert nbytes == {
        "k_buffer": 43_537_408,  # 61 * 1,088 * 656
        "v_buffer": 0,
        "index_k_buffer": 8_495_104,  # 61 * 1,088 * 128
        "index_k_scale_buffer": 265_472,  # 61 * 1,088 * 4
    }
    assert layout.planned_bytes == 1_088 * 48_068  # (T + P) * cell exactly
    assert dict(layout.attributes)["hadamard"] == "not modelled"


def test_npu_dsa_dcp_replicates_the_index_keys() -> None:
    cfg = ascend("deepseek-v3.2", tp_size=8, dcp_size=2, page_size=128)
    assert cfg.cell_size_bytes == 101_504  # 70,272 + 15,616 * dcp 2
    layout = cfg.token_to_kv_layout(WHAT_IF)
    # latent: 1024 // 128 + 1 = 9 pages; index: index_size = 1024 * 2, 2048 // 128 + idx_pad 2 = 18
    assert shapes(layout)["k_buffer"] == ((61, 9, 128, 1, 512), DType.BFLOAT16)
    assert shapes(layout)["index_k_buffer"] == ((61, 18, 128, 1, 128), DType.BFLOAT16)
    assert layout.planned_bytes == 80_953_344 + 35_979_264  # + 61 * 18 * 128 * 128 * 2


def test_npu_dsa_eagle_target_prices_one_draft_layer() -> None:
    cfg = ascend("deepseek-v3.2", tp_size=8, page_size=128, speculative_algorithm="EAGLE")
    # 85,888 + int(70,272 * 1 / 61) (= 1,152) + indexer(1, all layers) (= 128 * 1 * 2)
    assert cfg.cell_size_bytes == 87_296


@pytest.mark.parametrize(("dcp", "draft_tokens", "pages"), [(1, 1024, 9), (2, 2048, 18)])
def test_npu_dsa_draft_worker_pool(dcp: int, draft_tokens: int, pages: int) -> None:
    """Draft: index_size = T (its T already spans the DCP-widened ids), kv_pad = idx_pad = dcp."""
    cfg = ascend(
        "deepseek-v3.2", tp_size=8, dcp_size=dcp, page_size=128, speculative_algorithm="EAGLE", is_draft_worker=True
    )
    sizes = cfg.derive_draft_sizes(WHAT_IF)
    assert sizes.max_total_num_tokens == draft_tokens
    assert cfg.cell_size_bytes == 1_408  # 576 * 1 * 2 + 128 * 1 * 2: one MTP layer, no DCP factor
    assert shapes(cfg.token_to_kv_layout(sizes)) == {
        "k_buffer": ((1, pages, 128, 1, 512), DType.BFLOAT16),
        "v_buffer": ((1, pages, 128, 1, 64), DType.BFLOAT16),
        "index_k_buffer": ((1, pages, 128, 1, 128), DType.BFLOAT16),
    }


def test_npu_index_k_elision_and_its_npu_exceptions() -> None:
    """Layers 0, 1, 5, 9, ..., 57 own index keys with freq 4 (16 layers, as in test_default_advanced.py)."""
    owners = [0, 1, *range(5, 61, 4)]
    assert len(owners) == 16
    cfg = ascend(dsa_every_4th_layer(), tp_size=8, page_size=128)
    assert cfg.cell_size_bytes == 74_368  # 70,272 + 128 * 16 * 2
    layout = cfg.token_to_kv_layout(WHAT_IF)
    assert shapes(layout)["index_k_buffer"] == ((16, 9, 128, 1, 128), DType.BFLOAT16)
    index_views = [b for b in layout.buffers if b.name.startswith("index_k_buffer[")]
    assert [b.name for b in index_views] == [f"index_k_buffer[{layer}]" for layer in owners]
    assert index_views[2].view is not None and index_views[2].view.index == (2,)  # layer 5 in slot 2
    # NPU with PD disaggregation or hierarchical cache: no elision, all 61 layers
    # (DefaultPoolConfigurator._compute_dsa_indexer_cell_size)
    for extra in ({"disaggregation_mode": "prefill"}, {"enable_hierarchical_cache": True}):
        full = ascend(dsa_every_4th_layer(), tp_size=8, page_size=128, **extra)
        assert full.cell_size_bytes == 85_888
        assert shapes(full.token_to_kv_layout(WHAT_IF))["index_k_buffer"][0][0] == 61
    # on CUDA the same settings keep the elision: 70,272 + 132 * 16
    cuda = select_configurator(case_settings(dsa_every_4th_layer(), tp_size=8, disaggregation_mode="prefill"))
    assert isinstance(cuda, DefaultPoolConfigurator)
    assert cuda.cell_size_bytes == 72_384


def test_npu_mla_layout_rejects_bad_arguments() -> None:
    common: dict[str, Any] = {
        "size": 1024,
        "page_size": 64,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "layer_num": 2,
        "dtype": DType.FLOAT8_E4M3FN,
    }
    indexer = NPUIndexer(index_head_dim=128, index_size=1024, index_page_size=64, layer_ids=(0, 1))
    with pytest.raises(KVCacheConfigError, match="656"):
        npu_mla_layout(**common, indexer=indexer, kv_cache_dim=576)
    outside = NPUIndexer(index_head_dim=128, index_size=1024, index_page_size=64, layer_ids=(0, 2))
    with pytest.raises(KVCacheConfigError, match="stage range"):
        npu_mla_layout(**common, indexer=outside)
    with pytest.raises(KVCacheConfigError, match="page_size"):
        npu_num_pages(1024, 0)
    with pytest.raises(KVCacheConfigError, match="platform"):
        case_settings("llama-3.1-8b", device="npu", platform={"is_npu_arch36": True})


# ---- hybrid linear on NPU (_build_hybrid_linear_kv_pool: NPU sub-pool classes; mamba_utils state shapes: NPU conv) ---

HYBRID_SIZES = PoolSizes(max_total_num_tokens=1024, max_running_requests=8, max_mamba_cache_size=24)
MTP: dict[str, Any] = {
    "speculative_algorithm": "EAGLE",
    "eagle_draft_num_layers": 1,
    "speculative_num_draft_tokens": 4,
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "max_running_requests": 64,
}


def hybrid_npu(preset: str, **fields: Any) -> Any:
    cfg = select_configurator(case_settings(preset, device="npu", page_size=128, **fields))
    assert type(cfg).__name__ == "HybridLinearPoolConfigurator"
    return cfg.layout(HYBRID_SIZES)


def test_qwen3_next_on_npu_npu_mha_sub_pool_and_transposed_conv() -> None:
    layout = hybrid_npu("qwen3-next-80b-a3b")
    kv = layout.token_to_kv
    assert kv.pool_class == "HybridLinearKVPool"
    assert dict(kv.attributes)["full.pool_class"] == "NPUMHATokenToKVPool"
    # 12 full-attention layers, 2 KV heads of 256, pages 1024 // 128 + 1
    assert shapes(kv) == {
        "full.k_buffer": ((12, 9, 128, 2, 256), DType.BFLOAT16),
        "full.v_buffer": ((12, 9, 128, 2, 256), DType.BFLOAT16),
    }
    # conv (8192, 3) on CUDA -> (window 3, channels 8192) on NPU; temporal unchanged
    assert shapes(layout.extra[0]) == {
        "mamba.conv[0]": ((36, 25, 3, 8192), DType.BFLOAT16),
        "mamba.temporal": ((36, 25, 32, 128, 128), DType.FLOAT32),
    }
    mtp = hybrid_npu("qwen3-next-80b-a3b", tp_size=4, **MTP).extra[0]
    assert shapes(mtp) == {
        "mamba.conv[0]": ((36, 25, 6, 2048), DType.BFLOAT16),  # window 3 + (Dd - 1) = 6
        "mamba.temporal": ((36, 25, 8, 128, 128), DType.FLOAT32),
        "mamba.intermediate_ssm": ((36, 9, 4, 8, 128, 128), DType.FLOAT32),
        "mamba.intermediate_conv_window[0]": ((36, 9, 4, 2048, 3), DType.BFLOAT16),  # dense on NPU
    }


def test_kimi_linear_on_npu_npu_mla_sub_pool_and_kda_conv() -> None:
    layout = hybrid_npu("kimi-linear-48b-a3b", **MTP)
    assert shapes(layout.token_to_kv) == {
        "full.k_buffer": ((7, 9, 128, 1, 512), DType.BFLOAT16),
        "full.v_buffer": ((7, 9, 128, 1, 64), DType.BFLOAT16),
    }
    mamba = shapes(layout.extra[0])
    assert mamba["mamba.conv[0]"] == ((20, 25, 6, 12288), DType.BFLOAT16)  # KDA (3, 12288): window + 3
    assert mamba["mamba.intermediate_conv_window[0]"] == ((20, 9, 4, 12288, 3), DType.BFLOAT16)  # axes swapped
    with pytest.raises(UnsupportedConfigurationError, match="npu"):
        hybrid_npu("qwen3-next-80b-a3b", kv_cache_dtype="mxfp8")


# ---- catalog: planned == allocated, cuda vs npu ------------------------------------------------


def _plan(path: Path) -> Plan:
    case = load_case(path)
    return plan(
        case.settings,
        case.available_bytes,
        max_tokens=case.max_tokens,
        pool_max_tokens=case.pool_max_tokens,
        pool_max_running_requests=case.pool_max_running_requests,
    )


@pytest.mark.parametrize("path", NPU_CASES, ids=[p.stem for p in NPU_CASES])
def test_npu_catalog_case_planned_equals_allocated_on_meta(path: Path) -> None:
    planned = _plan(path)
    built = build(planned, "meta")
    assert built.token_to_kv_pool.allocated_bytes == planned.layout.token_to_kv.planned_bytes
    assert built.allocated_bytes == planned.layout.planned_bytes
    if load_case(path).settings.device.value == "npu" and planned.ctx.geometry.hybrid_swa is None:
        assert planned.layout.token_to_kv.pool_class.startswith("NPU")


TWINS = sorted(p for p in NPU_CASES if p.stem.endswith("-cuda"))
POOL_KEYS = {"configurator", "token_to_kv_pool_class", "pools", "allocations"}
BYTE_KEYS = {"planned_bytes", "allocated_bytes"}


@pytest.mark.parametrize("cuda_path", TWINS, ids=[p.stem for p in TWINS])
def test_cuda_and_npu_twins_differ_only_in_the_kv_pool_buffers(cuda_path: Path) -> None:
    """Same model and settings on cuda and npu: only the pool class and KV buffers differ.

    Token counts, requests, the cell and the request table are Default's on both devices, and
    with ``T`` a page multiple the pools hold the same bytes. Two exceptions:
    DSA index keys (CUDA: ``(T + P + 1) // P`` pages of 64 * 132 B; NPU: page-major, bf16
    without fp8) change the bytes, and a bf16 DSA cell carries the NPU bf16 indexer
    (DefaultPoolConfigurator._compute_dsa_indexer_cell_size).
    """
    npu_path = cuda_path.with_name(cuda_path.name.replace("-cuda.json", ".json"))
    cuda_plan, npu_plan = _plan(cuda_path), _plan(npu_path)
    cuda_doc, npu_doc = plan_document(cuda_plan), plan_document(npu_plan)
    geometry = npu_plan.ctx.geometry
    expected: set[str] = set()
    if geometry.dsa is not None:
        expected |= BYTE_KEYS
        if npu_plan.ctx.kv_cache_dtype.dtype is DType.BFLOAT16:
            expected |= {"cell_size", "sizes"}  # profiled T; the what-if pool_sizes stay equal
            assert npu_doc["cell_size"] - cuda_doc["cell_size"] == 61 * (128 * 2 - 132)
    differing = {k for k in cuda_doc if k not in POOL_KEYS and cuda_doc[k] != npu_doc[k]}
    assert differing == expected
    if geometry.hybrid_swa is not None:
        # KVCacheConfigurator._build_token_to_kv_pool: SWAKVPool of two NPUMHATokenToKVPool (the hybrid SWA strategy's
        # pools)
        assert npu_doc["configurator"] == cuda_doc["configurator"] == "HybridSWAPoolConfigurator"
        attributes = dict(npu_plan.layout.token_to_kv.attributes)
        assert attributes["full.pool_class"] == attributes["swa.pool_class"] == "NPUMHATokenToKVPool"
        # 12 SWA layers, 8 heads of 64; swa = align(int(1024 * 0.8), 128) = 768 -> 768 // 128 + 1 pages
        assert shapes(npu_plan.layout.token_to_kv)["swa.k_buffer"][0] == (12, 7, 128, 8, 64)
    else:
        assert npu_doc["configurator"] == "AscendPoolConfigurator"
        assert npu_doc["token_to_kv_pool_class"] == "NPU" + ("MLA" if geometry.use_mla else "MHA") + "TokenToKVPool"
    assert cuda_doc["pools"] != npu_doc["pools"]
    assert cuda_doc["req_to_token_pool"] == npu_doc["req_to_token_pool"]


def test_packed_fp8_dsa_holds_cuda_bytes_on_arch35() -> None:
    """CUDA packed 656-byte rows + 17 index pages of 64 * 132 B == NPU arch35 packed rows + fp8 keys
    + fp32 scales: both (T + P) * 48,068 = 52,297,984 B for T = 1024, P = 64."""
    cuda = _plan(CASES / "npu-deepseek-v3.2-tp8-fp8-p64-t1024-cuda.json")
    arch35 = _plan(CASES / "npu-deepseek-v3.2-tp8-fp8-p64-t1024-arch35.json")
    assert cuda.sizes == arch35.sizes
    assert cuda.layout.token_to_kv.planned_bytes == arch35.layout.token_to_kv.planned_bytes == 52_297_984


def test_twin_buffers_hold_the_same_bytes_per_layer() -> None:
    """Llama: CUDA ``k_buffer[l]`` (1152, 8, 128) views vs NPU (9, 128, 8, 128): same layer names,
    same elements. DeepSeek-V3: CUDA ``kv_buffer[l]`` (1152, 1, 576) vs NPU nope + rope."""
    for stem in ("npu-llama-3.1-8b-tp1-bf16-p128-t1024", "npu-deepseek-v3-tp8-bf16-p128-t1024"):
        cuda = _plan(CASES / f"{stem}-cuda.json").layout.token_to_kv
        npu = _plan(CASES / f"{stem}.json").layout.token_to_kv
        cuda_views = {b.name: b for b in cuda.engine_buffers if "[" in b.name}
        npu_views = {b.name: b for b in npu.engine_buffers if "[" in b.name}
        if "kv_buffer[0]" in cuda_views:
            assert cuda_views["kv_buffer[0]"].shape == (1152, 1, 576)
            assert npu_views["k_buffer[0]"].shape == (9, 128, 1, 512)
            assert npu_views["v_buffer[0]"].shape == (9, 128, 1, 64)
            npu_row = npu_views["k_buffer[0]"].nbytes + npu_views["v_buffer[0]"].nbytes
            assert cuda_views["kv_buffer[0]"].nbytes == npu_row
        else:
            assert set(cuda_views) == set(npu_views)
            assert cuda_views["k_buffer[0]"].shape == (1152, 8, 128)
            assert npu_views["k_buffer[0]"].shape == (9, 128, 8, 128)
            assert all(cuda_views[n].nbytes == npu_views[n].nbytes for n in cuda_views)


def test_dsa_bf16_differs_from_cuda_only_by_the_npu_indexer_term() -> None:
    """The one sizing difference between the devices (DefaultPoolConfigurator._compute_dsa_indexer_cell_size):
    61 layers * (128 * 2 - 132) = 7,564 B."""
    npu = ascend("deepseek-v3.2", tp_size=8, page_size=64, kv_cache_dtype="bf16")
    cuda = select_configurator(case_settings("deepseek-v3.2", tp_size=8, page_size=64, kv_cache_dtype="bf16"))
    assert cuda.cell_size_bytes == 78_324
    assert npu.cell_size_bytes - cuda.cell_size_bytes == 7_564


def test_catalog_cases_are_valid_json_with_the_npu_prefix() -> None:
    assert len(NPU_CASES) >= 20
    for path in NPU_CASES:
        data = json.loads(path.read_text())
        assert data["name"] == path.stem and data["pool_max_tokens"] == 1024


def test_planning_the_npu_pools_does_not_import_torch() -> None:
    code = (
        "import sys; from tests.helpers import case_settings; from kvstrategies.api import plan; "
        "ctx = case_settings('deepseek-v3.2', device='npu', tp_size=8, page_size=128); "
        "p = plan(ctx, 2**34, pool_max_tokens=1024); "
        "assert p.layout.token_to_kv.pool_class == 'NPUMLATokenToKVPool'; assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


# ---- the NPU MLA pool's indexer (NPUMLATokenToKVPool), by hand ---------------------------------------------


def _npu_mla(**fields: Any) -> PoolLayout:
    base: dict[str, Any] = {"size": 1024, "page_size": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                            "layer_num": 2, "dtype": DType.BFLOAT16}
    return npu_mla_layout(**{**base, **fields})


def test_npu_mla_indexer_defaults_to_stage_0_without_dcp() -> None:
    # start_layer 0, dcp 1: idx_pad 1 -> 1,024 // 128 + 1 = 9 pages; views labelled by pool-local layer
    layout = _npu_mla(indexer=NPUIndexer(index_head_dim=128, index_size=1024, index_page_size=128, layer_ids=(0, 1)))
    found = {b.name: b.shape for b in layout.buffers}
    assert found["index_k_buffer"] == (2, 9, 128, 1, 128)
    assert found["k_buffer"] == (2, 9, 128, 1, 512) and found["v_buffer"] == (2, 9, 128, 1, 64)
    assert "index_k_buffer[1]" in found


def test_npu_mla_indexer_of_a_later_stage_uses_pool_local_labels() -> None:
    # a PP stage holding global layers 30, 31 (start_layer 30): both inside [30, 32), views [0] and [1]
    indexer = NPUIndexer(index_head_dim=128, index_size=1024, index_page_size=128, layer_ids=(30, 31))
    layout = _npu_mla(start_layer=30, indexer=indexer)
    views = sorted(b.name for b in layout.buffers if b.name.startswith("index_k_buffer["))
    assert views == ["index_k_buffer[0]", "index_k_buffer[1]"]
    with pytest.raises(KVCacheConfigError, match=r"inside the stage range \[30, 32\)"):
        _npu_mla(start_layer=30, indexer=NPUIndexer(128, 1024, 128, (30, 32)))
