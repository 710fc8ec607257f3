"""vLLM 0.13.0: each release rule that sets it apart from 0.14.1, against a hand-computed expectation.

Sources (vLLM 0.13.0's own code): ``vllm/v1/kv_cache_interface.py FullAttentionSpec`` (no ``head_size_v``:
``vllm-attention-head-size-v``), ``vllm/config/scheduler.py SchedulerConfig.async_scheduling`` (False:
``vllm-async-scheduling-default``), ``vllm/envs.py VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE`` (0 by default,
so ``VllmConfig.__post_init__`` turns the hybrid manager off for Llama-4: ``vllm-chunked-local-with-hybrid-manager``)
and ``vllm/v1/core/kv_cache_utils.py get_kv_cache_configs`` (one request checked against each worker's own layer
specs before grouping: ``vllm-memory-check-from-groups``; ``get_kv_cache_groups`` reads full-attention specs that
merge as one spec, so a pipeline stage's block is its own layers' pages); its merged block-FP8 ``gate_up_proj``
refusal (``vllm-fp8-merged-block-mismatch``) is tested in ``test_vllm_refusals.py``. 0.14.1's rules hold in 0.13.0
too. Each expectation was also answered by vLLM 0.13.0 itself through the bridge (``golden/vllm-0.13.0/``).
"""

from __future__ import annotations

from typing import Any

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.core.releases import VLLM, parse_release, rules_differing
from kvstrategies.errors import InsufficientMemoryError
from kvstrategies.vllm.strategies.document import vllm_plan_document

GIB = 2**30
#: Llama-4-Scout's page at TP 8, fp8, 64-token blocks: 64 x 1 KV head x 128 x 2 (K, V) x 1 B
SCOUT_PAGE = 64 * 1 * 128 * 2


def _doc(preset: str, release: str, **fields: object) -> Any:
    case = parse_case({"preset": preset, "engine": "vllm", "vllm_version": release, "available_bytes": 40 * GIB,
                       **fields})  # fmt: skip
    return vllm_plan_document(plan(case.settings, case.available_bytes))


def test_0_13_specs_record_no_head_size_v_and_async_scheduling_is_off() -> None:
    # golden/vllm-0.13.0/default-llama-3.1-8b-tp1-fp8-p1.json: a 16-token page of 16 x 8 x 128 x 2 x 1 B = 32,768 B,
    # 32 layers: 40 GiB // 1,048,576 = 40,960 blocks in both; 0.13.0's spec has no head_size_v and its scheduler
    # no async default (one batch in flight)
    fields: dict[str, object] = {"kv_cache_dtype": "fp8_e4m3", "page_size": 1}
    old, new = _doc("llama-3.1-8b", "0.13.0", **fields), _doc("llama-3.1-8b", "0.14.1", **fields)
    assert old["num_gpu_blocks"] == new["num_gpu_blocks"] == 40 * GIB // (32 * 16 * 8 * 128 * 2) == 40_960
    assert "head_size_v" not in old["layer_specs"][0]["spec"] and new["layer_specs"][0]["spec"]["head_size_v"] == 128
    assert (old["vllm_settings"]["async_scheduling"], old["vllm_settings"]["max_concurrent_batches"]) == (False, 1)
    assert (new["vllm_settings"]["async_scheduling"], new["vllm_settings"]["max_concurrent_batches"]) == (True, 2)


def test_0_13_turns_the_hybrid_manager_off_for_chunked_local_attention() -> None:
    # golden/vllm-0.13.0/swa-llama-4-scout-tp8-fp8-p64-ratio1.0.json (10,485,760 tokens): the 48 layers in one group,
    # a block of 48 x 16,384 = 786,432 B, 40 GiB // 786,432 = 54,613 blocks; 0.14.1 keeps four groups of 12 layers:
    # 12 x 16,384 = 196,608 B, 218,453 blocks
    fields: dict[str, object] = {"tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 64,
                                 "swa_full_tokens_ratio": 1.0}
    old, new = _doc("llama-4-scout", "0.13.0", **fields), _doc("llama-4-scout", "0.14.1", **fields)
    assert old["vllm_settings"]["disable_hybrid_kv_cache_manager"] is True
    assert old["num_gpu_blocks"] == 40 * GIB // (48 * SCOUT_PAGE) == 54_613
    assert new["num_gpu_blocks"] == 40 * GIB // (12 * SCOUT_PAGE) == 218_453


def test_0_13_checks_one_request_against_the_layer_specs() -> None:
    # the same case: 0.13.0 checks the layer specs before grouping, so the 36 chunked layers count their chunk and
    # the 12 global ones 10,485,760 / 64 = 163,840 blocks each: 12 x 163,840 x 16,384 B = 30 GiB (plus the chunks)
    # fits 40 GiB; the groups keep every layer as full attention, 48 x 163,840 x 16,384 = 120 GiB, which a release
    # checking the groups refuses (0.14.1 with --disable-hybrid-kv-cache-manager)
    assert 12 * 163_840 * SCOUT_PAGE == 30 * GIB and 48 * 163_840 * SCOUT_PAGE == 120 * GIB
    fields: dict[str, object] = {"tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 64,
                                 "swa_full_tokens_ratio": 1.0}
    assert _doc("llama-4-scout", "0.13.0", **fields)["num_gpu_blocks"] == 54_613
    with pytest.raises(InsufficientMemoryError, match=r"\(120\.0 GiB KV cache is needed"):
        _doc("llama-4-scout", "0.14.1", disable_hybrid_swa_memory=True, **fields)


def test_0_13_sizes_a_merged_full_attention_stage_by_its_own_layers() -> None:
    # golden/vllm-0.13.0/release-swa-stage-llama-4-scout-tp4-pp2-rank0-fp8-p16.json (PP 2, rank 0, 24 layers, TP 4):
    # the specs merge as one full-attention spec, so the block is the stage's 24 x 8,192 B (16 x 2 heads x 128 x 2)
    # = 196,608 B: 40 GiB // 196,608 = 218,453 blocks, not a block of both stages' 48 layers
    fields: dict[str, object] = {"tp_size": 4, "pp_size": 2, "pp_rank": 0, "kv_cache_dtype": "fp8_e4m3",
                                 "page_size": 16, "context_length": 131_072}
    old = _doc("llama-4-scout", "0.13.0", **fields)
    assert old["num_gpu_blocks"] == 40 * GIB // (24 * 16 * 2 * 128 * 2) == 218_453


def test_0_13_rules_are_listed_against_0_14() -> None:
    from kvstrategies.vllm.planner import load_refusals  # registers vllm-fp8-merged-block-mismatch

    assert load_refusals.FP8_MERGED_MISMATCH_ALLOWED.key == "vllm-fp8-merged-block-mismatch"
    keys = {rule.key for rule in rules_differing(parse_release("0.13.0", VLLM), parse_release("0.14.1", VLLM))}
    assert keys == {"vllm-attention-head-size-v", "vllm-async-scheduling-default",
                    "vllm-chunked-local-with-hybrid-manager", "vllm-memory-check-from-groups",
                    "vllm-fp8-merged-block-mismatch"}
