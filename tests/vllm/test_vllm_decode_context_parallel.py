"""vLLM's ``--decode-context-parallel-size`` (a case's ``dcp_size``), each rule against a hand-computed expectation.

Sources (vLLM 0.33.0 and 0.34.0): ``vllm/v1/kv_cache_interface.py FullAttentionSpec.max_memory_usage_bytes`` (an
attention cache is ``dcp_sharded``: a request at ``max_model_len`` L holds ``cdiv(L, D)`` tokens on a rank), ``vllm/
v1/core/kv_cache_utils.py get_kv_cache_capacity`` (tokens = concurrency x L), ``vllm/config/model.py
ModelConfig.verify_with_parallel_config`` (GQA / MQA needs TP above the KV heads), the selector's ``use_dcp``
(``tools/list_vllm_backends.py``: rows ending in ``d``) and ``vllm/v1/attention/backends/mla/flashmla_sparse.py
FlashMLASparseImpl.__init__`` (0.33.0 refuses a 16-bit sparse cache under DCP). Each expectation is also vLLM's
answer through the bridge (``golden/vllm-0.34.0/bridge-dcp*.json`` and ``release-*dcp*.json``).
"""

from __future__ import annotations

from typing import Any

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.errors import UnsupportedConfigurationError

GIB = 2**30


def _plan(release: str = "0.34.0", **fields: Any) -> Any:
    base: dict[str, Any] = {"preset": "deepseek-v3", "engine": "vllm", "vllm_version": release, "tp_size": 8,
                            "dcp_size": 2, "page_size": 64, "kv_cache_dtype": "bf16",
                            "available_bytes": 40 * GIB}  # fmt: skip
    case = parse_case({**base, **fields})
    return plan(case.settings, case.available_bytes).vllm


def test_a_block_holds_d_times_its_tokens_of_a_request() -> None:
    # DeepSeek-V3 bf16, TP 8, DCP 2, blocks of 64: 61 layers x 64 x 576 x 2 B = 4,497,408 B a block (the latent is
    # whole on every rank), 40 GiB // 4,497,408 = 9,549 blocks; a request at 163,840 tokens holds cdiv(163,840, 2) =
    # 81,920 on a rank: 1,280 blocks; 9,549 / 1,280 = 7.46015625 requests, 7.46015625 x 163,840 = 1,222,272 tokens
    # (= 9,549 x 64 x 2; vLLM 0.34.0 and 0.33.0 log the same through the bridge)
    answer = _plan()
    assert answer.bytes_per_block == 61 * 64 * 576 * 2 == 4_497_408
    assert answer.num_gpu_blocks == 40 * GIB // 4_497_408 == 9_549
    assert answer.capacity.blocks_per_request == 1_280
    assert answer.capacity.tokens == 1_222_272 == 9_549 * 64 * 2
    assert answer.launch.settings_document()["decode_context_parallel_size"] == 2
    assert _plan(dcp_size=1).capacity.tokens == 611_136  # 9,549 x 64: the same blocks, half the tokens


def test_dcp_picks_among_the_backends_that_take_it() -> None:
    # DeepSeek-V3.2 bf16 on H200: FLASH_ATTN_MLA_SPARSE leads without DCP; with it only FLASHMLA_SPARSE is valid
    # (the selector's use_dcp row '9.0|mla|bfloat16|576|auto|sd'); fp8_e4m3 has no backend under DCP
    assert _plan(preset="deepseek-v3.2", dcp_size=4).backends[-1] == "FLASHMLA_SPARSE"
    assert _plan(preset="deepseek-v3.2", dcp_size=1).backends[-1] == "FLASH_ATTN_MLA_SPARSE"
    with pytest.raises(UnsupportedConfigurationError, match=r"No valid attention backend .*use_dcp=True"):
        _plan(preset="deepseek-v3.2", kv_cache_dtype="fp8_e4m3")
    with pytest.raises(UnsupportedConfigurationError, match="DCP for FlashMLA sparse requires an fp8_ds_mla"):
        _plan("0.33.0", preset="deepseek-v3.2", dcp_size=4)  # 0.33.0's FlashMLASparseImpl refuses the bf16 path


def test_gqa_needs_tp_above_its_kv_heads() -> None:
    words = r"requires `--tensor-parallel-size` \(8\) to be greater than the model's total number of KV heads \(8\)"
    with pytest.raises(UnsupportedConfigurationError, match=words):
        _plan(preset="llama-3.1-70b", page_size=16)
    with pytest.raises(UnsupportedConfigurationError, match="MLA models only"):
        _plan(preset="llama-3.1-8b", tp_size=16, page_size=16)  # 32 heads over TP 16, 8 KV heads: not modelled


def test_dcp_is_planned_from_0_33_0() -> None:
    with pytest.raises(UnsupportedConfigurationError, match=r"dcp_size 2: .*planned for vLLM 0\.33\.0"):
        _plan("0.32.0")


def test_plan_and_a_pasted_command_take_dcp(capsys: pytest.CaptureFixture[str]) -> None:
    # the same launch as the case above through plan --engine vllm: 1,222,272 tokens on 40 GiB
    from kvstrategies.cli.app import main

    argv = ["plan", "deepseek-v3", "--engine", "vllm", "--kv-cache-memory-bytes", "40G", "--tp", "8",
            "--block-size", "64", "--kv-cache-dtype", "auto"]  # fmt: skip
    assert main([*argv, "--dcp", "2"]) == 0
    out = capsys.readouterr().out
    assert "TP 8 x PP 1, DCP 2" in out and "GPU KV cache size: 1,222,272 tokens" in out
    assert main(["plan", "--kv-cache-memory-bytes", "40G", "--", "vllm", "serve", "deepseek-ai/DeepSeek-V3", "-tp",
                 "8", "--block-size", "64", "--decode-context-parallel-size", "2"]) == 0  # fmt: skip
    assert "GPU KV cache size: 1,222,272 tokens" in capsys.readouterr().out
