"""SGLang's ``--chunked-prefill-size -1`` as vLLM's ``--no-enable-chunked-prefill`` (rule
``vllm-chunked-prefill-off``), each rule against a hand-computed expectation.

Sources (vLLM 0.33.0 and 0.34.0): ``vllm/engine/arg_utils.py EngineArgs._set_default_args`` (without chunked
prefill ``max_num_batched_tokens`` becomes ``max(max_model_len, the default)``), ``vllm/config/scheduler.py
SchedulerConfig.verify_max_model_len`` (a given one below ``max_model_len`` is refused) and
``vllm/v1/kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes`` (a sliding layer holds
``window - 1 + max_in_flight_tokens`` tokens a request, at most ``max_model_len``). Each expectation is also
vLLM's own answer through the bridge
(``golden/vllm-0.34.0/release-swa-cap-chunk-off-gpt-oss-20b-tp1-bf16-p16-mrr64.json``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.errors import UnsupportedConfigurationError
from kvstrategies.vllm.strategies.engine_args import vllm_deployment
from kvstrategies.vllm.strategies.launch import resolve_launch

GIB = 2**30


def _case(release: str = "0.34.0", **fields: Any) -> Any:
    base: dict[str, Any] = {"preset": "gpt-oss-20b", "engine": "vllm", "vllm_version": release, "page_size": 16,
                            "kv_cache_dtype": "bf16", "available_bytes": 40 * GIB, "chunked_prefill_size": -1,
                            "max_running_requests": 64, "disable_radix_cache": True}  # fmt: skip
    return parse_case({**base, **fields})


def test_chunked_prefill_off_batches_a_whole_prompt() -> None:
    case = _case()
    deployment = vllm_deployment(case.settings, case.available_bytes)
    assert deployment.enable_chunked_prefill is False and deployment.max_num_batched_tokens is None
    assert deployment.engine_arguments()["enable_chunked_prefill"] is False
    answer = plan(case.settings, case.available_bytes).vllm
    assert answer is not None
    # max_num_batched_tokens = max(131,072 max_model_len, 8,192 on H200) = 131,072; two batches in flight (async
    # scheduling): 262,144 tokens; a sliding layer (window 128) holds min(127 + 262,144, 131,072) = 131,072 tokens a
    # request, cdiv(131,072, 16) + 1 = 8,193 blocks (chunked, 8,192 tokens a batch: min(127 + 16,384, 131,072) =
    # 16,511 tokens, 1,033 blocks); the blocks are the cache's: 12 layers x 2 x 16 x 8 x 64 x 2 B = 393,216 B a
    # block, 40 GiB // that = 109,226 (vLLM 0.34.0 and 0.33.0 record 8,193 and 109,226)
    assert answer.launch.max_num_batched_tokens == 131_072
    assert answer.launch.settings_document()["enable_chunked_prefill"] is False
    sliding = next(g for g in answer.groups if type(g.spec).__name__ == "SlidingWindowSpec")
    assert -(-min(127 + 2 * 131_072, 131_072) // 16) + 1 == 8_193
    assert answer.capacity.blocks_per_request == 8_193 + 8_192
    assert sliding.spec.page_size_bytes == 2 * 16 * 8 * 64 * 2
    assert answer.num_gpu_blocks == 40 * GIB // (12 * 32_768) == 109_226
    on = _case(chunked_prefill_size=8192)
    chunked = plan(on.settings, on.available_bytes).vllm
    assert chunked is not None and chunked.capacity.blocks_per_request == 1_033 + 8_192


def test_a_given_batch_below_the_length_is_refused_in_vllms_words() -> None:
    # --no-enable-chunked-prefill with --max-num-batched-tokens 4096 and max_model_len 8192: verify_max_model_len
    case = _case(preset="llama-3.1-8b", context_length=8192)
    deployment = vllm_deployment(case.settings, case.available_bytes)

    with pytest.raises(UnsupportedConfigurationError, match=r"max_num_batched_tokens \(4096\) is smaller than "
                                                            r"max_model_len \(8192\)"):  # fmt: skip
        resolve_launch(replace(deployment, max_num_batched_tokens=4096), 8192, is_mamba_hybrid=False, version="0.34.0")
    kept = resolve_launch(replace(deployment, max_num_batched_tokens=16384), 8192, is_mamba_hybrid=False,
                          version="0.34.0")  # fmt: skip
    assert kept.max_num_batched_tokens == 16_384


def test_chunked_prefill_off_is_mapped_from_0_33_0() -> None:
    case = _case("0.32.0")
    with pytest.raises(UnsupportedConfigurationError, match=r"chunked_prefill_size -1: .*mapped for vLLM 0\.33\.0"):
        plan(case.settings, case.available_bytes)


def test_the_planner_takes_no_enable_chunked_prefill(capsys: Any) -> None:
    import json

    from kvstrategies.cli import main

    # the case above as a pasted vLLM command: the same 109,226 blocks and 16,385 blocks a request
    assert main(["plan", "--json", "--", "vllm", "serve", "openai/gpt-oss-20b", "--no-enable-chunked-prefill",
                 "--kv-cache-memory-bytes", "40G", "--max-num-seqs", "64", "--no-enable-prefix-caching",
                 "--block-size", "16"]) == 0  # fmt: skip
    document = json.loads(capsys.readouterr().out)["plan"]
    assert document["num_gpu_blocks"] == 109_226
    assert document["vllm_settings"]["max_num_batched_tokens"] == 131_072
    assert document["vllm_settings"]["enable_chunked_prefill"] is False
    base = ["plan", "gpt-oss-20b", "--engine", "vllm", "--kv-cache-memory-bytes", "40G", "--no-enable-chunked-prefill"]
    assert main([*base, "--vllm-version", "0.32.0"]) != 0
    assert "--no-enable-chunked-prefill is planned for vLLM 0.33.0" in capsys.readouterr().err
    assert main([*base, "--max-num-batched-tokens", "262144"]) != 0
    assert "give one of them" in capsys.readouterr().err


def test_a_given_batch_of_exactly_the_length_is_kept() -> None:
    case = _case(preset="llama-3.1-8b", context_length=8192)
    deployment = vllm_deployment(case.settings, case.available_bytes)
    kept = resolve_launch(replace(deployment, max_num_batched_tokens=8192), 8192, is_mamba_hybrid=False,
                          version="0.34.0")  # fmt: skip
    assert kept.max_num_batched_tokens == 8_192
