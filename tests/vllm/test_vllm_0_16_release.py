"""vLLM 0.16.0: each release rule that sets it apart from 0.17.1, against a hand-computed expectation.

Sources (vLLM 0.16.0's own code): ``vllm/v1/core/kv_cache_utils.py get_kv_cache_configs`` (every worker gets the
global groups: a uniform-type group's block holds every stage's caches, and one request is checked against the
global groups; 0.17.1 projects them per worker with ``_project_kv_cache_groups_to_worker``:
``vllm-pp-projected-groups``) and ``vllm/transformers_utils/config.py _CONFIG_REGISTRY`` (no ``qwen3_5`` /
``qwen3_5_moe`` before 0.17.1: ``vllm-config-registry-0.17.1``). 0.17.1's own rules (``test_vllm_0_17_release.py``)
hold in 0.16.0 too. Each expectation was also answered by vLLM 0.16.0 itself through the bridge
(``golden/vllm-0.16.0/`` or a one-off case of the same settings).
"""

from __future__ import annotations

from typing import Any

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.core.releases import VLLM, parse_release, rules_differing
from kvstrategies.errors import InsufficientMemoryError, UnsupportedConfigurationError

GIB = 2**30
#: a DeepSeek-V3.2 layer's block of 64 tokens in fp8_ds_mla: the latent 64 x 656 B and the indexer's keys 64 x 132 B
DSA_LAYER_BLOCK = 64 * 656 + 64 * 132


def _vllm(preset: str, release: str, **fields: object) -> Any:
    case = parse_case({"preset": preset, "engine": "vllm", "vllm_version": release, "available_bytes": 40 * GIB,
                       **fields})  # fmt: skip
    return plan(case.settings, case.available_bytes).vllm


def test_0_16_sizes_a_stage_uniform_block_by_every_stage() -> None:
    # DeepSeek-V3.2 TP 4, PP 2, rank 1 (layers 31-60), fp8_e4m3 (stored as fp8_ds_mla in both), --block-size 64:
    # one uniform-type group of 61 layers x 50,432 B. 0.16.0 gives each worker the global spec: a block is
    # 61 x 50,432 = 3,076,352 B, 42,949,672,960 // 3,076,352 = 13,961 blocks, and the stage's 30 layers hold two
    # tensors each of 41,984 x 13,961 and 8,448 x 13,961 B. 0.17.1 projects the spec per stage: rank 0's
    # 31 x 50,432 = 1,563,392 B give 27,472 blocks, fewer than rank 1's 28,387
    fields: dict[str, object] = {"tp_size": 4, "pp_size": 2, "pp_rank": 1, "page_size": 64,
                                 "kv_cache_dtype": "fp8_e4m3"}
    old = _vllm("deepseek-v3.2", "0.16.0", **fields)
    assert (old.bytes_per_block, old.num_gpu_blocks) == (61 * DSA_LAYER_BLOCK, 13_961)
    assert 40 * GIB // (61 * DSA_LAYER_BLOCK) == 13_961
    assert len(old.tensors) == 60
    assert sorted({t.size for t in old.tensors}) == [64 * 132 * 13_961, 64 * 656 * 13_961]
    new = _vllm("deepseek-v3.2", "0.17.1", **fields)
    assert (new.bytes_per_block, new.num_gpu_blocks) == (30 * DSA_LAYER_BLOCK, 27_472)
    assert 40 * GIB // (31 * DSA_LAYER_BLOCK) == 27_472 < 40 * GIB // (30 * DSA_LAYER_BLOCK) == 28_387


def test_0_16_checks_one_request_against_the_whole_model() -> None:
    # Llama-3.1-8B PP 2 (16 layers a stage), --block-size 16, 12 GiB, 131,072 tokens: a page 16 x 8 x 128 x 2 x 2 =
    # 65,536 B. 0.16.0 checks the global group of 32 layers: 32 x 65,536 x 8,192 blocks = 16.0 GiB > 12 GiB, refused;
    # 0.17.1 checks each stage's 16 layers (8 GiB) and plans 12 GiB // (16 x 65,536) = 12,288 blocks
    fields: dict[str, object] = {"pp_size": 2, "pp_rank": 1, "page_size": 16, "available_bytes": 12 * GIB}
    with pytest.raises(InsufficientMemoryError, match=r"\(16\.0 GiB KV cache is needed"):
        _vllm("llama-3.1-8b", "0.16.0", **fields)
    assert _vllm("llama-3.1-8b", "0.17.1", **fields).num_gpu_blocks == 12 * GIB // (16 * 65_536) == 12_288


def test_0_16_cannot_read_a_qwen3_5_config() -> None:
    # 0.16.0's transformers 4 registers no qwen3_5_moe and its _CONFIG_REGISTRY lists none (0.17.1's reads it as
    # Qwen3_5MoeConfig): ModelConfig refuses before anything is sized
    with pytest.raises(UnsupportedConfigurationError, match="has model type `qwen3_5_moe` but Transformers does not"):
        _vllm("qwen3.5-35b-a3b", "0.16.0", tp_size=4)
    assert _vllm("qwen3.5-35b-a3b", "0.17.1", tp_size=4).num_gpu_blocks == 7_943


def test_0_16_rules_are_listed_against_0_17() -> None:
    keys = {rule.key for rule in rules_differing(parse_release("0.16.0", VLLM), parse_release("0.17.1", VLLM))}
    assert {"vllm-pp-projected-groups", "vllm-config-registry-0.17.1"} <= keys
    assert "vllm-mla-config-block" not in keys  # 0.17.1's own rules hold in 0.16.0 too
