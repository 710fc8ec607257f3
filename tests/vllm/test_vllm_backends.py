"""vLLM's attention backend and block size per GPU family, each against a hand-computed expectation.

Sources (vLLM 0.33.0): ``vllm/platforms/cuda.py _get_backend_priorities`` and
``CudaPlatformBase.get_valid_backends`` (which backend), ``vllm/v1/attention/backend.py
AttentionBackend.get_preferred_block_size`` (16 when the backend's kernel blocks take it, else the
smallest), each backend's ``get_supported_kernel_block_sizes`` and ``supported_kv_cache_layouts``
(``vllm/v1/attention/backends/``), ``vllm/v1/attention/backends/mla/triton_mla.py
TritonMLAImpl.__init__`` (its refusals). The table the strategies read was written by
``tools/list_vllm_backends.py`` from those classes; the recordings of ``cases/vllm/vllm-gpu-*``
(``golden/vllm-0.33.0/``) are vLLM's whole answer for the same deployments.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvstrategies import plan
from kvstrategies.case import load_case, parse_case
from kvstrategies.core.releases import NEWEST_VLLM, VLLM_RELEASE_LINES, parse_release
from kvstrategies.errors import UnsupportedConfigurationError
from kvstrategies.vllm.strategies.backend_tables import TABLES
from kvstrategies.vllm.strategies.backends import MLA_CONFIG_BLOCK, attention_backend, profile_key
from kvstrategies.vllm.strategies.devices import DEVICES, vllm_device

GIB = 2**30
ROOT = Path(__file__).resolve().parents[2]
#: DeepSeek-V3 / Kimi-K2: 61 MLA layers; DeepSeek-V2-Lite: 27; one latent row 576 elements
MLA_ROW = 576
ODD = 40 * GIB + 12_345_000


def _vllm(preset: str, **fields: object) -> Any:
    fields = {"vllm_version": "0.33.0", **fields}  # the numbers below are 0.33.0's unless a test names 0.34.0
    case = parse_case({"preset": preset, "engine": "vllm", "available_bytes": 40 * GIB, **fields})
    return plan(case.settings, case.available_bytes).vllm


def _geometry(preset: str) -> Any:
    return parse_case({"preset": preset, "engine": "vllm", "available_bytes": GIB}).settings.geometry


def _recorded(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((ROOT / "golden" / "vllm-0.33.0" / f"{name}.json").read_text("utf-8"))
    return document


# ---- Blackwell B200 / B300 (SM 10.x): FLASHINFER_MLA, kernel blocks [32, 64] -> 32 ----------------------


def test_b200_mla_without_block_size_takes_flashinfer_mlas_32() -> None:
    planned = _vllm("deepseek-v3", tp_size=8, gpu="B200")
    # get_preferred_block_size(16): 16 is not in FlashInferMLABackend's [32, 64] -> min = 32
    assert (planned.backends, planned.block_size) == (("FLASHINFER_MLA",), 32)
    # page 32 x 576 x 2 B = 36,864 B; a block across 61 layers 2,248,704 B; 40 GiB // that = 19,099
    assert planned.stage_groups[0].spec.page_size_bytes == 32 * MLA_ROW * 2 == 36_864
    assert planned.num_gpu_blocks == 40 * GIB // (61 * 36_864) == 19_099
    recorded = _recorded("vllm-gpu-b200-deepseek-v3-tp8-bf16")
    assert (recorded["block_size"], recorded["num_gpu_blocks"]) == (32, 19_099)


def test_b200_mla_fp8_and_kimi_take_32_too() -> None:
    for preset in ("deepseek-v3", "kimi-k2"):
        planned = _vllm(preset, tp_size=8, gpu="B200", kv_cache_dtype="fp8_e4m3")
        # fp8: 32 x 576 x 1 B = 18,432 B a page; 40 GiB // (61 x 18,432) = 38,199 (64-token blocks gave 19,099)
        assert (planned.backends[0], planned.block_size, planned.num_gpu_blocks) == ("FLASHINFER_MLA", 32, 38_199)


def test_b200_odd_budget_loses_one_block_of_tokens_against_16() -> None:
    planned = _vllm("deepseek-v2-lite", gpu="B200", available_bytes=ODD, context_length=8192)
    # 27 layers x 32 x 576 x 2 B = 995,328 B a block: ODD // that = 43,163 blocks; 8192 / 32 = 256 a request;
    # tokens int(43,163 / 256 x 8192) = 1,381,216 (16-token blocks: 86,327 x 16 = 1,381,232, one block more)
    assert (planned.block_size, planned.num_gpu_blocks) == (32, 43_163)
    assert planned.capacity.tokens == 43_163 * 32 == 1_381_216
    assert _recorded("vllm-gpu-b200-deepseek-v2-lite-tp1-bf16-odd-budget")["kv_cache_size_tokens"] == 1_381_216


def test_b200_given_block_size_64_is_kept() -> None:
    planned = _vllm("deepseek-v3", tp_size=8, gpu="B200", page_size=64)
    assert (planned.backends[0], planned.block_size, planned.num_gpu_blocks) == ("FLASHINFER_MLA", 64, 9_549)


def test_b200_given_block_size_16_leaves_flashinfer_mla_for_triton_mla() -> None:
    # 16 % 32 and 16 % 64 != 0: FLASHINFER_MLA and CUTLASS_MLA (128) are invalid, TRITON_MLA (MultipleOf 16) is next
    planned = _vllm("deepseek-v3", tp_size=8, gpu="B200", page_size=16)
    assert (planned.backends[0], planned.block_size) == ("TRITON_MLA", 16)


def test_b300_is_blackwell_too() -> None:
    planned = _vllm("deepseek-v3", tp_size=8, gpu="B300")
    assert (planned.backends, planned.block_size, planned.num_gpu_blocks) == (("FLASHINFER_MLA",), 32, 19_099)


def test_b200_flashinfer_puts_the_hnd_layout_first() -> None:
    # FlashInferBackend.supported_kv_cache_layouts on SM 10.x: (LBHNC, BLHNC)
    planned = _vllm("llama-3.1-8b", gpu="B200", context_length=8192)
    assert (planned.backends, planned.block_size, planned.kv_cache_layout) == (("FLASHINFER",), 16, "LBHNC")
    assert _recorded("vllm-gpu-b200-llama-3.1-8b-tp1-bf16")["kv_cache_layout"] == "LBHNC"


# ---- Hopper (SM 9.0): FLASH_ATTN_MLA (16) with a 16-bit cache, FLASHMLA (64) with fp8 ---------------------


@pytest.mark.parametrize("gpu", ["H100", "H200", "H20"])
def test_hopper_mla_backends(gpu: str) -> None:
    bf16 = _vllm("deepseek-v2-lite", gpu=gpu, context_length=8192)
    fp8 = _vllm("deepseek-v2-lite", gpu=gpu, context_length=8192, kv_cache_dtype="fp8_e4m3")
    assert (bf16.backends[0], bf16.block_size) == ("FLASH_ATTN_MLA", 16)
    assert (fp8.backends[0], fp8.block_size) == ("FLASHMLA", 64)  # FlashMLABackend: kernel block 64
    # 40 GiB // (27 x 64 x 576 x 1 B = 995,328 B) = 43,151
    assert fp8.num_gpu_blocks == 40 * GIB // (27 * 64 * MLA_ROW) == 43_151


def test_hopper_dense_is_flash_attention() -> None:
    planned = _vllm("llama-3.1-8b", gpu="H100", context_length=8192)
    assert (planned.backends, planned.block_size, planned.kv_cache_layout) == (("FLASH_ATTN",), 16, "LBNHC")


# ---- Ampere A100 / A10 (SM 8.0 / 8.6): TRITON_MLA; an fp8 MLA cache refused ------------------------------


@pytest.mark.parametrize("gpu", ["A100-80GB", "A100-40GB", "A10"])
def test_ampere_mla_is_triton_mla_and_refuses_fp8(gpu: str) -> None:
    planned = _vllm("deepseek-v2-lite", gpu=gpu, context_length=8192, available_bytes=10 * GIB)
    assert (planned.backends[0], planned.block_size) == ("TRITON_MLA", 16)
    with pytest.raises(UnsupportedConfigurationError, match=r"FP8 KV cache is not supported by the Triton MLA backend.*"
                       r"requires SM89\+.*--kv-cache-dtype bfloat16 .*TritonMLAImpl.__init__"):  # fmt: skip
        _vllm("deepseek-v2-lite", gpu=gpu, context_length=8192, kv_cache_dtype="fp8_e4m3")


def test_ampere_dense_is_flash_attention() -> None:
    planned = _vllm("llama-3.1-8b", gpu="A100-40GB", context_length=8192, available_bytes=20 * GIB)
    assert (planned.backends, planned.block_size) == (("FLASH_ATTN",), 16)


# ---- Ada (SM 8.9), SM 12.x, Turing (SM 7.5) ------------------------------------------------------------------


def test_ada_sinks_need_triton_attention() -> None:
    # FlashAttentionBackend.supports_combination: "sink not supported on compute capability < 9.0"
    planned = _vllm("gpt-oss-20b", gpu="L40S", context_length=8192, available_bytes=20 * GIB)
    assert planned.backends == ("TRITON_ATTN",)
    fp8 = _vllm("deepseek-v2-lite", gpu="L40S", context_length=8192, kv_cache_dtype="fp8_e4m3")
    assert (fp8.backends[0], fp8.block_size) == ("TRITON_MLA", 16)  # SM 8.9 has native fp8


def test_sm120_fp8_is_flashinfer_and_mla_triton() -> None:
    # FlashAttention 2 (SM 12.x) has no fp8 cache: FLASHINFER is next in _get_backend_priorities
    assert _vllm("llama-3.1-8b", gpu="RTX-5090", kv_cache_dtype="fp8_e4m3", context_length=8192,
                 available_bytes=8 * GIB).backends == ("FLASHINFER",)  # fmt: skip
    assert _vllm("deepseek-v2-lite", gpu="RTX-PRO-6000", context_length=8192).backends == ("TRITON_MLA",)


def test_turing_has_no_flash_attention() -> None:
    # FlashAttentionBackend.supports_compute_capability: >= 8.0; FLASHINFER's head sizes exclude nothing here,
    # but T4 runs fp16 models on TRITON_ATTN (the first valid backend vLLM records for SM 7.5)
    planned = _vllm("qwen2.5-7b", gpu="T4", context_length=4096, available_bytes=4 * GIB, kv_cache_dtype="auto")
    assert planned.backends == ("TRITON_ATTN",)


# ---- vLLM 0.34.0: CacheConfig.DEFAULT_BLOCK_SIZE 64 ---------------------------------------------------------


def test_0_34_0_keeps_the_64_default_where_the_kernels_take_it() -> None:
    # FLASHINFER_MLA [32, 64] takes 64; FLASH_ATTN_MLA MultipleOf(16) takes 64; FLASHMLA 64
    b200 = _vllm("deepseek-v3", tp_size=8, gpu="B200", vllm_version="0.34.0")
    h200 = _vllm("deepseek-v3", tp_size=8, gpu="H200", vllm_version="0.34.0")
    assert (b200.backends[0], b200.block_size, h200.backends[0], h200.block_size) == (
        "FLASHINFER_MLA", 64, "FLASH_ATTN_MLA", 64)  # fmt: skip
    # 40 GiB // (61 x 64 x 576 x 2 B = 4,497,408 B) = 9,549 blocks (the recording says the same)
    assert b200.num_gpu_blocks == 40 * GIB // (61 * 64 * MLA_ROW * 2) == 9_549
    recorded = json.loads((ROOT / "golden" / "vllm-0.34.0" / "vllm-gpu-b200-deepseek-v3-tp8-bf16.json").read_text())
    assert (recorded["block_size"], recorded["num_gpu_blocks"]) == (64, 9_549)


def test_preferred_block_size_is_vllms_rule_over_the_recorded_kernels() -> None:
    from kvstrategies.vllm.strategies.backends import preferred_block_size

    for release_text, table in TABLES.items():
        release = parse_release(release_text, "vllm")
        if MLA_CONFIG_BLOCK.holds(release):
            # 0.17.1's backends prefer no block (no get_preferred_block_size): the table records the 16 its CUDA
            # platform starts every layer at (CudaPlatformBase.check_and_update_config), MLA_CONFIG_BLOCK the rest
            assert {recorded for _blocks, recorded, _layouts in table.backends.values()} == {16}, release_text
            continue
        for key, (kernel_blocks, recorded, _layouts) in table.backends.items():
            assert preferred_block_size(kernel_blocks, release) == recorded, (release_text, key)
    assert preferred_block_size((32, 64), parse_release("0.33.0", "vllm")) == 32  # 16 % 32, 16 % 64 != 0
    assert preferred_block_size((32, 64), parse_release("0.34.0", "vllm")) == 64
    assert preferred_block_size((128,), parse_release("0.34.0", "vllm")) == 128  # CUTLASS_MLA


# ---- the table itself ------------------------------------------------------------------------------------


def test_every_release_has_a_table_and_every_gpu_family_a_row() -> None:
    assert set(TABLES) == set(VLLM_RELEASE_LINES)
    for table in TABLES.values():
        families = {key.split("|", 1)[0] for key in table.selections}
        assert families == {f"{d.capability[0]}.{d.capability[1]}" for d in DEVICES}


def test_profile_key_of_gpt_oss_on_b200() -> None:
    geometry = _geometry("gpt-oss-20b")
    assert profile_key(geometry, vllm_device("B200"), "bfloat16") == "10.0|mha|bfloat16|64|auto|kw"


def test_a_block_size_no_kernel_takes_is_refused_naming_vllms_selector() -> None:
    geometry = _geometry("deepseek-v3")
    with pytest.raises(UnsupportedConfigurationError, match="No valid attention backend.*get_attn_backend_cls"):
        attention_backend(geometry, vllm_device("B200"), "fp8_e5m2", NEWEST_VLLM)
    assert NEWEST_VLLM.text == VLLM_RELEASE_LINES[-1]


def test_recorded_gpu_family_cases_are_the_strategies_answers() -> None:
    """Every ``cases/vllm/vllm-gpu-*`` case planned by the strategies equals vLLM's recording."""
    from kvstrategies.vllm.bridge.snapshots import read_snapshot, result_from_snapshot
    from kvstrategies.vllm.bridge.verify import verdict_for

    paths = sorted((ROOT / "cases" / "vllm").glob("vllm-gpu-*.json"))
    assert len(paths) >= 15
    gpus = set()
    for path in paths:
        gpus.add(load_case(path).settings.platform.gpu)
        snapshot = read_snapshot(ROOT / "golden" / "vllm-0.33.0" / path.name)
        assert verdict_for(path, result_from_snapshot(snapshot), "0.33.0").status == "match", path.stem
    assert {"B200", "B300", "H100", "A100-80GB", "A100-40GB", "A10", "L40S", "RTX-5090", "T4"} <= gpus
