"""vLLM 0.17.1: each release rule that sets it apart from 0.18.1, against a hand-computed expectation.

Sources (vLLM 0.17.1's own code): ``vllm/platforms/cuda.py CudaPlatformBase.check_and_update_config`` (the MLA
block fixed with the config: ``vllm-mla-config-block``), ``vllm/model_executor/models/config.py
DeepseekV32ForCausalLM.verify_and_update_config`` (an fp8 cache becomes ``fp8_ds_mla``:
``vllm-dsa-fp8-ds-mla-cache``; its page ``vllm/v1/kv_cache_interface.py MLAAttentionSpec.real_page_size_bytes``),
``HybridAttentionMambaModelConfig.verify_and_update_config`` (the hybrid block kept without ``--block-size``,
``vllm-hybrid-block-kept``; 32-token alignment of 256-wide heads on SM 10.x,
``vllm-hybrid-blackwell-head-256-alignment``) and ``vllm/transformers_utils/config.py _CONFIG_REGISTRY``
(no ``kimi_k2`` before 0.18.1: ``vllm-config-registry-0.18.1``). Each expectation was also answered by vLLM 0.17.1
itself through the bridge (``golden/vllm-0.17.1/`` or a one-off case of the same settings).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.core.releases import VLLM, parse_release, rules_differing
from kvstrategies.errors import UnsupportedConfigurationError
from kvstrategies.models.parse import parse_hf_config
from kvstrategies.presets import load_preset_config
from kvstrategies.vllm.strategies.backends import mla_config_block
from kvstrategies.vllm.strategies.devices import vllm_device
from kvstrategies.vllm.strategies.specs import MLAAttentionSpec

GIB = 2**30
#: one token of a 576-wide bf16 MLA latent (kv_lora_rank 512 + rope 64)
MLA_ROW = 576 * 2


def _vllm(preset: str, release: str, **fields: object) -> Any:
    case = parse_case({"preset": preset, "engine": "vllm", "vllm_version": release, "available_bytes": 40 * GIB,
                       **fields})  # fmt: skip
    return plan(case.settings, case.available_bytes).vllm


def _spec_blocks(planned: Any) -> list[int]:
    return [spec.block_size for _layers, spec in planned.layer_specs]


def test_0_17_fixes_the_mla_block_with_the_config_on_hopper() -> None:
    # DeepSeek-V2-Lite TP 1 bf16 on H200, 27 layers of 1,152 B a token. 0.17.1's check_and_update_config: FlashMLA
    # (Hopper) wants a multiple of 64, so the block 16 it starts at becomes 64: 27 x 64 x 1,152 = 1,990,656 B a block,
    # 42,949,672,960 // 1,990,656 = 21,575 blocks. 0.18.1 keeps FLASH_ATTN_MLA's preferred 16: 497,664 B, 86,302
    old = _vllm("deepseek-v2-lite", "0.17.1", gpu="H200")
    assert (old.block_size, old.num_gpu_blocks) == (64, 40 * GIB // (27 * 64 * MLA_ROW)) == (64, 21_575)
    new = _vllm("deepseek-v2-lite", "0.18.1", gpu="H200")
    assert (new.block_size, new.num_gpu_blocks) == (16, 40 * GIB // (27 * 16 * MLA_ROW)) == (16, 86_302)
    # a given --block-size 16 is overridden too; 128, a multiple of 64, is kept: 42,949,672,960 // 3,981,312 = 10,787
    assert _vllm("deepseek-v2-lite", "0.17.1", gpu="H200", page_size=16).block_size == 64
    kept = _vllm("deepseek-v2-lite", "0.17.1", gpu="H200", page_size=128)
    assert (kept.block_size, kept.num_gpu_blocks) == (128, 10_787)
    # Ampere has neither FlashMLA nor FlashInfer MLA: the block stays at 16 (TRITON_MLA)
    ampere = _vllm("deepseek-v2-lite", "0.17.1", gpu="A100-80GB")
    assert (ampere.backends, ampere.block_size, ampere.num_gpu_blocks) == (("TRITON_MLA",), 16, 86_302)


def test_0_17_sets_flashinfer_mla_and_its_block_on_sm100() -> None:
    # DeepSeek-V3 TP 8 bf16 on B200 (qk_nope_head_dim 128): FLASHINFER_MLA is set, a block of 32 or a multiple of 64
    # kept, anything else 64. --block-size 16 -> 64: 61 x 64 x 1,152 = 4,497,408 B, 9,549 blocks; 32 kept:
    # 61 x 32 x 1,152 = 2,248,704 B, 19,099 blocks; 0.18.1 keeps the given 16 (a backend that takes it)
    forced = _vllm("deepseek-v3", "0.17.1", gpu="B200", tp_size=8, page_size=16)
    assert (forced.backends, forced.block_size, forced.num_gpu_blocks) == (("FLASHINFER_MLA",), 64, 9_549)
    assert 40 * GIB // (61 * 64 * MLA_ROW) == 9_549
    kept = _vllm("deepseek-v3", "0.17.1", gpu="B200", tp_size=8, page_size=32)
    assert (kept.block_size, kept.num_gpu_blocks) == (32, 40 * GIB // (61 * 32 * MLA_ROW)) == (32, 19_099)
    assert _vllm("deepseek-v3", "0.18.1", gpu="B200", tp_size=8, page_size=16).block_size == 16
    # no --block-size: 0.17.1 starts at 16 and takes 64; 0.18.1 FLASHINFER_MLA's preferred 32
    assert _vllm("deepseek-v3", "0.17.1", gpu="B200", tp_size=8).block_size == 64
    assert _vllm("deepseek-v3", "0.18.1", gpu="B200", tp_size=8).block_size == 32


def test_0_17_mla_block_rule_by_gpu_and_head() -> None:
    v0171, v0181 = parse_release("0.17.1", VLLM), parse_release("0.18.1", VLLM)
    geometry = parse_hf_config(load_preset_config("deepseek-v3"))
    assert geometry.mla is not None
    b200, h200, a100 = vllm_device("B200"), vllm_device("H200"), vllm_device("A100-80GB")
    blocks = [mla_config_block(geometry, b200, given, v0171) for given in (None, 16, 32, 48, 128)]
    assert blocks == [64, 64, 32, 64, 128]
    # another qk_nope_head_dim on SM 10.x: CUTLASS_MLA's multiple of 128
    other = replace(geometry, mla=replace(geometry.mla, qk_nope_head_dim=64))
    assert [mla_config_block(other, b200, given, v0171) for given in (None, 64, 256)] == [128, 128, 256]
    assert [mla_config_block(geometry, h200, given, v0171) for given in (None, 32, 192)] == [64, 64, 192]
    assert mla_config_block(geometry, a100, None, v0171) == 16
    assert mla_config_block(geometry, b200, None, v0181) is None  # 0.18.1: the backend's preferred block
    dense = parse_hf_config(load_preset_config("llama-3.1-8b"))
    assert mla_config_block(dense, h200, None, v0171) is None


def test_0_17_takes_64_token_blocks_for_sparse_mla_whatever_is_given() -> None:
    # DeepSeek-V3.2 TP 8 bf16 on H200 with --block-size 128: FLASHMLA_SPARSE takes 64 exactly. A layer holds the
    # latent 64 x 1,152 = 73,728 B and the indexer's keys 64 x 132 = 8,448 B: 61 x 82,176 = 5,012,736 B a block,
    # 42,949,672,960 // 5,012,736 = 8,568 blocks (vLLM 0.17.1 answers the same)
    planned = _vllm("deepseek-v3.2", "0.17.1", gpu="H200", tp_size=8, page_size=128, kv_cache_dtype="bf16")
    assert (planned.block_size, planned.bytes_per_block, planned.num_gpu_blocks) == (64, 61 * (73_728 + 8_448), 8_568)
    assert _vllm("deepseek-v3.2", "0.18.1", gpu="H200", tp_size=8, page_size=128, kv_cache_dtype="bf16").block_size \
        == 128


def test_0_17_stores_deepseek_v32_fp8_as_fp8_ds_mla() -> None:
    # fp8_e4m3 on H200, TP 8, --block-size 64: 0.17.1 turns it into fp8_ds_mla (FLASHMLA_SPARSE), 656 B a token
    # (512 fp8 + 4 float32 scales + 64 bf16 RoPE): a latent page 64 x 656 = 41,984 B beside the indexer's 8,448 B,
    # 61 x 50,432 = 3,076,352 B a block, 42,949,672,960 // 3,076,352 = 13,961 blocks (golden/vllm-0.17.1:
    # dsa-deepseek-v3.2-tp8-fp8-p64). 0.18.1 keeps fp8_e4m3, which no Hopper sparse backend takes
    planned = _vllm("deepseek-v3.2", "0.17.1", gpu="H200", tp_size=8, page_size=64, kv_cache_dtype="fp8_e4m3")
    assert planned.launch.kv_cache_dtype == "fp8_ds_mla"
    assert planned.backends == ("DEEPSEEK_V32_INDEXER", "FLASHMLA_SPARSE")
    assert (planned.bytes_per_block, planned.num_gpu_blocks) == (61 * (41_984 + 8_448), 13_961)
    with pytest.raises(UnsupportedConfigurationError, match="No valid attention backend"):
        _vllm("deepseek-v3.2", "0.18.1", gpu="H200", tp_size=8, page_size=64, kv_cache_dtype="fp8_e4m3")
    latent = MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=576, head_size_v=576,
                              dtype=planned.layer_specs[1][1].dtype, cache_dtype_str="fp8_ds_mla")  # fmt: skip
    assert latent.page_size_bytes == 64 * 656 == 41_984


def test_0_17_hybrid_attention_keeps_the_aligned_block() -> None:
    # Falcon-H1-7B TP 1 on H200, no --block-size: 2 KV heads x (128 + 128) x 2 B = 1,024 B a token; a state
    # 3 x 3,584 x 2 + 24 x 128 x 256 x 2 = 1,594,368 B; the hybrid block 16 x cdiv(1,594,368, 16 x 1,024) = 1,568.
    # 0.17.1's attention layers keep it (page 1,605,632 B); 0.18.1's are set back to 16 (page 16,384 B) and scaled
    # to the state page when grouped. Each of the 44 tensors holds one attention and one Mamba layer's page (two
    # groups of 44): 42,949,672,960 // (44 x 1,605,632) = 607 blocks either way
    old = _vllm("falcon-h1-7b", "0.17.1", gpu="H200")
    new = _vllm("falcon-h1-7b", "0.18.1", gpu="H200")
    assert sorted(_spec_blocks(old)) == [1_568, 262_144] and sorted(_spec_blocks(new)) == [16, 262_144]
    assert old.num_gpu_blocks == new.num_gpu_blocks == 40 * GIB // (44 * 1_605_632) == 607


def test_0_17_aligns_a_blackwell_hybrid_of_256_wide_heads_to_32() -> None:
    # Qwen3.5-35B-A3B TP 4: 1 KV head x (256 + 256) x 2 B = 1,024 B a token; a GDN state 3 x 2,048 x 2 +
    # 8 x 128 x 128 x 4 = 536,576 B. H200: 16 x cdiv(536,576, 16,384) = 528 tokens, pages of 540,672 B, 4 groups of
    # 10 layers: 42,949,672,960 // 5,406,720 = 7,943 blocks. B200 (FlashInfer, heads of 256): 32 x cdiv(536,576,
    # 32,768) = 544 tokens, 557,056 B pages, 7,710 blocks (vLLM 0.17.1 answers both). 0.18.1 aligns to 16 on B200 too
    h200 = _vllm("qwen3.5-35b-a3b", "0.17.1", gpu="H200", tp_size=4)
    b200 = _vllm("qwen3.5-35b-a3b", "0.17.1", gpu="B200", tp_size=4)
    assert (max(_spec_blocks(h200)[1:]), h200.num_gpu_blocks) == (528, 40 * GIB // (10 * 540_672)) == (528, 7_943)
    assert (max(_spec_blocks(b200)[1:]), b200.num_gpu_blocks) == (544, 40 * GIB // (10 * 557_056)) == (544, 7_710)
    assert _vllm("qwen3.5-35b-a3b", "0.18.1", gpu="B200", tp_size=4).num_gpu_blocks == 7_943


def test_0_17_cannot_read_a_kimi_k2_config() -> None:
    # vLLM 0.17.1 pins transformers 4, which registers no kimi_k2, and its _CONFIG_REGISTRY lists none (0.18.1's reads
    # it as DeepseekV3Config): ModelConfig refuses before anything is sized
    with pytest.raises(UnsupportedConfigurationError, match="has model type `kimi_k2` but Transformers does not"):
        _vllm("kimi-k2", "0.17.1", tp_size=8)
    assert _vllm("kimi-k2", "0.18.1", tp_size=8).num_gpu_blocks > 0


def test_0_17_rules_are_listed_against_0_18() -> None:
    keys = {rule.key for rule in rules_differing(parse_release("0.17.1", VLLM), parse_release("0.18.1", VLLM))}
    assert {"vllm-mla-config-block", "vllm-dsa-fp8-ds-mla-cache", "vllm-hybrid-block-kept",
            "vllm-hybrid-blackwell-head-256-alignment", "vllm-config-registry-0.18.1"} <= keys  # fmt: skip
