"""Default strategy, advanced branches: DSA, FP4, MXFP8, MiniMax sparse, EAGLE/DFLASH drafts.

Hand-computed expectations (DeepSeek-V3.2 DSA, FP4 KV, MXFP8, EAGLE/MTP drafts with DSA, DFLASH drafts) and the
layouts of MHATokenToKVPool's FP4 recipes, MHATokenToKVPoolMXFP8, MLATokenToKVPoolFP4, DSATokenToKVPool,
MHATokenToKOnlyPool and MiniMaxSparseKVPool, written as literals. Every catalog case this issue adds is built on
``meta`` and its allocated bytes compared with the planned bytes.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from kvstrategies import plan, select_configurator
from kvstrategies.api import build
from kvstrategies.case import load_case, parse_case
from kvstrategies.context import DeviceKind
from kvstrategies.core.dtypes import DType, KVCacheDtype, KVRecipe
from kvstrategies.errors import (
    KVCacheConfigError,
    UnsupportedConfigurationError,
)
from kvstrategies.models import parse_hf_config
from kvstrategies.models.minimax import MiniMaxLocalLayers
from kvstrategies.pools.dsa import DSAIndexGeometry, validate_index_page_size
from kvstrategies.pools.fp4 import FP4KVRecipe, fixed_fp4_cell_bytes
from kvstrategies.pools.minimax import minimax_sparse_cell_bytes
from kvstrategies.presets import load_preset_config
from kvstrategies.strategies import DefaultPoolConfigurator
from kvstrategies.strategies.checks import reject_fp4
from kvstrategies.strategies.resolve import finalize
from tests.helpers import buffer_shapes

from ..helpers import GIB, case_settings

CASES = Path(__file__).parents[2] / "cases"
NEW_CASE_PREFIXES = ("dsa-", "fp4-", "mxfp8-", "dflash-", "minimax-")
LLAMA_8B = "llama-3.1-8b"
V32 = "deepseek-v3.2"
SM100 = {"is_sm100": True, "is_blackwell": True}


def default(preset: str | dict[str, Any], **fields: Any) -> DefaultPoolConfigurator:
    cfg = select_configurator(case_settings(preset, **fields))
    assert type(cfg) is DefaultPoolConfigurator
    return cfg


def dsa_freq4() -> dict[str, Any]:
    """DeepSeek-V3.2 with a GLM-style ``index_topk_freq = 4`` (the skip variant
    of the DeepSeek-V3.2 DSA example below)."""
    config = copy.deepcopy(dict(load_preset_config(V32)))
    config["index_topk_freq"] = 4
    return config


MINIMAX_M3: dict[str, Any] = {
    "architectures": ["MiniMaxM3SparseForCausalLM"],
    "model_type": "minimax_m3",
    "num_hidden_layers": 8,
    "hidden_size": 3072,
    "num_attention_heads": 48,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 196608,
    "torch_dtype": "bfloat16",
    "sparse_attention_config": {
        "use_sparse_attention": True,
        "sparse_index_dim": 128,
        "sparse_num_index_heads": 1,
        # dense 0, 1; sparse 2..7, of which 2, 3, 6, 7 keep indexer keys only
        "sparse_attention_freq": [0, 0, 1, 1, 1, 1, 1, 1],
        "sparse_disable_index_value": [0, 0, 1, 1, 0, 0, 1, 1],
    },
}


def shapes(layout: Any, name: str) -> tuple[tuple[int, ...], str]:
    buf = next(b for b in layout.buffers if b.name == name)
    return buf.shape, str(buf.dtype)


# ---- worked example: DeepSeek-V3.2 DSA --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "cell", "tokens", "requests"),
    [
        # 656 * 61 + 132 * 61 = 40,016 + 8,052
        ({"kv_cache_dtype": "fp8_e4m3"}, 48_068, 893_504, 2_792),
        # a trtllm DSA backend keeps the raw 576: 35,136 + 8,052
        ({"kv_cache_dtype": "fp8_e4m3", "dsa_decode_backend": "trtllm"}, 43_188, 994_432, 3_107),
        # bf16: 576 * 61 * 2 + 8,052; R 1,713 clamped up to 2,048
        ({"kv_cache_dtype": "bf16"}, 78_324, 548_352, 2_048),
    ],
)
def test_example_6_dsa(fields: dict[str, Any], cell: int, tokens: int, requests: int) -> None:
    cfg = default(V32, page_size=64, tp_size=8, **fields)
    assert cfg.cell_size_bytes == cell
    sizes = finalize(cfg, cfg.calculate_pool_sizes(40 * GIB, 64))
    assert sizes.max_total_num_tokens == tokens
    assert sizes.max_running_requests == requests


def test_example_6_dsa_prefill_role_reads_the_prefill_backend() -> None:
    # PD prefill: only the prefill DSA backend decides (trtllm decode alone keeps the packed 656)
    packed = default(V32, kv_cache_dtype="fp8_e4m3", page_size=64, disaggregation_mode="prefill",
                     dsa_decode_backend="trtllm")
    assert packed.mla_kv_cache_dim() == 656
    raw = default(V32, kv_cache_dtype="fp8_e4m3", page_size=64, disaggregation_mode="prefill",
                  dsa_prefill_backend="trtllm")
    assert raw.mla_kv_cache_dim() == 576


def test_example_6_dsa_dcp2_replicates_the_indexer() -> None:
    cfg = default(V32, kv_cache_dtype="fp8_e4m3", page_size=64, tp_size=2, dcp_size=2)
    assert cfg.cell_size_bytes == 56_120  # 40,016 + 8,052 * 2
    # 42,949,672,960 // 56,120 = 765,318 -> page 64 -> 765,312
    assert cfg.calculate_pool_sizes(40 * GIB, 64).max_total_num_tokens == 765_312


def test_example_6_dsa_skip_pattern_freq4() -> None:
    cfg = default(dsa_freq4(), kv_cache_dtype="fp8_e4m3", page_size=64)
    assert cfg.indexer_layer_count(61) == 16  # layers 0, 1, 5, 9, ..., 57
    assert cfg.cell_size_bytes == 42_128  # 40,016 + 132 * 16
    assert cfg.calculate_pool_sizes(40 * GIB, 64).max_total_num_tokens == 1_019_456


def test_glm5_dsa_cells() -> None:
    # 78 layers, no skip rule: bf16 576*78*2 + 132*78; fp8 packed 656*78 + 132*78
    assert default("glm-5", kv_cache_dtype="bf16", page_size=64).cell_size_bytes == 100_152
    assert default("glm-5", kv_cache_dtype="fp8_e4m3", page_size=64).cell_size_bytes == 61_464


# ---- worked examples: EAGLE/MTP drafts (DSA rows) and DFLASH drafts --------------------------------------------------


def test_example_12_dsa_mtp() -> None:
    cfg = default(V32, kv_cache_dtype="fp8_e4m3", page_size=64, speculative_algorithm="EAGLE")
    # t_idx 8,052, t_kv 40,016, d_kv int(40,016 / 61) = 656, d_idx 132
    assert cfg.cell_size_bytes == 48_856
    assert cfg.calculate_pool_sizes(40 * GIB, 64).max_total_num_tokens == 879_104
    skips = default(dsa_freq4(), kv_cache_dtype="fp8_e4m3", page_size=64, speculative_algorithm="EAGLE")
    # t_idx 2,112, t_kv 40,016, d_kv 656, d_idx 132 (the draft's indexer counts all its layers)
    assert skips.cell_size_bytes == 42_916
    assert skips.calculate_pool_sizes(40 * GIB, 64).max_total_num_tokens == 1_000_768


def test_frozen_kv_mtp_scales_like_eagle_on_dsa() -> None:
    cfg = default(V32, kv_cache_dtype="fp8_e4m3", page_size=64, speculative_algorithm="FROZEN_KV_MTP")
    assert cfg.cell_size_bytes == 48_856


def test_example_13_dflash() -> None:
    known = default(LLAMA_8B, speculative_algorithm="DFLASH", eagle_draft_num_layers=5,
                    dflash_draft_cell_size_per_token=20_480)
    assert known.cell_size_bytes == 151_552  # 131,072 + 20,480
    assert known.calculate_pool_sizes(40 * GIB, 1).max_total_num_tokens == 283_398
    fallback = default(LLAMA_8B, speculative_algorithm="DFLASH", eagle_draft_num_layers=5)
    assert fallback.cell_size_bytes == 151_552  # ceil_div(131,072 * 37, 32)
    v3_known = default("deepseek-v3", tp_size=8, speculative_algorithm="DFLASH", eagle_draft_num_layers=4,
                       dflash_draft_cell_size_per_token=2_048)
    assert v3_known.cell_size_bytes == 72_320  # 70,272 + 1 * 256 * 4 * 2
    v3_fallback = default("deepseek-v3", tp_size=8, speculative_algorithm="DFLASH", eagle_draft_num_layers=4)
    assert v3_fallback.cell_size_bytes == 74_880  # ceil_div(70,272 * 65, 61)
    dsa = default(dsa_freq4(), kv_cache_dtype="fp8_e4m3", page_size=64, speculative_algorithm="DFLASH",
                  eagle_draft_num_layers=2)
    assert dsa.cell_size_bytes == 43_510  # ceil(42,128 * 63 / 61 = 43,509.25)
    assert dsa.calculate_pool_sizes(40 * GIB, 64).max_total_num_tokens == 987_072


def test_example_13_dflash_with_dcp2() -> None:
    # Llama-8B TP2 DCP2: 8 // (2 // 2) = 8 heads, base cell 131,072
    known = default(LLAMA_8B, tp_size=2, dcp_size=2, speculative_algorithm="DFLASH", eagle_draft_num_layers=5,
                    dflash_draft_cell_size_per_token=20_480)
    assert known.cell_size_bytes == 172_032  # 131,072 + 20,480 * 2
    fallback = default(LLAMA_8B, tp_size=2, dcp_size=2, speculative_algorithm="DFLASH", eagle_draft_num_layers=5)
    assert fallback.cell_size_bytes == 172_032  # ceil_div(131,072 * (32 + 5 * 2), 32)


def test_a_target_without_a_draft_model_adds_no_draft_cost() -> None:
    # NGRAM drafts from the prompt (no draft KV): cost = target 131,072 B/token + draft 0
    ngram = default(LLAMA_8B, speculative_algorithm="NGRAM", speculative_num_draft_tokens=4)
    assert ngram.draft_cost.slope == 0 and ngram.cell_size_bytes == ngram.base_cell_size_bytes == 131_072
    eagle = default(LLAMA_8B, speculative_algorithm="EAGLE", eagle_draft_num_layers=1, speculative_num_draft_tokens=2)
    assert eagle.draft_cost.slope == 4_096  # int(131,072 * 1 / 32)
    assert eagle.cost == eagle.target_cost + eagle.draft_cost and eagle.cell_size_bytes == 135_168


# ---- worked example: FP4 KV -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "cell", "tokens"),
    [
        # no backend named: packed data alone, 8 * 64 * 32 * 2
        ({}, 32_768, 1_310_720),
        # (flashinfer, trtllm_mha) SM100: linear + native + 2,048 workspace
        ({"prefill_attention_backend": "flashinfer", "decode_attention_backend": "trtllm_mha", "platform": SM100},
         43_008, 998_640),
        # trtllm_mha both phases, SM100: native only
        ({"attention_backend": "trtllm_mha", "platform": SM100}, 36_864, 1_165_072),
        # trtllm_mha both phases, SM120 (not SM100): linear only
        ({"attention_backend": "trtllm_mha", "platform": {"is_blackwell": True}}, 36_864, 1_165_072),
        # flashinfer both phases, SM100: linear (dequant path) + workspace, no native
        ({"attention_backend": "flashinfer", "platform": SM100}, 38_912, 1_103_760),
        # backends matching no rule contribute nothing
        ({"attention_backend": "fa3"}, 32_768, 1_310_720),
    ],
)
def test_example_7_nvfp4(fields: dict[str, Any], cell: int, tokens: int) -> None:
    cfg = default(LLAMA_8B, kv_cache_dtype="nvfp4", page_size=16, **fields)
    assert cfg.cell_size_bytes == cell
    assert cfg.calculate_pool_sizes(40 * GIB, 16).max_total_num_tokens == tokens


def test_example_7_fp4_mx_block16() -> None:
    cfg = default(LLAMA_8B, kv_cache_dtype="fp4_mx_block16", page_size=16, attention_backend="triton")
    assert cfg.cell_size_bytes == 36_864  # 32,768 + (8 * 128 // 16) * 32 * 2
    assert cfg.calculate_pool_sizes(40 * GIB, 16).max_total_num_tokens == 1_165_072


def test_fp4_mha_ignores_v_head_dim() -> None:
    # an asymmetric config: K 192, V 128; FP4 prices V with head_dim (SGLang's FP4 cell ignores v_head_dim)
    config = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "num_attention_heads": 8,
              "num_key_value_heads": 2, "head_dim": 192, "v_head_dim": 128, "hidden_size": 1024}
    cfg = default(config, kv_cache_dtype="fp4_mx_block16")
    assert cfg.cell_size_bytes == 2 * 96 * 2 * 2 + (2 * 192 // 16) * 2 * 2  # 768 + 96 = 864


@pytest.mark.parametrize("dtype", ["nvfp4", "fp4_mx_block16"])
def test_example_7_fp4_mla(dtype: str) -> None:
    cfg = default("deepseek-v3", kv_cache_dtype=dtype, attention_backend="flashinfer", platform=SM100)
    assert cfg.cell_size_bytes == 19_764  # (576 * 61) // 2 + (576 // 16) * 61 = 17,568 + 2,196
    assert cfg.calculate_pool_sizes(40 * GIB, 1).max_total_num_tokens == 2_173_126


def test_fp4_storage_element_is_one_byte() -> None:
    torch = pytest.importorskip("torch")
    assert torch.empty((), dtype=torch.float4_e2m1fn_x2).element_size() == 1  # SGLang's FP4 code relies on it
    assert DType.FLOAT4_E2M1FN_X2.itemsize == 1


# ---- worked example: MXFP8 ------------------------------------------------------------------------


def test_example_8_mxfp8() -> None:
    cfg = default(LLAMA_8B, kv_cache_dtype="mxfp8", page_size=128)
    assert cfg.cell_size_bytes == 67_584  # 65,536 + (8 * 256 * 32) // 32
    assert cfg.calculate_pool_sizes(40 * GIB, 128).max_total_num_tokens == 635_392


def test_mxfp8_scale_term_floors_the_whole_product() -> None:
    # Qwen2.5-7B at TP8: 1 head, 28 layers: 7,168 + 7,168 // 32 = 7,392
    assert default("qwen2.5-7b", tp_size=8, kv_cache_dtype="mxfp8", page_size=128).cell_size_bytes == 7_392
    # 1 head of 48 (+48) over 3 layers: 288 + 288 // 32 = 297 (per layer floor would give 3 * 3 = 9)
    config = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 3, "num_attention_heads": 4,
              "num_key_value_heads": 1, "head_dim": 48, "hidden_size": 192}
    assert default(config, kv_cache_dtype="mxfp8").cell_size_bytes == 297


# ---- layouts: DSA (DSATokenToKVPool) -------------------------------------------------------


def what_if(preset: str | dict[str, Any], tokens: int = 1024, requests: int = 8, **fields: Any) -> Any:
    return plan(case_settings(preset, **fields), 40 * GIB, pool_max_tokens=tokens, pool_max_running_requests=requests)


def test_dsa_pool_fp8_packed() -> None:
    kv = what_if(V32, kv_cache_dtype="fp8_e4m3", page_size=64, tp_size=8).layout.token_to_kv
    assert kv.pool_class == "DSATokenToKVPool"
    assert shapes(kv, "kv_buffer[0]") == ((1_088, 1, 656), "torch.uint8")
    # (1024 + 64 + 1) // 64 = 17 pages of 64 keys * 132 bytes
    assert shapes(kv, "index_k_with_scale_buffer[60]") == ((17, 8_448), "torch.uint8")
    assert len(kv.buffers) == 122
    assert kv.planned_bytes == 61 * (1_088 * 656 + 17 * 8_448) == 52_297_984


def test_dsa_pool_bf16_and_trtllm_raw() -> None:
    bf16 = what_if(V32, kv_cache_dtype="bf16", page_size=64).layout.token_to_kv
    assert shapes(bf16, "kv_buffer[3]") == ((1_088, 1, 576), "torch.bfloat16")
    raw = what_if(V32, kv_cache_dtype="fp8_e4m3", page_size=64, dsa_prefill_backend="trtllm",
                  dsa_decode_backend="trtllm").layout.token_to_kv
    assert shapes(raw, "kv_buffer[3]") == ((1_088, 1, 576), "torch.uint8")
    assert raw.planned_bytes == 61 * (1_088 * 576 + 17 * 8_448) == 46_988_544


def test_dsa_pool_skip_layers_get_zero_row_placeholders() -> None:
    kv = what_if(dsa_freq4(), kv_cache_dtype="fp8_e4m3", page_size=64).layout.token_to_kv
    real = [i for i in range(61) if shapes(kv, f"index_k_with_scale_buffer[{i}]")[0][0] == 17]
    assert real == [0, 1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53, 57]
    assert shapes(kv, "index_k_with_scale_buffer[2]") == ((0, 8_448), "torch.uint8")
    assert kv.planned_bytes == 61 * 1_088 * 656 + 16 * 17 * 8_448 == 45_835_264


def test_dsa_pool_dcp_target_and_draft() -> None:
    target = what_if(V32, kv_cache_dtype="fp8_e4m3", page_size=64, tp_size=8, dcp_size=2).layout.token_to_kv
    # index_buf_size = (1024 + 64) * 2 - 64 = 2,112 -> (2,112 + 64 + 1) // 64 = 34 pages
    assert shapes(target, "index_k_with_scale_buffer[0]") == ((34, 8_448), "torch.uint8")
    draft = what_if(V32, kv_cache_dtype="fp8_e4m3", page_size=64, tp_size=8, dcp_size=2,
                    speculative_algorithm="EAGLE", is_draft_worker=True).layout.token_to_kv
    # DCP draft: 2,048 ids, pool page 128, index page 128 / 2 = 64; (2,048 + 128 + 1) // 128 = 17
    # rows of 128 / kpool 1 = 128 keys (two 64-key kernel pages, SGLang's IndexKeyCache): 128 * 132 B
    assert [b.shape for b in draft.buffers] == [(2_176, 1, 656), (17, 16_896)]


def test_dsa_mtp_draft_worker_indexes_every_layer() -> None:
    draft = what_if(dsa_freq4(), kv_cache_dtype="fp8_e4m3", page_size=64, speculative_algorithm="EAGLE",
                    is_draft_worker=True)
    assert draft.cell_size_bytes == 788  # 656 + 132: a draft elides nothing, no DCP factor
    assert [b.shape for b in draft.layout.token_to_kv.buffers] == [(1_088, 1, 656), (17, 8_448)]


def test_dsa_pool_kpool_compress_tails() -> None:
    config = copy.deepcopy(dict(load_preset_config(V32)))
    config.update(index_kpool=2, index_kpool_compress=True, num_hidden_layers=2)
    planned = what_if(config, tokens=1024, requests=8, kv_cache_dtype="fp8_e4m3", page_size=128)
    assert planned.cell_size_bytes == 656 * 2 + 66 * 2  # ceil_div(132, 2) per indexer layer
    kv = planned.layout.token_to_kv
    assert shapes(kv, "index_k_with_scale_buffer[1]") == ((9, 8_448), "torch.uint8")  # (1024+128+1)//128
    # req_to_token rows R + 1 = 9, passed as max_running_requests -> 10 rows; kpool 2 + 0 drafts
    assert shapes(kv, "_compress_tail_k[0]") == ((10, 2, 128), "torch.bfloat16")
    assert shapes(kv, "_compress_tail_score[1]") == ((10, 2, 128), "torch.bfloat16")


def test_dsa_index_geometry_arithmetic() -> None:
    geo = DSAIndexGeometry(size=992, page_size=64, index_head_dim=128)
    assert (geo.index_page_size, geo.index_buf_size, geo.num_index_pages, geo.page_bytes) == (64, 992, 16, 8_448)


# ---- layouts: FP4 (4.5, 7) -------------------------------------------------------------


def test_nvfp4_pool_with_every_buffer() -> None:
    kv = what_if(LLAMA_8B, kv_cache_dtype="nvfp4", page_size=16, prefill_attention_backend="flashinfer",
                 decode_attention_backend="trtllm_mha", platform=SM100).layout.token_to_kv
    assert shapes(kv, "k_buffer[0]") == ((1_040, 8, 64), "torch.uint8")
    assert shapes(kv, "v_scale_buffer[31]") == ((1_040, 8, 8), "torch.uint8")
    assert shapes(kv, "native_k_scale_buffer[5]") == ((65, 8, 16, 8), "torch.uint8")
    assert shapes(kv, "dq_k_buffer") == ((1_040, 8, 128), "torch.float8_e4m3fn")
    assert shapes(kv, "quant_method.k_scales_gpu") == ((32,), "torch.float32")
    # 1,040 rows * the 43,008-byte cell + two (32,) fp32 vectors
    assert kv.planned_bytes == 1_040 * 43_008 + 2 * 32 * 4 == 44_728_576


def test_nvfp4_pool_without_backend_has_data_and_global_scales_only() -> None:
    kv = what_if(LLAMA_8B, kv_cache_dtype="nvfp4", page_size=16).layout.token_to_kv
    names = {b.name.split("[")[0] for b in kv.buffers}
    assert names == {"k_buffer", "v_buffer", "quant_method.k_scales_gpu", "quant_method.v_scales_gpu"}
    assert kv.planned_bytes == 1_040 * 32_768 + 256 == 34_078_976


def test_fp4_mx_block16_pool() -> None:
    kv = what_if(LLAMA_8B, kv_cache_dtype="fp4_mx_block16", page_size=16).layout.token_to_kv
    assert shapes(kv, "k_scale_buffer[0]") == ((1_040, 64), "torch.uint8")  # 2-D, H * D / 16
    assert not any("scales_gpu" in b.name or b.name.startswith("dq_") for b in kv.buffers)
    assert kv.planned_bytes == 1_040 * 36_864 == 38_338_560


def test_nvfp4_global_scales_have_the_stage_layer_count() -> None:
    kv = what_if("llama-3.1-70b", tp_size=4, pp_size=2, pp_rank=1, kv_cache_dtype="nvfp4", page_size=16,
                 attention_backend="trtllm_mha", platform=SM100).layout.token_to_kv
    assert shapes(kv, "quant_method.v_scales_gpu") == ((40,), "torch.float32")
    assert shapes(kv, "native_v_scale_buffer[39]") == ((65, 2, 16, 8), "torch.uint8")


def test_mla_fp4_pool() -> None:
    kv = what_if("deepseek-v3", kv_cache_dtype="nvfp4", page_size=64).layout.token_to_kv
    assert kv.pool_class == "MLATokenToKVPoolFP4"
    assert shapes(kv, "kv_buffer[60]") == ((1_088, 1, 288), "torch.uint8")
    assert shapes(kv, "kv_scale_buffer[60]") == ((1_088, 36), "torch.uint8")
    assert kv.planned_bytes == 1_088 * 19_764


# ---- layouts: MXFP8 (5) ----------------------------------------------------------------


def test_mxfp8_pool_page_128_interleaved() -> None:
    kv = what_if(LLAMA_8B, kv_cache_dtype="mxfp8", page_size=128).layout.token_to_kv
    assert kv.pool_class == "MHATokenToKVPoolMXFP8"
    assert shapes(kv, "k_buffer[0]") == ((1_152, 8, 128), "torch.float8_e4m3fn")
    assert shapes(kv, "k_scale_buffer[0]") == ((9, 8, 32, 4, 4), "torch.float8_e8m0fnu")
    assert kv.planned_bytes == 1_152 * 67_584


def test_mxfp8_pool_page_64_flat() -> None:
    kv = what_if(LLAMA_8B, kv_cache_dtype="mxfp8", page_size=64).layout.token_to_kv
    assert shapes(kv, "v_scale_buffer[31]") == ((1_088, 8, 4), "torch.float8_e8m0fnu")
    assert kv.planned_bytes == 1_088 * 67_584


# ---- MiniMax sparse (ModelConfig's MiniMax sparse layer ids, DefaultPoolConfigurator._compute_cell_size;
# MHATokenToKOnlyPool, MiniMaxSparseKVPool)


def test_minimax_geometry() -> None:
    geometry = parse_hf_config(MINIMAX_M3)
    sparse = geometry.minimax_sparse
    assert sparse is not None and geometry.family == "minimax-sparse"
    assert sparse.dense_layer_ids == (0, 1)
    assert sparse.sparse_layer_ids == (2, 3, 4, 5, 6, 7)
    local = sparse.local(4, 8)
    assert (local.dense, local.kv_sparse, local.k_only) == ((), (4, 5), (6, 7))
    # the shipped MiniMax-M2.5 preset is plain MHA, not sparse
    assert parse_hf_config(load_preset_config("minimax-m2.5")).minimax_sparse is None


def test_minimax_cell() -> None:
    # TP1 bf16: (2 + 6) * 2 * 8 * 128 * 2 = 32,768 main; (2 * 2 + 4) * 128 * 2 = 2,048 index
    assert default(MINIMAX_M3, kv_cache_dtype="bf16").cell_size_bytes == 34_816
    # TP4: 2 heads -> 8,192 main + 2,048 index
    assert default(MINIMAX_M3, kv_cache_dtype="bf16", tp_size=4).cell_size_bytes == 10_240
    # fp8 KV off SM90: index caches stay in the model dtype (bf16): 16,384 + 2,048
    assert default(MINIMAX_M3, kv_cache_dtype="fp8_e4m3").cell_size_bytes == 18_432
    # fp8 KV on CUDA SM90: index caches in fp8 too: 16,384 + 1,024
    assert default(MINIMAX_M3, kv_cache_dtype="fp8_e4m3", platform={"is_sm90": True}).cell_size_bytes == 17_408
    # PP stage [4, 8), SM90 fp8: 4 * 2 * 8 * 128 + (2 * 2 + 2) * 128
    stage = default(MINIMAX_M3, kv_cache_dtype="fp8_e4m3", pp_size=2, pp_rank=1, platform={"is_sm90": True})
    assert stage.cell_size_bytes == 8_960


def test_minimax_pool() -> None:
    kv = what_if(MINIMAX_M3, kv_cache_dtype="bf16", page_size=64).layout.token_to_kv
    assert kv.pool_class == "MiniMaxSparseKVPool"
    assert shapes(kv, "main.kv_storage[7]") == ((2, 1_088, 8, 128), "torch.bfloat16")
    assert shapes(kv, "index_kv.k_buffer[1]") == ((1_088, 1, 128), "torch.bfloat16")
    assert shapes(kv, "index_k.k_buffer[3]") == ((1_088, 1, 128), "torch.bfloat16")
    assert not any(b.name.startswith("index_k.v_buffer") for b in kv.buffers)
    assert kv.planned_bytes == 1_088 * 34_816 == 37_879_808
    fp8 = what_if(MINIMAX_M3, kv_cache_dtype="fp8_e4m3", page_size=64, platform={"is_sm90": True})
    assert shapes(fp8.layout.token_to_kv, "index_k.k_buffer[0]") == ((1_088, 1, 128), "torch.uint8")
    assert dict(fp8.layout.token_to_kv.attributes)["index_dtype"] == "torch.float8_e4m3fn"


# ---- catalog cases: planned == allocated ------------------------------------------------


NEW_CASES = sorted(p for p in CASES.glob("*.json") if p.name.startswith(NEW_CASE_PREFIXES))


def test_catalog_has_the_new_cases() -> None:
    assert len(NEW_CASES) >= 20


@pytest.mark.parametrize("path", NEW_CASES, ids=lambda p: p.stem)
def test_case_builds_on_meta_with_planned_bytes(path: Path) -> None:
    case = load_case(path)
    assert case.pool_max_tokens is not None  # snapshots stay small
    planned = plan(case.settings, case.available_bytes, max_tokens=case.max_tokens,
                   pool_max_tokens=case.pool_max_tokens, pool_max_running_requests=case.pool_max_running_requests)
    pools = build(planned, "meta")
    assert pools.token_to_kv_pool.allocated_bytes == planned.layout.token_to_kv.planned_bytes
    assert pools.allocated_bytes == planned.layout.planned_bytes
    for spec in planned.layout.token_to_kv.buffers:
        tensor = pools.token_to_kv_pool[spec.name]
        assert tuple(tensor.shape) == spec.shape
        assert str(tensor.dtype) == str(spec.dtype)


# ---- unsupported combinations ------------------------------------------------------------


def test_fp4_with_dsa_is_rejected() -> None:
    with pytest.raises(UnsupportedConfigurationError, match=r"nvfp4.*DSA.*DeepseekV32ForCausalLM"):
        _ = default(V32, kv_cache_dtype="nvfp4", page_size=64).cell_size_bytes


def test_fp4_with_minimax_sparse_is_rejected() -> None:
    with pytest.raises(UnsupportedConfigurationError, match=r"fp4_mx_block16.*MiniMax sparse"):
        _ = default(MINIMAX_M3, kv_cache_dtype="fp4_mx_block16").cell_size_bytes


def test_reject_fp4_helper() -> None:
    reject_fp4(case_settings(LLAMA_8B, kv_cache_dtype="fp8_e4m3"), "hybrid SWA")  # no FP4: fine
    with pytest.raises(KVCacheConfigError, match=r"'nvfp4' \(FP4\) is not supported with hybrid SWA"):
        reject_fp4(case_settings("gpt-oss-20b", kv_cache_dtype="nvfp4"), "hybrid SWA")


@pytest.mark.parametrize("device", ["npu", "cpu"])
def test_fp4_off_cuda_is_rejected(device: str) -> None:
    with pytest.raises(UnsupportedConfigurationError, match=f"only supported on CUDA, not on {device}"):
        _ = DefaultPoolConfigurator(case_settings(LLAMA_8B, kv_cache_dtype="nvfp4", device=device)).cell_size_bytes


def test_fp4_on_hip_is_rejected() -> None:
    ctx = case_settings(LLAMA_8B, kv_cache_dtype="nvfp4", platform={"is_hip": True})
    assert ctx.device is DeviceKind.HIP
    with pytest.raises(UnsupportedConfigurationError, match="not on hip"):
        _ = DefaultPoolConfigurator(ctx).cell_size_bytes


def test_fp4_dtype_without_recipe_is_rejected() -> None:
    with pytest.raises(KVCacheConfigError, match="FP4 storage dtype requires an explicit KV recipe name"):
        FP4KVRecipe.configure(KVRecipe.NONE, prefill_backend=None, decode_backend=None, is_sm100=False)
    ctx = case_settings(LLAMA_8B)
    import dataclasses

    bare = dataclasses.replace(ctx, kv_cache_dtype=KVCacheDtype("fp4", DType.FLOAT4_E2M1FN_X2))
    with pytest.raises(KVCacheConfigError, match="explicit KV recipe name"):
        _ = DefaultPoolConfigurator(bare).cell_size_bytes


@pytest.mark.parametrize(("name", "message"), [("fp4_e2m1", "nvfp4' or 'fp4_mx_block16"),
                                                ("mxfp4", "reserved for true block-32 MXFP4")])
def test_fp4_names_outside_sglang_are_rejected(name: str, message: str) -> None:
    with pytest.raises(KVCacheConfigError, match=message):
        case_settings(LLAMA_8B, kv_cache_dtype=name)


def test_nvfp4_native_layout_needs_page_multiple_of_4() -> None:
    with pytest.raises(KVCacheConfigError, match="page_size 1 is not a multiple of 4"):
        what_if(LLAMA_8B, kv_cache_dtype="nvfp4", page_size=1, attention_backend="trtllm_mha", platform=SM100)


def test_mxfp8_needs_head_dims_multiple_of_32() -> None:
    config = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 80, "hidden_size": 320}
    with pytest.raises(KVCacheConfigError, match="mxfp8 KV cache needs head_dim to be a multiple of 32, got 80"):
        what_if(config, kv_cache_dtype="mxfp8", page_size=128)


def test_dsa_on_cuda_needs_page_64() -> None:
    with pytest.raises(KVCacheConfigError, match="index page of 64 tokens, got 16"):
        what_if(V32, kv_cache_dtype="fp8_e4m3", page_size=16)


def test_dsa_index_head_dim_must_be_128() -> None:
    config = copy.deepcopy(dict(load_preset_config(V32)))
    config.update(index_head_dim=64, num_hidden_layers=2)
    with pytest.raises(KVCacheConfigError, match="index_head_dim 64 is not supported"):
        what_if(config, kv_cache_dtype="bf16", page_size=64)


def test_minimax_nvfp4_native_stack_is_out_of_scope() -> None:
    config = copy.deepcopy(MINIMAX_M3)
    config["quantization_config"] = {"quant_method": "minimax_m3_nvfp4"}
    with pytest.raises(UnsupportedConfigurationError, match="minimax_m3_nvfp4"):
        _ = default(config, platform={"is_blackwell": True}).cell_size_bytes


@pytest.mark.parametrize(
    ("sparse_cfg", "message"),
    [(None, "needs a 'sparse_attention_config'"),
     ({"sparse_index_dim": 128}, "sparse_attention_freq is missing"),
     ({"sparse_index_dim": 128, "sparse_attention_freq": [0, 1]}, "has 2 entries but the model has 8")],
)
def test_minimax_config_errors(sparse_cfg: dict[str, Any] | None, message: str) -> None:
    config = copy.deepcopy(MINIMAX_M3)
    config["sparse_attention_config"] = sparse_cfg
    with pytest.raises(KVCacheConfigError, match=message):
        parse_case({"hf_config": config, "available_bytes": 1})


# ---- FP4 before the KV recipes (SGLang 0.5.15-0.5.20), by hand ---------------------------------------------


def test_the_fixed_fp4_cell_before_the_recipes() -> None:
    """SGLang 0.5.15-0.5.20 ``DefaultPoolConfigurator._compute_cell_size`` (sglang.srt.model_executor.
    pool_configurator), float4_e2m1fn_x2 KV (1 byte): ``cell = H (D + Dv) L // 2 + (H D L 2) // 16 + H D 2``."""
    # Llama-3.1-8B at TP 1: H 8, D = Dv 128, 32 layers: 8*256*32//2 + 8*128*32*2//16 + 8*128*2
    assert fixed_fp4_cell_bytes(8, 128, 128, 32) == 32_768 + 4_096 + 2_048 == 38_912
    # K wider than V (D 192, Dv 128), 2 heads, 3 layers: 2*320*3//2 + 2*192*3*2//16 + 2*192*2
    assert fixed_fp4_cell_bytes(2, 192, 128, 3) == 960 + 144 + 768 == 1_872
    # the scale term floors as a whole: 1*16*1*2 // 16 = 2, the packed term 1*(16+16)*1 // 2 = 16
    assert fixed_fp4_cell_bytes(1, 16, 16, 1) == 16 + 2 + 32 == 50


# ---- draft scaling, zero-KV stages, DSA index pages and tails, MiniMax HiSparse, by hand -------------------


# ---- speculative draft scaling (DefaultPoolConfigurator.__init__ draft scaling) --------------------------------------


def test_dflash_with_zero_draft_layers_adds_no_draft_cell() -> None:
    # the DFLASH term needs Dd > 0; Llama-8B TP2 DCP2 base cell 8 * 256 * 32 * 2 = 131,072
    cfg = default("llama-3.1-8b", tp_size=2, dcp_size=2, speculative_algorithm="DFLASH", eagle_draft_num_layers=0,
                  dflash_draft_cell_size_per_token=20_480)
    assert cfg.cell_size_bytes == 131_072


def test_eagle_scales_a_single_layer_stage() -> None:
    # the draft scaling needs num_layers > 0 (not > 1): Llama-8B cut to 1 layer, 8 * 256 * 1 * 2 = 4,096,
    # + int(4,096 * 1 / 1)
    config = dict(load_preset_config("llama-3.1-8b"))
    config["num_hidden_layers"] = 1
    cfg = select_configurator(case_settings(config, speculative_algorithm="EAGLE", eagle_draft_num_layers=1))
    assert cfg.cell_size_bytes == 8_192


def test_eagle_scales_by_every_draft_layer() -> None:
    # EAGLE3 head of 2 layers on Llama-8B: 131,072 + int(131,072 * 2 / 32) = 131,072 + 8,192
    assert default("llama-3.1-8b", speculative_algorithm="EAGLE3", eagle_draft_num_layers=2).cell_size_bytes == 139_264


def test_eagle_dsa_scaling_under_dcp_with_two_draft_layers() -> None:
    # DeepSeek-V3.2 fp8 TP2 DCP2 (as in test_default_advanced.py: kv 656 * 61 = 40,016, indexer 132 * 61 =
    # 8,052): t_idx = 8,052 * 2; t_kv = 56,120 - 16,104 = 40,016; d_kv = int(40,016 * 2 / 61) = 1,312;
    # d_idx = 132 * 2 = 264; cell = 56,120 + 1,312 * 2 + 264 * 2
    cfg = default("deepseek-v3.2", kv_cache_dtype="fp8_e4m3", page_size=64, tp_size=2, dcp_size=2,
                  speculative_algorithm="EAGLE", eagle_draft_num_layers=2)
    assert cfg.cell_size_bytes == 59_272


@pytest.mark.parametrize(
    ("draft_layers", "draft_cell", "cell"),
    [
        (1, 20_480, 151_552),  # Dd = 1 > 0: 131,072 + 20,480
        (5, 0, 151_552),  # a draft cell of 0 is not positive: ceil_div(131,072 * (32 + 5), 32)
        (5, 1, 131_073),  # the smallest positive draft cell is added as given
    ],
)
def test_dflash_draft_cell_boundaries(draft_layers: int, draft_cell: int, cell: int) -> None:
    cfg = default("llama-3.1-8b", speculative_algorithm="DFLASH", eagle_draft_num_layers=draft_layers,
                  dflash_draft_cell_size_per_token=draft_cell)
    assert cfg.cell_size_bytes == cell


# ---- DSA kpool compress tails (DSATokenToKVPool, _build_dsa_kv_pool) ------------------------------------------


def _dsa_kpool(kpool: int) -> dict[str, Any]:
    config = copy.deepcopy(dict(load_preset_config("deepseek-v3.2")))
    config.update(index_kpool=kpool, index_kpool_compress=True, num_hidden_layers=2)
    return config


def test_dsa_compress_tails_need_kpool_above_one() -> None:
    # index_kpool 1 with index_kpool_compress set: no tail buffers (only kv + index keys per layer)
    planned = plan(case_settings(_dsa_kpool(1), kv_cache_dtype="fp8_e4m3", page_size=64), 40 * GIB,
                   pool_max_tokens=1024, pool_max_running_requests=8)
    assert sorted(buffer_shapes(planned.layout.token_to_kv)) == [
        "index_k_with_scale_buffer[0]", "index_k_with_scale_buffer[1]", "kv_buffer[0]", "kv_buffer[1]",
    ]


def test_dsa_compress_tails_in_the_decode_role_with_drafts() -> None:
    # rows: req_to_token rows R + pre_alloc + 1 = 8 + 4 + 1 = 13, passed as max_running_requests -> 14;
    # slots: index_kpool + max draft tokens = 2 + 3 = 5 (_build_dsa_kv_pool tail_extra_slots)
    ctx = case_settings(_dsa_kpool(2), kv_cache_dtype="fp8_e4m3", page_size=128, disaggregation_mode="decode",
                        disaggregation_decode_extra_slots=4, speculative_algorithm="EAGLE",
                        speculative_num_draft_tokens=3, speculative_num_steps=2, speculative_eagle_topk=1)
    planned = plan(ctx, 40 * GIB, pool_max_tokens=1024, pool_max_running_requests=8)
    found = buffer_shapes(planned.layout.token_to_kv)
    assert found["_compress_tail_k[0]"] == found["_compress_tail_score[1]"] == (14, 5, 128)


# ---- DSA index pages and tails (DSATokenToKVPool) ----------------------------------------------------------


@pytest.mark.parametrize(("size", "pages"), [(1_023, 17), (1_022, 16)])
def test_dsa_index_pages_add_one_not_page_minus_one(size: int, pages: int) -> None:
    # DSATokenToKVPool: num_index_pages = (index_buf_size + P + 1) // P: (1,023 + 65) // 64 = 17, (1,022 + 65) // 64 =
    # 16
    assert DSAIndexGeometry(size=size, page_size=64, index_head_dim=128).num_index_pages == pages


@pytest.mark.parametrize(("page", "ok"), [(1, True), (16, True), (32, True), (24, False), (17, False)])
def test_hip_dsa_index_page_is_one_or_a_multiple_of_16(page: int, ok: bool) -> None:
    if ok:
        validate_index_page_size(page, is_hip=True)
    else:
        with pytest.raises(KVCacheConfigError, match="multiple of 16"):
            validate_index_page_size(page, is_hip=True)


def test_dsa_layers_that_reuse_the_topk_get_zero_row_keys_and_tails() -> None:
    # _build_dsa_kv_pool, freq 2 without offset: layer l skips when max(l - 1, 0) % 2 != 0 -> only layer 2 of 4;
    # DSATokenToKVPool: its index keys and both tails have 0 rows; the others (1,024 + 128 + 1) // 128 = 9 pages
    # and R + 2 = 10 tail rows of index_kpool 2 slots
    config = _dsa_kpool(2)
    config.update(num_hidden_layers=4, index_topk_freq=2)
    planned = plan(case_settings(config, kv_cache_dtype="fp8_e4m3", page_size=128), 40 * GIB, pool_max_tokens=1024,
                   pool_max_running_requests=8)
    found = buffer_shapes(planned.layout.token_to_kv)
    assert [found[f"index_k_with_scale_buffer[{i}]"][0] for i in range(4)] == [9, 9, 0, 9]
    assert [found[f"_compress_tail_k[{i}]"] for i in range(4)] == [(10, 2, 128)] * 2 + [(0, 2, 128), (10, 2, 128)]
    assert found["_compress_tail_score[2]"] == (0, 2, 128)


def test_minimax_hisparse_ratio_scales_dense_layers_and_the_index() -> None:
    # DefaultPoolConfigurator._compute_cell_size with r = 2: dense (0, 1), sparse (2, 3, 4) of which 4 keeps K only; H
    # 2, D 128, fp8 KV, bf16 index of 128: main (2 * 2 + 3) * 2 * 2 * 128 * 1 = 3,584; index ((2 * 2 + 1) * 128 * 2) * 2
    # = 2,560
    layers = MiniMaxLocalLayers(dense=(0, 1), sparse=(2, 3, 4), k_only=(4,))
    cell = minimax_sparse_cell_bytes(layers, head_num=2, head_dim=128, kv_itemsize=1, index_dim=128, index_itemsize=2,
                                     hisparse_ratio=2)
    assert cell == 6_144
