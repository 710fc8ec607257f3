"""vLLM 0.14.1: each release rule that sets it apart from 0.15.1, against a hand-computed expectation.

Sources (vLLM 0.14.1's own code): ``vllm/v1/attention/backend.py AttentionBackend.supported_kv_cache_dtypes`` and
``vllm/v1/attention/backends/flash_attn.py FlashAttentionBackend.supports_kv_cache_dtype`` (``auto`` and fp8 only:
``--kv-cache-dtype bfloat16`` leaves no valid backend, ``vllm-bfloat16-cache-dtype``), ``vllm/platforms/cuda.py
CudaPlatformBase.check_and_update_config`` (CUTLASS_MLA and its 128-token block for every dense MLA model on SM 10.x:
``vllm-mla-blackwell-flashinfer``), ``vllm/config/vllm.py VllmConfig.__post_init__`` (async scheduling off at PP > 1:
``vllm-async-scheduling-with-pp``), ``vllm/config/cache.py CacheConfig`` (no ``mamba_cache_mode``:
``vllm-mamba-cache-mode``) and the state backends' missing ``get_name`` (``vllm-state-backend-names``). 0.15.1's
own rules (none against 0.16.0) and 0.16.0's hold in 0.14.1 too. Each expectation was also answered by vLLM 0.14.1
itself through the bridge (``golden/vllm-0.14.1/`` or a one-off case of the same settings).
"""

from __future__ import annotations

from typing import Any

import pytest

from kvstrategies import plan
from kvstrategies.case import parse_case
from kvstrategies.core.releases import VLLM, parse_release, rules_differing
from kvstrategies.errors import UnsupportedConfigurationError
from kvstrategies.vllm.strategies.document import vllm_plan_document

GIB = 2**30


def _plan(preset: str, release: str, **fields: object) -> Any:
    case = parse_case({"preset": preset, "engine": "vllm", "vllm_version": release, "available_bytes": 40 * GIB,
                       **fields})  # fmt: skip
    return plan(case.settings, case.available_bytes)


def test_0_14_refuses_a_bfloat16_cache_name_and_plans_auto() -> None:
    # golden/vllm-0.14.1/default-llama-3.1-8b-tp1-bf16-p1.json: no backend of 0.14.1 lists "bfloat16"; the model
    # dtype's cache (no --kv-cache-dtype: auto) plans as before, a one-off case answered live by 0.14.1: a 16-token
    # block of 32 layers x 16 x 8 heads x 128 x 2 (K, V) x 2 B = 2,097,152 B, 40 GiB // 2,097,152 = 20,480 blocks
    with pytest.raises(UnsupportedConfigurationError, match="No valid attention backend found for cuda"):
        _plan("llama-3.1-8b", "0.14.1", kv_cache_dtype="bf16", page_size=1)
    assert _plan("llama-3.1-8b", "0.15.1", kv_cache_dtype="bf16", page_size=1).vllm.num_gpu_blocks > 0
    auto = _plan("llama-3.1-8b", "0.14.1", page_size=16).vllm
    assert 40 * GIB // (32 * 16 * 8 * 128 * 2 * 2) == 20_480
    assert auto.num_gpu_blocks == 20_480


def test_0_14_names_cutlass_mla_for_a_bfloat16_mla_cache_on_blackwell() -> None:
    # golden/vllm-0.14.1/vllm-gpu-b200-deepseek-v3-tp8-bf16.json: the config set CUTLASS_MLA, so vLLM says so
    with pytest.raises(UnsupportedConfigurationError, match="Selected backend AttentionBackendEnum.CUTLASS_MLA is not"):
        _plan("deepseek-v3", "0.14.1", gpu="B200", tp_size=8, kv_cache_dtype="bf16")


def test_0_14_gives_every_dense_mla_model_cutlass_mla_on_blackwell() -> None:
    # golden/vllm-0.14.1/vllm-gpu-b200-deepseek-v3-tp8-fp8.json (--block-size 1, fp8_e4m3, TP 8, 40 GiB): CUTLASS_MLA
    # forces a multiple of 128: a block of 61 layers x 128 x 576 B = 4,497,408 B, 40 GiB // 4,497,408 = 9,549 blocks;
    # 0.15.1 sets FLASHINFER_MLA (qk_nope_head_dim 128) and 64: 61 x 64 x 576 = 2,248,704 B, 19,099 blocks
    fields: dict[str, object] = {"gpu": "B200", "tp_size": 8, "kv_cache_dtype": "fp8_e4m3", "page_size": 1}
    old = vllm_plan_document(_plan("deepseek-v3", "0.14.1", **fields))
    assert (old["attention_backends"], old["block_size"], old["num_gpu_blocks"]) == (["CUTLASS_MLA"], 128, 9_549)
    assert 40 * GIB // (61 * 128 * 576) == 9_549
    new = vllm_plan_document(_plan("deepseek-v3", "0.15.1", **fields))
    assert (new["attention_backends"], new["block_size"], new["num_gpu_blocks"]) == (["FLASHINFER_MLA"], 64, 19_099)
    assert 40 * GIB // (61 * 64 * 576) == 19_099


def test_0_14_turns_async_scheduling_off_at_pp_above_one() -> None:
    # golden/vllm-0.14.1/bridge-pp2-rank0-llama-3.1-70b-tp4-fp8-p16.json: async_scheduling False (0.15.1: True); the
    # V1 runner overlaps no batch at PP > 1 either way, so max_concurrent_batches is 2 in both and the blocks agree
    fields: dict[str, object] = {"tp_size": 4, "pp_size": 2, "pp_rank": 0, "page_size": 16,
                                 "kv_cache_dtype": "fp8_e4m3"}
    old = vllm_plan_document(_plan("llama-3.1-70b", "0.14.1", **fields))
    new = vllm_plan_document(_plan("llama-3.1-70b", "0.15.1", **fields))
    assert (old["vllm_settings"]["async_scheduling"], new["vllm_settings"]["async_scheduling"]) == (False, True)
    assert old["vllm_settings"]["max_concurrent_batches"] == new["vllm_settings"]["max_concurrent_batches"] == 2
    assert old["num_gpu_blocks"] == new["num_gpu_blocks"] == 131_072


def test_0_14_has_no_mamba_cache_mode_and_names_no_state_backend() -> None:
    # golden/vllm-0.14.1/hybrid-linear-qwen3-next-80b-a3b-tp2-fp8-p64.json: the same 6,520 blocks of 1,072 tokens as
    # 0.15.1, but no mamba_cache_mode in the settings or the Mamba spec, and only FLASH_ATTN named (GDN_ATTN has no
    # get_name of its own in 0.14.1)
    fields: dict[str, object] = {"tp_size": 2, "page_size": 64, "kv_cache_dtype": "fp8_e4m3"}
    old = vllm_plan_document(_plan("qwen3-next-80b-a3b", "0.14.1", **fields))
    new = vllm_plan_document(_plan("qwen3-next-80b-a3b", "0.15.1", **fields))
    assert (old["num_gpu_blocks"], old["block_size"]) == (new["num_gpu_blocks"], new["block_size"]) == (6_520, 1_072)
    assert (old["vllm_settings"]["mamba_cache_mode"], new["vllm_settings"]["mamba_cache_mode"]) == (None, "none")
    mamba = [g["spec"] for g in old["kv_cache_groups"] if g["spec"]["kind"] == "MambaSpec"]
    assert mamba and all("mamba_cache_mode" not in spec for spec in mamba)
    assert (old["attention_backends"], new["attention_backends"]) == (["FLASH_ATTN"], ["GDN_ATTN", "FLASH_ATTN"])


def test_0_14_rules_are_listed_against_0_15() -> None:
    keys = {rule.key for rule in rules_differing(parse_release("0.14.1", VLLM), parse_release("0.15.1", VLLM))}
    assert keys == {"vllm-bfloat16-cache-dtype", "vllm-mla-blackwell-flashinfer", "vllm-async-scheduling-with-pp",
                    "vllm-mamba-cache-mode", "vllm-state-backend-names"}
