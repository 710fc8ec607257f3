"""vLLM 0.12.0: each release rule that sets it apart from 0.13.0, against a hand-computed expectation.

Sources (vLLM 0.12.0's own code): ``vllm/platforms/cuda.py CudaPlatformBase.check_and_update_config`` (CUTLASS_MLA
set through ``VLLM_ATTENTION_BACKEND`` on SM 10.0 alone, sparse models included: ``vllm-cutlass-mla-sm10-family``),
``CudaPlatformBase.get_attn_backend_cls`` (its refusal lists the selector's fields: ``vllm-selector-config-wording``)
and ``vllm/model_executor/models/kimi_linear.py`` (``MLAModules`` built without ``indexer_rotary_emb``:
``vllm-model-builds-0.13.0``). 0.13.0's rules hold in 0.12.0 too. Each expectation was also answered by vLLM 0.12.0
itself through the bridge (``golden/vllm-0.12.0/``).
"""

from __future__ import annotations

from typing import Any

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.core.releases import VLLM, parse_release, rules_differing
from kvstrategies.errors import UnsupportedConfigurationError

GIB = 2**30
#: a DeepSeek-V3.2 layer's block of 64 tokens in fp8_ds_mla: the latent 64 x 656 B and the indexer's keys 64 x 132 B
DSA_LAYER_BLOCK = 64 * 656 + 64 * 132


def _vllm(preset: str, release: str, **fields: object) -> Any:
    case = parse_case({"preset": preset, "engine": "vllm", "vllm_version": release, "available_bytes": 40 * GIB,
                       **fields})  # fmt: skip
    return plan(case.settings, case.available_bytes).vllm


def test_0_12_lists_the_selector_fields_in_its_refusal() -> None:
    # golden/vllm-0.12.0/default-llama-3.1-8b-tp1-bf16-p1.json: "... found for cuda with head_size: 128, dtype: ..."
    # (0.13.0: "with AttentionSelectorConfig(head_size=128, ...")
    with pytest.raises(UnsupportedConfigurationError, match="found for cuda with head_size: 128, "):
        _vllm("llama-3.1-8b", "0.12.0", kv_cache_dtype="bf16", page_size=1)
    with pytest.raises(UnsupportedConfigurationError, match=r"found for cuda with AttentionSelectorConfig\("):
        _vllm("llama-3.1-8b", "0.13.0", kv_cache_dtype="bf16", page_size=1)


def test_0_12_sets_cutlass_mla_on_sm100_alone_sparse_models_included() -> None:
    # golden/vllm-0.12.0/dsa-deepseek-v3.2-tp8-fp8-trtllm-p64.json (B200, SM 10.0): CUTLASS_MLA is set for the sparse
    # model and refuses it; 0.13.0 leaves it to FLASHMLA_SPARSE in fp8_ds_mla: a block of 61 x 50,432 = 3,076,352 B,
    # 40 GiB // 3,076,352 = 13,961 blocks
    fields: dict[str, object] = {"tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 64,
                                 "platform": {"is_blackwell": True, "is_sm100": True}}
    with pytest.raises(UnsupportedConfigurationError, match="CUTLASS_MLA is not valid .*'sparse not supported'"):
        _vllm("deepseek-v3.2", "0.12.0", **fields)
    assert _vllm("deepseek-v3.2", "0.13.0", **fields).num_gpu_blocks == 40 * GIB // (61 * DSA_LAYER_BLOCK) == 13_961
    # golden/vllm-0.12.0/vllm-gpu-b300-deepseek-v3-tp8-bf16.json (B300, SM 10.3): no backend is set, so the selector
    # refuses bfloat16 with its own words (0.13.0 names the CUTLASS_MLA it set)
    with pytest.raises(UnsupportedConfigurationError, match="found for cuda with head_size: 576, "):
        _vllm("deepseek-v3", "0.12.0", gpu="B300", tp_size=8, kv_cache_dtype="bf16")
    with pytest.raises(UnsupportedConfigurationError, match="Selected backend AttentionBackendEnum.CUTLASS_MLA"):
        _vllm("deepseek-v3", "0.13.0", gpu="B300", tp_size=8, kv_cache_dtype="bf16")


def test_0_12_cannot_build_kimi_linear() -> None:
    # golden/vllm-0.12.0/hybrid-linear-kimi-linear-48b-a3b-tp4-fp8-p64.json; 0.13.0 builds it and plans 11,096 blocks
    fields: dict[str, object] = {"tp_size": 4, "kv_cache_dtype": "fp8_e4m3", "page_size": 64}
    with pytest.raises(UnsupportedConfigurationError, match="missing 1 required positional argument: 'indexer_rotary"):
        _vllm("kimi-linear-48b-a3b", "0.12.0", **fields)
    assert _vllm("kimi-linear-48b-a3b", "0.13.0", **fields).num_gpu_blocks == 11_096


def test_0_12_rules_are_listed_against_0_13() -> None:
    keys = {rule.key for rule in rules_differing(parse_release("0.12.0", VLLM), parse_release("0.13.0", VLLM))}
    assert keys == {"vllm-cutlass-mla-sm10-family", "vllm-selector-config-wording", "vllm-model-builds-0.13.0"}
