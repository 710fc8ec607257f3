"""vLLM 0.15.1: no release rule sets it apart from 0.16.0; 0.16.0's own two hold in it, against hand-computed
expectations.

Sources (vLLM 0.15.1's own code): ``vllm/v1/core/kv_cache_utils.py get_kv_cache_configs`` is 0.16.0's line for line
(every worker gets the global groups: ``vllm-pp-projected-groups`` holds from 0.17.1 only) and
``vllm/transformers_utils/config.py _CONFIG_REGISTRY`` lists no ``qwen3_5`` / ``qwen3_5_moe`` (as 0.16.0's:
``vllm-config-registry-0.17.1``). What else differs from 0.16.0 in the modules the bridge drives is wording: the
backend choice's log line (``vllm/platforms/cuda.py``: a tuple, no full stop) and the ``VllmConfig`` fields a
refusal's pydantic tail quotes. Each expectation was also answered by vLLM 0.15.1 itself through the bridge
(``golden/vllm-0.15.1/`` or a one-off case of the same settings).
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


def test_0_15_sizes_a_stage_uniform_block_by_every_stage() -> None:
    # DeepSeek-V3.2 TP 4, PP 2, rank 1, fp8_e4m3 (stored as fp8_ds_mla), --block-size 64 (golden/vllm-0.15.1/
    # dsa-deepseek-v3.2-pp2-rank1-tp4-fp8-p64.json): the global group of 61 layers x 50,432 B a block, as in 0.16.0:
    # 42,949,672,960 // (61 x 50,432 = 3,076,352) = 13,961 blocks
    fields: dict[str, object] = {"tp_size": 4, "pp_size": 2, "pp_rank": 1, "page_size": 64,
                                 "kv_cache_dtype": "fp8_e4m3"}
    old = _vllm("deepseek-v3.2", "0.15.1", **fields)
    assert (old.bytes_per_block, old.num_gpu_blocks) == (61 * DSA_LAYER_BLOCK, 13_961)
    assert 40 * GIB // (61 * DSA_LAYER_BLOCK) == 13_961
    newer = _vllm("deepseek-v3.2", "0.16.0", **fields)
    assert (newer.bytes_per_block, newer.num_gpu_blocks) == (old.bytes_per_block, old.num_gpu_blocks)


def test_0_15_checks_one_request_against_the_whole_model() -> None:
    # Llama-3.1-8B PP 2, --block-size 16, 12 GiB, 131,072 tokens (a one-off case answered live by 0.15.1): the page
    # 16 x 8 x 128 x 2 x 2 = 65,536 B; the global group's 32 layers x 65,536 x 8,192 blocks = 16.0 GiB > 12 GiB
    fields: dict[str, object] = {"pp_size": 2, "pp_rank": 1, "page_size": 16, "available_bytes": 12 * GIB}
    assert 16 * GIB == 32 * 65_536 * (131_072 // 16)
    with pytest.raises(InsufficientMemoryError, match=r"\(16\.0 GiB KV cache is needed"):
        _vllm("llama-3.1-8b", "0.15.1", **fields)


def test_0_15_cannot_read_a_qwen3_5_config() -> None:
    # golden/vllm-0.15.1/hybrid-linear-qwen3.5-35b-a3b-*.json: transformers 4 and 0.15.1's _CONFIG_REGISTRY know no
    # qwen3_5_moe, so ModelConfig refuses it before anything is sized
    with pytest.raises(UnsupportedConfigurationError, match="has model type `qwen3_5_moe` but Transformers does not"):
        _vllm("qwen3.5-35b-a3b", "0.15.1", tp_size=4)


def test_0_15_has_no_rule_of_its_own_against_0_16() -> None:
    assert not rules_differing(parse_release("0.15.1", VLLM), parse_release("0.16.0", VLLM))
    keys = {rule.key for rule in rules_differing(parse_release("0.15.1", VLLM), parse_release("0.17.1", VLLM))}
    assert keys == {"vllm-pp-projected-groups", "vllm-config-registry-0.17.1"}
